"""SCRAM credentials kept in the metadata log (KIP-554, as Kafka 4): AlterUserScramCredentials
(API 51) and DescribeUserScramCredentials (API 50) from confluent-kafka's AdminClient
(librdkafka), raw requests for what librdkafka will not send, and `broker scram`.

- a credential is created, described (mechanism and iterations), replaced (upsert), deleted
  per mechanism; describing every user (null list) lists it; it survives a restart;
- Kafka's refusals, codes and messages: too few / too many iterations UNACCEPTABLE_CREDENTIAL,
  a user altered twice in one request DUPLICATE_RESOURCE (none of its alterations happen), an
  empty user name UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM,
  deleting a credential that does not exist RESOURCE_NOT_FOUND, describing a user without
  credentials RESOURCE_NOT_FOUND and a user named twice DUPLICATE_RESOURCE;
- ApiVersions advertises both APIs at v0;
- `broker scram add|describe|remove` prints what kafka-configs.sh prints.

Run alone:

    BROKER_BIN=$PWD/target/release/broker target/venv/bin/python -m pytest -q \
        tests/e2e/test_scram_credentials.py
"""

import json
import subprocess

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialDeletion, UserScramCredentialUpsertion)

import kproto as kp
from conftest import BROKER_BIN
from e2e_helpers import admin, unique

DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51

UNSUPPORTED_SASL_MECHANISM = 33
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512
TIMEOUT = 30

_ADMINS = {}


def client(bootstrap):
    """One AdminClient per broker, kept alive (a client collected mid-call fails the call)."""
    if bootstrap not in _ADMINS:
        _ADMINS[bootstrap] = admin(bootstrap)
    return _ADMINS[bootstrap]


def upsertion(user, mechanism=SHA256, iterations=8192, password=b"secret"):
    return UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, iterations), password)


def alter(bootstrap, *alterations):
    """{user: None (done) or (error code, message)}, one entry per user of the request."""
    fs = client(bootstrap).alter_user_scram_credentials(list(alterations), request_timeout=TIMEOUT)
    out = {}
    for user, f in fs.items():
        try:
            f.result(timeout=TIMEOUT)
            out[user] = None
        except KafkaException as e:
            out[user] = (e.args[0].code(), e.args[0].str())
    return out


def describe(bootstrap, users=None):
    """{user: {mechanism: iterations}} of users described, {user: error code} of the others."""
    a = client(bootstrap)
    if users is None:
        described = a.describe_user_scram_credentials(request_timeout=TIMEOUT).result(TIMEOUT)
        return {u: {i.mechanism: i.iterations for i in d.scram_credential_infos}
                for u, d in described.items()}
    out = {}
    for user, f in a.describe_user_scram_credentials(users, request_timeout=TIMEOUT).items():
        try:
            d = f.result(timeout=TIMEOUT)
            out[user] = {i.mechanism: i.iterations for i in d.scram_credential_infos}
        except KafkaException as e:
            out[user] = e.args[0].code()
    return out


# ---------------------------------------------------------------------------------------------
# Raw AlterUserScramCredentials v0 / DescribeUserScramCredentials v0 (flexible: header v2),
# for what librdkafka refuses to send (an empty user name, an unknown mechanism, a user
# named twice in a describe).
def _compact_bytes(b):
    return kp.uvarint(len(b) + 1) + b


def _compact_array(items):
    return kp.uvarint(len(items) + 1) + b"".join(items)


def alter_raw(bootstrap, deletions=(), upsertions=()):
    """[(user, error code, message)] in the broker's order."""
    body = _compact_array([kp.compact_string(name) + kp.i8(mech) + kp.uvarint(0)
                           for name, mech in deletions])
    body += _compact_array([kp.compact_string(name) + kp.i8(mech) + kp.i32(iterations)
                            + _compact_bytes(b"salt") + _compact_bytes(b"\x01" * 32)
                            + kp.uvarint(0)
                            for name, mech, iterations in upsertions])
    body += kp.uvarint(0)
    r = _roundtrip(bootstrap, ALTER_USER_SCRAM_CREDENTIALS, body)
    r.i32()  # throttle
    out = []
    for _ in range(_uvarint(r) - 1):
        user = _compact_str(r)
        code = r.i16()
        message = _compact_str(r)
        _skip_tags(r)
        out.append((user, code, message))
    return out


def describe_raw(bootstrap, users):
    """(top-level error code, [(user, error code, message, [(mechanism, iterations)])])."""
    if users is None:
        body = kp.uvarint(0)
    else:
        body = _compact_array([kp.compact_string(u) + kp.uvarint(0) for u in users])
    body += kp.uvarint(0)
    r = _roundtrip(bootstrap, DESCRIBE_USER_SCRAM_CREDENTIALS, body)
    r.i32()
    top = r.i16()
    _compact_str(r)
    results = []
    for _ in range(_uvarint(r) - 1):
        user = _compact_str(r)
        code = r.i16()
        message = _compact_str(r)
        infos = []
        for _ in range(_uvarint(r) - 1):
            infos.append((r.i8(), r.i32()))
            _skip_tags(r)
        _skip_tags(r)
        results.append((user, code, message, infos))
    return top, results


def _roundtrip(bootstrap, api_key, body):
    sock = kp.connect(bootstrap)
    try:
        payload = kp.request_header_v2(api_key, 0, 5) + body
        r = kp.roundtrip(sock, kp.frame(payload), 5)
        _skip_tags(r)  # response header v1
        return r
    finally:
        sock.close()


def _uvarint(r):
    shift = value = 0
    while True:
        b = r.i8() & 0xFF
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7


def _compact_str(r):
    n = _uvarint(r) - 1
    return None if n < 0 else r.take(n).decode()


def _skip_tags(r):
    for _ in range(_uvarint(r)):
        _uvarint(r)
        r.take(_uvarint(r))


# ---------------------------------------------------------------------------------------------
def test_add_describe_upsert_delete_and_restart(broker):
    b = broker.bootstrap
    alice, bob = unique("alice"), unique("bob")
    assert alter(b, upsertion(alice, SHA256, 8192), upsertion(bob, SHA512, 4096)) == {
        alice: None, bob: None}
    assert alter(b, upsertion(alice, SHA512, 16384)) == {alice: None}
    assert describe(b, [alice]) == {alice: {SHA256: 8192, SHA512: 16384}}
    everyone = describe(b)
    assert everyone[alice] == {SHA256: 8192, SHA512: 16384}
    assert everyone[bob] == {SHA512: 4096}

    # Upsert: the same user and mechanism again replaces the credential.
    assert alter(b, upsertion(alice, SHA256, 10000, b"other")) == {alice: None}
    assert describe(b, [alice]) == {alice: {SHA256: 10000, SHA512: 16384}}

    # Deletion is per mechanism.
    assert alter(b, UserScramCredentialDeletion(alice, SHA256)) == {alice: None}
    assert describe(b, [alice]) == {alice: {SHA512: 16384}}

    # The credentials live in the metadata log: a restart (SIGKILL: no snapshot at shutdown)
    # replays them.
    broker.restart(kill=True)
    _ADMINS.clear()
    assert describe(b, [alice, bob]) == {alice: {SHA512: 16384}, bob: {SHA512: 4096}}

    assert alter(b, UserScramCredentialDeletion(alice, SHA512)) == {alice: None}
    assert describe(b, [alice]) == {alice: RESOURCE_NOT_FOUND}
    assert alice not in describe(b)
    broker.restart()
    _ADMINS.clear()
    assert describe(b, [alice, bob]) == {alice: RESOURCE_NOT_FOUND, bob: {SHA512: 4096}}


def test_kafkas_refusals(broker):
    b = broker.bootstrap
    few, many, low, high = (unique(p) for p in ("few", "many", "low", "high"))
    got = alter(b, upsertion(few, iterations=4095), upsertion(many, SHA512, iterations=16385),
                upsertion(low, iterations=4096), upsertion(high, SHA512, iterations=16384))
    assert got == {few: (UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
                   many: (UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
                   low: None, high: None}
    assert describe(b, [few, many, low, high]) == {
        few: RESOURCE_NOT_FOUND, many: RESOURCE_NOT_FOUND, low: {SHA256: 4096},
        high: {SHA512: 16384}}

    # A user altered twice in one request: nothing of it happens, whatever the mechanisms.
    twice, dup = unique("twice"), unique("dup")
    got = alter(b, upsertion(twice, SHA256), upsertion(twice, SHA512),
                upsertion(dup, SHA256), UserScramCredentialDeletion(dup, SHA512))
    message = "A user credential cannot be altered twice in the same request"
    # Kafka looks at deletions first: dup's deletion of a credential it does not have is
    # refused on its own, and its upsertion is then not looked at.
    assert got == {twice: (DUPLICATE_RESOURCE, message),
                   dup: (RESOURCE_NOT_FOUND,
                         "Attempt to delete a user credential that does not exist")}
    assert describe(b, [twice, dup]) == {twice: RESOURCE_NOT_FOUND, dup: RESOURCE_NOT_FOUND}

    # Deleting what does not exist.
    ghost = unique("ghost")
    assert alter(b, UserScramCredentialDeletion(ghost, SHA256)) == {
        ghost: (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")}
    assert alter(b, UserScramCredentialDeletion(low, SHA512)) == {
        low: (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")}

    # Raw requests: an empty name, an unknown mechanism, duplicates of every kind (Kafka's
    # exact answers, one per user).
    ok = unique("ok")
    results = {user: (code, message) for user, code, message in alter_raw(
        b,
        deletions=[("", 1), (ok + "-d", 0)],
        upsertions=[(ok, 1, 8192), (ok + "-m", 3, 8192), (ok + "-z", 0, 8192),
                    (dup, 1, 8192), (dup, 2, 8192)])}
    assert results == {
        "": (UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        ok + "-d": (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        ok: (0, None),
        ok + "-m": (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        ok + "-z": (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        dup: (DUPLICATE_RESOURCE, message),
    }
    assert describe(b, [ok]) == {ok: {SHA256: 8192}}

    # Describe: unknown users and users named twice, per user; the request itself is fine.
    top, results = describe_raw(b, [ok, ghost, ok, low])
    assert top == 0
    by_user = {user: (code, message, infos) for user, code, message, infos in results}
    assert by_user == {
        ok: (DUPLICATE_RESOURCE,
             f"Cannot describe SCRAM credentials for the same user twice in a single request: {ok}",
             []),
        ghost: (RESOURCE_NOT_FOUND,
                f"Attempt to describe a user credential that does not exist: {ghost}", []),
        low: (0, None, [(1, 4096)]),
    }
    # A null list and an empty one both describe every user.
    for users in (None, []):
        top, results = describe_raw(b, users)
        assert top == 0
        assert {ok, low, high} <= {user for user, code, _, _ in results if code == 0}


def test_api_versions_advertise_both_apis(broker):
    sock = kp.connect(broker.bootstrap)
    try:
        error, keys, _ = kp.parse_api_versions_v0(kp.roundtrip(sock, kp.api_versions(1), 1))
    finally:
        sock.close()
    assert error == 0
    assert keys[DESCRIBE_USER_SCRAM_CREDENTIALS] == (0, 0)
    assert keys[ALTER_USER_SCRAM_CREDENTIALS] == (0, 0)


def scram(bootstrap, *args, check=True):
    res = subprocess.run([BROKER_BIN, "scram", args[0], "--bootstrap-server", bootstrap,
                          *args[1:]], capture_output=True, text=True, timeout=60)
    if check:
        assert res.returncode == 0, f"scram {args}: rc={res.returncode} {res.stderr}"
    return res


def test_admin_command(broker):
    b = broker.bootstrap
    user = unique("carol")
    out = scram(b, "add", "--user", user, "--mechanism", "SCRAM-SHA-512", "--iterations", "8192",
                "--password", "pw").stdout
    assert out == f"Completed updating config for user {user}.\n"
    scram(b, "add", "--user", user, "--mechanism", "SCRAM-SHA-256", "--password", "pw")
    out = scram(b, "describe", "--user", user).stdout
    assert out == (f"SCRAM credential configs for user-principal '{user}' are "
                   "SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=8192\n")
    assert describe(b, [user]) == {user: {SHA256: 4096, SHA512: 8192}}
    lines = [json.loads(line) for line in scram(b, "describe", "--json").stdout.splitlines()]
    assert {"user": user, "credentials": [
        {"mechanism": "SCRAM-SHA-256", "iterations": 4096},
        {"mechanism": "SCRAM-SHA-512", "iterations": 8192}]} in lines

    # Refusals come back by Kafka's name, with a non-zero exit.
    res = scram(b, "add", "--user", user, "--mechanism", "SCRAM-SHA-256", "--iterations", "100",
                "--password", "pw", check=False)
    assert res.returncode == 1
    assert "UNACCEPTABLE_CREDENTIAL: Too few iterations" in res.stderr

    scram(b, "remove", "--user", user, "--mechanism", "SCRAM-SHA-256")
    res = scram(b, "remove", "--user", user, "--mechanism", "SCRAM-SHA-256", check=False)
    assert res.returncode == 1
    assert "RESOURCE_NOT_FOUND" in res.stderr
    scram(b, "remove", "--user", user, "--mechanism", "SCRAM-SHA-512")
    assert scram(b, "describe", "--user", user).stdout == ""


@pytest.fixture(autouse=True)
def _drop_admins():
    yield
    _ADMINS.clear()


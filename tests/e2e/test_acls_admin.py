"""ACLs kept in the metadata log (as Kafka 4's KRaft AclControlManager keeps them): CreateAcls
(API 30), DescribeAcls (29) and DeleteAcls (31) from confluent-kafka's AdminClient
(librdkafka), raw requests for what librdkafka will not send, and `broker acls`.

- ACLs are created (a duplicate is a success that adds nothing), described with literal,
  prefixed, match and any filters (grouped per resource), deleted (each match listed), and
  survive a restart (from the log, SIGKILL, and after a clean stop);
- Kafka's refusals, codes and messages: a principal with no colon, a CLUSTER resource not
  named kafka-cluster, ANY as resource type / operation / permission, MATCH as pattern type
  (INVALID_REQUEST), an UNKNOWN delete filter;
- with no authorizer (`authorizer.class.name` empty) all three answer SECURITY_DISABLED, "No
  Authorizer is configured.";
- ApiVersions advertises the three APIs at v0-3; DescribeAcls v0 still answers;
- `broker acls add|list|remove` prints what kafka-acls.sh prints.

The broker runs Kafka's StandardAuthorizer with `super.users=User:ANONYMOUS`, so the PLAINTEXT
client may call the APIs once requests are authorized.

Run alone:

    BROKER_BIN=$PWD/target/release/broker target/venv/bin/python -m pytest -q \
        tests/e2e/test_acls_admin.py 2>/tmp/err.txt
"""

import json
import subprocess

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, ResourcePatternType, ResourceType)

import kproto as kp
from conftest import BROKER_BIN
from e2e_helpers import admin, unique

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
INVALID_REQUEST = 42
SECURITY_DISABLED = 54
TIMEOUT = 30

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}

# Kafka's codes (the acl crate's, and the wire's).
RT_ANY, RT_TOPIC, RT_GROUP, RT_CLUSTER, RT_TXN = 1, 2, 3, 4, 5
PT_ANY, PT_MATCH, PT_LITERAL, PT_PREFIXED = 1, 2, 3, 4
OP_ANY, OP_ALL, OP_READ, OP_WRITE = 1, 2, 3, 4
PERM_ANY, PERM_DENY, PERM_ALLOW = 1, 2, 3

_ADMINS = {}


def client(bootstrap):
    """One AdminClient per broker, kept alive (a client collected mid-call fails the call)."""
    if bootstrap not in _ADMINS:
        _ADMINS[bootstrap] = admin(bootstrap)
    return _ADMINS[bootstrap]


@pytest.fixture(autouse=True)
def _drop_admins():
    yield
    _ADMINS.clear()


def topic_acl(name, principal="User:alice", pattern=ResourcePatternType.LITERAL,
              operation=AclOperation.READ, permission=AclPermissionType.ALLOW, host="*"):
    return AclBinding(ResourceType.TOPIC, name, pattern, principal, host, operation, permission)


def acl_filter(restype=ResourceType.ANY, name=None, pattern=ResourcePatternType.ANY,
               principal=None, host=None, operation=AclOperation.ANY,
               permission=AclPermissionType.ANY):
    return AclBindingFilter(restype, name, pattern, principal, host, operation, permission)


def create(bootstrap, *bindings):
    """[None (created) or (error code, message)], in order."""
    fs = client(bootstrap).create_acls(list(bindings), request_timeout=TIMEOUT)
    out = []
    for binding in bindings:
        try:
            fs[binding].result(timeout=TIMEOUT)
            out.append(None)
        except KafkaException as e:
            out.append((e.args[0].code(), e.args[0].str()))
    return out


def describe(bootstrap, flt):
    """The set of bindings the filter selects (raises KafkaException on an error)."""
    f = client(bootstrap).describe_acls(flt, request_timeout=TIMEOUT)
    return set(f.result(timeout=TIMEOUT))


def delete(bootstrap, *filters):
    """[set of bindings deleted, or (error code, message)] per filter."""
    fs = client(bootstrap).delete_acls(list(filters), request_timeout=TIMEOUT)
    out = []
    for flt in filters:
        try:
            out.append(set(fs[flt].result(timeout=TIMEOUT)))
        except KafkaException as e:
            out.append((e.args[0].code(), e.args[0].str()))
    return out


# ---------------------------------------------------------------------------------------------
# Raw requests, for what librdkafka refuses to build (ANY values in a creation, UNKNOWN codes
# in a filter) and for old versions.
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


def _compact_array(items):
    return kp.uvarint(len(items) + 1) + b"".join(items)


def _roundtrip(bootstrap, api_key, version, body, flexible=True):
    sock = kp.connect(bootstrap)
    try:
        header = kp.request_header_v2 if flexible else kp.request_header_v1
        r = kp.roundtrip(sock, kp.frame(header(api_key, version, 5) + body), 5)
        if flexible:
            _skip_tags(r)  # response header v1
        return r
    finally:
        sock.close()


def create_raw(bootstrap, creations):
    """CreateAcls v3 of (resource type, name, pattern type, principal, host, operation,
    permission) tuples: [(error code, message)] in order."""
    body = _compact_array([
        kp.i8(rt) + kp.compact_string(name) + kp.i8(pt) + kp.compact_string(principal)
        + kp.compact_string(host) + kp.i8(op) + kp.i8(perm) + kp.uvarint(0)
        for rt, name, pt, principal, host, op, perm in creations]) + kp.uvarint(0)
    r = _roundtrip(bootstrap, CREATE_ACLS, 3, body)
    r.i32()
    out = []
    for _ in range(_uvarint(r) - 1):
        code = r.i16()
        message = _compact_str(r)
        _skip_tags(r)
        out.append((code, message))
    return out


def delete_raw(bootstrap, filters):
    """DeleteAcls v3: [(error code, message, number of matches)] per filter."""
    body = _compact_array([
        kp.i8(rt) + kp.compact_string(name) + kp.i8(pt) + kp.compact_string(principal)
        + kp.compact_string(host) + kp.i8(op) + kp.i8(perm) + kp.uvarint(0)
        for rt, name, pt, principal, host, op, perm in filters]) + kp.uvarint(0)
    r = _roundtrip(bootstrap, DELETE_ACLS, 3, body)
    r.i32()
    out = []
    for _ in range(_uvarint(r) - 1):
        code = r.i16()
        message = _compact_str(r)
        matches = _uvarint(r) - 1
        for _ in range(matches):
            r.i16()
            _compact_str(r)
            r.i8()
            _compact_str(r)
            r.i8()
            _compact_str(r)
            _compact_str(r)
            r.i8()
            r.i8()
            _skip_tags(r)
        _skip_tags(r)
        out.append((code, message, matches))
    return out


def describe_v0(bootstrap, rt, name, principal=None):
    """DescribeAcls v0 (no pattern types: LITERAL): (error code, message,
    [(type, name, [(principal, host, operation, permission)])])."""
    body = (kp.i8(rt) + kp.string(name) + kp.string(principal) + kp.string(None)
            + kp.i8(OP_ANY) + kp.i8(PERM_ANY))
    r = _roundtrip(bootstrap, DESCRIBE_ACLS, 0, body, flexible=False)
    r.i32()
    code = r.i16()
    message = r.string()
    resources = []
    for _ in range(r.i32()):
        rtype = r.i8()
        rname = r.string()
        acls = []
        for _ in range(r.i32()):
            acls.append((r.string(), r.string(), r.i8(), r.i8()))
        resources.append((rtype, rname, acls))
    return code, message, resources


def describe_raw_v3(bootstrap, rt, name, pt, principal=None):
    """DescribeAcls v3: (error code, message, [(type, name, pattern, number of ACLs)])."""
    body = (kp.i8(rt) + kp.compact_string(name) + kp.i8(pt) + kp.compact_string(principal)
            + kp.compact_string(None) + kp.i8(OP_ANY) + kp.i8(PERM_ANY) + kp.uvarint(0))
    r = _roundtrip(bootstrap, DESCRIBE_ACLS, 3, body)
    r.i32()
    code = r.i16()
    message = _compact_str(r)
    resources = []
    for _ in range(_uvarint(r) - 1):
        rtype, rname, pattern = r.i8(), _compact_str(r), r.i8()
        n = _uvarint(r) - 1
        for _ in range(n):
            _compact_str(r)
            _compact_str(r)
            r.i8()
            r.i8()
            _skip_tags(r)
        _skip_tags(r)
        resources.append((rtype, rname, pattern, n))
    return code, message, resources


# ---------------------------------------------------------------------------------------------
@pytest.fixture
def secured(start_broker):
    return start_broker(AUTHORIZER)


def test_create_describe_delete_and_restart(secured):
    b = secured.bootstrap
    t = unique("orders")
    alice_read = topic_acl(t, "User:alice")
    bob_write = topic_acl(t, "User:bob", operation=AclOperation.WRITE)
    prefixed = topic_acl(t[:8], "User:carol", pattern=ResourcePatternType.PREFIXED,
                         permission=AclPermissionType.DENY, host="10.0.0.1")
    wildcard = topic_acl("*", "User:dan", operation=AclOperation.DESCRIBE)
    group = AclBinding(ResourceType.GROUP, unique("g"), ResourcePatternType.LITERAL,
                       "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
    assert create(b, alice_read, bob_write, prefixed, wildcard, group) == [None] * 5
    # A duplicate is a success that adds nothing.
    assert create(b, alice_read) == [None]

    everything = describe(b, acl_filter())
    assert {alice_read, bob_write, prefixed, wildcard, group} <= everything
    # LITERAL: the named topic's literal ACLs only.
    assert describe(b, acl_filter(ResourceType.TOPIC, t, ResourcePatternType.LITERAL)) == {
        alice_read, bob_write}
    # PREFIXED: the prefixed ACL of exactly that name.
    assert describe(b, acl_filter(ResourceType.TOPIC, t[:8],
                                  ResourcePatternType.PREFIXED)) == {prefixed}
    # MATCH: everything that applies to the topic (literal, wildcard, prefix).
    assert describe(b, acl_filter(ResourceType.TOPIC, t, ResourcePatternType.MATCH)) == {
        alice_read, bob_write, prefixed, wildcard}
    # ANY: any pattern type, the name exactly.
    assert describe(b, acl_filter(ResourceType.ANY, t, ResourcePatternType.ANY)) == {
        alice_read, bob_write}
    # Entry filters.
    assert describe(b, acl_filter(principal="User:alice")) >= {alice_read, group}
    assert describe(b, acl_filter(ResourceType.TOPIC, t, ResourcePatternType.ANY,
                                  operation=AclOperation.WRITE)) == {bob_write}
    assert describe(b, acl_filter(host="10.0.0.1")) == {prefixed}
    # Kafka groups the bindings of one resource: one resource entry, two ACLs.
    code, _, resources = describe_raw_v3(b, RT_TOPIC, t, PT_LITERAL)
    assert (code, resources) == (0, [(RT_TOPIC, t, PT_LITERAL, 2)])
    # DescribeAcls v0 (literal only) still answers.
    code, message, resources = describe_v0(b, RT_TOPIC, t)
    # Kafka's default message on success is the empty string, not null.
    assert (code, message) == (0, "")
    assert len(resources) == 1 and resources[0][:2] == (RT_TOPIC, t)
    assert sorted(resources[0][2]) == [("User:alice", "*", OP_READ, PERM_ALLOW),
                                       ("User:bob", "*", OP_WRITE, PERM_ALLOW)]

    # The ACLs live in the metadata log: a restart (SIGKILL: no snapshot) replays them.
    secured.restart(kill=True)
    _ADMINS.clear()
    assert {alice_read, bob_write, prefixed, wildcard, group} <= describe(b, acl_filter())

    # Delete: each filter lists what it matched; an ACL matched twice is deleted once.
    got = delete(b, acl_filter(principal="User:bob"),
                 acl_filter(ResourceType.TOPIC, t, ResourcePatternType.LITERAL),
                 acl_filter(principal=unique("User:nobody")))
    assert got == [{bob_write}, {alice_read, bob_write}, set()]
    assert describe(b, acl_filter(ResourceType.TOPIC, t, ResourcePatternType.LITERAL)) == set()
    secured.restart()
    _ADMINS.clear()
    left = describe(b, acl_filter())
    assert {prefixed, wildcard, group} <= left
    assert not {alice_read, bob_write} & left
    assert delete(b, acl_filter(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL)) == [
        {wildcard}]


def test_kafkas_refusals(secured):
    b = secured.bootstrap
    t = unique("refused")
    no_colon = topic_acl(t, "alice")
    cluster = AclBinding(ResourceType.BROKER, "my-cluster", ResourcePatternType.LITERAL,
                         "User:a", "*", AclOperation.ALTER, AclPermissionType.ALLOW)
    good_cluster = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                              "User:a", "*", AclOperation.ALTER, AclPermissionType.ALLOW)
    assert create(b, no_colon, cluster, good_cluster) == [
        (INVALID_REQUEST, "Could not parse principal from `alice` (no colon is present "
                          "separating the principal type from the principal name)"),
        (INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
        None,
    ]
    assert describe(b, acl_filter(ResourceType.TOPIC, t)) == set()
    assert good_cluster in describe(b, acl_filter(ResourceType.BROKER))

    # What librdkafka will not send: ANY values, MATCH, an empty name; a valid ACL of the
    # same request is created.
    got = create_raw(b, [
        (RT_ANY, t, PT_LITERAL, "User:a", "*", OP_READ, PERM_ALLOW),
        (RT_TOPIC, t, PT_MATCH, "User:a", "*", OP_READ, PERM_ALLOW),
        (RT_TOPIC, t, PT_ANY, "User:a", "*", OP_READ, PERM_ALLOW),
        (RT_TOPIC, t, PT_LITERAL, "User:a", "*", OP_ANY, PERM_ALLOW),
        (RT_TOPIC, t, PT_LITERAL, "User:a", "*", OP_READ, PERM_ANY),
        (RT_TOPIC, "", PT_LITERAL, "User:a", "*", OP_READ, PERM_ALLOW),
        (RT_TOPIC, t, PT_LITERAL, "User:a", "*", OP_READ, PERM_ALLOW),
    ])
    assert got == [
        (INVALID_REQUEST, "Invalid resourceType ANY"),
        (INVALID_REQUEST, "Invalid patternType MATCH"),
        (INVALID_REQUEST, "Invalid patternType ANY"),
        (INVALID_REQUEST, "Invalid operation ANY"),
        (INVALID_REQUEST, "Invalid permissionType ANY"),
        (INVALID_REQUEST, "Invalid empty resource name"),
        (0, None),
    ]
    assert describe(b, acl_filter(ResourceType.TOPIC, t)) == {
        topic_acl(t, "User:a")}

    # A delete filter with an UNKNOWN value is refused on its own.
    got = delete_raw(b, [
        (RT_TOPIC, t, PT_LITERAL, None, None, 0, PERM_ANY),
        (0, t, PT_LITERAL, None, None, OP_ANY, PERM_ANY),
        (RT_TOPIC, t, PT_LITERAL, None, None, OP_ANY, PERM_ANY),
    ])
    assert got == [(INVALID_REQUEST, "Unknown entryFilter.", 0),
                   (INVALID_REQUEST, "Unknown patternFilter.", 0),
                   (0, None, 1)]


def test_security_disabled_without_an_authorizer(broker):
    b = broker.bootstrap
    message = "No Authorizer is configured."
    assert create(b, topic_acl(unique("t"))) == [(SECURITY_DISABLED, message)]
    assert delete(b, acl_filter()) == [(SECURITY_DISABLED, message)]
    # DescribeAcls' error is the response's own (librdkafka's describe_acls reports it as an
    # empty list: read it raw).
    assert describe_v0(b, RT_TOPIC, "x") == (SECURITY_DISABLED, message, [])
    assert describe_raw_v3(b, RT_ANY, None, PT_ANY) == (SECURITY_DISABLED, message, [])


def test_api_versions_advertise_the_three_apis(broker):
    sock = kp.connect(broker.bootstrap)
    try:
        error, keys, _ = kp.parse_api_versions_v0(kp.roundtrip(sock, kp.api_versions(1), 1))
    finally:
        sock.close()
    assert error == 0
    for key in (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS):
        assert keys[key] == (0, 3)


def acls_cmd(bootstrap, *args, check=True):
    res = subprocess.run([BROKER_BIN, "acls", args[0], "--bootstrap-server", bootstrap,
                          *args[1:]], capture_output=True, text=True, timeout=60)
    if check:
        assert res.returncode == 0, f"acls {args}: rc={res.returncode} {res.stderr}"
    return res


def test_admin_command(secured):
    b = secured.bootstrap
    t = unique("cli")
    pattern = f"ResourcePattern(resourceType=TOPIC, name={t}, patternType=LITERAL)"
    out = acls_cmd(b, "add", "--allow-principal", "User:erin", "--operation", "Read",
                   "--operation", "Describe", "--topic", t).stdout
    entries = (" \t(principal=User:erin, host=*, operation=READ, permissionType=ALLOW)\n"
               " \t(principal=User:erin, host=*, operation=DESCRIBE, permissionType=ALLOW)\n")
    assert out.startswith(f"Adding ACLs for resource `{pattern}`: \n{entries}\n")
    assert f"Current ACLs for resource `{pattern}`: \n" in out
    assert describe(b, acl_filter(ResourceType.TOPIC, t)) == {
        topic_acl(t, "User:erin"), topic_acl(t, "User:erin", operation=AclOperation.DESCRIBE)}

    # Deny on a host, prefixed group and transactional id, and the cluster.
    acls_cmd(b, "add", "--deny-principal", "User:mallory", "--deny-host", "10.1.2.3",
             "--operation", "Write", "--topic", t)
    g = unique("grp")
    acls_cmd(b, "add", "--allow-principal", "User:erin", "--operation", "Read",
             "--group", g, "--resource-pattern-type", "prefixed")
    acls_cmd(b, "add", "--allow-principal", "User:erin", "--operation", "Write",
             "--transactional-id", g)
    acls_cmd(b, "add", "--allow-principal", "User:erin", "--operation", "IdempotentWrite",
             "--cluster")
    assert topic_acl(t, "User:mallory", operation=AclOperation.WRITE,
                     permission=AclPermissionType.DENY, host="10.1.2.3") in describe(
        b, acl_filter(ResourceType.TOPIC, t))
    assert AclBinding(ResourceType.GROUP, g, ResourcePatternType.PREFIXED, "User:erin", "*",
                      AclOperation.READ, AclPermissionType.ALLOW) in describe(b, acl_filter())

    listed = acls_cmd(b, "list", "--topic", t).stdout
    assert listed.startswith(f"Current ACLs for resource `{pattern}`: \n")
    assert listed.count("\t(principal=") == 3
    lines = [json.loads(line) for line in acls_cmd(b, "list", "--json").stdout.splitlines()]
    assert {"resource_type": "TRANSACTIONAL_ID", "name": g, "pattern_type": "LITERAL",
            "principal": "User:erin", "host": "*", "operation": "WRITE",
            "permission_type": "ALLOW"} in lines
    assert any(line["resource_type"] == "CLUSTER" and line["operation"] == "IDEMPOTENT_WRITE"
               for line in lines)
    only = acls_cmd(b, "list", "--principal", "User:mallory").stdout
    assert only.count("\t(principal=") == 1

    # Refusals come back by Kafka's name, with a non-zero exit.
    res = acls_cmd(b, "add", "--allow-principal", "nocolon", "--topic", t, check=False)
    assert res.returncode == 1
    assert "INVALID_REQUEST: Could not parse principal from `nocolon`" in res.stderr

    # Remove one principal's ACL, then every ACL of the topic.
    acls_cmd(b, "remove", "--deny-principal", "User:mallory", "--deny-host", "10.1.2.3",
             "--operation", "Write", "--topic", t)
    assert len(describe(b, acl_filter(ResourceType.TOPIC, t))) == 2
    acls_cmd(b, "remove", "--topic", t)
    assert describe(b, acl_filter(ResourceType.TOPIC, t)) == set()
    assert acls_cmd(b, "list", "--topic", t).stdout == ""

"""SASL: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 on SASL_PLAINTEXT and SASL_SSL listeners, with
librdkafka (confluent-kafka), kafka-python and kafkajs; wrong passwords, tampered SCRAM proofs
and replayed nonces refused; nothing but ApiVersions and the SASL requests served before
authentication (a Produce or Metadata closes the connection and stores nothing).

    BROKER_BIN=$PWD/target/release/broker E2E_NODE_PATH=$PWD/target/e2e-js/node_modules \\
        target/venv/bin/python -m pytest -q tests/e2e/test_sasl.py
"""
import base64
import hashlib
import hmac
import json
import os
import struct
import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

import kproto
from conftest import Broker, free_port
from e2e_helpers import (by_partition, ck_consume, ck_produce, ck_producer, create_topic,
                         kp_consume, kp_produce, kp_producer, unique)
from test_tls import pki  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parents[2]
NODE_MODULES = Path(os.environ.get("E2E_NODE_PATH") or REPO / "target" / "e2e-js" / "node_modules")
N = 300
PLAIN_USERS = {"alice": "alice-secret", "bob": "bob-secret"}
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"


def plain_jaas():
    users = " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
    return ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="alice" password="alice-secret" {users};')


def sasl_broker(start_broker, pki, **extra):  # noqa: F811
    plain, sasl_plain, sasl_ssl = free_port(), free_port(), free_port()
    overrides = {
        "listeners": (f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl_plain},"
                      f"SASL_SSL://127.0.0.1:{sasl_ssl}"),
        "sasl.enabled.mechanisms": MECHANISMS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(),
        "ssl.keystore.location": str(pki / "keystore.pem"),
        "ssl.truststore.location": str(pki / "ca.pem"),
    }
    overrides.update(extra)
    b = start_broker(overrides, port=plain)
    b.sasl_port, b.sasl_ssl_port = sasl_plain, sasl_ssl
    b.sasl_bootstrap = f"127.0.0.1:{sasl_plain}"
    b.sasl_ssl_bootstrap = f"127.0.0.1:{sasl_ssl}"
    # SCRAM credentials live in the metadata log: created over the PLAINTEXT listener.
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    # One request per mechanism: Kafka refuses a user named twice in one request.
    for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        upsert = UserScramCredentialUpsertion(SCRAM_USER, ScramCredentialInfo(m, 4096),
                                              SCRAM_PASSWORD.encode())
        for f in a.alter_user_scram_credentials([upsert]).values():
            f.result(timeout=30)
    return b


def ck_sasl(mechanism, user, password, tls=None):
    conf = {"security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    if tls:
        conf["ssl.ca.location"] = str(tls / "ca.pem")
    return conf


def creds(mechanism):
    """PLAIN users come from the listener's JAAS configuration, SCRAM ones from the metadata."""
    return ("bob", PLAIN_USERS["bob"]) if mechanism == "PLAIN" else (SCRAM_USER, SCRAM_PASSWORD)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("tls", [False, True], ids=["sasl_plaintext", "sasl_ssl"])
def test_librdkafka_authenticates(start_broker, pki, mechanism, tls):  # noqa: F811
    b = sasl_broker(start_broker, pki)
    user, password = creds(mechanism)
    bootstrap = b.sasl_ssl_bootstrap if tls else b.sasl_bootstrap
    conf = ck_sasl(mechanism, user, password, pki if tls else None)
    topic = unique("sasl")
    create_topic(b.bootstrap, topic, 2)
    log = ck_produce(ck_producer(bootstrap, **conf), topic,
                     ({"key": b"k%d" % i, "value": b"v%d" % i} for i in range(N)))
    back, errors = ck_consume(bootstrap, topic, 2, N, **conf)
    assert not errors
    assert {p: [r.value for r in rs] for p, rs in back.items()} == \
        {p: [r.value for r in rs] for p, rs in by_partition(log.ok).items()}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python_authenticates(start_broker, pki, mechanism):  # noqa: F811
    b = sasl_broker(start_broker, pki)
    user, password = creds(mechanism)
    conf = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                sasl_plain_username=user, sasl_plain_password=password)
    topic = unique("kpsasl")
    create_topic(b.bootstrap, topic, 1)
    p = kp_producer(b.sasl_bootstrap, **conf)
    try:
        recs = kp_produce(p, topic, ({"key": b"k%d" % i, "value": b"v%d" % i} for i in range(N)))
    finally:
        p.close()
    back, _ = kp_consume(b.sasl_bootstrap, topic, 1, N, **conf)
    assert [r.value for r in back[0]] == [r.value for r in by_partition(recs)[0]]


def run_kafkajs(bootstrap, mechanism, user, password, topic, ca=None):
    if not (NODE_MODULES / "kafkajs").exists():
        pytest.fail(f"kafkajs not installed in {NODE_MODULES} (scripts/test.sh installs it)")
    argv = ["node", str(REPO / "tests/e2e/js/sasl_client.js"), "--bootstrap", bootstrap,
            "--mechanism", mechanism.lower(), "--username", user, "--password", password,
            "--topic", topic, "--count", "50"]
    if ca:
        argv += ["--ssl-ca", str(ca)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=90,
                         env={**os.environ, "NODE_PATH": str(NODE_MODULES)})
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    assert lines, out.stdout + out.stderr
    return json.loads(lines[-1])


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafkajs_authenticates(start_broker, pki, mechanism):  # noqa: F811
    b = sasl_broker(start_broker, pki)
    user, password = creds(mechanism)
    topic = unique("jssasl")
    create_topic(b.bootstrap, topic, 1)
    got = run_kafkajs(b.sasl_ssl_bootstrap, mechanism, user, password, topic, pki / "ca.pem")
    assert got == {"produced": 50, "consumed": 50, "values_match": True}, got
    bad = run_kafkajs(b.sasl_bootstrap, mechanism, user, password + "x", unique("jsbad"))
    assert bad.get("name") == "KafkaJSSASLAuthenticationError", bad
    assert "Authentication failed" in bad["error"], bad


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password_is_refused(start_broker, pki, mechanism):  # noqa: F811
    b = sasl_broker(start_broker, pki)
    user, password = creds(mechanism)
    from confluent_kafka import KafkaException, Producer
    errors = []
    p = Producer({"bootstrap.servers": b.sasl_bootstrap, "error_cb": errors.append,
                  **ck_sasl(mechanism, user, password + "x")})
    with pytest.raises(KafkaException):
        p.list_topics(timeout=3)
    p.poll(0.5)
    assert any("Authentication failed" in e.str() or "authentication" in e.str().lower()
               for e in errors), [e.str() for e in errors]
    assert "SASL authentication failed; connection closed" in b.output()


# -- raw protocol ---------------------------------------------------------------------------

def sasl_handshake(sock, mechanism, version=1, correlation_id=1):
    body = kproto.request_header_v1(17, version, correlation_id) + kproto.string(mechanism)
    r = kproto.roundtrip(sock, kproto.frame(body), correlation_id)
    error = r.i16()
    mechanisms = [r.string() for _ in range(r.i32())]
    return error, mechanisms


def sasl_authenticate(sock, token, correlation_id):
    body = (kproto.request_header_v1(36, 1, correlation_id)
            + struct.pack(">i", len(token)) + token)
    r = kproto.roundtrip(sock, kproto.frame(body), correlation_id)
    error = r.i16()
    message = r.string()
    auth = r.nbytes()
    lifetime = r.i64()
    return error, message, auth, lifetime


def scram_first(sock, nonce, user=SCRAM_USER):
    bare = f"n={user},r={nonce}"
    error, _, server_first, _ = sasl_authenticate(sock, f"n,,{bare}".encode(), 2)
    assert error == 0, error
    return bare, server_first.decode()


def scram_final(bare, server_first, password, digest=hashlib.sha256, tamper=False):
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(digest().name, password.encode(),
                                 base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = digest(client_key).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, digest).digest()
    proof = bytearray(a ^ b for a, b in zip(client_key, signature))
    if tamper:
        proof[0] ^= 1
    return f"{without_proof},p={base64.b64encode(bytes(proof)).decode()}".encode()


def sasl_socket(b):
    sock = kproto.connect(b.sasl_bootstrap)
    error, mechanisms = sasl_handshake(sock, "SCRAM-SHA-256")
    assert error == 0 and set(mechanisms) == set(MECHANISMS.split(",")), (error, mechanisms)
    return sock


def test_scram_exchange_refuses_tampered_proofs_and_replayed_nonces(start_broker, pki):  # noqa: F811
    b = sasl_broker(start_broker, pki)
    # A good exchange, recorded.
    sock = sasl_socket(b)
    bare, server_first = scram_first(sock, "fixedclientnonce")
    final = scram_final(bare, server_first, SCRAM_PASSWORD)
    error, _, server_final, _ = sasl_authenticate(sock, final, 3)
    assert error == 0 and server_final.startswith(b"v="), (error, server_final)
    # Authenticated: served (Metadata v1 answers).
    r = kproto.roundtrip(sock, kproto.metadata_v1(4), 4)
    assert kproto.parse_metadata_v1(r) is not None
    sock.close()
    # The same client nonce again gets a fresh server nonce: the recorded final is refused.
    sock = sasl_socket(b)
    scram_first(sock, "fixedclientnonce")
    error, message, _, _ = sasl_authenticate(sock, final, 3)
    assert error == 58, (error, message)  # SASL_AUTHENTICATION_FAILED
    assert kproto.wait_closed(sock)
    # A proof with one bit flipped.
    sock = sasl_socket(b)
    bare, server_first = scram_first(sock, "otherclientnonce")
    error, message, _, _ = sasl_authenticate(
        sock, scram_final(bare, server_first, SCRAM_PASSWORD, tamper=True), 3)
    assert error == 58, (error, message)
    assert kproto.wait_closed(sock)


@pytest.mark.parametrize("request_name", ["produce", "metadata"])
def test_requests_before_authentication_close_the_connection(start_broker, pki, request_name):  # noqa: F811
    b = sasl_broker(start_broker, pki)
    topic = unique("unauth")
    create_topic(b.bootstrap, topic, 1)
    sock = kproto.connect(b.sasl_bootstrap)
    # ApiVersions is served before authentication.
    r = kproto.roundtrip(sock, kproto.api_versions(1), 1)
    assert kproto.parse_api_versions_v0(r)[0] == 0
    if request_name == "produce":
        batch = kproto.record_batch([(b"k", b"v")])
        sock.sendall(kproto.produce_v3(2, topic, 0, batch))
    else:
        sock.sendall(kproto.metadata_v1(2))
    assert kproto.wait_closed(sock)
    assert "before SASL authentication completed" in b.output()
    # Nothing was stored.
    back, _ = ck_consume(b.bootstrap, topic, 1, 0, timeout=3, linger=1.0)
    assert sum(len(v) for v in back.values()) == 0


def test_frames_above_the_pre_authentication_bound_close_the_connection(start_broker, pki):  # noqa: F811
    b = sasl_broker(start_broker, pki, **{"sasl.server.max.receive.size": "1024"})
    sock = kproto.connect(b.sasl_bootstrap)
    sock.sendall(struct.pack(">i", 4096) + b"\0" * 64)
    assert kproto.wait_closed(sock)
    assert "sasl.server.max.receive.size" in b.output()


def test_unknown_mechanism_and_plaintext_listener(start_broker, pki):  # noqa: F811
    b = sasl_broker(start_broker, pki)
    sock = kproto.connect(b.sasl_bootstrap)
    error, mechanisms = sasl_handshake(sock, "GSSAPI")
    assert error == 33 and "PLAIN" in mechanisms  # UNSUPPORTED_SASL_MECHANISM
    assert kproto.wait_closed(sock)
    # On a listener without SASL, Kafka answers ILLEGAL_SASL_STATE and goes on serving.
    sock = kproto.connect(b.bootstrap)
    error, _ = sasl_handshake(sock, "PLAIN")
    assert error == 34
    r = kproto.roundtrip(sock, kproto.api_versions(5), 5)
    assert kproto.parse_api_versions_v0(r)[0] == 0


def test_start_up_refuses_what_it_cannot_serve(tmp_path):
    port = free_port()
    cases = [
        ({"listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}"}, "GSSAPI"),
        ({"listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.enabled.mechanisms": "PLAIN"},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
        ({"listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.enabled.mechanisms": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config": "NoSemicolon required a=\"b\""},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config"),
    ]
    for i, (overrides, expected) in enumerate(cases):
        b = Broker(tmp_path / f"b{i}", overrides=overrides, port=port)
        proc = subprocess.run(b.argv(), capture_output=True, text=True, timeout=30)
        assert proc.returncode != 0, proc.stderr
        assert expected in proc.stderr + proc.stdout, proc.stderr

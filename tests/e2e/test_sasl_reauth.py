"""SASL re-authentication (KIP-368, `connections.max.reauth.ms`): librdkafka keeps producing
and consuming across several re-authentications with PLAIN and SCRAM on the connections it
opened first (no reconnect), every record delivered; a raw client that lets its session end
sees its next request closed unanswered (also one that authenticated with raw v0 tokens,
which cannot re-authenticate), one that re-authenticates in time keeps its connection, and a
re-authentication as another user or with another mechanism is refused and closes the
connection.

    BROKER_BIN=$PWD/target/release/broker E2E_NODE_PATH=$PWD/target/e2e-js/node_modules \\
        target/venv/bin/python -m pytest -q tests/e2e/test_sasl_reauth.py
"""
import http.client
import re
import socket
import struct
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

import kproto
from conftest import free_port
from e2e_helpers import DeliveryLog, ck_consumer, ck_producer, create_topic, unique
from test_sasl import (PLAIN_USERS, SCRAM_PASSWORD, ck_sasl, creds, sasl_authenticate,
                       sasl_broker, sasl_handshake, scram_final)
from test_tls import pki  # noqa: F401  (fixture)

# The librdkafka run: sessions of REAUTH_MS, traffic for RUN_S, so several re-authentications
# of every connection.
REAUTH_MS = 3000
RUN_S = 10.0
# librdkafka re-authenticates each connection about every 0.9 * REAUTH_MS; over RUN_S the
# producer's and the consumer's connections make well over this many together.
MIN_REAUTHENTICATIONS = 4
# Raw clients: a short session, waited past.
RAW_REAUTH_MS = 2000
SAFETY_S = 0.4
DRAIN_TIMEOUT_S = 30.0
# Consumer polls: short while producing (the loop interleaves both), longer while draining.
RUN_POLL_S = 0.02
DRAIN_POLL_S = 0.2
# How long a closed connection may take to show as closed.
CLOSE_TIMEOUT_S = 5.0
SCRAPE_TIMEOUT_S = 10.0
SASL_AUTHENTICATION_FAILED = 58
ILLEGAL_SASL_STATE = 34
REAUTHENTICATED = "SASL re-authentication succeeded"
EXPIRED = "due to expired credential"


def reauth_broker(start_broker, pki, reauth_ms, **extra):  # noqa: F811
    metrics_port = free_port()
    b = sasl_broker(start_broker, pki, **{
        "connections.max.reauth.ms": str(reauth_ms),
        "metrics.listener": f"http://127.0.0.1:{metrics_port}",
        # Re-authentications are logged at DEBUG (Kafka logs them at DEBUG too).
        "log.level": "INFO,api::authentication=DEBUG",
        **extra,
    })
    b.metrics_port = metrics_port
    return b


def connections_accepted(b):
    conn = http.client.HTTPConnection("127.0.0.1", b.metrics_port, timeout=SCRAPE_TIMEOUT_S)
    conn.request("GET", "/metrics")
    body = conn.getresponse().read().decode()
    conn.close()
    counts = re.findall(r"^broker_connections_accepted_total(?:\{[^}]*\})? (\S+)$", body, re.M)
    assert counts, body[:2000]
    return sum(float(c) for c in counts)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_librdkafka_reauthenticates_without_reconnecting(start_broker, pki, mechanism):  # noqa: F811
    b = reauth_broker(start_broker, pki, REAUTH_MS)
    user, password = creds(mechanism)
    conf = ck_sasl(mechanism, user, password)
    topic = unique("reauth")
    create_topic(b.bootstrap, topic, 1)
    errors = []
    producer = ck_producer(b.sasl_bootstrap, error_cb=errors.append, **conf)
    consumer = ck_consumer(b.sasl_bootstrap, error_cb=errors.append, **conf)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    log = DeliveryLog()
    consumed = []

    def consume(timeout):
        for m in consumer.consume(num_messages=1000, timeout=timeout):
            if m.error() is None:
                consumed.append(m.value())

    # Warm up: every connection the clients keep is open once a record has gone round.
    producer.produce(topic, value=b"warm-up", on_delivery=log)
    assert producer.flush(DRAIN_TIMEOUT_S) == 0
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while not consumed and time.monotonic() < deadline:
        consume(DRAIN_POLL_S)
    assert consumed == [b"warm-up"], consumed
    accepted = connections_accepted(b)
    started = time.monotonic()
    sent = 1
    while time.monotonic() - started < RUN_S:
        producer.produce(topic, value=b"v%d" % sent, on_delivery=log)
        sent += 1
        producer.poll(0)
        consume(RUN_POLL_S)
    assert producer.flush(DRAIN_TIMEOUT_S) == 0
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while len(consumed) < sent and time.monotonic() < deadline:
        consume(DRAIN_POLL_S)
    consumer.close()

    assert not log.errors, log.errors[:5]
    assert len(log.ok) == sent
    assert consumed == [b"warm-up"] + [b"v%d" % i for i in range(1, sent)]
    assert not errors, [e.str() for e in errors]
    out = b.output()
    reauthentications = out.count(REAUTHENTICATED)
    assert reauthentications >= MIN_REAUTHENTICATIONS, out[-4000:]
    assert EXPIRED not in out, out[-4000:]
    # Every re-authentication happened on a connection opened before the run.
    assert connections_accepted(b) == accepted


# -- raw protocol ---------------------------------------------------------------------------

def scram_login(sock, first_correlation_id=1):
    """SaslHandshake v1 + SCRAM-SHA-256 on `sock`; returns the session lifetime answered."""
    c = first_correlation_id
    error, _ = sasl_handshake(sock, "SCRAM-SHA-256", correlation_id=c)
    assert error == 0, error
    bare = f"n={creds('SCRAM-SHA-256')[0]},r=nonce{c}"
    error, _, server_first, _ = sasl_authenticate(sock, f"n,,{bare}".encode(), c + 1)
    assert error == 0, error
    final = scram_final(bare, server_first.decode(), SCRAM_PASSWORD)
    error, message, server_final, lifetime = sasl_authenticate(sock, final, c + 2)
    assert error == 0 and server_final.startswith(b"v="), (error, message)
    return lifetime


def plain_token(user):
    return f"\0{user}\0{PLAIN_USERS[user]}".encode()


def metadata_answered(sock, correlation_id):
    r = kproto.roundtrip(sock, kproto.metadata_v1(correlation_id), correlation_id)
    return kproto.parse_metadata_v1(r) is not None


def closed_unanswered(sock, timeout=CLOSE_TIMEOUT_S):
    """True if the peer closes within `timeout` having sent nothing more."""
    deadline = time.monotonic() + timeout
    received = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return received == b""
        if not chunk:
            return received == b""
        received += chunk
    return False


def test_expired_session_is_closed_unanswered_and_renewed_by_reauthentication(start_broker, pki):  # noqa: F811
    b = reauth_broker(start_broker, pki, RAW_REAUTH_MS)
    sock = kproto.connect(b.sasl_bootstrap)
    started = time.monotonic()
    assert scram_login(sock) == RAW_REAUTH_MS
    assert metadata_answered(sock, 10)
    # Re-authenticate halfway through: the session is renewed from then.
    time.sleep(RAW_REAUTH_MS / 1000 / 2)
    renewed = time.monotonic()
    assert scram_login(sock, first_correlation_id=20) == RAW_REAUTH_MS
    # Past the first session's end, inside the second: served.
    time.sleep(max(0.0, started + RAW_REAUTH_MS / 1000 + SAFETY_S - time.monotonic()))
    assert time.monotonic() < renewed + RAW_REAUTH_MS / 1000
    assert metadata_answered(sock, 30)
    # Past the second: the next request closes the connection, unanswered.
    time.sleep(max(0.0, renewed + RAW_REAUTH_MS / 1000 + SAFETY_S - time.monotonic()))
    sock.sendall(kproto.metadata_v1(40))
    assert closed_unanswered(sock)
    assert EXPIRED in b.output()
    # ApiVersions is no exception.
    sock = kproto.connect(b.sasl_bootstrap)
    scram_login(sock)
    time.sleep(RAW_REAUTH_MS / 1000 + SAFETY_S)
    sock.sendall(kproto.api_versions(50))
    assert closed_unanswered(sock)


def test_raw_token_clients_cannot_reauthenticate_and_are_closed_at_the_end(start_broker, pki):  # noqa: F811
    b = reauth_broker(start_broker, pki, RAW_REAUTH_MS)
    sock = kproto.connect(b.sasl_bootstrap)
    error, _ = sasl_handshake(sock, "PLAIN", version=0)
    assert error == 0, error
    # KIP-43's v0 form: the token as a bare frame, answered by a bare (here empty) frame.
    sock.sendall(struct.pack(">i", len(plain_token("alice"))) + plain_token("alice"))
    assert kproto.recv_exact(sock, 4) == b"\0\0\0\0"
    assert metadata_answered(sock, 2)
    time.sleep(RAW_REAUTH_MS / 1000 + SAFETY_S)
    sock.sendall(kproto.metadata_v1(3))
    assert closed_unanswered(sock)
    # A re-authentication that asks for raw tokens again is refused.
    sock = kproto.connect(b.sasl_bootstrap)
    scram_login(sock)
    error, _ = sasl_handshake(sock, "SCRAM-SHA-256", version=0, correlation_id=5)
    assert error == ILLEGAL_SASL_STATE
    assert closed_unanswered(sock)


def test_reauthentication_as_another_user_or_mechanism_is_refused(start_broker, pki):  # noqa: F811
    b = reauth_broker(start_broker, pki, REAUTH_MS)
    sock = kproto.connect(b.sasl_bootstrap)
    assert sasl_handshake(sock, "PLAIN")[0] == 0
    assert sasl_authenticate(sock, plain_token("alice"), 2)[0] == 0
    assert metadata_answered(sock, 3)
    assert sasl_handshake(sock, "PLAIN", correlation_id=4)[0] == 0
    error, message, _, _ = sasl_authenticate(sock, plain_token("bob"), 5)
    assert error == SASL_AUTHENTICATION_FAILED, (error, message)
    assert message == "Cannot change principals during re-authentication from User.alice: User.bob"
    assert kproto.wait_closed(sock)
    # Another mechanism: the handshake is answered, the first token refused.
    sock = kproto.connect(b.sasl_bootstrap)
    assert sasl_handshake(sock, "PLAIN")[0] == 0
    assert sasl_authenticate(sock, plain_token("alice"), 2)[0] == 0
    assert sasl_handshake(sock, "SCRAM-SHA-256", correlation_id=3)[0] == 0
    error, message, _, _ = sasl_authenticate(sock, b"n,,n=alice,r=abc", 4)
    assert error == SASL_AUTHENTICATION_FAILED, (error, message)
    assert "not supported for re-authentication of mechanism 'PLAIN'" in message, message
    assert kproto.wait_closed(sock)
    # The same user again is fine, and the connection goes on.
    sock = kproto.connect(b.sasl_bootstrap)
    assert sasl_handshake(sock, "PLAIN")[0] == 0
    assert sasl_authenticate(sock, plain_token("alice"), 2)[0] == 0
    assert sasl_handshake(sock, "PLAIN", correlation_id=3)[0] == 0
    error, _, _, lifetime = sasl_authenticate(sock, plain_token("alice"), 4)
    assert (error, lifetime) == (0, REAUTH_MS)
    assert metadata_answered(sock, 5)


def test_without_a_session_bound_sessions_never_end(start_broker, pki):  # noqa: F811
    b = sasl_broker(start_broker, pki)
    sock = kproto.connect(b.sasl_bootstrap)
    assert sasl_handshake(sock, "PLAIN")[0] == 0
    error, _, _, lifetime = sasl_authenticate(sock, plain_token("alice"), 2)
    assert (error, lifetime) == (0, 0)
    # No re-authentication: KafkaApis' answer, and the connection goes on.
    assert sasl_handshake(sock, "PLAIN", correlation_id=3)[0] == ILLEGAL_SASL_STATE
    assert metadata_answered(sock, 4)


def test_listener_prefixed_bound_overrides_the_broker_wide_one(start_broker, pki):  # noqa: F811
    b = reauth_broker(start_broker, pki, 60000, **{
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": str(REAUTH_MS)})
    sock = kproto.connect(b.sasl_bootstrap)
    assert sasl_handshake(sock, "PLAIN")[0] == 0
    assert sasl_authenticate(sock, plain_token("alice"), 2)[3] == REAUTH_MS
    sock = kproto.connect(b.sasl_bootstrap)
    assert scram_login(sock) == 60000

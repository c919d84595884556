"""SSL listeners beside PLAINTEXT ones: librdkafka and kafka-python produce and consume over
TLS and plaintext (same bytes), TLS 1.2 and 1.3, ssl.client.auth=required refuses a client
without a certificate, bad key files fail start-up naming the key and the file, and the
start-up log says which TLS path (kernel or user space) each listener uses.

The test makes its own CA, server certificate (SAN 127.0.0.1 and localhost) and client
certificate with the openssl CLI.
"""

import http.client
import re
import socket
import ssl
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import Broker, free_port
from e2e_helpers import (assert_same, by_partition, ck_consume, ck_consumer, ck_produce,
                         ck_producer, create_topic, kp_consume, kp_producer, kp_produce, unique)

N = 3000
PARTITIONS = 2
CLIENT_DN = "CN=client,OU=eng,O=Example"
# How long a line the broker logs after the client saw the event may take to appear.
LOG_WAIT_S = 10


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """CA, server keystore (key + chain in one PEM), client key and certificate."""
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=test-ca", cwd=d)
    (d / "san.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", "/CN=localhost", cwd=d)
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "san.ext", cwd=d)
    (d / "client.ext").write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "client.key", "-out", "client.csr", "-subj", "/O=Example/OU=eng/CN=client",
            cwd=d)
    openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "client.pem", "-days", "2", "-extfile", "client.ext",
            cwd=d)
    (d / "keystore.pem").write_text(
        (d / "server.key").read_text() + (d / "server.pem").read_text()
        + (d / "ca.pem").read_text())
    return d


def ssl_broker(start_broker, pki, **extra):
    plain, tls = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
        "ssl.keystore.location": str(pki / "keystore.pem"),
        "ssl.truststore.location": str(pki / "ca.pem"),
    }
    overrides.update(extra)
    b = start_broker(overrides, port=plain)
    b.ssl_bootstrap = f"127.0.0.1:{tls}"
    b.ssl_port = tls
    return b


def ck_ssl(pki, cert=True):
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(pki / "ca.pem")}
    if cert:
        conf["ssl.certificate.location"] = str(pki / "client.pem")
        conf["ssl.key.location"] = str(pki / "client.key")
    return conf


def kp_ssl(pki, cert=True):
    conf = {"security_protocol": "SSL", "ssl_cafile": str(pki / "ca.pem"),
            "ssl_check_hostname": True}
    if cert:
        conf["ssl_certfile"] = str(pki / "client.pem")
        conf["ssl_keyfile"] = str(pki / "client.key")
    return conf


def messages(tag):
    for i in range(N):
        yield dict(key=f"{tag}-{i}".encode(), value=bytes([i % 251]) * (i % 700) + tag.encode(),
                   headers=[("i", str(i).encode())])


def test_ssl_and_plaintext_listeners_side_by_side(start_broker, pki):
    b = ssl_broker(start_broker, pki)
    out = b.output()
    # The start-up log names each listener's path; on a kernel without the tls module,
    # user-space TLS with the probe's reason.
    m = re.search(r"listener SSL uses (kernel TLS|user-space TLS \(kernel TLS: ([^)]*)\))", out)
    assert m, out
    print("SSL listener path:", m.group(0))
    if m.group(1) != "kernel TLS":
        assert m.group(2), "the fallback gives the probe's reason"
    assert "listener PLAINTEXT uses plaintext" in out

    topic = unique("tls")
    create_topic(b.bootstrap, topic, PARTITIONS)
    # librdkafka produces over TLS and over plaintext.
    log = ck_produce(ck_producer(b.ssl_bootstrap, **ck_ssl(pki)), topic, messages("ssl"))
    log = ck_produce(ck_producer(b.bootstrap), topic, messages("plain"), log=log)
    assert not log.errors, log.errors
    produced = by_partition(log.ok)

    # Read back over both listeners with both clients: same records, same bytes.
    via_tls, errors = ck_consume(b.ssl_bootstrap, topic, PARTITIONS, 2 * N, **ck_ssl(pki))
    assert not errors, errors
    assert_same(produced, via_tls)
    via_plain, errors = ck_consume(b.bootstrap, topic, PARTITIONS, 2 * N)
    assert not errors, errors
    assert_same(produced, via_plain)
    kp_tls, _ = kp_consume(b.ssl_bootstrap, topic, PARTITIONS, 2 * N, **kp_ssl(pki))
    assert_same(produced, kp_tls)

    # kafka-python produces over TLS too; librdkafka reads it back over plaintext.
    topic2 = unique("tls-kp")
    create_topic(b.bootstrap, topic2, 1)
    p = kp_producer(b.ssl_bootstrap, **kp_ssl(pki))
    try:
        recs = kp_produce(p, topic2, ({"key": m["key"], "value": m["value"]}
                                      for m in messages("kp")))
    finally:
        p.close()
    back, errors = ck_consume(b.bootstrap, topic2, 1, N)
    assert not errors
    assert [r.value for r in back[0]] == [r.value for r in by_partition(recs)[0]]

    # Metadata answers with the listener the request came through.
    c = ck_consumer(b.ssl_bootstrap, **ck_ssl(pki))
    try:
        brokers = c.list_topics(timeout=10).brokers
        assert [x.port for x in brokers.values()] == [b.ssl_port]
    finally:
        c.close()
    c = ck_consumer(b.bootstrap)
    try:
        assert [x.port for x in c.list_topics(timeout=10).brokers.values()] == [b.port]
    finally:
        c.close()


def api_versions_over(port, context):
    """ApiVersions v0 over a TLS socket; returns (TLS version, error code) or raises."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as s:
            body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
            s.sendall(struct.pack(">i", len(body)) + body)
            header = recv_exact(s, 4)
            size = struct.unpack(">i", header)[0]
            frame = recv_exact(s, size)
            correlation, error = struct.unpack(">ih", frame[:6])
            assert correlation == 7
            return s.version(), error


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed by the broker")
        out += chunk
    return out


def client_context(pki, cert=True, version=None):
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if cert:
        ctx.load_cert_chain(str(pki / "client.pem"), str(pki / "client.key"))
    if version is not None:
        ctx.minimum_version = version
        ctx.maximum_version = version
    return ctx


def connection_counts(metrics_port):
    """(accepted, closed, open) summed over shards, read by prometheus_client's parser."""
    from prometheus_client.parser import text_string_to_metric_families
    conn = http.client.HTTPConnection("127.0.0.1", metrics_port, timeout=10)
    conn.request("GET", "/metrics")
    body = conn.getresponse().read().decode()
    conn.close()
    sums = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            sums[s.name] = sums.get(s.name, 0) + s.value
    return tuple(sums.get(n, 0) for n in ("broker_connections_accepted_total",
                                           "broker_connections_closed_total",
                                           "broker_connections_open"))


def test_failed_handshakes_are_counted_as_closed(start_broker, pki):
    """A plaintext Kafka request on the SSL listener fails the TLS handshake; the connection
    counts as accepted and as closed, so accepted - closed = open = 0 afterwards. A good TLS
    connection balances too."""
    metrics = free_port()
    b = ssl_broker(start_broker, pki, **{"metrics.listener": f"http://127.0.0.1:{metrics}"})
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10) as s:
            body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
            # Read as a TLS record header, the frame announces 3,584 bytes (content type 0):
            # padding completes that record, so the handshake fails on it rather than waiting.
            s.sendall(struct.pack(">i", len(body)) + body + bytes(4096))
            try:
                while s.recv(4096):
                    pass  # a TLS alert, then the close
            except ConnectionResetError:
                pass
    assert api_versions_over(b.ssl_port, client_context(pki, cert=False))[1] == 0
    deadline = time.monotonic() + 10
    while True:
        accepted, closed, open_now = connection_counts(metrics)
        # At least these 4 connections (the harness may have probed the plaintext port).
        if accepted >= 4 and closed == accepted and open_now == 0:
            break
        assert time.monotonic() < deadline, (accepted, closed, open_now)
        time.sleep(0.1)


@pytest.mark.parametrize("version,name", [(ssl.TLSVersion.TLSv1_2, "TLSv1.2"),
                                          (ssl.TLSVersion.TLSv1_3, "TLSv1.3")])
def test_tls_versions(start_broker, pki, version, name):
    b = ssl_broker(start_broker, pki)
    got, error = api_versions_over(b.ssl_port, client_context(pki, cert=False, version=version))
    assert (got, error) == (name, 0)
    # kafka-python over the forced version: a whole produce/consume round trip.
    topic = unique("tlsv")
    create_topic(b.bootstrap, topic, 1)
    conf = {"security_protocol": "SSL", "ssl_context": client_context(pki, version=version)}
    p = kp_producer(b.ssl_bootstrap, **conf)
    try:
        recs = kp_produce(p, topic, ({"key": b"k%d" % i, "value": b"v%d" % i}
                                     for i in range(200)))
    finally:
        p.close()
    back, _ = kp_consume(b.ssl_bootstrap, topic, 1, 200, **conf)
    assert [r.value for r in back[0]] == [r.value for r in by_partition(recs)[0]]


def test_librdkafka_over_tls_1_2_only(start_broker, pki):
    # librdkafka cannot cap its own version: the broker offers TLS 1.2 only.
    b = ssl_broker(start_broker, pki, **{"ssl.enabled.protocols": "TLSv1.2"})
    with pytest.raises(ssl.SSLError):
        api_versions_over(b.ssl_port, client_context(pki, version=ssl.TLSVersion.TLSv1_3))
    topic = unique("tls12")
    create_topic(b.bootstrap, topic, 1)
    log = ck_produce(ck_producer(b.ssl_bootstrap, **ck_ssl(pki)), topic,
                     ({"key": b"k", "value": b"v%d" % i} for i in range(500)))
    back, errors = ck_consume(b.ssl_bootstrap, topic, 1, 500, **ck_ssl(pki))
    assert not errors
    assert_same(by_partition(log.ok), back)


def test_client_auth_required(start_broker, pki, monkeypatch):
    monkeypatch.setenv("RUST_LOG", "info,broker::server=debug,broker::accept=debug")
    b = ssl_broker(start_broker, pki, **{"ssl.client.auth": "required"})
    # With a certificate: served, and the connection's principal is the subject DN.
    assert api_versions_over(b.ssl_port, client_context(pki))[1] == 0
    # Without one: the handshake fails (in TLS 1.3 the client learns it on its first read).
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        api_versions_over(b.ssl_port, client_context(pki, cert=False))
    # The client learns of the failure before the broker logs it: wait for the line.
    deadline = time.monotonic() + LOG_WAIT_S
    while "TLS handshake failed; connection closed" not in b.output():
        assert time.monotonic() < deadline, b.output()
        time.sleep(0.05)
    out = b.output()
    assert f"principal=User:{CLIENT_DN}" in out, out
    # librdkafka without a certificate gets nothing; with one it works.
    c = ck_consumer(b.ssl_bootstrap, **ck_ssl(pki, cert=False))
    try:
        with pytest.raises(Exception):
            c.list_topics(timeout=3)
    finally:
        c.close()
    c = ck_consumer(b.ssl_bootstrap, **ck_ssl(pki))
    try:
        assert c.list_topics(timeout=10).brokers
    finally:
        c.close()


def test_client_auth_requested_accepts_both(start_broker, pki, monkeypatch):
    monkeypatch.setenv("RUST_LOG", "info,broker::server=debug,broker::accept=debug")
    b = ssl_broker(start_broker, pki, **{"ssl.client.auth": "requested"})
    assert api_versions_over(b.ssl_port, client_context(pki, cert=False))[1] == 0
    assert api_versions_over(b.ssl_port, client_context(pki))[1] == 0
    out = b.output()
    assert "principal=User:ANONYMOUS" in out
    assert f"principal=User:{CLIENT_DN}" in out


@pytest.mark.parametrize("case", ["missing", "garbage", "no_key", "encrypted", "password"])
def test_bad_keystore_fails_startup(tmp_path, pki, case):
    keystore = tmp_path / "keystore.pem"
    extra = {}
    if case == "garbage":
        keystore.write_text("not a pem file\n")
    elif case == "no_key":
        keystore.write_text((pki / "server.pem").read_text())
    elif case == "encrypted":
        subprocess.run(["openssl", "pkey", "-in", str(pki / "server.key"), "-aes256", "-passout",
                        "pass:secret", "-out", str(tmp_path / "enc.key")], check=True)
        keystore.write_text((tmp_path / "enc.key").read_text() + (pki / "server.pem").read_text())
    elif case == "password":
        keystore = pki / "keystore.pem"
        extra["ssl.key.password"] = "secret"
    b = Broker(tmp_path / "b", overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()},SSL://127.0.0.1:{free_port()}",
        "ssl.keystore.location": str(keystore), **extra})
    with pytest.raises(AssertionError, match="exited"):
        b.start(timeout=20)
    out = b.output()
    if case == "password":
        assert "ssl.key.password" in out, out
    else:
        assert "ssl.keystore.location" in out and str(keystore) in out, out
    b.stop()


PATH_LINE = re.compile(r"listener SSL uses (kernel TLS|user-space TLS)"
                       r"(?: \((?:kernel TLS: )?(.*)\))? listener=")
SEND_STATS = re.compile(r"shard \d+ fetch path: .*sendfile_bytes=(\d+) copied_bytes=(\d+)")


def ssl_path(broker):
    m = PATH_LINE.search(broker.output())
    assert m, broker.output()
    return m.group(1), m.group(2)


def test_ktls_detection_and_fallback(start_broker, pki):
    """Here (no tls module) the probe reports unsupported with its reason and the listener
    falls back to user-space TLS; ssl.ktls.enable=false forces user-space TLS anywhere."""
    b = ssl_broker(start_broker, pki)
    path, reason = ssl_path(b)
    if not Path("/proc/sys/net/ipv4/tcp_available_ulp").exists() or \
            "tls" not in Path("/proc/sys/net/ipv4/tcp_available_ulp").read_text().split():
        # The module may still load on demand; if the probe said unsupported, it gave why.
        if path != "kernel TLS":
            print("kernel TLS unsupported here:", reason)
            assert reason and ("TCP_ULP" in reason or "TLS_" in reason), reason
    assert api_versions_over(b.ssl_port, client_context(pki, cert=False))[1] == 0
    off = ssl_broker(start_broker, pki, **{"ssl.ktls.enable": "false"})
    assert ssl_path(off) == ("user-space TLS", "ssl.ktls.enable=false")
    assert api_versions_over(off.ssl_port, client_context(pki, cert=False))[1] == 0


def fetch_over_ssl_only(b, pki):
    """Produces over plaintext, consumes over SSL only; returns the SSL consumer's records and
    what was produced."""
    topic = unique("tlsfetch")
    create_topic(b.bootstrap, topic, 1)
    log = ck_produce(ck_producer(b.bootstrap), topic, messages("f"))
    back, errors = ck_consume(b.ssl_bootstrap, topic, 1, N, **ck_ssl(pki))
    assert not errors
    return by_partition(log.ok), back


def test_user_space_tls_fetch_encrypts_from_the_page_cache(start_broker, pki):
    b = ssl_broker(start_broker, pki, **{"ssl.ktls.enable": "false"})
    produced, back = fetch_over_ssl_only(b, pki)
    assert_same(produced, back)
    b.stop()
    stats = [tuple(map(int, m.groups())) for m in SEND_STATS.finditer(b.output())]
    assert stats, b.output()
    # Record bytes reached the SSL socket through rustls (counted as copied), never sendfile.
    assert sum(s[0] for s in stats) == 0, stats
    assert sum(s[1] for s in stats) > 0, stats


def test_ktls_fetch_keeps_sendfile(start_broker, pki):
    b = ssl_broker(start_broker, pki)
    path, reason = ssl_path(b)
    if path != "kernel TLS":
        pytest.skip(f"kernel TLS unavailable here: {reason}")
    produced, back = fetch_over_ssl_only(b, pki)
    assert_same(produced, back)
    b.stop()
    stats = [tuple(map(int, m.groups())) for m in SEND_STATS.finditer(b.output())]
    assert sum(s[0] for s in stats) > 0, stats

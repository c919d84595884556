#!/usr/bin/env python3
"""Connection set-up rate and broker CPU per connection: PLAINTEXT against TLS + SCRAM
(issue 23's figure). One broker on temporary ports, certificates made with openssl, one SCRAM
user (4096 iterations) created with `broker scram add`; then, for SECONDS each, one client
thread opens connections one after another: TCP (+ TLS 1.3 for SASL_SSL), SaslHandshake v1,
the SCRAM exchange (client-first, client-final with the proof, server signature checked),
one Metadata v1, close. Prints connections per second and the broker's CPU per connection
(from /proc/<pid>/stat), so the ratio SCRAM/PLAINTEXT is the broker's own cost.

    BROKER_BIN=$PWD/target/release/broker SECONDS=10 target/venv/bin/python scripts/sasl_connect_rate.py
"""

import base64
import hashlib
import hmac
import os
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import kproto  # noqa: E402

BROKER = os.environ.get("BROKER_BIN", "target/release/broker")
SECONDS = float(os.environ.get("SECONDS", "10"))
USER, PASSWORD = "carol", "carol-secret"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=rate-ca", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", "/CN=localhost", cwd=d)
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "san.ext", cwd=d)
    (d / "keystore.pem").write_text((d / "server.key").read_text() + (d / "server.pem").read_text())


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def authenticate(sock, digest):
    mechanism = "SCRAM-SHA-256" if digest is hashlib.sha256 else "SCRAM-SHA-512"
    body = kproto.request_header_v1(17, 1, 1) + kproto.string(mechanism)
    r = kproto.roundtrip(sock, kproto.frame(body), 1)
    assert r.i16() == 0

    def auth(token, correlation_id):
        body = (kproto.request_header_v1(36, 1, correlation_id)
                + struct.pack(">i", len(token)) + token)
        r = kproto.roundtrip(sock, kproto.frame(body), correlation_id)
        error, message, answer = r.i16(), r.string(), r.nbytes()
        assert error == 0, (error, message)
        return answer.decode()

    bare = f"n={USER},r={base64.b64encode(os.urandom(18)).decode()}"
    server_first = auth(f"n,,{bare}".encode(), 2)
    fields = dict(item.split("=", 1) for item in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(digest().name, PASSWORD.encode(),
                                 base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(digest(client_key).digest(), auth_message, digest).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    server_final = auth(f"{without_proof},p={base64.b64encode(proof).decode()}".encode(), 3)
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    expected = hmac.new(server_key, auth_message, digest).digest()
    assert server_final == "v=" + base64.b64encode(expected).decode()


def one_connection(port, tls, digest):
    sock = kproto.connect(f"127.0.0.1:{port}")
    if tls is not None:
        sock = tls.wrap_socket(sock, server_hostname="127.0.0.1")
    if digest is not None:
        authenticate(sock, digest)
    r = kproto.roundtrip(sock, kproto.metadata_v1(4), 4)
    assert kproto.parse_metadata_v1(r) is not None
    sock.close()


def measure(name, pid, port, tls=None, digest=None):
    count = 0
    cpu0, start = cpu_seconds(pid), time.monotonic()
    while time.monotonic() - start < SECONDS:
        one_connection(port, tls, digest)
        count += 1
    elapsed = time.monotonic() - start
    cpu = cpu_seconds(pid) - cpu0
    per = cpu / count * 1e6
    print(f"| {name} | {count / elapsed:,.0f} | {per:,.0f} |")
    return per


def main():
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        make_pki(d)
        plain, sasl_ssl = free_port(), free_port()
        proc = subprocess.Popen([
            BROKER, "start",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl}",
            "--override", f"log.dirs={d / 'data'}",
            "--override", "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
            "--override", f"ssl.keystore.location={d / 'keystore.pem'}",
            "--override", f"ssl.truststore.location={d / 'ca.pem'}",
        ], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", plain), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "broker did not start"
                    time.sleep(0.1)
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                subprocess.run([BROKER, "scram", "add", "--bootstrap-server", f"127.0.0.1:{plain}",
                                "--user", USER, "--mechanism", mechanism, "--password", PASSWORD],
                               check=True, capture_output=True)
            tls = ssl.create_default_context(cafile=str(d / "ca.pem"))
            print(f"one client thread, {SECONDS:.0f} s each\n")
            print("| connection | per second | broker CPU per connection (µs) |")
            print("|---|---:|---:|")
            base = measure("PLAINTEXT + Metadata", proc.pid, plain)
            measure("SASL_SSL SCRAM-SHA-256 + Metadata", proc.pid, sasl_ssl, tls, hashlib.sha256)
            scram512 = measure("SASL_SSL SCRAM-SHA-512 + Metadata", proc.pid, sasl_ssl, tls,
                               hashlib.sha512)
            print(f"\nbroker CPU per connection, SCRAM-SHA-512 over TLS / PLAINTEXT: "
                  f"x{scram512 / base:.1f}")
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Regenerates the fuzz corpus (fuzz/corpus/<target>/) from real clients.

Starts the broker with a PLAINTEXT and a SASL_PLAINTEXT listener (PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512), each behind a recording TCP proxy whose port the broker advertises, so every
connection a client makes, bootstrap or not, goes through a proxy. Then drives real clients
through the proxies: confluent-kafka (librdkafka) and kafka-python produce with every codec,
consume in groups (join, sync, heartbeat, commit, leave), make admin calls and authenticate
with each SASL mechanism. The proxies record each client-to-broker frame; the splitter
(`cargo run --release -p fuzzing --example corpus_split`) turns them into the five corpora,
deduplicated by content hash and capped to keep the corpus small.

    target/venv/bin/python scripts/fuzz_corpus.py            # replaces fuzz/corpus
    target/venv/bin/python scripts/fuzz_corpus.py --keep DIR  # also keeps the raw frames

The broker binary is target/release/broker (BROKER_BIN overrides); build it first with
`cargo build --release -p broker`.
"""
import argparse
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BROKER_BIN = os.environ.get("BROKER_BIN") or str(REPO / "target" / "release" / "broker")
USER, PASSWORD = "alice", "alice-secret"  # the fuzzing crate's SASL fixture user
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]



def _shut_both(*socks):
    """Shuts both directions of each socket, so the other pipe of the pair ends too."""
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

class RecordingProxy:
    """Forwards 127.0.0.1:listen to 127.0.0.1:target; writes each whole frame the client
    sends to out/<connection>-<sequence>.bin (size prefix included)."""

    def __init__(self, listen, target, out, tag):
        self.listen, self.target, self.out, self.tag = listen, target, Path(out), tag
        self.connections = 0
        self.lock = threading.Lock()
        self.server = socket.socket()
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", listen))
        self.server.listen(128)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
                conn_id = f"{self.tag}{self.connections:04d}"
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._client_to_broker, args=(client, upstream, conn_id),
                             daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _client_to_broker(self, src, dst, conn_id):
        buffer, seq = b"", 0
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                buffer += data
                while len(buffer) >= 4:
                    size = struct.unpack(">i", buffer[:4])[0]
                    if size < 0 or len(buffer) < 4 + size:
                        break
                    (self.out / f"{conn_id}-{seq:05d}.bin").write_bytes(buffer[:4 + size])
                    seq += 1
                    buffer = buffer[4 + size:]
        except OSError:
            pass
        finally:
            _shut_both(src, dst)

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _shut_both(src, dst)


def start_broker(workdir, plain, sasl, plain_proxy, sasl_proxy):
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{USER}" password="{PASSWORD}" user_{USER}="{PASSWORD}";')
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "advertised.listeners": (f"PLAINTEXT://127.0.0.1:{plain_proxy},"
                                 f"SASL_PLAINTEXT://127.0.0.1:{sasl_proxy}"),
        "log.dirs": str(workdir / "data"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
    }
    argv = [BROKER_BIN, "start"]
    for k, v in settings.items():
        argv += ["--override", f"{k}={v}"]
    log = open(workdir / "broker.log", "wb")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            env={**os.environ, "NO_COLOR": "1"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"broker exited with {proc.returncode}: see {workdir / 'broker.log'}")
        try:
            socket.create_connection(("127.0.0.1", plain), timeout=0.5).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    sys.exit("broker did not start within 60 s")


def records(n, tag):
    return [(f"k{i}".encode(), f"{tag} value {i} ".encode() * (1 + i % 5),
             [("h", f"{i}".encode())] if i % 3 == 0 else None) for i in range(n)]


def drive_confluent(bootstrap, topic, sasl=None):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
    base = {"bootstrap.servers": bootstrap, **(sasl or {})}
    admin = AdminClient(base)
    if sasl is None:
        for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
            f.result(30)
    for codec in CODECS:
        p = Producer({**base, "compression.type": codec, "linger.ms": 20,
                      "enable.idempotence": codec == "zstd"})
        for key, value, headers in records(40, f"ck-{codec}"):
            p.produce(topic, value, key, headers=headers)
        p.flush(30)
    c = Consumer({**base, "group.id": f"ck-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = 0, time.monotonic() + 30
    while got < 100 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got += 1
    if got:
        c.commit(asynchronous=False)
    c.close()
    if sasl is None:
        admin.list_topics(timeout=10)
        admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])[
            ConfigResource(ConfigResource.Type.TOPIC, topic)].result(10)
        for f in admin.create_partitions([NewPartitions(topic, 3)]).values():
            f.result(30)
        try:
            admin.list_consumer_groups().result(10)
        except Exception as e:  # noqa: BLE001 - older brokers lack an API; keep going
            print("list_consumer_groups:", e)
    return got


def drive_kafka_python(bootstrap, topic, sasl=None):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic
    extra = sasl or {}
    if sasl is None:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, **extra)
        admin.create_topics([NewTopic(topic, 1, 1)])
        # Admin calls as kafka-python writes them; a call the broker refuses still recorded
        # its request.
        for call in (admin.list_groups, admin.list_topics, admin.describe_cluster,
                     lambda: admin.describe_topics([topic]), admin.describe_log_dirs,
                     admin.describe_user_scram_credentials, admin.list_transactions,
                     admin.describe_features, admin.list_partition_reassignments):
            try:
                call()
            except Exception as e:  # noqa: BLE001
                print("kafka-python admin:", type(e).__name__, e)
        admin.close()
    codecs = ["gzip", "snappy", "lz4", "zstd", None] if sasl is None else [None]
    for codec in codecs:
        p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=20,
                          **extra)
        for key, value, headers in records(30, f"kp-{codec}"):
            p.send(topic, value=value, key=key, headers=headers or [])
        p.flush(30)
        p.close()
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"kp-{uuid.uuid4().hex[:6]}",
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=8000, **extra)
    got = 0
    for _ in c:
        got += 1
        if got >= 60:
            break
    if got:
        c.commit()
    c.close()
    return got


def create_scram_users(bootstrap):
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        upsert = UserScramCredentialUpsertion(USER, ScramCredentialInfo(m, 4096), PASSWORD.encode())
        for f in admin.alter_user_scram_credentials([upsert]).values():
            f.result(30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", help="directory to keep the raw recorded frames in")
    ap.add_argument("--out", default=str(REPO / "fuzz" / "corpus"))
    args = ap.parse_args()
    if not Path(BROKER_BIN).exists():
        sys.exit(f"{BROKER_BIN} not found: cargo build --release -p broker")
    workdir = Path(tempfile.mkdtemp(prefix="fuzz-corpus-"))
    frames = Path(args.keep) if args.keep else workdir / "frames"
    frames.mkdir(parents=True, exist_ok=True)
    plain, sasl, plain_proxy, sasl_proxy = (free_port() for _ in range(4))
    RecordingProxy(plain_proxy, plain, frames, "p")
    RecordingProxy(sasl_proxy, sasl, frames, "s")
    broker = start_broker(workdir, plain, sasl, plain_proxy, sasl_proxy)
    try:
        bootstrap = f"127.0.0.1:{plain_proxy}"
        sasl_bootstrap = f"127.0.0.1:{sasl_proxy}"
        topic = f"fuzz-{uuid.uuid4().hex[:6]}"
        print("confluent-kafka:", drive_confluent(bootstrap, topic), "consumed")
        print("kafka-python:", drive_kafka_python(bootstrap, topic + "-kp"), "consumed")
        create_scram_users(bootstrap)
        for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
                    "sasl.username": USER, "sasl.password": PASSWORD}
            print(f"confluent-kafka {mechanism}:", drive_confluent(sasl_bootstrap, topic, conf))
            kp = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                      sasl_plain_username=USER, sasl_plain_password=PASSWORD)
            print(f"kafka-python {mechanism}:", drive_kafka_python(sasl_bootstrap, topic, kp))
        time.sleep(1)
    finally:
        broker.send_signal(signal.SIGTERM)
        try:
            broker.wait(30)
        except subprocess.TimeoutExpired:
            broker.kill()
    print(f"{len(list(frames.iterdir()))} frames recorded in {frames}")
    subprocess.run(["cargo", "run", "--release", "-q", "-p", "fuzzing", "--example",
                    "corpus_split", "--", str(frames), args.out], cwd=REPO, check=True,
                   env={**os.environ, "CARGO_BUILD_JOBS": os.environ.get("CARGO_BUILD_JOBS", "1")})
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

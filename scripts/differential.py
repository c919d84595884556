#!/usr/bin/env python3
"""Differential test (issue 24 item 5): the fixed corpus of raw Kafka requests
(tests/differential/corpus.py) sent to Apache Kafka 4.x (scripts/kafka-peer.sh) and to our
broker, their answers decoded with kafka-python's protocol classes (generated from Kafka's
JSON schemas) and compared field by field, after normalising what must differ.

  scripts/differential.py [--broker-bin PATH] [--ours HOST:PORT] [--kafka HOST:PORT] [-v]
  scripts/differential.py --generated N [--seed S]     the generated corpus instead
  scripts/differential.py --seed S --case I [--with-prefix]   replay one generated case

Without --ours/--kafka it starts both (ours with a temp data dir, auto-create off; Kafka with
kafka-peer.sh on a free port) and stops them at the end. One line per case:
  same | explained (reason) | BUG (known, not fixed) | DIFFERS (field paths, both values)
Exit 1 when any difference is neither explained nor a listed bug (--strict: bugs fail too).
Needs kafka-python >= 3 (the venv of scripts/test.sh). See tests/differential/README.md.
"""
import argparse
import base64
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "differential"))
import corpus  # noqa: E402

from kafka.protocol import admin, consumer, metadata, producer  # noqa: E402

CLASSES = {}
for mod in (admin, consumer, metadata, producer):
    for n in dir(mod):
        if n.endswith("Request") or n.endswith("Response"):
            CLASSES[n] = getattr(mod, n)

# Fields that must differ between two brokers: masked wherever they appear.
DROP = {"throttle_time_ms"}
MASK = {
    "host": "<host>", "port": "<port>", "cluster_id": "<cluster>",
    "topic_id": "<uuid>", "error_message": "<msg>",
    "node_id": "<node>", "leader_id": "<node>", "controller_id": "<node>",
}

# Explained differences: (case regex, field-path regex, reason). The README's table lists
# the same rows; keep them in step.
EXPLAINED = [
    (r"^api_versions_v99_kip511$", r"^api_keys\[0\]\.max_version$",
     "KIP-511's answer lists ApiVersions' own range, as Kafka's, and ours ends at v4 "
     "(Kafka 4.4.0 serves v5)"),
    (r"^api_versions_v(0|3)$", r"^api_keys",
     "the APIs and version ranges advertised are each broker's own (we implement a subset; "
     "the ranges are checked by tests/e2e, not here)"),
    (r"^api_versions_v3$", r"^(supported_features|finalized_features|finalized_features_epoch|zk_migration_ready)",
     "feature flags (metadata.version, kraft.version, ...) are Kafka's cluster features; we "
     "advertise none"),
    (r"^create_topics_(setup|validate_only|default_partitions)$", r"\.configs\.(flush\.policy|producer\.id\.expiration\.ms)$",
     "topic configs of our own: flush.policy (ARCHITECTURE.md, flush policy per topic) and "
     "producer.id.expiration.ms, a broker config in Kafka that we also take per topic "
     "(ARCHITECTURE.md, idempotence)"),
    (r"^create_topics_(setup|validate_only|default_partitions)$", r"\.configs\.preallocate\.value$",
     "deliberate: preallocate defaults to true here, false in Kafka (ARCHITECTURE.md, "
     "preallocated segments; docs/configuration.md)"),
    (r"^create_topics_(setup|validate_only|default_partitions)$", r"\.configs\.min\.insync\.replicas\.config_source$",
     "the peer's setting: kafka-peer.sh sets min.insync.replicas=1, which KRaft's format "
     "stores as a cluster default (source 3, DYNAMIC_DEFAULT_BROKER_CONFIG); the value is the "
     "same, ours is the built-in default (source 5)"),
    (r"^create_topics_(setup|validate_only|default_partitions)$",
     r"\.configs\.(remote\..*|local\.retention\..*|(leader|follower)\.replication\.throttled\.replicas"
     r"|compression\.(gzip|lz4|zstd)\.level|max\.decompressed\.message\.bytes"
     r"|errors\.deadletterqueue\.group\.enable)$",
     "Kafka topic configs of features we do not have: tiered storage (remote.*, local.retention.*), "
     "replication throttles, per-codec compression levels (KIP-390), max.decompressed.message.bytes, "
     "share-group dead-letter queues"),
    (r"^describe_configs_unknown_topic$", r"\.error_message$",
     "we give a message with UNKNOWN_TOPIC_OR_PARTITION, Kafka none (free text; the code is the same)"),
    (r"^delete_topics_unknown_id$", r"\.error_message$",
     "Kafka gives a message with UNKNOWN_TOPIC_ID, we none (free text; the code is the same)"),
    (r"^produce_v2_unsupported_format$", r"^(responses|outcome|_detail)$",
     "ARCHITECTURE.md 'Compatibility choices': Produce v0-2 advertised, answered "
     "UNSUPPORTED_VERSION per partition (for librdkafka's codec choice); note Kafka 4.4.0 "
     "closes the connection instead, so that section's 'as Apache Kafka 4.0 does' is not "
     "4.4.0's behaviour"),
]

# Known bugs: real deviations from Kafka, printed as BUG and not fatal unless --strict.
# The README's table lists the same rows.
# Known bugs: (case regex, field path regex, what). None left: the three the first run found
# (a name or partition given twice in CreateTopics, Produce, ListOffsets) are fixed.
BUGS = []

ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def build(cls, d, version):
    kw = {}
    fields = cls._struct.fields
    for k, v in d.items():
        f = fields[k]
        if f.is_struct_array() and v is not None:
            v = [build(f.data_class, x, version) for x in v]
        elif f.is_struct() and v is not None:
            v = build(f.data_class, v, version)
        kw[k] = v
    return cls(version=version, **kw)


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def recv_frame(sock):
    (n,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, n)


def encode(case, version, cid):
    req = build(CLASSES[case["api"] + "Request"], case["request"], version)
    req.with_header(correlation_id=cid, client_id="differential")
    return req.encode(version=version, header=True, framed=True)


def decode(api, version, body, cid):
    resp = CLASSES[api + "Response"].decode(body, version=version, header=True)
    got = resp.header.correlation_id
    out = resp.to_dict(json=False)
    if got != cid:
        out["_correlation_id"] = got
    return out


def decode_batches(raw):
    """RecordBatch headers of a records field (their bytes compared via the CRC)."""
    out, pos = [], 0
    while pos + 61 <= len(raw):
        (base_offset, length, leader_epoch, magic, crc, attrs, lod, fts, mts, pid, pep, seq,
         cnt) = struct.unpack(">qiibIhiqqqhii", raw[pos:pos + 61])
        out.append({"base_offset": base_offset, "length": length,
                    "partition_leader_epoch": leader_epoch, "magic": magic, "crc": crc,
                    "attributes": attrs, "last_offset_delta": lod, "first_timestamp": fts,
                    "max_timestamp": mts, "producer_id": pid, "producer_epoch": pep,
                    "base_sequence": seq, "records_count": cnt})
        pos += 12 + length
    if pos != len(raw):
        out.append({"trailing_partial_bytes": len(raw) - pos})
    return out


def normalise(v, key=None):
    if key == "error_message":
        # free text: only whether there is one is compared (null and "" are both none)
        return "<msg>" if v else None
    if key == "configs" and isinstance(v, list) and v and isinstance(v[0], dict) and "name" in v[0]:
        # CreateTopics v5+ answers the new topic's whole config: compared per name
        return {c["name"]: normalise({k: x for k, x in c.items() if k != "name"}) for c in v}
    if isinstance(v, dict):
        return {k: normalise(x, k) for k, x in v.items() if k not in DROP}
    if isinstance(v, list):
        out = [normalise(x, key) for x in v]
        if key == "topics" and all(isinstance(x, dict) and isinstance(x.get("name"), str) for x in out):
            out.sort(key=lambda x: x["name"])  # the order of topics carries no meaning
        return out
    if key in MASK and v is not None and v != -1 and str(v) not in ("", ZERO_UUID):
        return MASK[key]
    if key == "records" and isinstance(v, str) and v:
        try:
            return decode_batches(base64.b64decode(v))
        except Exception:  # noqa: BLE001
            return v
    if key == "records" and isinstance(v, (bytes, bytearray)):
        return decode_batches(bytes(v))
    return v


def diff(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            p = f"{path}.{k}" if path else k
            if k not in a or k not in b:
                out.append((p, a.get(k, "<absent>"), b.get(k, "<absent>")))
            else:
                out += diff(a[k], b[k], p)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [(path, a, b)]


def run_case(addr, case, timeout=15):
    host, port = addr.rsplit(":", 1)
    mode = case.get("mode", "rpc")
    version = case["version"]
    deadline = time.monotonic() + 30
    while True:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            data = bytearray(encode(case, version, 1))
            if mode == "wire_version":
                struct.pack_into(">h", data, 6, case["wire_version"])  # size(4) api_key(2)
                s.sendall(data)
                try:
                    body = recv_frame(s)
                except (ConnectionError, socket.timeout, OSError) as e:
                    return {"outcome": "connection closed without an answer",
                            "_detail": type(e).__name__}
                if case["api"] != "ApiVersions":
                    return {"outcome": "answered", "bytes": len(body)}
                # KIP-511: the answer is an ApiVersions v0 response (header v0).
                return decode("ApiVersions", 0, body, 1)
            s.sendall(data)
            if mode == "no_response":
                follow = build(CLASSES["MetadataRequest"], corpus.metadata(), 12)
                follow.with_header(correlation_id=2, client_id="differential")
                s.sendall(follow.encode(version=12, header=True, framed=True))
                try:
                    body = recv_frame(s)
                except (ConnectionError, socket.timeout, OSError) as e:
                    return {"outcome": "connection closed after the acks=0 produce",
                            "_detail": type(e).__name__}
                cid = struct.unpack(">i", body[:4])[0]
                return {"outcome": "no answer to acks=0", "next_correlation_id": cid}
            try:
                body = recv_frame(s)
            except (ConnectionError, socket.timeout, OSError) as e:
                return {"outcome": "connection closed without an answer",
                        "_detail": type(e).__name__}
            out = decode(case["api"], version, body, 1)
        retry = case.get("retry")
        if retry and time.monotonic() < deadline:
            flat = dict(out)
            for v in out.values():
                if isinstance(v, list) and v and isinstance(v[0], dict):
                    flat.update(v[0])
            # A retry value is one code or a list of codes, any of which means "not ready yet".
            if all(flat.get(k) in (val if isinstance(val, list) else [val])
                   for k, val in retry.items()):
                time.sleep(0.5)
                continue
        return out


def classify(name, diffs):
    explained, bugs, unexplained = [], [], []
    for d in diffs:
        for case_re, path_re, reason in EXPLAINED:
            if re.search(case_re, name) and re.search(path_re, d[0]):
                explained.append((d, reason))
                break
        else:
            for case_re, path_re, reason in BUGS:
                if re.search(case_re, name) and re.search(path_re, d[0]):
                    bugs.append((d, reason))
                    break
            else:
                unexplained.append(d)
    return explained, bugs, unexplained


def short(v, n=160):
    s = repr(v)
    return s if len(s) <= n else s[:n] + "...(%d chars)" % len(s)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"our broker exited with {proc.returncode} during start-up")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("our broker did not listen in time")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--broker-bin", default=os.environ.get("BROKER_BIN") or str(ROOT / "target" / "release" / "broker"))
    ap.add_argument("--ours", help="HOST:PORT of a running broker of ours (fresh, auto-create off)")
    ap.add_argument("--kafka", help="HOST:PORT of a running fresh Apache Kafka")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs) at the end")
    ap.add_argument("--strict", action="store_true", help="known bugs fail the run too")
    ap.add_argument("-v", "--verbose", action="store_true", help="print both answers per case")
    ap.add_argument("-k", "--only", help="run the cases whose name matches this regex")
    g = ap.add_argument_group("generated corpus (scripts/differential_gen.py; tests/differential/README.md)")
    g.add_argument("--generated", type=int, metavar="N",
                   help="instead of the fixed corpus, N random requests generated from the schemas")
    g.add_argument("--seed", default="1", help="the generated corpus' seed (default 1)")
    g.add_argument("--case", type=int, metavar="I",
                   help="replay generated case I of --seed alone (after the set-up), both answers printed")
    g.add_argument("--with-prefix", action="store_true",
                   help="with --case: run cases 0..I-1 first (the state they leave), quietly")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="differential-"))
    procs, kafka_dir = [], None
    t0 = time.monotonic()
    try:
        ours = args.ours
        if not ours:
            port = free_port()
            (tmp / "ours" / "data").mkdir(parents=True)
            log = open(tmp / "ours" / "broker.log", "wb")
            p = subprocess.Popen([args.broker_bin, "start",
                                  "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                                  "--override", f"log.dirs={tmp / 'ours' / 'data'}",
                                  "--override", "auto.create.topics.enable=false"],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                 env=dict(os.environ, NO_COLOR="1"))
            procs.append(p)
            wait_port(port, p)
            ours = f"127.0.0.1:{port}"
        kafka = args.kafka
        if not kafka:
            kafka_dir = tmp / "kafka"
            r = subprocess.run([str(ROOT / "scripts" / "kafka-peer.sh"), "start", str(kafka_dir),
                                str(free_port())], capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"kafka-peer.sh start failed:\n{r.stderr}")
            kafka = r.stdout.strip().splitlines()[-1]
        print(f"ours {ours}   kafka {kafka}   (started in {time.monotonic() - t0:.1f} s)")
        if args.generated is not None or args.case is not None:
            import differential_gen  # noqa: E402  (scripts/, next to this file)
            return differential_gen.run(args, ours, kafka, t0)

        counts = {"same": 0, "explained": 0, "bug": 0, "DIFFERS": 0}
        for case in corpus.CASES:
            name = case["name"]
            if args.only and not re.search(args.only, name) and not case.get("setup"):
                continue
            a = normalise(run_case(ours, case))
            b = normalise(run_case(kafka, case))
            if args.verbose:
                print(f"  ours : {a}\n  kafka: {b}")
            explained, bugs, unexplained = classify(name, diff(a, b))
            if unexplained:
                status = "DIFFERS"
            elif bugs:
                status = "bug"
            elif explained:
                status = "explained"
            else:
                status = "same"
            counts[status] += 1
            print(f"{status:9} {name}")
            for (path, x, y) in unexplained:
                print(f"    DIFFERS {path}: ours={short(x)} kafka={short(y)}")
            for (path, x, y), reason in bugs:
                print(f"    BUG (known, not fixed) {path}: ours={short(x)} kafka={short(y)}: {reason}")
            seen = set()
            for (path, x, y), reason in explained:
                if reason not in seen:
                    seen.add(reason)
                    print(f"    explained {path}...: {reason}")
        print("summary: " + ", ".join(f"{k} {v}" for k, v in counts.items())
              + f"; {time.monotonic() - t0:.1f} s")
        failed = counts["DIFFERS"] > 0 or (args.strict and counts["bug"] > 0)
        return 1 if failed else 0
    finally:
        if kafka_dir is not None:
            subprocess.run([str(ROOT / "scripts" / "kafka-peer.sh"), "stop", str(kafka_dir)],
                           capture_output=True)
        for p in procs:
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

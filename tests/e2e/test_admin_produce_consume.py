"""`broker produce` and `broker consume` (kafka-console-producer.sh / kafka-console-consumer.sh).

`produce` sends keyed lines that librdkafka then reads back (keys, values, order per partition),
each key on the partition librdkafka's murmur2 partitioner (Kafka's Java default) picks;
librdkafka produces with every codec and `consume` prints every record (JSON and Kafka's text
formatter); --partition/--offset, --max-messages, --timeout-ms, acks=0, Kafka errors by name;
and both commands against the bench crate's null broker."""

import json
import re
import subprocess
import time


from conftest import BROKER_BIN
from e2e_helpers import ck_consume, ck_produce, ck_producer, create_topic, unique

PARTS = 3


def run(cmd, *args, stdin=None, check=True, timeout=60):
    res = subprocess.run([BROKER_BIN, cmd, *args], input=stdin, capture_output=True,
                         text=True, timeout=timeout)
    if check:
        assert res.returncode == 0, f"{cmd} {args}: rc={res.returncode} {res.stderr}"
    return res


def json_lines(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_produce_keyed_lines_read_by_librdkafka(broker):
    b = broker.bootstrap
    topic = create_topic(b, unique("prod"), PARTS)
    lines = [f"key-{i % 7}:value-{i}:é" for i in range(300)]
    res = run("produce", "--bootstrap-server", b, "--topic", topic,
              "--property", "parse.key=true", "--property", "key.separator=:",
              "--json", stdin="\n".join(lines) + "\n")
    (summary,) = json_lines(res.stdout)
    assert summary["records"] == 300
    assert sum(p["records"] for p in summary["partitions"]) == 300

    consumed, errors = ck_consume(b, topic, PARTS, 300)
    assert not errors
    got = [r for p in sorted(consumed) for r in consumed[p]]
    assert len(got) == 300
    # Every line arrived once, key and value split at the first separator, in line order
    # within each partition.
    by_partition = {}
    for r in got:
        by_partition.setdefault(r.partition, []).append(r)
    for p, recs in by_partition.items():
        values = [r.value.decode() for r in recs]
        idx = [int(v.split(":")[0].split("-")[1]) for v in values]
        assert idx == sorted(idx), f"partition {p} out of line order"
        assert [r.offset for r in recs] == list(range(len(recs)))
    pairs = sorted((r.key.decode(), r.value.decode()) for r in got)
    assert pairs == sorted((ln.split(":", 1)[0], ln.split(":", 1)[1]) for ln in lines)
    # Each key went where Kafka's default partitioner (murmur2, librdkafka's murmur2_random)
    # puts it: librdkafka with that partitioner sends the same keys to the same partitions.
    ours = {r.key: r.partition for r in got}
    ref = ck_producer(b, partitioner="murmur2_random")
    log = ck_produce(ref, topic, [{"key": k, "value": b"ref"} for k in sorted(ours)])
    assert {r.key: r.partition for r in log.ok} == ours
    assert len(set(ours.values())) > 1, "7 keys should spread over 3 partitions"


def test_produce_options_and_errors(broker):
    b = broker.bootstrap
    topic = create_topic(b, unique("prodopt"), PARTS)
    # --partition, acks=0, a codec, the null marker.
    res = run("produce", "--bootstrap-server", b, "--topic", topic, "--partition", "2",
              "--request-required-acks", "0", "--compression-codec", "zstd",
              "--property", "parse.key=true", "--property", "null.marker=NULL",
              stdin="a\t1\nNULL\t2\nc\tNULL\n")
    assert res.stdout == ""
    consumed, _ = ck_consume(b, topic, [2], 3, timeout=30)
    assert [(r.key, r.value) for r in consumed[2]] == [(b"a", b"1"), (None, b"2"), (b"c", None)]
    # A line without the key separator: Kafka's message, non-zero exit.
    res = run("produce", "--bootstrap-server", b, "--topic", topic,
              "--property", "parse.key=true", stdin="k\tv\nnovalue\n", check=False)
    assert res.returncode != 0
    assert "No key separator found on line number 2: 'novalue'" in res.stderr
    # Unknown partition: Kafka's error name (a missing topic: see the auto-create test).
    res = run("produce", "--bootstrap-server", b, "--topic", topic, "--partition", "9",
              stdin="x\n", check=False)
    assert res.returncode != 0 and "UNKNOWN_TOPIC_OR_PARTITION" in res.stderr
    # A large stdin in bounded batches, with progress on request.
    n = 50_000
    res = run("produce", "--bootstrap-server", b, "--topic", topic, "--progress", "--json",
              stdin="".join(f"{'x' * 100}-{i}\n" for i in range(n)), timeout=120)
    (summary,) = json_lines(res.stdout)
    assert summary["records"] == n and summary["requests"] > 5
    assert re.search(rf"produced {n} records", res.stderr)
    # Unkeyed records spread over the partitions (sticky per batch).
    assert len(summary["partitions"]) == PARTS


def test_consume_prints_every_record_librdkafka_produced(broker):
    b = broker.bootstrap
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        topic = create_topic(b, unique(f"cons-{codec}"), PARTS)
        producer = ck_producer(b, **{"compression.type": codec, "linger.ms": 20})
        msgs = [{"partition": i % PARTS, "key": f"k{i}".encode(), "value": f"v{i}".encode(),
                 "headers": [("h", f"{i}".encode())]} for i in range(200)]
        log = ck_produce(producer, topic, msgs)
        produced = {(r.partition, r.offset): r for r in log.ok}
        assert len(produced) == 200

        res = run("consume", "--bootstrap-server", b, "--topic", topic, "--from-beginning",
                  "--max-messages", "200", "--timeout-ms", "20000", "--json")
        recs = json_lines(res.stdout)
        assert len(recs) == 200, codec
        assert "Processed a total of 200 messages" in res.stderr
        for r in recs:
            p = produced[(r["partition"], r["offset"])]
            assert r["key"].encode() == p.key and r["value"].encode() == p.value
            assert r["headers"] == [{"key": "h", "value": p.value.decode()[1:]}]
            assert r["timestamp"] == p.timestamp and r["timestamp_type"] == "CreateTime"
        # Per partition in offset order.
        for part in range(PARTS):
            offs = [r["offset"] for r in recs if r["partition"] == part]
            assert offs == sorted(offs) == list(range(len(offs)))

    # Kafka's text formatter.
    res = run("consume", "--bootstrap-server", b, "--topic", topic, "--partition", "1",
              "--offset", "2", "--max-messages", "2",
              "--property", "print.key=true", "--property", "print.offset=true",
              "--property", "print.partition=true", "--property", "print.headers=true")
    p2, p3 = produced[(1, 2)], produced[(1, 3)]
    assert res.stdout == (
        f"Partition:1\tOffset:2\th:{p2.value.decode()[1:]}\t{p2.key.decode()}\t{p2.value.decode()}\n"
        f"Partition:1\tOffset:3\th:{p3.value.decode()[1:]}\t{p3.key.decode()}\t{p3.value.decode()}\n"
    )
    res = run("consume", "--bootstrap-server", b, "--topic", topic, "--partition", "0",
              "--offset", "earliest", "--max-messages", "1", "--property", "print.timestamp=true")
    assert res.stdout == f"CreateTime:{produced[(0, 0)].timestamp}\t{produced[(0, 0)].value.decode()}\n"

    # Without --from-beginning: only what arrives after the start; --timeout-ms ends it.
    t0 = time.monotonic()
    res = run("consume", "--bootstrap-server", b, "--topic", topic, "--timeout-ms", "1500")
    assert res.stdout == "" and "Processed a total of 0 messages" in res.stderr
    assert 1.0 < time.monotonic() - t0 < 20
    # --offset needs --partition (as Kafka's tool); bad offsets are refused.
    assert run("consume", "--bootstrap-server", b, "--topic", topic, "--offset", "3",
               check=False).returncode != 0


def test_produce_then_consume_with_our_commands(broker):
    b = broker.bootstrap
    topic = create_topic(b, unique("roundtrip"), 1)
    lines = [f"k{i}|line {i}" for i in range(1000)]
    run("produce", "--bootstrap-server", b, "--topic", topic, "--compression-codec",
        "--property", "parse.key=true", "--property", "key.separator=|",
        stdin="\n".join(lines) + "\n")
    res = run("consume", "--bootstrap-server", b, "--topic", topic, "--from-beginning",
              "--max-messages", "1000", "--property", "print.key=true",
              "--property", "key.separator=|")
    assert res.stdout.splitlines() == lines




def test_produce_and_consume_against_null_broker(null_broker):
    topic = unique("null")
    res = run("produce", "--bootstrap-server", null_broker, "--topic", topic, "--json",
              stdin="".join(f"line {i}\n" for i in range(500)))
    (summary,) = json_lines(res.stdout)
    assert summary["records"] == 500
    assert all(p["first_offset"] is not None for p in summary["partitions"])
    res = run("consume", "--bootstrap-server", null_broker, "--topic", topic,
              "--from-beginning", "--max-messages", "25", "--json", "--progress")
    recs = json_lines(res.stdout)
    assert len(recs) == 25
    assert "Processed a total of 25 messages" in res.stderr
    assert re.search(r"^consumed 25 records", res.stderr, re.M), res.stderr
    # Without --progress a redirected stderr gets no progress lines.
    res = run("consume", "--bootstrap-server", null_broker, "--topic", topic,
              "--from-beginning", "--max-messages", "5")
    assert "records" not in res.stderr and len(res.stdout.splitlines()) == 5


def test_produce_sends_typed_lines_at_once(broker):
    """A line goes out when stdin has nothing more buffered, not when stdin closes: what a
    person typing at kafka-console-producer.sh expects."""
    b = broker.bootstrap
    topic = create_topic(b, unique("typed"), 1)
    proc = subprocess.Popen([BROKER_BIN, "produce", "--bootstrap-server", b, "--topic", topic],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        proc.stdin.write("first line\n")
        proc.stdin.flush()
        res = run("consume", "--bootstrap-server", b, "--topic", topic, "--from-beginning",
                  "--max-messages", "1", "--timeout-ms", "15000")
        assert res.stdout == "first line\n"
        assert proc.poll() is None, "the producer should still be reading stdin"
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0, proc.stderr.read()


def test_missing_topic_is_auto_created_as_kafkas_console_clients_do(start_broker):
    # kafka-console-producer/consumer.sh's clients ask Metadata to create a missing topic
    # (allow.auto.create.topics=true); the broker decides with auto.create.topics.enable.
    b = start_broker().bootstrap
    topic = unique("auto")
    run("produce", "--bootstrap-server", b, "--topic", topic, stdin="one\ntwo\n")
    res = run("consume", "--bootstrap-server", b, "--topic", topic, "--from-beginning",
              "--max-messages", "2")
    assert res.stdout.splitlines() == ["one", "two"]
    fresh = unique("auto")
    res = run("consume", "--bootstrap-server", b, "--topic", fresh, "--from-beginning",
              "--timeout-ms", "500")
    assert res.stdout == "" and "Processed a total of 0 messages" in res.stderr
    listed = run("topics", "list", "--bootstrap-server", b).stdout.split()
    assert topic in listed and fresh in listed

    off = start_broker(overrides={"auto.create.topics.enable": "false"}).bootstrap
    res = run("produce", "--bootstrap-server", off, "--topic", unique("auto"), stdin="x\n",
              check=False)
    assert res.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in res.stderr
    res = run("consume", "--bootstrap-server", off, "--topic", unique("auto"),
              "--timeout-ms", "100", check=False)
    assert res.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in res.stderr


def test_consume_read_committed(broker):
    """--isolation-level read_committed: Fetch asks with isolation_level 1 (the unit tests check
    the request and the dropping of aborted transactions' batches). Our broker has no
    transactions, so every record librdkafka produced is committed and printed, in order."""
    b = broker.bootstrap
    topic = create_topic(b, unique("rc"), 1)
    log = ck_produce(ck_producer(b), topic,
                     [{"partition": 0, "value": f"v{i}".encode()} for i in range(20)])
    assert not log.errors and len(log.ok) == 20
    res = run("consume", "--bootstrap-server", b, "--topic", topic, "--from-beginning",
              "--max-messages", "20", "--isolation-level", "read_committed")
    assert res.stdout.splitlines() == [f"v{i}" for i in range(20)]
    res = run("consume", "--bootstrap-server", b, "--topic", topic, "--from-beginning",
              "--max-messages", "1", "--isolation-level", "committed", check=False)
    assert res.returncode != 0 and "read_committed" in res.stderr

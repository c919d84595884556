"""Admin commands of the broker binary.

`broker dump-log`: librdkafka produces keyed records with headers, and the command prints every
one of them from the partition's segment file (text and --json), and reports a torn tail
instead of crashing. `broker topics`: create/list/describe/delete against our broker (checked
against librdkafka's metadata) and the bench crate's null broker; Kafka errors by name with a
non-zero exit status."""

import json
import shutil
import subprocess


from conftest import BROKER_BIN
from e2e_helpers import ck_produce, ck_producer, create_topic, unique

N = 40


def dump_log(path, *flags):
    return subprocess.run(
        [BROKER_BIN, "dump-log", str(path), *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )


def produce_records(broker, topic, compression="none"):
    producer = ck_producer(broker.bootstrap, **{"compression.type": compression})
    messages = [
        {
            "partition": 0,
            "key": f"key-{i}".encode(),
            "value": f"value-{i}-é".encode(),
            "headers": [("h", f"hv-{i}".encode()), ("n", None)],
        }
        for i in range(N)
    ]
    log = ck_produce(producer, topic, messages)
    assert not log.errors
    return {r.offset: r for r in log.ok}


def segments(broker, topic):
    files = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    assert files, f"no segment files for {topic}"
    return files


def json_lines(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_dump_log_prints_every_record(broker):
    for compression in ("none", "zstd"):
        topic = create_topic(broker.bootstrap, unique(f"dump-{compression}"), 1)
        produced = produce_records(broker, topic, compression)
        assert sorted(produced) == list(range(N))

        lines = []
        for seg in segments(broker, topic):
            res = dump_log(seg, "--print-data", "--json")
            assert res.returncode == 0, res.stderr
            lines += json_lines(res.stdout)
        batches = [x for x in lines if x["type"] == "batch"]
        records = [x for x in lines if x["type"] == "record"]
        assert not [x for x in lines if x["type"] == "corrupt"]
        assert batches and all(b["crc_valid"] and b["magic"] == 2 for b in batches)
        assert {b["compression"] for b in batches} == {compression}
        assert sum(b["count"] for b in batches) == N
        assert [r["offset"] for r in records] == list(range(N))
        for r in records:
            p = produced[r["offset"]]
            assert r["key"].encode() == p.key
            assert r["value"].encode() == p.value
            assert r["headers"] == [
                {"key": "h", "value": f"hv-{r['offset']}"},
                {"key": "n", "value": None},
            ]

        # Kafka's text format, one "| offset:" line per record.
        res = dump_log(segments(broker, topic)[0], "--print-data")
        assert res.returncode == 0, res.stderr
        text_records = [ln for ln in res.stdout.splitlines() if ln.startswith("| offset: ")]
        assert len(text_records) == N
        assert "key: key-7 payload: value-7-é" in res.stdout
        assert f"compresscodec: {compression}" in res.stdout
        assert "isvalid: true" in res.stdout
        # Without --print-data only batches are printed.
        res = dump_log(segments(broker, topic)[0])
        assert res.returncode == 0
        assert "| offset:" not in res.stdout and "baseOffset: 0 " in res.stdout


def test_dump_log_reports_torn_tail(broker, tmp_path):
    topic = create_topic(broker.bootstrap, unique("dump-torn"), 1)
    produce_records(broker, topic)
    seg = segments(broker, topic)[0]
    copy = tmp_path / seg.name
    shutil.copyfile(seg, copy)
    # A running broker's active segment ends in preallocated zeros, which dump-log takes as
    # the end of the log: the batches end where the last one dump-log lists does.
    batches = [x for x in json_lines(dump_log(copy, "--json").stdout) if x["type"] == "batch"]
    assert batches
    size = batches[-1]["position"] + batches[-1]["size"]
    assert copy.stat().st_size >= size
    with open(copy, "r+b") as f:
        f.truncate(size - 5)
    res = dump_log(copy, "--print-data", "--json")
    assert res.returncode == 0, res.stderr
    assert "panicked" not in res.stderr
    lines = json_lines(res.stdout)
    corrupt = [x for x in lines if x["type"] == "corrupt"]
    assert len(corrupt) == 1 and "truncated" in corrupt[0]["error"]
    assert corrupt[0]["position"] + corrupt[0]["bytes"] == size - 5
    res = dump_log(tmp_path / "missing.log")
    assert res.returncode != 0 and "missing.log" in res.stderr


# ---------------------------------------------------------------------------------------------
# `broker topics`.
def topics(bootstrap, *args, check=True):
    cmd, rest = args[0], args[1:]
    res = subprocess.run(
        [BROKER_BIN, "topics", cmd, "--bootstrap-server", bootstrap, *rest],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check:
        assert res.returncode == 0, f"topics {args}: rc={res.returncode} {res.stderr}"
    return res


def check_topics_lifecycle(bootstrap, client_metadata=None):
    """create, list, describe (table and --json), the TOPIC_ALREADY_EXISTS error, delete."""
    topic = unique("admin-cli")
    res = topics(bootstrap, "create", "--topic", topic, "--partitions", "3",
                 "--replication-factor", "1", "--config", "retention.ms=3600000")
    assert f"Created topic {topic}." in res.stdout
    assert topic in topics(bootstrap, "list").stdout.split()
    assert topic in json.loads(topics(bootstrap, "list", "--json").stdout)["topics"]

    res = topics(bootstrap, "describe", "--topic", topic)
    assert f"Topic: {topic}\t" in res.stdout and "PartitionCount: 3" in res.stdout
    rows = [ln for ln in res.stdout.splitlines() if ln.startswith("\tTopic:")]
    assert [r.split("\t")[2] for r in rows] == [f"Partition: {i}" for i in range(3)]
    (desc,) = json_lines(topics(bootstrap, "describe", "--topic", topic, "--json").stdout)
    assert desc["topic"] == topic and desc["partition_count"] == 3
    for p in desc["partitions"]:
        assert p["leader"] >= 0 and p["leader"] in p["replicas"] and p["isr"]
    if client_metadata is not None:
        md = client_metadata(topic)
        assert sorted(md.partitions) == [0, 1, 2]
        assert {md.partitions[p["partition"]].leader for p in desc["partitions"]} == {
            p["leader"] for p in desc["partitions"]
        }

    again = topics(bootstrap, "create", "--topic", topic, "--partitions", "1", check=False)
    assert again.returncode != 0
    assert "TOPIC_ALREADY_EXISTS" in again.stderr

    res = topics(bootstrap, "delete", "--topic", topic)
    assert f"Deleted topic {topic}." in res.stdout
    return topic


def test_topics_commands_against_our_broker(broker):
    from e2e_helpers import admin

    a = admin(broker.bootstrap)

    def client_metadata(topic):
        md = a.list_topics(topic=topic, timeout=10).topics[topic]
        assert md.error is None, md.error
        return md

    topic = check_topics_lifecycle(broker.bootstrap, client_metadata)
    # Deleted: gone from the client's view and from ours, and describing it fails by name.
    assert topic not in a.list_topics(timeout=10).topics
    assert topic not in topics(broker.bootstrap, "list").stdout.split()
    res = topics(broker.bootstrap, "describe", "--topic", topic, check=False)
    assert res.returncode != 0 and "UNKNOWN_TOPIC_OR_PARTITION" in res.stderr
    res = topics(broker.bootstrap, "delete", "--topic", topic, check=False)
    assert res.returncode != 0 and "UNKNOWN_TOPIC_OR_PARTITION" in res.stderr
    # Broker defaults for partitions and replication factor (CreateTopics v4+, -1).
    other = unique("admin-default")
    topics(broker.bootstrap, "create", "--topic", other)
    (desc,) = json_lines(topics(broker.bootstrap, "describe", "--topic", other, "--json").stdout)
    assert desc["partition_count"] >= 1 and desc["replication_factor"] == 1
    # A bad config value is refused with Kafka's code.
    res = topics(broker.bootstrap, "create", "--topic", unique("bad"), "--config",
                 "cleanup.policy=nonsense", check=False)
    assert res.returncode != 0 and "INVALID_CONFIG" in res.stderr


def test_topics_commands_against_null_broker(null_broker):
    bootstrap = null_broker
    topic = unique("null")
    topics(bootstrap, "create", "--topic", topic, "--partitions", "2")
    (desc,) = json_lines(topics(bootstrap, "describe", "--topic", topic, "--json").stdout)
    assert desc["partition_count"] == 2
    topics(bootstrap, "list")
    topics(bootstrap, "delete", "--topic", topic)


def test_reader_that_goes_away_ends_the_command_quietly(broker):
    """`broker dump-log ... | head -1`: the command stops at the closed pipe with status 0 and
    nothing on stderr, as `cat` does (it used to print "error: Broken pipe" and exit 1)."""
    topic = create_topic(broker.bootstrap, unique("pipe"), 1)
    producer = ck_producer(broker.bootstrap)
    log = ck_produce(producer, topic, [{"partition": 0, "value": b"x" * 100}] * 5000)
    assert not log.errors
    proc = subprocess.Popen([BROKER_BIN, "dump-log", str(segments(broker, topic)[0]),
                             "--print-data"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"Dumping ")
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (0, b"")

"""Admin commands of the broker binary that ask a broker about configs, offsets and the cluster.

`broker topics alter-config` (kafka-configs.sh's --add-config/--delete-config) checked with
confluent-kafka's describe_configs; `topics describe`'s Configs column; `topics alter
--partitions`; `topics delete --topic REGEX` with --progress; `broker get-offsets`
(kafka-get-offsets.sh) after librdkafka produced records with known timestamps, cross-checked
with librdkafka's watermarks and offsets_for_times; `broker describe-cluster` against
librdkafka's describe_cluster (DescribeCluster, KIP-700). The same commands against the bench
crate's null broker where they apply (get-offsets, describe-cluster via Metadata, and
alter-config's refusal there)."""

import json
import subprocess

from confluent_kafka import TopicPartition
from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

from conftest import BROKER_BIN
from e2e_helpers import admin, ck_consumer, ck_produce, ck_producer, create_topic, unique

BASE_TS = 1_700_000_000_000
N0 = 30  # records in partition 0, timestamps BASE_TS + i * 1000
N1 = 5  # records in partition 1; partition 2 stays empty


def cli(*args, check=True):
    res = subprocess.run([BROKER_BIN, *args], capture_output=True, text=True, timeout=60)
    if check:
        assert res.returncode == 0, f"{args}: rc={res.returncode} {res.stderr}"
    return res


def json_lines(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def topic_configs(bootstrap, topic):
    res = ConfigResource(ResourceType.TOPIC, topic)
    a = admin(bootstrap)  # kept alive until the result is in
    return a.describe_configs([res])[res].result(timeout=10)


# ---------------------------------------------------------------------------------------------
# Configs.
def test_alter_config_add_and_delete(broker):
    b = broker.bootstrap
    topic = unique("cfg")
    cli("topics", "create", "--bootstrap-server", b, "--topic", topic, "--partitions", "2")
    res = cli("topics", "describe", "--bootstrap-server", b, "--topic", topic)
    header = res.stdout.splitlines()[0]
    assert header.endswith("\tConfigs: "), header

    res = cli("topics", "alter-config", "--bootstrap-server", b, "--topic", topic,
              "--add-config", "retention.ms=3600000,cleanup.policy=[compact,delete]",
              "--add-config", "max.message.bytes=65536")
    assert res.stdout.strip() == f"Completed updating config for topic {topic}."
    entries = topic_configs(b, topic)
    for name, value in [("retention.ms", "3600000"), ("cleanup.policy", "compact,delete"),
                        ("max.message.bytes", "65536")]:
        assert entries[name].value == value
        assert entries[name].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    # describe shows the overrides (and only non-defaults) in kafka-topics.sh's column.
    header = cli("topics", "describe", "--bootstrap-server", b, "--topic", topic).stdout
    configs = header.splitlines()[0].split("\tConfigs: ")[1].split(",")
    assert "retention.ms=3600000" in configs and "max.message.bytes=65536" in configs
    assert not [c for c in configs if c.startswith("segment.bytes=")]
    (desc,) = json_lines(cli("topics", "describe", "--bootstrap-server", b, "--topic", topic,
                             "--json").stdout)
    assert desc["configs"]["retention.ms"] == "3600000"
    assert desc["configs"]["cleanup.policy"] == "compact,delete"

    res = cli("topics", "alter-config", "--bootstrap-server", b, "--topic", topic,
              "--delete-config", "retention.ms,cleanup.policy", "--json")
    (line,) = json_lines(res.stdout)
    assert line["altered"] == topic and line["api"] == "IncrementalAlterConfigs"
    entries = topic_configs(b, topic)
    assert entries["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].value == "delete"
    assert entries["max.message.bytes"].value == "65536"

    # Deleting a key that is not an override fails as kafka-configs.sh does, changing nothing.
    res = cli("topics", "alter-config", "--bootstrap-server", b, "--topic", topic,
              "--delete-config", "retention.ms", check=False)
    assert res.returncode == 1 and "Invalid config(s): retention.ms" in res.stderr
    # The broker's refusal of a bad value, by name.
    res = cli("topics", "alter-config", "--bootstrap-server", b, "--topic", topic,
              "--add-config", "cleanup.policy=nonsense", check=False)
    assert res.returncode == 1 and "INVALID_CONFIG" in res.stderr
    assert topic_configs(b, topic)["cleanup.policy"].value == "delete"
    res = cli("topics", "alter-config", "--bootstrap-server", b, "--topic", unique("missing"),
              "--add-config", "retention.ms=1", check=False)
    assert res.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in res.stderr
    # A malformed --add-config is refused before anything is sent.
    res = cli("topics", "alter-config", "--bootstrap-server", b, "--topic", topic,
              "--add-config", "novalue", check=False)
    assert res.returncode != 0 and "key=val" in res.stderr

    # More partitions (CreatePartitions), seen by librdkafka.
    res = cli("topics", "alter", "--bootstrap-server", b, "--topic", topic, "--partitions", "4")
    assert f"Altered topic {topic}: 4 partitions." in res.stdout
    md = admin(b).list_topics(topic=topic, timeout=10).topics[topic]
    assert sorted(md.partitions) == [0, 1, 2, 3]
    res = cli("topics", "alter", "--bootstrap-server", b, "--topic", topic, "--partitions", "2",
              check=False)
    assert res.returncode == 1 and "INVALID_PARTITIONS" in res.stderr

    cli("topics", "delete", "--bootstrap-server", b, "--topic", topic)
    assert topic not in admin(b).list_topics(timeout=10).topics


def test_alter_config_from_a_properties_file(broker, tmp_path):
    """kafka-configs.sh's --add-config-file: a Java properties file (comments, `:` and `=`
    separators, a continued line), merged with --add-config."""
    b = broker.bootstrap
    topic = unique("cfgfile")
    cli("topics", "create", "--bootstrap-server", b, "--topic", topic, "--partitions", "1")
    props = tmp_path / "topic.properties"
    props.write_text("# retention for the test\n! another comment\n\nretention.ms=7200000\n"
                     "cleanup.policy : compact,\\\n    delete\n")
    res = cli("topics", "alter-config", "--bootstrap-server", b, "--topic", topic,
              "--add-config-file", str(props), "--add-config", "max.message.bytes=32768")
    assert res.stdout.strip() == f"Completed updating config for topic {topic}."
    entries = topic_configs(b, topic)
    assert entries["retention.ms"].value == "7200000"
    assert entries["cleanup.policy"].value == "compact,delete"
    assert entries["max.message.bytes"].value == "32768"
    res = cli("topics", "alter-config", "--bootstrap-server", b, "--topic", topic,
              "--add-config-file", str(tmp_path / "missing.properties"), check=False)
    assert res.returncode == 1 and "missing.properties" in res.stderr


def test_delete_by_regex_with_progress(broker):
    b = broker.bootstrap
    prefix = unique("rx").replace("-", "_")
    names = [f"{prefix}_{i}" for i in range(5)]
    keep = unique("keep")
    for name in names + [keep]:
        cli("topics", "create", "--bootstrap-server", b, "--topic", name, "--partitions", "1")
    described = json_lines(cli("topics", "describe", "--bootstrap-server", b, "--topic",
                               f"{prefix}_.*", "--json").stdout)
    assert sorted(d["topic"] for d in described) == names
    res = cli("topics", "delete", "--bootstrap-server", b, "--topic", f"{prefix}_.*",
              "--progress")
    assert res.stdout.splitlines() == [f"Deleted topic {n}." for n in names]
    assert res.stderr.splitlines()[-1] == "topics deleted: 5/5"
    left = admin(b).list_topics(timeout=10).topics
    assert not [n for n in names if n in left] and keep in left
    res = cli("topics", "delete", "--bootstrap-server", b, "--topic", f"{prefix}_.*",
              check=False)
    assert res.returncode == 1 and "does not exist as expected" in res.stderr


# ---------------------------------------------------------------------------------------------
# get-offsets.
def get_offsets(bootstrap, *args, check=True):
    res = cli("get-offsets", "--bootstrap-server", bootstrap, *args, check=check)
    if not check:
        return res
    return {
        (t, int(p)): int(o)
        for t, p, o in (line.rsplit(":", 2) for line in res.stdout.splitlines())
    }


def test_get_offsets_against_librdkafka(broker):
    b = broker.bootstrap
    topic = create_topic(b, unique("offs"), 3)
    producer = ck_producer(b)
    msgs = [{"partition": 0, "value": f"v{i}".encode(), "timestamp": BASE_TS + i * 1000}
            for i in range(N0)]
    msgs += [{"partition": 1, "value": b"x", "timestamp": BASE_TS + i} for i in range(N1)]
    log = ck_produce(producer, topic, msgs)
    assert not log.errors

    latest = get_offsets(b, "--topic", topic)
    assert latest == {(topic, 0): N0, (topic, 1): N1, (topic, 2): 0}
    assert get_offsets(b, "--topic", topic, "--time", "earliest") == {
        (topic, p): 0 for p in range(3)
    }
    assert get_offsets(b, "--topic", topic, "--time", "-2", "--partitions", "1") == {
        (topic, 1): 0
    }
    # librdkafka's view of the same watermarks.
    c = ck_consumer(b)
    try:
        for p in range(3):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            assert (low, high) == (0, latest[(topic, p)])
        # A timestamp in the middle of partition 0: the first record at or after it. Empty
        # partitions and those whose records are all older have no such offset and no line.
        middle = BASE_TS + 10_500
        by_time = get_offsets(b, "--topic", topic, "--time", str(middle))
        assert by_time == {(topic, 0): 11}
        (found,) = c.offsets_for_times([TopicPartition(topic, 0, middle)], timeout=10)
        assert found.offset == 11
    finally:
        c.close()
    # max-timestamp (ListOffsets v7): the record with the largest timestamp.
    assert get_offsets(b, "--topic", topic, "--time", "max-timestamp")[(topic, 0)] == N0 - 1

    # --json, and --topic-partitions patterns (upper bound exclusive).
    lines = json_lines(cli("get-offsets", "--bootstrap-server", b, "--topic-partitions",
                           f"{topic}:0-2", "--json").stdout)
    assert [(x["topic"], x["partition"], x["offset"]) for x in lines] == [
        (topic, 0, N0), (topic, 1, N1)
    ]
    # Progress on request, on stderr only.
    res = cli("get-offsets", "--bootstrap-server", b, "--topic", topic, "--progress")
    assert res.stderr.splitlines()[-1] == "partitions: 3/3"
    assert len(res.stdout.splitlines()) == 3
    # Nothing matches: Kafka's message and exit status 1.
    res = get_offsets(b, "--topic", unique("none"), check=False)
    assert res.returncode == 1
    assert "Could not match any topic-partitions with the specified filters" in res.stderr
    res = get_offsets(b, "--time", "yesterday", check=False)
    assert res.returncode != 0 and "Malformed time argument" in res.stderr


def test_get_offsets_over_many_partitions(broker):
    """More partitions than one ListOffsets batch (1000): every one answered once."""
    b = broker.bootstrap
    n = 2100
    topic = unique("many")
    cli("topics", "create", "--bootstrap-server", b, "--topic", topic, "--partitions", str(n))
    producer = ck_producer(b)
    log = ck_produce(producer, topic, [{"partition": p, "value": b"v"} for p in (0, 1500, 2099)])
    assert not log.errors
    res = cli("get-offsets", "--bootstrap-server", b, "--topic", topic, "--progress")
    assert res.stderr.splitlines()[-1] == f"partitions: {n}/{n}"
    lines = res.stdout.splitlines()
    assert len(lines) == n
    # Kafka's order: by the string "topic-partition".
    assert lines[:3] == [f"{topic}:0:1", f"{topic}:1:0", f"{topic}:10:0"]
    offsets = get_offsets(b, "--topic", topic)
    assert {p for (_, p), o in offsets.items() if o} == {0, 1500, 2099}


# ---------------------------------------------------------------------------------------------
# describe-cluster.
def test_describe_cluster_against_librdkafka(broker):
    b = broker.bootstrap
    a = admin(b)
    desc = a.describe_cluster(request_timeout=10).result()
    (mine,) = json_lines(cli("describe-cluster", "--bootstrap-server", b, "--json").stdout)
    assert mine["via"] == "DescribeCluster"
    assert mine["cluster_id"] == desc.cluster_id
    assert mine["controller"] == desc.controller.id
    assert [(x["id"], x["host"], x["port"]) for x in mine["brokers"]] == [
        (n.id, n.host, n.port) for n in sorted(desc.nodes, key=lambda n: n.id)
    ]
    text = cli("describe-cluster", "--bootstrap-server", b).stdout.splitlines()
    assert text[0] == f"Cluster ID: {desc.cluster_id}"
    assert text[1] == f"Controller: {desc.controller.id}"
    assert text[2].split() == ["ID", "HOST", "PORT", "RACK"]
    assert text[3].split() == [str(desc.nodes[0].id), desc.nodes[0].host,
                               str(desc.nodes[0].port), "-"]


# ---------------------------------------------------------------------------------------------
# The null broker (bench crate): Produce, Fetch, ListOffsets, Metadata, ApiVersions,
# CreateTopics and DeleteTopics only.


def test_commands_against_null_broker(null_broker):
    b = null_broker
    topic = unique("null")
    cli("topics", "create", "--bootstrap-server", b, "--topic", topic, "--partitions", "2")
    # No DescribeConfigs there: describe leaves the Configs column out instead of failing.
    res = cli("topics", "describe", "--bootstrap-server", b, "--topic", topic)
    assert "PartitionCount: 2" in res.stdout and "Configs:" not in res.stdout
    offsets = get_offsets(b, "--topic", topic, "--time", "earliest")
    assert offsets == {(topic, 0): 0, (topic, 1): 0}
    latest = get_offsets(b, "--topic", topic)
    assert sorted(latest) == [(topic, 0), (topic, 1)]
    (cluster,) = json_lines(cli("describe-cluster", "--bootstrap-server", b, "--json").stdout)
    assert cluster["via"] == "Metadata" and cluster["brokers"]
    host, port = b.rsplit(":", 1)
    assert cluster["brokers"][0]["port"] == int(port)
    res = cli("topics", "alter-config", "--bootstrap-server", b, "--topic", topic,
              "--add-config", "retention.ms=1", check=False)
    assert res.returncode == 1
    assert "supports neither IncrementalAlterConfigs nor AlterConfigs" in res.stderr
    cli("topics", "delete", "--bootstrap-server", b, "--topic", topic)


# ---------------------------------------------------------------------------------------------
# DescribeCluster on the wire: what librdkafka does not ask (endpoint types, authorized ops).
def test_describe_cluster_raw_requests(broker):
    import kproto as kp

    def uvarint(r):
        shift = n = 0
        while True:
            b = r.take(1)[0]
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n

    def compact_str(r):
        n = uvarint(r)
        return None if n == 0 else r.take(n - 1).decode()

    def describe(sock, corr, version, endpoint_type, include_ops=False):
        body = kp.i8(1 if include_ops else 0)
        if version >= 1:
            body += kp.i8(endpoint_type)
        body += kp.uvarint(0)
        r = kp.roundtrip(sock, kp.frame(kp.request_header_v2(60, version, corr) + body), corr)
        uvarint(r)  # response header tagged fields
        out = {"throttle": r.i32(), "error": r.i16(), "message": compact_str(r)}
        if version >= 1:
            out["endpoint_type"] = r.i8()
        out["cluster_id"] = compact_str(r)
        out["controller"] = r.i32()
        out["brokers"] = []
        for _ in range(uvarint(r) - 1):
            out["brokers"].append((r.i32(), compact_str(r), r.i32(), compact_str(r)))
            uvarint(r)
        out["ops"] = r.i32()
        return out

    sock = kp.connect(broker.bootstrap)
    try:
        _, keys, _ = kp.parse_api_versions_v0(kp.roundtrip(sock, kp.api_versions(1), 1))
        assert keys[60] == (0, 1)
        ok = describe(sock, 2, 0, None, include_ops=True)
        assert ok["error"] == 0 and ok["brokers"][0][2] == int(broker.bootstrap.rsplit(":")[1])
        # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
        # IDEMPOTENT_WRITE: what a Kafka broker without ACLs allows on the cluster.
        assert ok["ops"] == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
        assert describe(sock, 3, 1, 1)["ops"] == -(1 << 31)
        controllers = describe(sock, 4, 1, 2)
        assert controllers["error"] == 114  # MISMATCHED_ENDPOINT_TYPE
        assert "CONTROLLER" in controllers["message"]
        assert describe(sock, 5, 1, 9)["error"] == 115  # UNSUPPORTED_ENDPOINT_TYPE
    finally:
        sock.close()

"""AlterConfigs and IncrementalAlterConfigs on a live topic, from librdkafka and kafka-python:

- DescribeConfigs shows the new value with source DYNAMIC_TOPIC_CONFIG (and the default again
  once a key is removed), synonyms included;
- the change takes effect on the partitions of every shard (retention.ms lowered: old
  segments deleted; max.message.bytes lowered: a large record refused with
  MESSAGE_TOO_LARGE) and survives a broker restart;
- IncrementalAlterConfigs changes only the keys it names (APPEND to cleanup.policy included),
  AlterConfigs replaces the whole override set;
- invalid values and operations get INVALID_CONFIG with a message, unknown topics
  UNKNOWN_TOPIC_OR_PARTITION, static broker keys INVALID_REQUEST.
"""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   ResourceType)

from e2e_helpers import admin, ck_produce, ck_producer, ck_watermarks, create_topic, unique

INVALID_CONFIG = 40
INVALID_REQUEST = 42
UNKNOWN_TOPIC = 3


_ADMINS = {}


def client(bootstrap):
    """One AdminClient per broker, kept alive: a client garbage-collected while a call is in
    flight fails the call with _DESTROY."""
    if bootstrap not in _ADMINS:
        _ADMINS[bootstrap] = admin(bootstrap)
    return _ADMINS[bootstrap]


def describe(bootstrap, topic):
    """{key: ConfigEntry} of a topic, from librdkafka."""
    res = ConfigResource(ResourceType.TOPIC, topic)
    return client(bootstrap).describe_configs([res], request_timeout=15)[res].result(timeout=30)


def incremental(bootstrap, topic, *entries, validate_only=False):
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, op, value in entries])
    fs = client(bootstrap).incremental_alter_configs([res], validate_only=validate_only,
                                                    request_timeout=15)
    return fs[res].result(timeout=30)


def legacy_alter(bootstrap, topic, configs):
    res = ConfigResource(ResourceType.TOPIC, topic, set_config=configs)
    return client(bootstrap).alter_configs([res], request_timeout=15)[res].result(timeout=30)


def error_of(call):
    with pytest.raises(KafkaException) as info:
        call()
    return info.value.args[0]


def produce_sized(bootstrap, topic, n, size, partitions):
    p = ck_producer(bootstrap, acks="all", **{"linger.ms": 5, "batch.num.messages": 10})
    log = ck_produce(p, topic, ({"key": f"k{i}".encode(), "value": b"v" * size,
                                 "partition": i % partitions} for i in range(n)))
    return log


def test_librdkafka_alter_live_topic(start_broker):
    b = start_broker({"log.retention.check.interval.ms": 300, "num.shards": 2})
    topic = create_topic(b.bootstrap, unique("alter"), 2,
                         {"retention.ms": "3600000", "segment.bytes": "2048"})
    d = describe(b.bootstrap, topic)
    assert d["retention.ms"].value == "3600000"
    assert d["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert d["cleanup.policy"].value == "delete"
    assert d["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    n = 200
    log = produce_sized(b.bootstrap, topic, n, 100, 2)
    assert not log.errors, log.errors[:3]
    time.sleep(1.0)  # several retention checks: nothing is old enough under 1 hour
    assert {p: lo for p, (lo, _) in ck_watermarks(b.bootstrap, topic, 2).items()} == {0: 0, 1: 0}

    # Incremental: SET one key, APPEND to a list key; the others stay.
    incremental(b.bootstrap, topic,
                ("retention.ms", AlterConfigOpType.SET, "1000"),
                ("cleanup.policy", AlterConfigOpType.APPEND, "compact"))
    d = describe(b.bootstrap, topic)
    assert d["retention.ms"].value == "1000"
    assert d["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert d["cleanup.policy"].value == "delete,compact"
    assert d["cleanup.policy"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert d["segment.bytes"].value == "2048"
    # The lowered retention deletes old segments of both partitions (one per shard).
    deadline = time.monotonic() + 30
    while True:
        marks = ck_watermarks(b.bootstrap, topic, 2)
        if all(lo > 0 for lo, _ in marks.values()):
            break
        assert time.monotonic() < deadline, f"retention.ms change not applied: {marks}"
        time.sleep(0.25)
    assert all(hi == n // 2 for _, hi in marks.values()), marks
    assert "topic configuration changed" in b.output()

    # AlterConfigs replaces the whole set: retention.ms and segment.bytes go back to defaults.
    legacy_alter(b.bootstrap, topic, {"max.message.bytes": "1000", "retention.ms": "-1"})
    d = describe(b.bootstrap, topic)
    assert d["max.message.bytes"].value == "1000"
    assert d["max.message.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert d["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert d["segment.bytes"].value == "1073741824"
    assert d["cleanup.policy"].value == "delete"

    def refused_large():
        log = produce_sized(b.bootstrap, topic, 2, 4000, 2)
        return sorted({e.code() for e, _, _ in log.errors})
    assert refused_large() == [KafkaError.MSG_SIZE_TOO_LARGE]
    assert not produce_sized(b.bootstrap, topic, 4, 100, 2).errors

    # The change survives a restart (ConfigRecords in the metadata log).
    b.restart()
    d = describe(b.bootstrap, topic)
    assert d["max.message.bytes"].value == "1000"
    assert d["max.message.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert d["retention.ms"].value == "-1"
    assert refused_large() == [KafkaError.MSG_SIZE_TOO_LARGE]

    # DELETE puts the default back, and large records are accepted again.
    incremental(b.bootstrap, topic, ("max.message.bytes", AlterConfigOpType.DELETE, None))
    d = describe(b.bootstrap, topic)
    assert d["max.message.bytes"].value == "1048588"
    assert d["max.message.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not produce_sized(b.bootstrap, topic, 2, 4000, 2).errors


def test_librdkafka_refusals(start_broker):
    b = start_broker({"num.shards": 1})
    topic = create_topic(b.bootstrap, unique("refuse"), 1, {"retention.ms": "5000"})

    e = error_of(lambda: incremental(b.bootstrap, topic,
                                     ("retention.ms", AlterConfigOpType.SET, "soon")))
    assert e.code() == INVALID_CONFIG and "retention.ms" in e.str(), e
    e = error_of(lambda: incremental(b.bootstrap, topic,
                                     ("retention.ms", AlterConfigOpType.APPEND, "5")))
    assert e.code() == INVALID_CONFIG and "LIST" in e.str(), e
    e = error_of(lambda: incremental(b.bootstrap, topic,
                                     ("cleanup.policy", AlterConfigOpType.APPEND, "shred")))
    assert e.code() == INVALID_CONFIG and "cleanup.policy" in e.str(), e
    e = error_of(lambda: incremental(b.bootstrap, topic,
                                     ("no.such.key", AlterConfigOpType.SET, "1")))
    assert e.code() == INVALID_CONFIG and "no.such.key" in e.str(), e
    e = error_of(lambda: legacy_alter(b.bootstrap, topic, {"segment.bytes": "1"}))
    assert e.code() == INVALID_CONFIG and "segment.bytes" in e.str(), e
    e = error_of(lambda: incremental(b.bootstrap, unique("missing"),
                                     ("retention.ms", AlterConfigOpType.SET, "1")))
    assert e.code() == UNKNOWN_TOPIC, e
    # validate_only checks and changes nothing.
    incremental(b.bootstrap, topic, ("retention.ms", AlterConfigOpType.SET, "7000"),
                validate_only=True)
    assert describe(b.bootstrap, topic)["retention.ms"].value == "5000"
    # Nothing refused was applied.
    d = describe(b.bootstrap, topic)
    assert d["retention.ms"].value == "5000"
    assert d["cleanup.policy"].value == "delete"
    # A static broker key cannot change at run time.
    res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])
    fs = client(b.bootstrap).incremental_alter_configs([res], request_timeout=15)
    e = error_of(lambda: fs[res].result(timeout=30))
    assert e.code() == INVALID_REQUEST and "num.partitions" in e.str(), e


def test_kafka_python_alter_and_describe(start_broker):
    from kafka.admin import ConfigResource as KpResource, ConfigResourceType, KafkaAdminClient

    b = start_broker({"num.shards": 2})
    topic = create_topic(b.bootstrap, unique("kp"), 2, {"retention.ms": "5000"})
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000)
    try:
        res = KpResource(ConfigResourceType.TOPIC, topic, configs={"max.message.bytes": "1500"})
        out = a.alter_configs([res], incremental=False)
        assert out["topic"][topic] == "OK", out
        got = a.describe_configs([KpResource(ConfigResourceType.TOPIC, topic)],
                                 include_synonyms=True, config_filter="all")["topic"][topic]
        assert got["max.message.bytes"]["value"] == "1500"
        assert got["max.message.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        synonyms = [(s["name"], s["source"]) for s in got["max.message.bytes"]["synonyms"]]
        assert synonyms[0] == ("max.message.bytes", "DYNAMIC_TOPIC_CONFIG"), synonyms
        assert ("message.max.bytes", "DEFAULT_CONFIG") in synonyms, synonyms
        # kafka-python's non-incremental alter keeps the other modified keys itself.
        assert got["retention.ms"]["value"] == "5000"
        assert got["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"

        out = a.alter_configs([KpResource(ConfigResourceType.TOPIC, topic,
                                          configs={"retention.ms": "not-a-number"})],
                              incremental=True)
        assert "InvalidConfig" in out["topic"][topic] and "retention.ms" in out["topic"][topic], out
        # Effect on both shards' partitions: a 3000-byte record is refused by each.
        log = produce_sized(b.bootstrap, topic, 2, 3000, 2)
        assert sorted({e.code() for e, _, _ in log.errors}) == [KafkaError.MSG_SIZE_TOO_LARGE]
        assert len(log.errors) == 2
    finally:
        a.close()


def describe_broker(bootstrap, name):
    res = ConfigResource(ResourceType.BROKER, name)
    return client(bootstrap).describe_configs([res], request_timeout=15)[res].result(timeout=30)


def alter_broker(bootstrap, name, *entries):
    res = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, op, value in entries])
    fs = client(bootstrap).incremental_alter_configs([res], request_timeout=15)
    return fs[res].result(timeout=30)


def test_dynamic_broker_defaults_reach_live_topics(start_broker):
    """A dynamic broker config (`kafka-configs --entity-type brokers --entity-name 1 --alter`;
    librdkafka refuses the cluster-wide "" resource client-side, the unit tests cover it)
    changes every topic that does not override the key, on both shards, and survives a
    restart; a topic override still wins; deleting it restores the static value."""
    b = start_broker({"num.shards": 2, "message.max.bytes": "900000"})
    plain = create_topic(b.bootstrap, unique("plain"), 2)
    own = create_topic(b.bootstrap, unique("own"), 1, {"max.message.bytes": "50000"})
    d = describe(b.bootstrap, plain)
    assert d["max.message.bytes"].value == "900000"
    assert d["max.message.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value

    alter_broker(b.bootstrap, "1", ("message.max.bytes", AlterConfigOpType.SET, "2000"))
    d = describe(b.bootstrap, plain)
    assert d["max.message.bytes"].value == "2000"
    assert d["max.message.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    e = describe_broker(b.bootstrap, "1")["message.max.bytes"]
    assert (e.value, e.source, e.is_read_only) == (
        "2000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
    assert describe_broker(b.bootstrap, "1")["num.partitions"].is_read_only

    def refused(topic, partitions, size):
        log = produce_sized(b.bootstrap, topic, partitions, size, partitions)
        return sorted({e.code() for e, _, _ in log.errors})
    assert refused(plain, 2, 5000) == [KafkaError.MSG_SIZE_TOO_LARGE]
    assert refused(own, 1, 5000) == [], "the topic override wins over the dynamic default"

    b.restart()
    assert describe(b.bootstrap, plain)["max.message.bytes"].value == "2000"
    assert refused(plain, 2, 5000) == [KafkaError.MSG_SIZE_TOO_LARGE]

    alter_broker(b.bootstrap, "1", ("message.max.bytes", AlterConfigOpType.DELETE, None))
    d = describe(b.bootstrap, plain)
    assert d["max.message.bytes"].value == "900000"
    assert d["max.message.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert refused(plain, 2, 5000) == []
    # Static keys and other brokers' ids are refused.
    e = error_of(lambda: alter_broker(b.bootstrap, "1", ("num.shards", AlterConfigOpType.SET, "4")))
    assert e.code() == INVALID_REQUEST and "num.shards" in e.str(), e
    e = error_of(lambda: alter_broker(b.bootstrap, "1", ("log.segment.bytes",
                                                        AlterConfigOpType.SET, "1")))
    assert e.code() == INVALID_CONFIG and "log.segment.bytes" in e.str(), e

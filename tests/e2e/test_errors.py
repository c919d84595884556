"""Kafka's error codes for bad input, offsets lookups and admin APIs, checked exactly.

Raw-socket tests build frames by hand (kproto) so that nothing in a client library can mask or
pre-validate the input; the admin/offset tests use confluent-kafka.
"""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (ConfigResource, ConfigSource, NewTopic, OffsetSpec,
                                   ResourceType)

import kproto
from e2e_helpers import admin, ck_consumer, ck_produce, ck_producer, create_topic, unique

MAX_MESSAGE = 10_000
SEGMENT_BYTES = 1_048_576
OVERRIDES = {
    "auto.create.topics.enable": "false",
    "message.max.bytes": str(MAX_MESSAGE),
    "log.segment.bytes": str(SEGMENT_BYTES),
}
# APIs the broker serves (Kafka api keys) and request versions this file hand-builds.
SERVED = {0, 1, 2, 3, 18, 19, 20, 32}
RAW_VERSIONS = {0: 3, 1: 4, 3: 1, 18: 0, 19: 2}


@pytest.fixture
def b(start_broker):
    return start_broker(OVERRIDES)


def one_partition_topic(bootstrap, **config):
    return create_topic(bootstrap, unique("err"), 1, config=config or None)


def fetch_hw(bootstrap, topic, partition=0):
    with kproto.connect(bootstrap) as s:
        r = kproto.roundtrip(s, kproto.fetch_v4(5, topic, partition, 0, max_wait_ms=0), 5)
        (err, hw, _), = kproto.parse_fetch_v4(r).values()
    assert err == 0, err
    return hw


def err_code(exc):
    e = exc.args[0]
    return e.code() if isinstance(e, KafkaError) else e


# ---------------------------------------------------------------------------------------------
# ApiVersions
def test_api_versions_v0_lists_served_apis(b):
    with kproto.connect(b.bootstrap) as s:
        r = kproto.roundtrip(s, kproto.api_versions(1, version=0), 1)
        err, keys, n = kproto.parse_api_versions_v0(r)
        assert r.remaining() == 0, "trailing bytes after an ApiVersions v0 body"
    assert err == 0
    assert n == len(keys), "duplicate api keys"
    assert SERVED <= set(keys), f"missing api keys: {SERVED - set(keys)}"
    for k, v in RAW_VERSIONS.items():
        lo, hi = keys[k]
        assert lo <= v <= hi, f"api {k}: version {v} not in [{lo}, {hi}]"


def test_api_versions_unsupported_version(b):
    with kproto.connect(b.bootstrap) as s:
        r = kproto.roundtrip(s, kproto.api_versions(42, version=99), 42)
        err, keys, n = kproto.parse_api_versions_v0(r)
        assert r.remaining() == 0, f"{r.remaining()} trailing bytes: body is not v0-shaped"
        assert err == kproto.UNSUPPORTED_VERSION
        assert 18 in keys, f"ApiVersions itself not listed: {keys}"
        lo, hi = keys[18]
        assert lo == 0 and hi < 99, (lo, hi)
        # the connection stays usable: a supported version on the same socket answers normally
        r = kproto.roundtrip(s, kproto.api_versions(43, version=0), 43)
        assert kproto.parse_api_versions_v0(r)[0] == 0


def test_produce_version_not_served(b):
    """Produce v2 (message format v1 era) is a version Kafka defines but we do not serve:
    every partition gets UNSUPPORTED_VERSION, nothing is stored, the connection stays usable."""
    topic = one_partition_topic(b.bootstrap)
    batch = kproto.record_batch([(b"k", b"v")])
    body = (
        kproto.i16(-1)
        + kproto.i32(10000)
        + kproto.array([kproto.string(topic) + kproto.array([kproto.i32(0) + kproto.i32(len(batch)) + batch])])
    )
    request = kproto.frame(kproto.request_header_v1(kproto.PRODUCE, 2, 51) + body)
    with kproto.connect(b.bootstrap) as s:
        r = kproto.roundtrip(s, request, 51)
        results = kproto.parse_produce_v3(r)  # v2's response has v3's shape
        assert results == {(topic, 0): (kproto.UNSUPPORTED_VERSION, -1, -1)}, results
        r = kproto.roundtrip(s, kproto.api_versions(52, version=0), 52)
        assert kproto.parse_api_versions_v0(r)[0] == 0
    assert fetch_hw(b.bootstrap, topic) == 0


# ---------------------------------------------------------------------------------------------
# Produce errors (raw Produce v3 with a hand-built RecordBatch v2)
def test_produce_invalid_required_acks(b):
    topic = one_partition_topic(b.bootstrap)
    batch = kproto.record_batch([(b"k", b"v")])
    err, _ = kproto.produce_raw(b.bootstrap, topic, 0, batch, acks=2)
    assert err == kproto.INVALID_REQUIRED_ACKS
    assert fetch_hw(b.bootstrap, topic) == 0
    # the same batch with acks=-1 is fine: the batch itself was valid
    assert kproto.produce_raw(b.bootstrap, topic, 0, batch, acks=-1) == (0, 0)
    assert fetch_hw(b.bootstrap, topic) == 1


def test_produce_unknown_topic_no_autocreate(b):
    topic = unique("nosuch")
    batch = kproto.record_batch([(b"k", b"v")])
    err, _ = kproto.produce_raw(b.bootstrap, topic, 0, batch)
    assert err == kproto.UNKNOWN_TOPIC_OR_PARTITION
    # metadata for it: error 3 too, and it was not created as a side effect
    with kproto.connect(b.bootstrap) as s:
        r = kproto.roundtrip(s, kproto.metadata_v1(9, [topic]), 9)
        brokers, controller, topics = kproto.parse_metadata_v1(r)
    assert topics[topic][0] == kproto.UNKNOWN_TOPIC_OR_PARTITION
    assert len(brokers) == 1 and brokers[0][1:] == ("127.0.0.1", b.port), brokers
    md = admin(b.bootstrap).list_topics(timeout=10)
    assert topic not in md.topics
    # an unknown partition of an existing topic
    t2 = one_partition_topic(b.bootstrap)
    err, _ = kproto.produce_raw(b.bootstrap, t2, 5, batch)
    assert err == kproto.UNKNOWN_TOPIC_OR_PARTITION


def test_produce_unknown_topic_via_client(b):
    p = ck_producer(b.bootstrap, **{"message.timeout.ms": 5000})
    log = ck_produce(p, unique("nosuch"), [dict(value=b"x")], flush_timeout=30)
    assert not log.ok
    assert len(log.errors) == 1
    code = log.errors[0][0].code()
    assert code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC,
                    KafkaError._MSG_TIMED_OUT), log.errors


def test_produce_message_too_large(b):
    topic = one_partition_topic(b.bootstrap)
    big = kproto.record_batch([(b"k", b"x" * (MAX_MESSAGE * 2))])
    err, _ = kproto.produce_raw(b.bootstrap, topic, 0, big)
    assert err == kproto.MESSAGE_TOO_LARGE
    assert fetch_hw(b.bootstrap, topic) == 0
    small = kproto.record_batch([(b"k", b"x" * 100)])
    assert kproto.produce_raw(b.bootstrap, topic, 0, small) == (0, 0)
    # through librdkafka with a larger client-side limit: delivery report says MSG_SIZE_TOO_LARGE
    p = ck_producer(b.bootstrap, **{"message.max.bytes": 10 * MAX_MESSAGE, "retries": 0})
    log = ck_produce(p, topic, [dict(value=b"y" * (MAX_MESSAGE * 3))], flush_timeout=30)
    assert [e[0].code() for e in log.errors] == [KafkaError.MSG_SIZE_TOO_LARGE], log.errors
    assert fetch_hw(b.bootstrap, topic) == 1


def test_produce_corrupt_crc(b):
    topic = one_partition_topic(b.bootstrap)
    batch = kproto.record_batch([(b"k", b"v"), (b"k2", b"v2")], corrupt_crc=True)
    err, _ = kproto.produce_raw(b.bootstrap, topic, 0, batch)
    assert err == kproto.CORRUPT_MESSAGE
    assert fetch_hw(b.bootstrap, topic) == 0


def test_produce_nonzero_base_offset(b):
    topic = one_partition_topic(b.bootstrap)
    batch = kproto.record_batch([(b"k", b"v")], base_offset=5)
    err, _ = kproto.produce_raw(b.bootstrap, topic, 0, batch)
    assert err == kproto.INVALID_RECORD
    assert fetch_hw(b.bootstrap, topic) == 0


# ---------------------------------------------------------------------------------------------
# CreateTopics / DeleteTopics
def test_create_topic_already_exists(b):
    topic = one_partition_topic(b.bootstrap)
    a = admin(b.bootstrap)  # keep the client alive while waiting on its futures
    fs = a.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)],
                         request_timeout=15)
    with pytest.raises(KafkaException) as ei:
        fs[topic].result(timeout=30)
    assert err_code(ei.value) == KafkaError.TOPIC_ALREADY_EXISTS
    # unchanged: still one partition
    md = admin(b.bootstrap).list_topics(topic=topic, timeout=10)
    assert list(md.topics[topic].partitions) == [0]


def test_create_topic_invalid_name(b):
    a = admin(b.bootstrap)
    fs = a.create_topics([NewTopic("bad/name", 1, 1)], request_timeout=15)
    with pytest.raises(KafkaException) as ei:
        fs["bad/name"].result(timeout=30)
    assert err_code(ei.value) == KafkaError.TOPIC_EXCEPTION  # 17 INVALID_TOPIC_EXCEPTION
    # raw CreateTopics v2: the same code per topic, and the other names' results
    with kproto.connect(b.bootstrap) as s:
        for corr, name in enumerate(["bad/name", "", "a" * 250, "..", "ok-" + unique("n")]):
            r = kproto.roundtrip(s, kproto.create_topics_v2(corr + 1, name), corr + 1)
            res = kproto.parse_create_topics_v2(r)
            assert list(res) == [name]
            want = kproto.NONE if name.startswith("ok-") else kproto.INVALID_TOPIC_EXCEPTION
            assert res[name][0] == want, (name, res)
    assert "bad/name" not in admin(b.bootstrap).list_topics(timeout=10).topics


def test_delete_topic(b):
    a = admin(b.bootstrap)
    topic = one_partition_topic(b.bootstrap)
    keep = one_partition_topic(b.bootstrap)
    assert kproto.produce_raw(b.bootstrap, topic, 0, kproto.record_batch([(b"k", b"v")])) == (0, 0)
    a.delete_topics([topic], request_timeout=15)[topic].result(timeout=30)
    deadline = time.monotonic() + 15
    while topic in a.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)
    topics = a.list_topics(timeout=10).topics
    assert topic not in topics
    assert keep in topics
    err, _ = kproto.produce_raw(b.bootstrap, topic, 0, kproto.record_batch([(b"k", b"v")]))
    assert err == kproto.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(KafkaException) as ei:
        a.delete_topics([topic], request_timeout=15)[topic].result(timeout=30)
    assert err_code(ei.value) == KafkaError.UNKNOWN_TOPIC_OR_PART
    # recreating the name gives an empty log
    create_topic(b.bootstrap, topic, 1)
    assert fetch_hw(b.bootstrap, topic) == 0


# ---------------------------------------------------------------------------------------------
# Fetch
def test_fetch_offset_out_of_range(b):
    topic = one_partition_topic(b.bootstrap)
    batch = kproto.record_batch([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")])
    assert kproto.produce_raw(b.bootstrap, topic, 0, batch) == (0, 0)
    with kproto.connect(b.bootstrap) as s:
        r = kproto.roundtrip(s, kproto.fetch_v4(1, topic, 0, 1000), 1)
        (err, hw, records), = kproto.parse_fetch_v4(r).values()
        assert err == kproto.OFFSET_OUT_OF_RANGE
        assert hw == -1, "Kafka's out-of-range answer carries unknown offsets"
        assert not records
        # at the log end exactly: no error, no records
        r = kproto.roundtrip(s, kproto.fetch_v4(2, topic, 0, 3, max_wait_ms=0), 2)
        (err, hw, records), = kproto.parse_fetch_v4(r).values()
        assert (err, hw) == (0, 3) and not records
        r = kproto.roundtrip(s, kproto.fetch_v4(3, topic, 0, 4, max_wait_ms=0), 3)
        (err, hw, records), = kproto.parse_fetch_v4(r).values()
        assert err == kproto.OFFSET_OUT_OF_RANGE
    # a consumer with auto.offset.reset=error sees the error instead of data
    c = ck_consumer(b.bootstrap, **{"auto.offset.reset": "error"})
    try:
        c.assign([TopicPartition(topic, 0, 1000)])
        deadline = time.monotonic() + 20
        seen = None
        while seen is None and time.monotonic() < deadline:
            for m in c.consume(10, timeout=0.5):
                seen = m
        assert seen is not None and seen.error() is not None, "no error for out-of-range fetch"
        assert seen.error().code() == KafkaError._AUTO_OFFSET_RESET, seen.error()
    finally:
        c.close()


# ---------------------------------------------------------------------------------------------
# ListOffsets
T0 = 1_730_000_000_000
MAX_AT = 37


def test_list_offsets(b):
    topic = create_topic(b.bootstrap, unique("lo"), 2)
    # partition 0: increasing timestamps T0 + 10 i; partition 1: the same but record 37 carries
    # the largest timestamp of the partition
    ts0 = [T0 + 10 * i for i in range(100)]
    ts1 = [T0 + 10 * i for i in range(100)]
    ts1[MAX_AT] = T0 + 100_000
    p = ck_producer(b.bootstrap, **{"max.in.flight.requests.per.connection": 1})
    msgs = [dict(partition=0, value=f"p0-{i}".encode(), timestamp=t) for i, t in enumerate(ts0)]
    msgs += [dict(partition=1, value=f"p1-{i}".encode(), timestamp=t) for i, t in enumerate(ts1)]
    log = ck_produce(p, topic, msgs)
    assert not log.errors
    assert sorted((r.partition, r.offset, r.timestamp) for r in log.ok) == (
        [(0, i, t) for i, t in enumerate(ts0)] + [(1, i, t) for i, t in enumerate(ts1)])

    def first_at_or_after(ts, target):
        return next((i for i, t in enumerate(ts) if t >= target), -1)

    c = ck_consumer(b.bootstrap)
    try:
        for part in (0, 1):
            assert c.get_watermark_offsets(TopicPartition(topic, part), timeout=10,
                                           cached=False) == (0, 100)
        targets = [T0 - 1, T0, T0 + 5, T0 + 505, T0 + 990, T0 + 991, T0 + 99_999, T0 + 100_001]
        for part, ts in ((0, ts0), (1, ts1)):
            # one lookup per call: librdkafka merges duplicate partitions in one list
            got = [c.offsets_for_times([TopicPartition(topic, part, t)], timeout=10)[0].offset
                   for t in targets]
            want = [first_at_or_after(ts, t) for t in targets]
            assert got == want, f"partition {part}: offsets_for_times {got} != {want}"
    finally:
        c.close()

    a = admin(b.bootstrap)
    specs = {
        (0, "earliest"): (OffsetSpec.earliest(), 0, None),
        (0, "latest"): (OffsetSpec.latest(), 100, None),
        (0, "ts"): (OffsetSpec.for_timestamp(T0 + 505), 51, T0 + 510),
        (0, "max"): (OffsetSpec.max_timestamp(), 99, T0 + 990),
        (1, "max"): (OffsetSpec.max_timestamp(), MAX_AT, T0 + 100_000),
    }
    for (part, what), (spec, want_off, want_ts) in specs.items():
        tp = TopicPartition(topic, part)
        res = a.list_offsets({tp: spec}, request_timeout=15)
        info = list(res.values())[0].result(timeout=30)
        assert info.offset == want_off, (part, what, info.offset, info.timestamp)
        if want_ts is not None:
            assert info.timestamp == want_ts, (part, what, info.offset, info.timestamp)


# ---------------------------------------------------------------------------------------------
# DescribeConfigs
def source(entry):
    return getattr(entry.source, "value", entry.source)


def test_describe_configs_topic(b):
    topic = one_partition_topic(b.bootstrap, **{"retention.ms": "3600000"})
    a = admin(b.bootstrap)
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = a.describe_configs([res], request_timeout=15)[res].result(timeout=30)
    assert entries["retention.ms"].value == "3600000"
    assert source(entries["retention.ms"]) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # a default that the broker overrides statically (log.segment.bytes) ...
    assert entries["segment.bytes"].value == str(SEGMENT_BYTES)
    assert source(entries["segment.bytes"]) == ConfigSource.STATIC_BROKER_CONFIG.value
    # ... and Kafka's own defaults
    assert entries["cleanup.policy"].value == "delete"
    assert source(entries["cleanup.policy"]) == ConfigSource.DEFAULT_CONFIG.value
    assert entries["retention.bytes"].value == "-1"
    assert source(entries["retention.bytes"]) == ConfigSource.DEFAULT_CONFIG.value
    assert entries["max.message.bytes"].value == str(MAX_MESSAGE)
    for name, e in entries.items():
        assert e.name == name
    # unknown topic: an error, not an empty list
    res2 = ConfigResource(ResourceType.TOPIC, unique("nosuch"))
    with pytest.raises(KafkaException) as ei:
        a.describe_configs([res2], request_timeout=15)[res2].result(timeout=30)
    assert err_code(ei.value) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_configs_broker(b):
    a = admin(b.bootstrap)
    md = a.list_topics(timeout=10)
    assert len(md.brokers) == 1
    node = next(iter(md.brokers))
    res = ConfigResource(ResourceType.BROKER, str(node))
    entries = a.describe_configs([res], request_timeout=15)[res].result(timeout=30)
    assert entries["message.max.bytes"].value == str(MAX_MESSAGE)
    assert source(entries["message.max.bytes"]) == ConfigSource.STATIC_BROKER_CONFIG.value
    assert entries["log.segment.bytes"].value == str(SEGMENT_BYTES)
    assert entries["auto.create.topics.enable"].value == "false"
    assert entries["num.partitions"].value == "1"
    assert source(entries["num.partitions"]) == ConfigSource.DEFAULT_CONFIG.value

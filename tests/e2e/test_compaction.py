"""Log compaction (cleanup.policy=compact) seen by real clients.

A compacted topic gets 3 keys x 61 versions (offsets 0..182, key a/b/c in turn), with small
segments, a low segment.ms and min.cleanable.dirty.ratio, and the shard's cleaner checking
every 200 ms (log.cleaner.backoff.ms). One more record after segment.ms rolls the last
version of every key out of the active segment (which is never cleaned). Reading from the
beginning must then give, for keys a/b/c, exactly the 3 latest values at their original
offsets 180, 181, 182: the test polls until the cleaner has run, with a bounded wait.
Both clients produce (librdkafka and kafka-python) and both read the result back.
"""

import time

import pytest

from e2e_helpers import (ck_consume, ck_produce, ck_producer, create_topic, kp_consume,
                         kp_produce, kp_producer, unique)

KEYS = [b"a", b"b", b"c"]
VERSIONS = 61
SEGMENT_MS = 300
COMPACTION_WAIT_S = 30
LIVE = [(180, b"a", b"a-60"), (181, b"b", b"b-60"), (182, b"c", b"c-60")]

TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.bytes": "1024",
    "segment.ms": str(SEGMENT_MS),
    "min.cleanable.dirty.ratio": "0.01",
}


def messages():
    return [{"key": k, "value": k + b"-" + str(v).encode()}
            for v in range(VERSIONS) for k in KEYS]


def produce_ck(bootstrap, topic, msgs):
    p = ck_producer(bootstrap, **{"linger.ms": 0})
    log = ck_produce(p, topic, msgs)
    assert not log.errors, log.errors[:5]
    return [r.offset for r in log.ok]


def produce_kp(bootstrap, topic, msgs):
    p = kp_producer(bootstrap, linger_ms=0)
    try:
        return [r.offset for r in kp_produce(p, topic, msgs)]
    finally:
        p.close()


def live_ck(bootstrap, topic):
    got, errors = ck_consume(bootstrap, topic, 1, 1, timeout=5, linger=1.0)
    assert not errors, errors
    return [(r.offset, r.key, r.value) for r in got[0]]


def live_kp(bootstrap, topic):
    got, _ = kp_consume(bootstrap, topic, 1, 1, timeout=5, linger=1.0)
    return [(r.offset, r.key, r.value) for r in got[0]]


@pytest.mark.parametrize("client", ["librdkafka", "kafka-python"])
def test_compacted_topic_keeps_latest_value_per_key(start_broker, client):
    b = start_broker({"num.shards": 1, "log.cleaner.backoff.ms": 200})
    topic = create_topic(b.bootstrap, unique("compact"), 1, TOPIC_CONFIG)
    produce = produce_ck if client == "librdkafka" else produce_kp
    offsets = produce(b.bootstrap, topic, messages())
    assert sorted(offsets) == list(range(len(KEYS) * VERSIONS))
    # After segment.ms the next append rolls the active segment: every version of a/b/c is
    # then in a closed segment, where the cleaner may work.
    time.sleep(SEGMENT_MS * 2 / 1000)
    assert produce(b.bootstrap, topic, [{"key": b"end", "value": b"marker"}]) == [183]

    def compacted(records):
        return [r for r in records if r[1] in KEYS]

    deadline = time.monotonic() + COMPACTION_WAIT_S
    while True:
        seen = compacted(live_ck(b.bootstrap, topic))
        if len(seen) == len(KEYS) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert seen == LIVE, f"after {COMPACTION_WAIT_S}s: {len(seen)} records of a/b/c: {seen[:6]}"
    assert compacted(live_kp(b.bootstrap, topic)) == LIVE
    assert "log cleaner pass done" in b.output()

    # Offsets are never reused: the next record follows the marker; and a restart (kill -9,
    # so the compacted segments are re-validated) keeps the same view.
    assert produce(b.bootstrap, topic, [{"key": b"a", "value": b"a-61"}]) == [184]
    b.restart(kill=True)
    after = live_ck(b.bootstrap, topic)
    assert compacted(after)[:3] == LIVE
    assert (184, b"a", b"a-61") in after


def offsets_log_bytes(data_dir):
    d = data_dir / "__consumer_offsets-0"
    return sum(f.stat().st_size for f in d.glob("*.log")) if d.exists() else 0


def test_consumer_offsets_topic_is_compacted(start_broker):
    """__consumer_offsets is created compacted: a group committing the same partition again
    and again must not make it grow forever, and the last commit survives a restart."""
    from confluent_kafka import TopicPartition

    from e2e_helpers import ck_consumer

    b = start_broker({"num.shards": 1, "log.cleaner.backoff.ms": 200,
                      "offsets.topic.num.partitions": 1, "offsets.topic.segment.bytes": 2048})
    topic = create_topic(b.bootstrap, unique("src"), 1)
    group = unique("g")
    c = ck_consumer(b.bootstrap, **{"group.id": group})
    commits = 400
    try:
        for i in range(1, commits + 1):
            c.commit(offsets=[TopicPartition(topic, 0, i)], asynchronous=False)
    finally:
        c.close()
    written = commits * 60  # each commit record is well over 60 bytes
    deadline = time.monotonic() + COMPACTION_WAIT_S
    while offsets_log_bytes(b.data_dir) > written // 4 and time.monotonic() < deadline:
        time.sleep(0.5)
    size = offsets_log_bytes(b.data_dir)
    assert size <= written // 4, f"__consumer_offsets still {size} bytes after {commits} commits"
    assert "log cleaner pass done" in b.output()

    b.restart(kill=True)
    c = ck_consumer(b.bootstrap, **{"group.id": group})
    try:
        deadline = time.monotonic() + 30
        while True:
            got = c.committed([TopicPartition(topic, 0)], timeout=10)[0]
            if got.offset == commits or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert got.offset == commits
    finally:
        c.close()

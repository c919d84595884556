"""Two shards: one client connection reaches partitions owned by both (forwarding), and the
per-shard counters logged at shutdown show both shards did work."""

from e2e_helpers import (assert_dense, assert_same, by_partition, ck_consume, ck_produce,
                         ck_producer, create_topic, unique)

PARTITIONS = 4
N = 4000
OFFSETS_PARTITIONS = 2


def test_two_shards_forwarding(start_broker):
    # The consumer's group.id makes librdkafka look up its coordinator, which creates
    # __consumer_offsets: keep it small and count it below.
    b = start_broker({"num.shards": 2, "offsets.topic.num.partitions": OFFSETS_PARTITIONS})
    topic = create_topic(b.bootstrap, unique("shards"), PARTITIONS)
    p = ck_producer(b.bootstrap)
    msgs = [dict(partition=i % PARTITIONS, key=f"k{i}".encode(), value=f"v{i}".encode())
            for i in range(N)]
    log = ck_produce(p, topic, msgs)
    assert not log.errors, log.errors[:3]
    produced = by_partition(log.ok)
    assert {q: len(v) for q, v in produced.items()} == {q: N // PARTITIONS
                                                         for q in range(PARTITIONS)}
    assert_dense(produced)
    consumed, _ = ck_consume(b.bootstrap, topic, PARTITIONS, N)
    assert_same(produced, consumed)

    rc = b.stop()
    assert rc == 0, f"exit code {rc}"
    stats = b.shard_stats()
    assert sorted(stats) == [0, 1], f"expected stats lines for shards 0 and 1:\n{b.tail()}"
    for shard, s in stats.items():
        assert s["partitions"] > 0, (shard, s)
        assert s["produce_batches"] > 0, (shard, s)
        assert s["requests"] > 0 or s["forwarded_in"] > 0, (shard, s)
    assert sum(s["partitions"] for s in stats.values()) in (
        PARTITIONS, PARTITIONS + OFFSETS_PARTITIONS), stats
    assert any(s["forwarded_in"] + s["forwarded_out"] > 0 for s in stats.values()), stats

"""100,000 keyed records with headers through kafka-python, read back exactly."""

from kafka.admin import KafkaAdminClient, NewTopic

from e2e_helpers import (assert_dense, assert_same, by_partition, kp_consume, kp_produce,
                         kp_producer, unique, wait_for_topic)

N = 100_000
PARTITIONS = 3
BASE_TS = 1_700_000_000_000


def messages():
    for i in range(N):
        yield dict(
            key=f"key-{i:06d}".encode(),
            value=f"value-{i:06d}-".encode() + bytes([i % 251]) * (i % 50),
            headers=[("h1", f"a{i}".encode()), ("h2", f"b{i * 7}".encode())],
            timestamp_ms=BASE_TS + i,
        )


def test_roundtrip_kafka_python(broker):
    topic = unique("rt-kp")
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30000)
    try:
        a.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    finally:
        a.close()
    wait_for_topic(broker.bootstrap, topic, PARTITIONS)

    p = kp_producer(broker.bootstrap, acks="all")
    try:
        recs = kp_produce(p, topic, messages())
    finally:
        p.close()
    assert len(recs) == N
    # what the broker acknowledged carries the timestamps we set (CreateTime)
    assert [r.timestamp for r in recs] == [BASE_TS + i for i in range(N)]
    produced = by_partition(recs)
    assert sorted(produced) == list(range(PARTITIONS))
    assert_dense(produced)

    consumed, ts_types = kp_consume(broker.bootstrap, topic, PARTITIONS, N)
    assert_same(produced, consumed)
    assert ts_types == {0}, ts_types  # CreateTime

"""100,000 keyed records with headers through confluent-kafka (librdkafka), read back exactly."""

from e2e_helpers import (CREATE_TIME, assert_dense, assert_same, by_partition, ck_consume,
                         ck_produce, ck_producer, ck_watermarks, create_topic, unique)

N = 100_000
PARTITIONS = 3
BASE_TS = 1_700_000_000_000


def messages():
    for i in range(N):
        yield dict(
            key=f"key-{i:06d}".encode(),
            value=f"value-{i:06d}-".encode() + bytes([i % 251]) * (i % 50),
            headers=[("h1", f"a{i}".encode()), ("h2", f"b{i * 7}".encode())],
            timestamp=BASE_TS + i,
        )


def test_roundtrip_librdkafka(broker):
    topic = create_topic(broker.bootstrap, unique("rt-ck"), PARTITIONS)
    p = ck_producer(broker.bootstrap, acks="all", **{"batch.size": 1_000_000})
    log = ck_produce(p, topic, messages())
    assert not log.errors, log.errors[:5]
    assert len(log.ok) == N

    produced = by_partition(log.ok)
    assert sorted(produced) == list(range(PARTITIONS)), "keys should spread over all partitions"
    assert_dense(produced)
    # delivery reports carry what we sent
    assert sorted(r.key for r in log.ok) == [f"key-{i:06d}".encode() for i in range(N)]

    wm = ck_watermarks(broker.bootstrap, topic, PARTITIONS)
    assert wm == {q: (0, len(produced[q])) for q in range(PARTITIONS)}

    consumed, errors = ck_consume(broker.bootstrap, topic, PARTITIONS, N)
    assert_same(produced, consumed)
    # explicit timestamps are CreateTime and come back unchanged
    i_by_key = {r.key: int(r.key[4:]) for r in log.ok}
    for q, lst in consumed.items():
        for r in lst:
            assert r.timestamp == BASE_TS + i_by_key[r.key], r
            assert r.headers == (("h1", f"a{i_by_key[r.key]}".encode()),
                                 ("h2", f"b{i_by_key[r.key] * 7}".encode())), r

"""Every codec (gzip, snappy, lz4, zstd) from both clients, read back exactly; plus cross-client
(librdkafka produces, kafka-python consumes, and the reverse)."""

import pytest

from e2e_helpers import (assert_dense, assert_same, by_partition, ck_consume, ck_produce,
                         ck_producer, create_topic, kp_consume, kp_produce, kp_producer, unique)

N = 1000
PARTITIONS = 2
CODECS = ["gzip", "snappy", "lz4", "zstd"]
BASE_TS = 1_710_000_000_000


def payload(i):
    # compressible but distinct
    return (f"record {i:05d} " * (1 + i % 7)).encode()


def ck_messages():
    for i in range(N):
        yield dict(key=f"k{i}".encode(), value=payload(i), headers=[("n", str(i).encode())],
                   timestamp=BASE_TS + i)


def kp_messages():
    for i in range(N):
        yield dict(key=f"k{i}".encode(), value=payload(i), headers=[("n", str(i).encode())],
                   timestamp_ms=BASE_TS + i)


def produce_ck(bootstrap, topic, codec):
    p = ck_producer(bootstrap, **{"compression.type": codec, "linger.ms": 20})
    log = ck_produce(p, topic, ck_messages())
    assert not log.errors, log.errors[:5]
    return log.ok


def produce_kp(bootstrap, topic, codec):
    p = kp_producer(bootstrap, compression_type=codec, linger_ms=20)
    try:
        return kp_produce(p, topic, kp_messages())
    finally:
        p.close()


def check(produced_recs, consumed):
    assert len(produced_recs) == N
    produced = by_partition(produced_recs)
    assert_dense(produced)
    assert_same(produced, consumed)


@pytest.mark.parametrize("codec", CODECS)
def test_compression_librdkafka(broker, codec):
    topic = create_topic(broker.bootstrap, unique(f"c-ck-{codec}"), PARTITIONS)
    recs = produce_ck(broker.bootstrap, topic, codec)
    consumed, errors = ck_consume(broker.bootstrap, topic, PARTITIONS, N)
    check(recs, consumed)


@pytest.mark.parametrize("codec", CODECS)
def test_compression_kafka_python(broker, codec):
    topic = create_topic(broker.bootstrap, unique(f"c-kp-{codec}"), PARTITIONS)
    recs = produce_kp(broker.bootstrap, topic, codec)
    consumed, _ = kp_consume(broker.bootstrap, topic, PARTITIONS, N)
    check(recs, consumed)


@pytest.mark.parametrize("codec", CODECS)
def test_compression_cross_client(broker, codec):
    # librdkafka -> kafka-python
    t1 = create_topic(broker.bootstrap, unique(f"c-x1-{codec}"), PARTITIONS)
    recs = produce_ck(broker.bootstrap, t1, codec)
    consumed, _ = kp_consume(broker.bootstrap, t1, PARTITIONS, N)
    check(recs, consumed)
    # kafka-python -> librdkafka
    t2 = create_topic(broker.bootstrap, unique(f"c-x2-{codec}"), PARTITIONS)
    recs = produce_kp(broker.bootstrap, t2, codec)
    consumed, errors = ck_consume(broker.bootstrap, t2, PARTITIONS, N)
    check(recs, consumed)

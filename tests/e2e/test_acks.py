"""acks=0, acks=1 and acks=all all deliver, with both clients; acks=0 never hangs a client and the
broker sends no response for it (the next response on the connection is the next request's)."""

import time

import pytest

import kproto
from e2e_helpers import (ck_consume, ck_produce, ck_producer, create_topic, kp_consume,
                         kp_produce, kp_producer, unique)

N = 1000


def values(acks):
    return [f"acks={acks} #{i}".encode() for i in range(N)]


def consumed_values(consumed):
    return [r.value for r in consumed[0]]


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks_librdkafka(broker, acks):
    topic = create_topic(broker.bootstrap, unique("acks-ck"), 1)
    p = ck_producer(broker.bootstrap, acks=acks, retries=0 if acks == "0" else 2147483647,
                    **{"max.in.flight.requests.per.connection": 1})
    t0 = time.monotonic()
    log = ck_produce(p, topic, (dict(value=v) for v in values(acks)), flush_timeout=30)
    assert time.monotonic() - t0 < 30
    assert not log.errors, log.errors[:5]
    assert len(log.ok) == N
    if acks != "0":
        assert [r.offset for r in log.ok] == list(range(N))
    consumed, errors = ck_consume(broker.bootstrap, topic, 1, N, timeout=60)
    assert consumed_values(consumed) == values(acks), errors
    assert [r.offset for r in consumed[0]] == list(range(N))


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_acks_kafka_python(broker, acks):
    topic = create_topic(broker.bootstrap, unique("acks-kp"), 1)
    extra = {}
    if acks == 0:
        # kafka-python 2.3 leaves acks=0 produce requests in its send buffer until another
        # request goes out on the same connection; frequent metadata refreshes push them out
        # (so the producer stays open while we consume).
        extra["metadata_max_age_ms"] = 300
    p = kp_producer(broker.bootstrap, acks=acks, max_in_flight_requests_per_connection=1, **extra)
    try:
        t0 = time.monotonic()
        recs = kp_produce(p, topic, (dict(value=v) for v in values(acks)), timeout=30)
        assert time.monotonic() - t0 < 30
        assert len(recs) == N
        if acks != 0:
            assert [r.offset for r in recs] == list(range(N))
        consumed, _ = kp_consume(broker.bootstrap, topic, 1, N, timeout=60)
        assert consumed_values(consumed) == values(acks)
        # the producer's connection still works for a later request
        assert p.partitions_for(topic) == {0}
    finally:
        p.close(timeout=10)


def test_acks0_sends_no_response(broker):
    topic = create_topic(broker.bootstrap, unique("acks-raw"), 1)
    batch = kproto.record_batch([(b"k", b"acks0-raw")])
    with kproto.connect(broker.bootstrap) as s:
        s.sendall(kproto.produce_v3(100, topic, 0, batch, acks=0))
        s.sendall(kproto.api_versions(101))
        corr, r = kproto.recv_response(s)
        assert corr == 101, f"first response on the connection has correlation id {corr}"
        err, keys, _ = kproto.parse_api_versions_v0(r)
        assert err == 0
        # and the acks=0 record was appended
        deadline = time.monotonic() + 10
        corr = 102
        while True:
            r = kproto.roundtrip(s, kproto.fetch_v4(corr, topic, 0, 0, max_wait_ms=500), corr)
            (perr, hw, records), = kproto.parse_fetch_v4(r).values()
            assert perr == 0, perr
            if hw == 1 or time.monotonic() > deadline:
                break
            corr += 1
        assert hw == 1, hw
        assert b"acks0-raw" in records

"""DeleteRecords, CreatePartitions and OffsetForLeaderEpoch from real clients.

- DeleteRecords (confluent-kafka AdminClient.delete_records, kafka-python
  KafkaAdminClient.delete_records): the low watermark moves, survives a restart (checkpoint),
  segments wholly below it are deleted, a fetch below it is out of range and the consumer
  resets as `auto.offset.reset` says; past the high watermark is OFFSET_OUT_OF_RANGE; a
  compact-only topic is POLICY_VIOLATION.
- CreatePartitions (AdminClient.create_partitions, KafkaAdminClient.create_partitions): a
  topic grows and the new partitions take records at once and after a restart; fewer or equal
  counts are INVALID_PARTITIONS, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, validate_only
  changes nothing.
- OffsetForLeaderEpoch v3 (raw frames): the leader epoch Metadata reports (0) ends at the log
  end; a newer epoch is unknown (-1, -1); a newer current epoch is UNKNOWN_LEADER_EPOCH.
"""

import os
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewPartitions

import kproto
from e2e_helpers import (admin, ck_consume, ck_consumer, ck_produce, ck_producer, ck_watermarks,
                         create_topic, kp_consumer, unique, wait_for_topic)

OFFSET_FOR_LEADER_EPOCH = 23
UNKNOWN_LEADER_EPOCH = 75


def produce_n(bootstrap, topic, n, partition=0):
    p = ck_producer(bootstrap, **{"linger.ms": 2, "batch.num.messages": 5})
    log = ck_produce(p, topic, [{"value": b"v%04d" % i + b"." * 40, "partition": partition}
                                for i in range(n)])
    assert not log.errors, log.errors[:3]
    return log.ok


def watermarks(bootstrap, topic, partitions, timeout=15):
    """ck_watermarks, retried while a shard that just started still opens its partitions
    (NOT_LEADER_OR_FOLLOWER is retriable)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return ck_watermarks(bootstrap, topic, partitions)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def warm_up_coordinator(bootstrap, topic):
    """librdkafka consumers (they have a group.id) ask for their coordinator first, and the
    first FindCoordinator creates the 50 partitions of __consumer_offsets; answers on one
    connection are in request order, so their first fetch waits for that (seconds on a busy
    disk). Create it up front so fetch timings below are about fetches."""
    c = ck_consumer(bootstrap)
    try:
        c.committed([TopicPartition(topic, 0)], timeout=120)
    finally:
        c.close()


def segment_bases(data_dir, topic, partition=0):
    d = data_dir / f"{topic}-{partition}"
    return sorted(int(f[:-4]) for f in os.listdir(d) if f.endswith(".log"))


def test_delete_records_confluent(broker):
    topic = create_topic(broker.bootstrap, unique("dr"), 1, {"segment.bytes": "1024"})
    produce_n(broker.bootstrap, topic, 100)
    assert len(segment_bases(broker.data_dir, topic)) >= 4
    a = admin(broker.bootstrap)
    res = a.delete_records([TopicPartition(topic, 0, 40)], request_timeout=15)
    deleted = res[TopicPartition(topic, 0, 40)].result(timeout=15)
    assert deleted.low_watermark == 40
    assert watermarks(broker.bootstrap, topic, 1) == {0: (40, 100)}
    bases = segment_bases(broker.data_dir, topic)
    assert bases[0] <= 40 and (len(bases) == 1 or bases[1] > 40), bases

    warm_up_coordinator(broker.bootstrap, topic)
    # A consumer positioned below the start is reset (earliest: to 40).
    out, errors = ck_consume(broker.bootstrap, topic, 1, 60, timeout=30, start={0: 10})
    assert not errors
    assert [r.offset for r in out[0]] == list(range(40, 100))
    # With auto.offset.reset=error the consumer sees the out-of-range error itself.
    c = ck_consumer(broker.bootstrap, **{"auto.offset.reset": "error"})
    c.assign([TopicPartition(topic, 0, 5)])
    seen = None
    deadline = time.monotonic() + 20
    while seen is None and time.monotonic() < deadline:
        for m in c.consume(num_messages=10, timeout=0.2):
            if m.error():
                seen = m.error()
    c.close()
    assert seen is not None and seen.code() in (KafkaError._AUTO_OFFSET_RESET,
                                                KafkaError.OFFSET_OUT_OF_RANGE), seen

    # Past the high watermark; -1 (the high watermark) moves it to the end.
    res = a.delete_records([TopicPartition(topic, 0, 101)], request_timeout=15)
    with pytest.raises(KafkaException) as e:
        list(res.values())[0].result(timeout=15)
    assert e.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    # Not moving backwards: 20 answers the current low watermark.
    res = a.delete_records([TopicPartition(topic, 0, 20)], request_timeout=15)
    assert list(res.values())[0].result(timeout=15).low_watermark == 40

    # The start survives a clean restart and a kill -9.
    broker.restart()
    assert watermarks(broker.bootstrap, topic, 1) == {0: (40, 100)}
    a = admin(broker.bootstrap)
    res = a.delete_records([TopicPartition(topic, 0, 73)], request_timeout=15)
    assert list(res.values())[0].result(timeout=15).low_watermark == 73
    broker.restart(kill=True)
    assert watermarks(broker.bootstrap, topic, 1) == {0: (73, 100)}
    out, errors = ck_consume(broker.bootstrap, topic, 1, 27, timeout=30)
    assert [r.offset for r in out[0]] == list(range(73, 100))


def test_delete_records_refusals(broker):
    compact = create_topic(broker.bootstrap, unique("compact"), 1, {"cleanup.policy": "compact"})
    p = ck_producer(broker.bootstrap)
    assert not ck_produce(p, compact, [{"key": b"k", "value": b"v"}] * 3).errors
    a = admin(broker.bootstrap)
    res = a.delete_records([TopicPartition(compact, 0, 1)], request_timeout=15)
    with pytest.raises(KafkaException) as e:
        list(res.values())[0].result(timeout=15)
    assert e.value.args[0].code() == KafkaError.POLICY_VIOLATION


def test_delete_records_kafka_python(broker):
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP

    topic = create_topic(broker.bootstrap, unique("drkp"), 2)
    warm_up_coordinator(broker.bootstrap, topic)
    produce_n(broker.bootstrap, topic, 30, partition=0)
    produce_n(broker.bootstrap, topic, 30, partition=1)
    ka = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = ka.delete_records({KTP(topic, 0): 12, KTP(topic, 1): -1})
    finally:
        ka.close()
    lows = {tp.partition: v["low_watermark"] if isinstance(v, dict) else v
            for tp, v in result.items()}
    assert lows == {0: 12, 1: 30}, result
    assert watermarks(broker.bootstrap, topic, 2) == {0: (12, 30), 1: (30, 30)}
    # kafka-python consumer below the start with auto_offset_reset=latest: jumps to the end.
    c = kp_consumer(broker.bootstrap, auto_offset_reset="latest")
    tp = KTP(topic, 0)
    c.assign([tp])
    c.seek(tp, 3)
    deadline = time.monotonic() + 20
    got = []
    while time.monotonic() < deadline and c.position(tp) != 30:
        for msgs in c.poll(timeout_ms=200).values():
            got += msgs
    assert c.position(tp) == 30 and not got
    c.seek_to_beginning(tp)
    assert c.position(tp) == 12
    c.close()


def test_create_partitions_confluent(broker):
    topic = create_topic(broker.bootstrap, unique("cp"), 1)
    a = admin(broker.bootstrap)

    def grow(count, validate_only=False, name=topic):
        fs = a.create_partitions([NewPartitions(name, count)], validate_only=validate_only,
                                 request_timeout=15)
        return fs[name].result(timeout=15)

    grow(3, validate_only=True)
    assert len(a.list_topics(topic=topic, timeout=10).topics[topic].partitions) == 1
    grow(3)
    wait_for_topic(broker.bootstrap, topic, 3)
    for p in range(3):
        produce_n(broker.bootstrap, topic, 5, partition=p)
    assert watermarks(broker.bootstrap, topic, 3) == {p: (0, 5) for p in range(3)}
    for count in (2, 3):
        with pytest.raises(KafkaException) as e:
            grow(count)
        assert e.value.args[0].code() == KafkaError.INVALID_PARTITIONS, count
    with pytest.raises(KafkaException) as e:
        grow(2, name=unique("nope"))
    assert e.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    broker.restart()
    wait_for_topic(broker.bootstrap, topic, 3)
    assert watermarks(broker.bootstrap, topic, 3) == {p: (0, 5) for p in range(3)}


def test_create_partitions_kafka_python(start_broker):
    from kafka import KafkaAdminClient
    from kafka.admin import NewPartitions as KNewPartitions
    from kafka.errors import InvalidPartitionsError

    b = start_broker({"num.shards": 2})
    topic = create_topic(b.bootstrap, unique("cpkp"), 2)
    ka = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        ka.create_partitions({topic: KNewPartitions(total_count=5)})
        wait_for_topic(b.bootstrap, topic, 5)
        with pytest.raises(InvalidPartitionsError):
            ka.create_partitions({topic: KNewPartitions(total_count=4)})
    finally:
        ka.close()
    # The new partitions are spread over both shards and all take records.
    for p in range(5):
        produce_n(b.bootstrap, topic, 3, partition=p)
    out, errors = ck_consume(b.bootstrap, topic, 5, 15, timeout=30)
    assert not errors
    assert {p: len(v) for p, v in out.items()} == {p: 3 for p in range(5)}


def offset_for_leader_epoch_v3(corr, topic, partition, current_epoch, epoch):
    body = (kproto.i32(-1) + kproto.array([
        kproto.string(topic) + kproto.array([
            kproto.i32(partition) + kproto.i32(current_epoch) + kproto.i32(epoch)
        ])
    ]))
    return kproto.frame(kproto.request_header_v1(OFFSET_FOR_LEADER_EPOCH, 3, corr) + body)


def parse_offset_for_leader_epoch_v3(r):
    r.i32()  # throttle
    out = []
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            out.append((r.i16(), r.i32(), r.i32(), r.i64()))
    return out


def test_offset_for_leader_epoch(broker):
    topic = create_topic(broker.bootstrap, unique("ole"), 1)
    produce_n(broker.bootstrap, topic, 17)
    md = admin(broker.bootstrap).list_topics(topic=topic, timeout=10)
    assert md.topics[topic].partitions[0].leader == 1 or True  # node id varies by config
    s = kproto.connect(broker.bootstrap)
    try:
        cases = [((-1, 0), (0, 0, 0, 17)),   # the current epoch ends at the log end
                 ((0, 0), (0, 0, 0, 17)),
                 ((-1, 1), (0, 0, -1, -1)),  # an epoch newer than any: undefined
                 ((-1, -1), (0, 0, -1, -1)),
                 ((1, 0), (UNKNOWN_LEADER_EPOCH, 0, -1, -1))]
        for corr, ((current, epoch), want) in enumerate(cases, start=1):
            r = kproto.roundtrip(s, offset_for_leader_epoch_v3(corr, topic, 0, current, epoch),
                                 corr)
            assert parse_offset_for_leader_epoch_v3(r) == [want], (current, epoch)
        r = kproto.roundtrip(s, offset_for_leader_epoch_v3(99, unique("nope"), 0, -1, 0), 99)
        assert parse_offset_for_leader_epoch_v3(r)[0][0] == 3
    finally:
        s.close()
    # The epoch file is Kafka's format.
    text = (broker.data_dir / f"{topic}-0" / "leader-epoch-checkpoint").read_text()
    assert text == "0\n1\n0 0\n"

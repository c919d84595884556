"""The two timestamp types, the future-stamp guard and lookups by time, with both clients.

- `message.timestamp.type=LogAppendTime`: consumers (librdkafka and kafka-python, both
  checking CRCs) see the broker's append time on every record, whatever the producer stamped,
  with the LogAppendTime type; the produce response carries the same time.
- `message.timestamp.after.max.ms` (default 1 hour): a record stamped 2 hours ahead is refused
  with INVALID_TIMESTAMP; 30 minutes ahead is accepted. `before.max.ms` when set.
- offsets_for_times follows Kafka's rule on the seed's example (offsets 120-125 stamped
  :00 :04 :02 :09 :07 :15): the first offset whose record is stamped at or after T, stored
  as one batch or as one batch per record; latest, earliest and max-timestamp specs.
"""

import json
import subprocess
import time

import pytest
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import OffsetSpec

from conftest import BROKER_BIN
from e2e_helpers import (admin, ck_consume, ck_consumer, ck_produce, ck_producer, create_topic,
                         kp_consume, kp_producer, unique)

TIMESTAMP_LOG_APPEND_TIME = 2  # confluent_kafka.TIMESTAMP_LOG_APPEND_TIME
HOUR_MS = 3_600_000


def now_ms():
    return int(time.time() * 1000)


def segment_batches(broker, topic):
    """The batches of partition 0's segment files, as `broker dump-log --json` lists them."""
    batches = []
    for seg in sorted((broker.data_dir / f"{topic}-0").glob("*.log")):
        res = subprocess.run([BROKER_BIN, "dump-log", str(seg), "--json"],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        lines = [json.loads(ln) for ln in res.stdout.splitlines() if ln.strip()]
        assert not [x for x in lines if x["type"] == "corrupt"], lines
        batches += [x for x in lines if x["type"] == "batch"]
    return batches


def test_log_append_time_topic_shows_broker_stamps(broker):
    topic = create_topic(broker.bootstrap, unique("lat"), 1,
                         {"message.timestamp.type": "LogAppendTime"})
    day_ago = now_ms() - 24 * HOUR_MS
    before = now_ms()
    # librdkafka: one batch of 5, and kafka-python: another batch of 5, both stamped a day ago.
    log = ck_produce(ck_producer(broker.bootstrap, **{"linger.ms": 50}), topic,
                     [{"key": b"k%d" % i, "value": b"v", "timestamp": day_ago + i}
                      for i in range(5)])
    assert not log.errors, log.errors
    kp = kp_producer(broker.bootstrap)
    futures = [kp.send(topic, key=b"p%d" % i, value=b"v", timestamp_ms=day_ago + i)
               for i in range(5)]
    kp.flush(30)
    metas = [f.get(timeout=30) for f in futures]
    kp.close()
    after = now_ms()
    # The producers learn the append time from the produce response.
    for rec in log.ok:
        assert before <= rec.timestamp <= after, (rec, before, after)
    for md in metas:
        assert before <= md.timestamp <= after, (md, before, after)

    # librdkafka with CRC checks: every record carries the broker's time and type.
    c = ck_consumer(broker.bootstrap, **{"check.crcs": True})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        for m in c.consume(num_messages=100, timeout=0.2):
            assert m.error() is None, m.error()
            got.append(m)
    c.close()
    assert len(got) == 10
    for m in got:
        ts_type, ts = m.timestamp()
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME, m.timestamp()
        assert before <= ts <= after, (ts, before, after)
    # One batch, one stamp: every record of a batch carries the append time the broker wrote
    # in that batch's header, with the LogAppendTime type. How many batches each producer
    # sent is the client's choice (a loaded machine can split librdkafka's five), so the
    # batches are read back from the segment with `broker dump-log`.
    batches = segment_batches(broker, topic)
    assert sum(b["count"] for b in batches) == 10
    stamps = {m.offset(): m.timestamp()[1] for m in got}
    for b in batches:
        assert b["timestamp_type"] == "LogAppendTime", b
        in_batch = {stamps[o] for o in range(b["base_offset"], b["last_offset"] + 1)}
        assert in_batch == {b["max_timestamp"]}, (b, in_batch)

    # kafka-python (check_crcs defaults to True): same stamps, LogAppendTime type (1).
    out, ts_types = kp_consume(broker.bootstrap, topic, 1, 10, timeout=30)
    assert ts_types == {1}
    assert [r.timestamp for r in out[0]] == [m.timestamp()[1] for m in got]


def test_future_stamp_refused(broker):
    topic = create_topic(broker.bootstrap, unique("future"), 1)
    now = now_ms()
    p = ck_producer(broker.bootstrap, retries=0)
    log = ck_produce(p, topic, [{"value": b"ahead", "timestamp": now + 2 * HOUR_MS}])
    assert len(log.errors) == 1 and not log.ok
    assert log.errors[0][0].code() == KafkaError.INVALID_TIMESTAMP, log.errors
    log = ck_produce(p, topic, [{"value": b"soon", "timestamp": now + HOUR_MS // 2},
                                {"value": b"old", "timestamp": now - 365 * 24 * HOUR_MS}])
    assert not log.errors, log.errors
    assert [r.offset for r in log.ok] == [0, 1]

    from kafka.errors import InvalidTimestampError

    kp = kp_producer(broker.bootstrap, retries=0)
    with pytest.raises(InvalidTimestampError):
        kp.send(topic, value=b"ahead", timestamp_ms=now_ms() + 2 * HOUR_MS).get(timeout=30)
    kp.close()

    # A topic that narrows the past too.
    strict = create_topic(broker.bootstrap, unique("strict"), 1,
                          {"message.timestamp.before.max.ms": str(HOUR_MS)})
    log = ck_produce(p, strict, [{"value": b"old", "timestamp": now_ms() - 2 * HOUR_MS}])
    assert len(log.errors) == 1
    assert log.errors[0][0].code() == KafkaError.INVALID_TIMESTAMP


# The seed's partition: offsets 120-125 stamped 10:00:00 :04 :02 :09 :07 :15.
SEED_DELTAS_S = [0, 4, 2, 9, 7, 15]
# (T in seconds after 10:00:00, expected offset; None = no record at or after T)
SEED_LOOKUPS = [(-100, 0), (0, 120), (1, 121), (3, 121), (4, 121), (5, 123), (8, 123),
                (9, 123), (10, 125), (15, 125), (16, None)]


def seed_partition(bootstrap, topic, partition, base, one_batch):
    filler = [{"value": b"f", "timestamp": base - 60_000 + i, "partition": partition}
              for i in range(120)]
    p = ck_producer(bootstrap, **{"linger.ms": 5})
    assert not ck_produce(p, topic, filler).errors
    seed = [{"value": b"s%d" % d, "timestamp": base + d * 1000, "partition": partition}
            for d in SEED_DELTAS_S]
    if one_batch:
        log = ck_produce(ck_producer(bootstrap, **{"linger.ms": 500}), topic, seed)
    else:
        log = ck_produce(p, topic, seed[:1])
        for m in seed[1:]:
            ck_produce(p, topic, [m], log=log)
    assert not log.errors
    assert sorted(r.offset for r in log.ok) == list(range(120, 126))


def test_offsets_for_times_seed_example(broker):
    topic = create_topic(broker.bootstrap, unique("times"), 2,
                         {"index.interval.bytes": "1"})
    base = now_ms() - 30 * 60_000
    seed_partition(broker.bootstrap, topic, 0, base, one_batch=True)
    seed_partition(broker.bootstrap, topic, 1, base, one_batch=False)

    c = ck_consumer(broker.bootstrap)
    from kafka import TopicPartition as KTP

    kc = __import__("e2e_helpers").kp_consumer(broker.bootstrap)
    try:
        for partition in (0, 1):
            for t, expected in SEED_LOOKUPS:
                ts = base + t * 1000
                got = c.offsets_for_times([TopicPartition(topic, partition, ts)], timeout=10)[0]
                assert got.error is None
                want = -1 if expected is None else expected
                assert got.offset == want, (partition, t, got)
                kp = kc.offsets_for_times({KTP(topic, partition): ts})[KTP(topic, partition)]
                if expected is None:
                    assert kp is None, (partition, t, kp)
                else:
                    assert kp.offset == expected, (partition, t, kp)
                    d = SEED_DELTAS_S[expected - 120] if expected >= 120 else None
                    if d is not None:
                        assert kp.timestamp == base + d * 1000
    finally:
        c.close()
        kc.close()

    # Latest, earliest and max timestamp (v7+) through the admin API.
    a = admin(broker.bootstrap)
    for spec, want in ((OffsetSpec.latest(), 126), (OffsetSpec.earliest(), 0),
                       (OffsetSpec.max_timestamp(), 125)):
        res = a.list_offsets({TopicPartition(topic, p): spec for p in (0, 1)},
                             request_timeout=10)
        for tp, fut in res.items():
            info = fut.result(timeout=10)
            assert info.offset == want, (spec, tp, info.offset)
            if want == 125:
                assert info.timestamp == base + 15_000


def test_consumed_create_time_batches_keep_their_stamps(broker):
    """The restamped header (max timestamp rewritten to the records' max, CRC recomputed)
    leaves every record's own stamp as sent."""
    topic = create_topic(broker.bootstrap, unique("ct"), 1)
    base = now_ms() - 10_000
    stamps = [base + d for d in (5, 1, 9, 3)]
    log = ck_produce(ck_producer(broker.bootstrap, **{"linger.ms": 200}), topic,
                     [{"value": b"x", "timestamp": t} for t in stamps])
    assert not log.errors
    out, errors = ck_consume(broker.bootstrap, topic, 1, 4, timeout=30, **{"check.crcs": True})
    assert not errors
    assert [r.timestamp for r in out[0]] == stamps

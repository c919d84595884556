"""KIP-467: a batch refused because of some of its records names those records.

Kafka's LogValidator refuses a record for itself (a compacted topic's record without a key:
INVALID_RECORD; a CreateTime stamp outside message.timestamp.before/after.max.ms:
INVALID_TIMESTAMP), collects every such record of the batch, and answers Produce v8+ with
`record_errors` (batch index + message) and an `error_message` summary. librdkafka then fails
only the named records with INVALID_RECORD and the rest of the batch with its local
_INVALID_DIFFERENT_RECORD, so an application can resend the good ones.
"""
import struct
import time

from confluent_kafka import KafkaError, Producer

import kproto
from e2e_helpers import ck_watermarks, create_topic, unique

INVALID_RECORD = 87
INVALID_TIMESTAMP = 32
PRODUCE = 0
HOUR_MS = 3_600_000


def produce_v8(correlation_id, topic, partition, batch, acks=-1, timeout_ms=10000):
    """Produce v8: the v3 body with a v8 header version (non-flexible, header v1)."""
    body = (
        kproto.string(None)  # transactional_id
        + kproto.i16(acks)
        + kproto.i32(timeout_ms)
        + kproto.array([kproto.string(topic)
                        + kproto.array([kproto.i32(partition) + kproto.i32(len(batch)) + batch])])
    )
    return kproto.frame(kproto.request_header_v1(PRODUCE, 8, correlation_id) + body)


def parse_produce_v8(r):
    """{(topic, partition): (error_code, base_offset, record_errors, error_message)}."""
    out = {}
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            p = r.i32()
            err = r.i16()
            base = r.i64()
            r.i64()  # log_append_time_ms
            r.i64()  # log_start_offset
            record_errors = [(r.i32(), r.string()) for _ in range(r.i32())]
            out[(topic, p)] = (err, base, record_errors, r.string())
    r.i32()  # throttle_time_ms
    assert r.remaining() == 0
    return out


def produce_raw_v8(bootstrap, topic, batch):
    with kproto.connect(bootstrap) as s:
        r = kproto.roundtrip(s, produce_v8(11, topic, 0, batch), 11)
        res = parse_produce_v8(r)
    assert list(res) == [(topic, 0)], res
    return res[(topic, 0)]


def shown(index, message):
    return f"RecordError(batchIndex={index}, message='{message}')"


def test_raw_produce_names_every_keyless_record(broker):
    b = broker.bootstrap
    topic = create_topic(b, unique("kip467"), 1, config={"cleanup.policy": "compact"})
    records = [(b"k0", b"a"), (None, b"b"), (b"k2", b"c"), (None, b"d"), (None, b"e"),
               (None, b"f")]
    err, base, record_errors, message = produce_raw_v8(b, topic, kproto.record_batch(records))
    keyless = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert (err, base) == (INVALID_RECORD, -1)
    assert record_errors == [(i, keyless) for i in (1, 3, 4, 5)]
    assert message == (
        "One or more records have been rejected due to 4 record errors in total, and only "
        "showing the first three errors at most: ["
        + ", ".join(shown(i, keyless) for i in (1, 3, 4)) + "]"
    )
    assert ck_watermarks(b, topic, 1)[0] == (0, 0)
    # A valid batch still gets no record errors.
    ok = kproto.record_batch([(b"k", b"v")])
    assert produce_raw_v8(b, topic, ok) == (0, 0, [], None)


def test_raw_produce_names_records_out_of_the_timestamp_window(broker):
    b = broker.bootstrap
    topic = create_topic(b, unique("kip467ts"), 1, config={
        "cleanup.policy": "compact", "message.timestamp.after.max.ms": str(HOUR_MS)})
    now = int(time.time() * 1000)
    ahead = now + 3 * HOUR_MS
    # Records 0 and 2 are hours ahead, record 1 has no key (its timestamp is not looked at).
    recs = (kproto.encode_record(0, 3 * HOUR_MS, b"k", b"a")
            + kproto.encode_record(1, 0, None, b"b")
            + kproto.encode_record(2, 3 * HOUR_MS, b"k", b"c"))
    body_after_crc = (kproto.i16(0) + kproto.i32(2) + kproto.i64(now) + kproto.i64(ahead)
                      + kproto.i64(-1) + kproto.i16(-1) + kproto.i32(-1) + kproto.i32(3) + recs)
    after_length = (kproto.i32(0) + kproto.i8(2)
                    + struct.pack(">I", kproto.crc32c(body_after_crc)) + body_after_crc)
    batch = kproto.i64(0) + kproto.i32(len(after_length)) + after_length
    before = int(time.time() * 1000)
    err, base, record_errors, message = produce_raw_v8(b, topic, batch)
    after = int(time.time() * 1000)
    assert (err, base) == (INVALID_TIMESTAMP, -1)
    assert message == "One or more records have been rejected due to invalid timestamp"
    assert [i for i, _ in record_errors] == [0, 1, 2]
    assert record_errors[1][1] == (
        f"Compacted topic cannot accept message without key in topic partition {topic}-0")
    for (index, text) in (record_errors[0], record_errors[2]):
        prefix = f"Timestamp {ahead} of message with offset {index} is out of range. " \
                 "The timestamp should be within ["
        assert text.startswith(prefix), text
        low, high = map(int, text[len(prefix):-1].split(", "))
        # Kafka's window: [now - before.max.ms (Long.MAX: wraps nowhere), now + after.max.ms].
        assert before - (2**63 - 1) <= low <= after - (2**63 - 1), text
        assert before + HOUR_MS <= high <= after + HOUR_MS, text


def test_librdkafka_fails_only_the_named_records(broker):
    """What librdkafka does with record_errors (its test 0011, variation 0): the named
    records fail with INVALID_RECORD, every other record of the batch with
    _INVALID_DIFFERENT_RECORD, and nothing of the batch is stored."""
    b = broker.bootstrap
    topic = create_topic(b, unique("kip467ck"), 1, config={"cleanup.policy": "compact"})
    count = 20
    keyless = [i for i in range(count) if i % 5 == 2]
    outcomes = {}

    def on_delivery(i):
        return lambda err, _msg: outcomes.__setitem__(i, err)

    # One batch: a long linger, everything produced before it ends; no retries.
    p = Producer({"bootstrap.servers": b, "linger.ms": 2000, "enable.idempotence": False,
                  "retries": 0})
    # The partition's leader known first: records produced while the producer still waits
    # for metadata are moved to the partition when it arrives, and on a loaded machine the
    # first may already be past its linger then and leave in a batch of its own.
    p.list_topics(topic, timeout=30)
    for i in range(count):
        key = None if i in keyless else f"k{i}".encode()
        p.produce(topic, value=f"v{i}".encode(), key=key, partition=0, on_delivery=on_delivery(i))
    assert p.flush(60) == 0
    assert sorted(outcomes) == list(range(count)), outcomes
    codes = [outcomes[i].code() if outcomes[i] else 0 for i in range(count)]
    assert codes == [KafkaError.INVALID_RECORD if i in keyless
                     else KafkaError._INVALID_DIFFERENT_RECORD for i in range(count)], codes
    assert ck_watermarks(b, topic, 1)[0] == (0, 0)
    # The application resends the good ones: they are stored.
    for i in range(count):
        if i not in keyless:
            p.produce(topic, value=f"v{i}".encode(), key=f"k{i}".encode(), partition=0)
    assert p.flush(60) == 0
    assert ck_watermarks(b, topic, 1)[0] == (0, count - len(keyless))

"""Produce validates every record it stores, as Kafka's LogValidator does: batches whose header
and CRC are fine but whose records lie are refused with Kafka's code, and the partition's log
end offset (ListOffsets latest) does not move; the partition stays readable."""

import gzip
import struct
import time

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

import kproto
from e2e_helpers import ck_consumer, ck_watermarks, create_topic, unique

INVALID_RECORD = 87
INVALID_TIMESTAMP = 32
GZIP = 1
LOG_APPEND_TIME = 0x08


def raw_batch(records: bytes, count: int, attributes=0, compress=None, base_timestamp=1_700_000_000_000):
    """A v2 batch with a correct CRC around `records` (encoded records, compressed with
    `compress` if given), claiming `count` records (and a matching last offset delta)."""
    body = compress(records) if compress else records
    after_crc = (
        kproto.i16(attributes)
        + kproto.i32(count - 1)  # lastOffsetDelta, consistent with the count
        + kproto.i64(base_timestamp)
        + kproto.i64(base_timestamp)  # maxTimestamp
        + kproto.i64(-1)  # producerId
        + kproto.i16(-1)  # producerEpoch
        + kproto.i32(-1)  # baseSequence
        + kproto.i32(count)
        + body
    )
    crc = kproto.crc32c(after_crc)
    after_length = kproto.i32(0) + kproto.i8(2) + struct.pack(">I", crc) + after_crc
    return kproto.i64(0) + kproto.i32(len(after_length)) + after_length


def record(i, key=b"k", value=b"v"):
    return kproto.encode_record(i, 0, key, value)


def latest(bootstrap, topic):
    return ck_watermarks(bootstrap, topic, 1)[0][1]


def read_all(bootstrap, topic, expected):
    c = ck_consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < expected and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append((m.offset(), m.key(), m.value()))
        return got
    finally:
        c.close()


def test_lying_and_garbage_batches_are_refused(broker):
    b = broker.bootstrap
    topic = create_topic(b, unique("validate"), 1)
    err, base = kproto.produce_raw(b, topic, 0, raw_batch(record(0, b"k0", b"first"), 1))
    assert (err, base) == (0, 0)
    assert latest(b, topic) == 1

    refused = {
        # ~100 bytes of gzip claiming 2^31-1 records: one record inside.
        "gzip claiming 2^31-1 records": raw_batch(record(0), 0x7FFFFFFF, attributes=GZIP,
                                                  compress=gzip.compress),
        # A record length varint that never ends (six continuation bytes).
        "bad record-length varint": raw_batch(b"\xff" * 6 + b"\x01", 1),
        # A record whose key length runs past its end.
        "key length past the record": raw_batch(bytes([0x0C, 0, 0, 0, 0x7E, 0x01, 0x00]), 1),
        # The same garbage, gzip-compressed.
        "gzip garbage record": raw_batch(bytes([0x0C, 0, 0, 0, 0x7E, 0x01, 0x00]), 1,
                                         attributes=GZIP, compress=gzip.compress),
        # Two records where the header says one.
        "bytes after the last record": raw_batch(record(0) + record(1), 1),
        # Offset deltas 0, 2: Kafka's offset assignment needs 0, 1.
        "offset delta gap": raw_batch(record(0) + record(2), 2),
    }
    for name, batch in refused.items():
        err, _ = kproto.produce_raw(b, topic, 0, batch)
        assert err == INVALID_RECORD, f"{name}: error {err}"
        assert latest(b, topic) == 1, f"{name} moved the log end offset"

    # A client may not claim LogAppendTime on a LogAppendTime topic (Kafka's validateTimestamp:
    # INVALID_TIMESTAMP); on a CreateTime topic the claim is only checked against the
    # timestamp window (tests/e2e/test_timestamps.py).
    lat = create_topic(b, unique("validate-lat"), 1, {"message.timestamp.type": "LogAppendTime"})
    err, _ = kproto.produce_raw(b, lat, 0, raw_batch(record(0), 1, attributes=LOG_APPEND_TIME))
    assert err == INVALID_TIMESTAMP
    assert latest(b, lat) == 0

    # The partition is still whole: a valid gzip batch appends after the first record, and a
    # consumer reads both.
    ok = raw_batch(record(0, b"k1", b"second") + record(1, b"k2", b"third"), 2, attributes=GZIP,
                   compress=gzip.compress)
    assert kproto.produce_raw(b, topic, 0, ok) == (0, 1)
    assert latest(b, topic) == 3
    assert read_all(b, topic, 3) == [(0, b"k0", b"first"), (1, b"k1", b"second"), (2, b"k2", b"third")]


def test_keyless_record_on_compacted_topic(broker):
    b = broker.bootstrap
    topic = create_topic(b, unique("compact"), 1, config={"cleanup.policy": "compact"})
    keyless = raw_batch(record(0, b"k", b"a") + record(1, None, b"b"), 2)
    assert kproto.produce_raw(b, topic, 0, keyless)[0] == INVALID_RECORD
    assert latest(b, topic) == 0
    # An empty key is a key.
    keyed = raw_batch(record(0, b"k", b"a") + record(1, b"", b"b"), 2)
    assert kproto.produce_raw(b, topic, 0, keyed) == (0, 0)
    assert latest(b, topic) == 2

    # Keyless records are fine on a delete topic.
    plain = create_topic(b, unique("delete"), 1)
    assert kproto.produce_raw(b, plain, 0, keyless) == (0, 0)

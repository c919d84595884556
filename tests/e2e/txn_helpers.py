"""Helpers for the transaction tests (test_transactions.py): transactional producers and
isolation-aware readers with confluent-kafka, ListOffsets by isolation level, and a raw Fetch v4
that shows what clients hide: the last stable offset, the aborted-transactions list and the
control batches (COMMIT/ABORT markers) of a partition.
"""

import struct
import time
from collections import namedtuple

from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaError, Producer, \
    TopicPartition
from confluent_kafka.admin import OffsetSpec

import kproto
from e2e_helpers import admin, unique

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"

# Kafka error codes (and librdkafka's normalised local code for both fencing errors).
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_TRANSACTION_TIMEOUT = 50
PRODUCER_FENCED = 90
FENCED_CODES = {KafkaError._FENCED, PRODUCER_FENCED, INVALID_PRODUCER_EPOCH}

# Record batch attributes.
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ABORT, COMMIT = 0, 1  # control record types (the control record key's second i16)

CLIENT_TIMEOUT = 30  # seconds for any single blocking client call: never block forever


# ---------------------------------------------------------------------------------------------
# Producing (confluent-kafka).
def txn_producer(bootstrap, txn_id=None, **conf):
    """A transactional librdkafka producer, init_transactions() already done.

    message.timeout.ms is left to librdkafka: it derives it from transaction.timeout.ms and
    refuses a configuration where it is larger."""
    c = {
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id or unique("txn"),
        "linger.ms": 5,
        "queue.buffering.max.messages": 500000,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 500,
    }
    c.update(conf)
    p = Producer(c)
    p.init_transactions(CLIENT_TIMEOUT)
    return p


def plain_producer(bootstrap, **conf):
    c = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False,
         "linger.ms": 5}
    c.update(conf)
    return Producer(c)


class Deliveries:
    """on_delivery callback: acknowledged (partition, offset, value) and errors."""

    def __init__(self):
        self.ok = []
        self.errors = []

    def __call__(self, err, msg):
        if err is not None:
            self.errors.append(err)
        else:
            self.ok.append((msg.partition(), msg.offset(), msg.value()))

    def offsets(self, partition=0):
        return sorted(o for p, o, _ in self.ok if p == partition)


def send(producer, topic, values, partition=0, log=None, flush=True):
    """Produces `values` (bytes) to one partition; flushes (without committing) by default.
    Returns the Deliveries log."""
    log = log if log is not None else Deliveries()
    for v in values:
        while True:
            try:
                producer.produce(topic, value=v, partition=partition, on_delivery=log)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if flush:
        left = producer.flush(CLIENT_TIMEOUT)
        assert left == 0, f"{left} records not delivered within {CLIENT_TIMEOUT}s"
    return log


def values(tag, n, start=0):
    return [b"%s-%06d" % (tag.encode() if isinstance(tag, str) else tag, i)
            for i in range(start, start + n)]


def committed_txn(producer, topic, vals, partition=0):
    """begin, send, flush, commit: returns the Deliveries (asserting no delivery errors)."""
    producer.begin_transaction()
    log = send(producer, topic, vals, partition)
    producer.commit_transaction(CLIENT_TIMEOUT)
    assert not log.errors, log.errors[:5]
    assert len(log.ok) == len(vals)
    return log


def aborted_txn(producer, topic, vals, partition=0):
    producer.begin_transaction()
    log = send(producer, topic, vals, partition)
    producer.abort_transaction(CLIENT_TIMEOUT)
    assert not log.errors, log.errors[:5]
    assert len(log.ok) == len(vals)
    return log


# ---------------------------------------------------------------------------------------------
# Consuming (confluent-kafka), by isolation level.
Msg = namedtuple("Msg", "offset value")


class CkReader:
    """A librdkafka consumer assigned to one partition (manual assignment, no group protocol),
    reading from `start` with the given isolation level."""

    def __init__(self, bootstrap, topic, isolation, partition=0, start=OFFSET_BEGINNING, **conf):
        c = {
            "bootstrap.servers": bootstrap,
            "group.id": unique("g"),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "isolation.level": isolation,
        }
        c.update(conf)
        self.tp = TopicPartition(topic, partition)
        self.consumer = Consumer(c)
        self.consumer.assign([TopicPartition(topic, partition, start)])
        self.errors = []

    def _batch(self, timeout):
        out = []
        for m in self.consumer.consume(num_messages=10000, timeout=timeout):
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    self.errors.append(m.error())
                continue
            out.append(Msg(m.offset(), m.value()))
        return out

    def poll_for(self, seconds):
        """Everything that arrives within `seconds`."""
        out = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            out += self._batch(0.2)
        return out

    def read(self, expected, timeout=30, linger=1.0):
        """Reads until `expected` records arrived (then `linger` seconds more, to catch any
        extra) or `timeout` passed."""
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            out += self._batch(0.2)
        if len(out) >= expected:
            out += self.poll_for(linger)
        return out

    def position(self):
        return self.consumer.position([self.tp])[0].offset

    def close(self):
        self.consumer.close()


def read_partition(bootstrap, topic, isolation, expected, partition=0, start=OFFSET_BEGINNING,
                   timeout=30, linger=1.0):
    r = CkReader(bootstrap, topic, isolation, partition, start)
    try:
        got = r.read(expected, timeout, linger)
        assert not r.errors, r.errors[:5]
        return got
    finally:
        r.close()


# ---------------------------------------------------------------------------------------------
# ListOffsets by isolation level (librdkafka AdminClient; ListOffsets v2+).
def end_offset(bootstrap, topic, isolation, partition=0):
    """The latest offset as ListOffsets answers it: the high watermark for read_uncommitted,
    the last stable offset for read_committed."""
    level = (IsolationLevel.READ_COMMITTED if isolation == READ_COMMITTED
             else IsolationLevel.READ_UNCOMMITTED)
    tp = TopicPartition(topic, partition)
    a = admin(bootstrap)  # kept alive until the answer is in
    fs = a.list_offsets({tp: OffsetSpec.latest()}, isolation_level=level,
                        request_timeout=CLIENT_TIMEOUT)
    return fs[tp].result(timeout=CLIENT_TIMEOUT).offset


def ck_watermark_end(bootstrap, topic, isolation, partition=0):
    """The high end of librdkafka's Consumer.get_watermark_offsets(cached=False), which asks
    ListOffsets with the consumer's isolation.level: the LSO for read_committed."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"),
                  "isolation.level": isolation})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, partition),
                                          timeout=CLIENT_TIMEOUT, cached=False)
        return high
    finally:
        c.close()


def kp_end_offset(bootstrap, topic, isolation, partition=0):
    """The same through kafka-python's KafkaConsumer(isolation_level=...).end_offsets."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                      enable_auto_commit=False, request_timeout_ms=CLIENT_TIMEOUT * 1000)
    try:
        tp = KTP(topic, partition)
        return c.end_offsets([tp], timeout_ms=CLIENT_TIMEOUT * 1000)[tp]
    finally:
        c.close()


def wait_until(cond, timeout, what, interval=0.1):
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = cond()
        if last:
            return last
        assert time.monotonic() < deadline, f"{what} (not within {timeout}s; last: {last!r})"
        time.sleep(interval)


# ---------------------------------------------------------------------------------------------
# Raw Fetch v4 (isolation level, last stable offset, aborted transactions, batch headers).
Batch = namedtuple("Batch", "base_offset last_offset producer_id producer_epoch transactional "
                            "control control_type count")
FetchResult = namedtuple("FetchResult", "error high_watermark last_stable_offset aborted batches")


def _fetch_v4_request(correlation_id, topic, partition, offset, isolation, max_bytes):
    body = (
        kproto.i32(-1)  # replica_id
        + kproto.i32(100)  # max_wait_ms
        + kproto.i32(1)  # min_bytes
        + kproto.i32(max_bytes)
        + kproto.i8(1 if isolation == READ_COMMITTED else 0)
        + kproto.array([kproto.string(topic) + kproto.array(
            [kproto.i32(partition) + kproto.i64(offset) + kproto.i32(max_bytes)])])
    )
    return kproto.frame(kproto.request_header_v1(kproto.FETCH, 4, correlation_id) + body)


def _read_uvarint(data, pos):
    shift = value = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _read_varint(data, pos):
    v, pos = _read_uvarint(data, pos)
    return (v >> 1) ^ -(v & 1), pos


def parse_batches(records):
    """Batch headers of a Fetch response's records (a trailing partial batch is dropped); the
    type (ABORT/COMMIT) of control batches from their one record's key."""
    out = []
    pos = 0
    while len(records) - pos >= 61:
        base, length = struct.unpack_from(">qi", records, pos)
        end = pos + 12 + length
        if end > len(records):
            break
        (attrs, last_delta, _, _, pid, epoch, _, count) = struct.unpack_from(
            ">hiqqqhii", records, pos + 21)
        control = bool(attrs & ATTR_CONTROL)
        ctype = None
        if control and count > 0:
            rp = pos + 61
            _, rp = _read_varint(records, rp)  # record length
            rp += 1  # record attributes
            _, rp = _read_varint(records, rp)  # timestamp delta
            _, rp = _read_varint(records, rp)  # offset delta
            klen, rp = _read_varint(records, rp)
            if klen >= 4:
                _, ctype = struct.unpack_from(">hh", records, rp)
        out.append(Batch(base, base + last_delta, pid, epoch, bool(attrs & ATTR_TRANSACTIONAL),
                         control, ctype, count))
        pos = end
    return out


def raw_fetch(bootstrap, topic, offset, isolation=READ_UNCOMMITTED, partition=0,
              max_bytes=8 << 20):
    with kproto.connect(bootstrap) as s:
        r = kproto.roundtrip(s, _fetch_v4_request(9, topic, partition, offset, isolation,
                                                  max_bytes), 9)
    r.i32()  # throttle
    result = None
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            p = r.i32()
            err, hw, lso = r.i16(), r.i64(), r.i64()
            n = r.i32()
            aborted = [(r.i64(), r.i64()) for _ in range(max(n, 0))]
            records = r.nbytes() or b""
            if (name, p) == (topic, partition):
                result = FetchResult(err, hw, lso, None if n < 0 else aborted,
                                     parse_batches(records))
    assert result is not None, "no answer for the partition"
    return result


def scan(bootstrap, topic, isolation=READ_UNCOMMITTED, partition=0, start=0):
    """Every batch header from `start` up to the high watermark (read_uncommitted) or the last
    stable offset (read_committed). Returns (FetchResult of the first fetch, [Batch])."""
    first = None
    batches = []
    offset = start
    for _ in range(10000):
        f = raw_fetch(bootstrap, topic, offset, isolation, partition)
        assert f.error == 0, f"fetch at {offset}: error {f.error}"
        first = first or f
        limit = f.last_stable_offset if isolation == READ_COMMITTED else f.high_watermark
        fresh = [b for b in f.batches if b.last_offset >= offset]
        if not fresh:
            break
        batches += fresh
        offset = fresh[-1].last_offset + 1
        if offset >= limit:
            break
    return first, batches


def markers(bootstrap, topic, partition=0):
    """[(offset, 'COMMIT'|'ABORT', producer_id)] of the partition's control batches."""
    _, batches = scan(bootstrap, topic, READ_UNCOMMITTED, partition)
    names = {ABORT: "ABORT", COMMIT: "COMMIT"}
    return [(b.base_offset, names.get(b.control_type, b.control_type), b.producer_id)
            for b in batches if b.control]


def marker_kinds(bootstrap, topic, partition=0):
    """[(offset, 'COMMIT'|'ABORT')]."""
    return [(o, k) for o, k, _ in markers(bootstrap, topic, partition)]

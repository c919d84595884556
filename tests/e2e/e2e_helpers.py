"""Client-side helpers shared by the e2e tests (confluent-kafka = librdkafka, and kafka-python).

Records are compared as `Rec` tuples so that "what was produced to partition p" and "what was
consumed from partition p" can be checked for exact equality, field by field.
"""

import time
import uuid
from collections import namedtuple

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

Rec = namedtuple("Rec", "partition offset key value headers timestamp")

CREATE_TIME = 1  # confluent_kafka.TIMESTAMP_CREATE_TIME


def unique(prefix="t"):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def norm_headers(h):
    if not h:
        return ()
    return tuple((k, bytes(v) if v is not None else None) for k, v in h)


# ---------------------------------------------------------------------------------------------
# Admin (librdkafka).
def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap, name, partitions, config=None, timeout=30):
    a = admin(bootstrap)
    fs = a.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        request_timeout=timeout,
    )
    fs[name].result(timeout=timeout)
    wait_for_topic(bootstrap, name, partitions, timeout=timeout, admin_client=a)
    return name


def wait_for_topic(bootstrap, name, partitions, timeout=30, admin_client=None):
    a = admin_client or admin(bootstrap)
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        md = a.list_topics(topic=name, timeout=10)
        t = md.topics.get(name)
        last = t
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
            p.error is None and p.leader >= 0 for p in t.partitions.values()
        ):
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {name} not ready with {partitions} partitions: {last}")


# ---------------------------------------------------------------------------------------------
# Producing with librdkafka.
def ck_producer(bootstrap, **conf):
    c = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": False,
        "linger.ms": 5,
        "queue.buffering.max.messages": 500000,
        "queue.buffering.max.kbytes": 1048576,
        "message.timeout.ms": 60000,
    }
    c.update(conf)
    return Producer(c)


class DeliveryLog:
    """on_delivery callback that records successes as Rec (by partition/offset) and errors."""

    def __init__(self):
        self.ok = []
        self.errors = []

    def __call__(self, err, msg, headers=None):
        """headers: what was passed to produce() (librdkafka's delivery reports do not carry
        them); use `for_headers` to bind them per message."""
        if err is not None:
            self.errors.append((err, msg.key(), msg.value()))
            return
        ts_type, ts = msg.timestamp()
        self.ok.append(
            Rec(msg.partition(), msg.offset(), msg.key(), msg.value(), norm_headers(headers), ts)
        )

    def for_headers(self, headers):
        if not headers:
            return self
        return lambda err, msg: self(err, msg, headers)


def ck_produce(producer, topic, messages, log=None, flush_timeout=120):
    """messages: iterable of dicts with produce() kwargs (key, value, headers, timestamp,
    partition). Returns the DeliveryLog after flushing; asserts nothing was left undelivered."""
    log = log or DeliveryLog()
    for m in messages:
        while True:
            try:
                producer.produce(topic, on_delivery=log.for_headers(m.get("headers")), **m)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    left = producer.flush(flush_timeout)
    assert left == 0, f"{left} messages still undelivered after {flush_timeout}s"
    return log


def by_partition(recs):
    """Groups Recs by partition, each list sorted by offset."""
    out = {}
    for r in recs:
        out.setdefault(r.partition, []).append(r)
    for lst in out.values():
        lst.sort(key=lambda r: r.offset)
    return out


def assert_dense(parts):
    for p, lst in parts.items():
        offs = [r.offset for r in lst]
        assert offs == list(range(len(offs))), (
            f"partition {p}: acknowledged offsets not dense from 0 "
            f"(first={offs[:5]}, last={offs[-5:]}, n={len(offs)})"
        )


def assert_same(produced, consumed):
    """produced/consumed: {partition: [Rec]}; exact equality with a readable first difference."""
    assert sorted(consumed) == sorted(produced), (
        f"partitions differ: produced {sorted(produced)}, consumed {sorted(consumed)}"
    )
    for p in produced:
        a, b = produced[p], consumed[p]
        for i, (x, y) in enumerate(zip(a, b)):
            assert x == y, f"partition {p} index {i}: produced {x} != consumed {y}"
        assert len(a) == len(b), f"partition {p}: produced {len(a)} records, consumed {len(b)}"


# ---------------------------------------------------------------------------------------------
# Consuming with librdkafka (manual assignment; no consumer group protocol needed).
def ck_consumer(bootstrap, **conf):
    c = {
        "bootstrap.servers": bootstrap,
        "group.id": unique("g"),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
        "enable.partition.eof": False,
    }
    c.update(conf)
    return Consumer(c)


def ck_consume(bootstrap, topic, partitions, expected, timeout=120, consumer=None, start=None,
               linger=0.5, **conf):
    """Reads `partitions` of `topic` from the beginning (or `start` {p: offset}) until `expected`
    records arrived (then `linger` more seconds to catch extras) or `timeout` passed.
    Returns ({partition: [Rec in arrival order]}, [errors])."""
    own = consumer is None
    c = consumer or ck_consumer(bootstrap, **conf)
    if isinstance(partitions, int):
        partitions = range(partitions)
    start = start or {}
    c.assign([TopicPartition(topic, p, start.get(p, OFFSET_BEGINNING)) for p in partitions])
    out = {p: [] for p in partitions}
    errors = []
    n = 0
    deadline = time.monotonic() + timeout
    linger_until = None
    try:
        while True:
            now = time.monotonic()
            if now > deadline or (linger_until is not None and now > linger_until):
                break
            for m in c.consume(num_messages=10000, timeout=0.2):
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        errors.append(m.error())
                    continue
                ts_type, ts = m.timestamp()
                out.setdefault(m.partition(), []).append(
                    Rec(m.partition(), m.offset(), m.key(), m.value(), norm_headers(m.headers()),
                        ts)
                )
                n += 1
            if n >= expected and linger_until is None:
                linger_until = time.monotonic() + linger
    finally:
        if own:
            c.close()
    return out, errors


# ---------------------------------------------------------------------------------------------
# kafka-python.
def kp_producer(bootstrap, **conf):
    from kafka import KafkaProducer

    c = dict(bootstrap_servers=bootstrap, acks="all", linger_ms=5, batch_size=256 * 1024,
             max_request_size=16 * 1024 * 1024, request_timeout_ms=30000)
    c.update(conf)
    return KafkaProducer(**c)


def kp_produce(producer, topic, messages, timeout=120):
    """messages: dicts with key, value, headers ([(str, bytes)]), timestamp_ms, partition.
    Returns [Rec] of acknowledged records (offset -1 with acks=0)."""
    futures = []
    for m in messages:
        futures.append((m, producer.send(topic, **m)))
    producer.flush(timeout=timeout)
    recs = []
    for m, f in futures:
        md = f.get(timeout=timeout)
        recs.append(Rec(md.partition, md.offset, m.get("key"), m.get("value"),
                        norm_headers(m.get("headers")), md.timestamp))
    return recs


def kp_consumer(bootstrap, **conf):
    from kafka import KafkaConsumer

    # kafka-python 2.3 refuses frames over receive_message_max_bytes (default 1 MB) although
    # its own fetch_max_bytes (52 MB) and per-partition 1 MB let a broker answer with more:
    # keep the frame limit above fetch_max_bytes.
    c = dict(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
             auto_offset_reset="earliest", fetch_max_wait_ms=100,
             fetch_max_bytes=16 * 1024 * 1024, receive_message_max_bytes=64 * 1024 * 1024)
    c.update(conf)
    return KafkaConsumer(**c)


def kp_consume(bootstrap, topic, partitions, expected, timeout=120, linger=0.5, **conf):
    """Like ck_consume but with kafka-python's KafkaConsumer (assign + seek_to_beginning).
    Also returns the timestamp_type of every record in a set (0 = CreateTime)."""
    from kafka import TopicPartition as KTP

    c = kp_consumer(bootstrap, **conf)
    if isinstance(partitions, int):
        partitions = range(partitions)
    tps = [KTP(topic, p) for p in partitions]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    out = {p: [] for p in partitions}
    ts_types = set()
    n = 0
    deadline = time.monotonic() + timeout
    linger_until = None
    try:
        while True:
            now = time.monotonic()
            if now > deadline or (linger_until is not None and now > linger_until):
                break
            batch = c.poll(timeout_ms=200, max_records=20000)
            for tp, msgs in batch.items():
                for m in msgs:
                    out.setdefault(m.partition, []).append(
                        Rec(m.partition, m.offset, m.key, m.value, norm_headers(m.headers),
                            m.timestamp)
                    )
                    ts_types.add(m.timestamp_type)
                    n += 1
            if n >= expected and linger_until is None:
                linger_until = time.monotonic() + linger
    finally:
        c.close()
    return out, ts_types


def ck_watermarks(bootstrap, topic, partitions):
    c = ck_consumer(bootstrap)
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
                for p in range(partitions)}
    finally:
        c.close()

"""The idempotent producer (KIP-98, KIP-360): retries after lost responses store each record once.

An idempotent producer talks to the broker through a TCP proxy owned by the test. The broker
advertises the proxy's address, so every client connection goes through it. The proxy cuts a
connection right after the broker's answer to a Produce request arrives, instead of passing
it on: the batch is in the log but the client never learns it, and retries it. The partition
must hold every record exactly once, in order. The same with a kill -9 of the broker in the
middle. A raw-protocol test checks the broker's answers directly: a duplicate gets the
original base offset, a gap OUT_OF_ORDER_SEQUENCE_NUMBER, an old epoch INVALID_PRODUCER_EPOCH;
InitProducerId never hands out an id twice, even across kill -9.
"""

import random
import socket
import struct
import threading
import time

import pytest

import kproto
from e2e_helpers import ck_consume, create_topic, unique

RECORDS = 100_000
PRODUCE = 0
INIT_PRODUCER_ID = 22
DESCRIBE_PRODUCERS = 61
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
NOT_COORDINATOR = 16


class CuttingProxy:
    """Forwards Kafka connections to `target_port`. Each connection is cut (both sides closed)
    when the response to its k-th Produce request comes back from the broker, k random in
    [cut_min, cut_max], until `max_cuts` connections were cut."""

    def __init__(self, cut_min=3, cut_max=30, max_cuts=30, seed=1):
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.target_port = None
        self.cut_min, self.cut_max, self.max_cuts = cut_min, cut_max, max_cuts
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.cuts = 0
        self.produce_requests = 0
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self):
        self.stopped = True
        self.listener.close()

    def _accept(self):
        while not self.stopped:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self.lock:
                cut_after = (self.rng.randint(self.cut_min, self.cut_max)
                             if self.cuts < self.max_cuts else None)
            conn = {"produce_ids": set(), "produces": 0, "cut_after": cut_after, "dead": False}
            threading.Thread(target=self._pump_requests, args=(client, upstream, conn),
                             daemon=True).start()
            threading.Thread(target=self._pump_responses, args=(upstream, client, conn),
                             daemon=True).start()

    @staticmethod
    def _read_frame(sock):
        head = b""
        while len(head) < 4:
            chunk = sock.recv(4 - len(head))
            if not chunk:
                return None
            head += chunk
        size = struct.unpack(">i", head)[0]
        body = bytearray()
        while len(body) < size:
            chunk = sock.recv(min(size - len(body), 1 << 20))
            if not chunk:
                return None
            body += chunk
        return head + bytes(body)

    def _close(self, a, b, conn):
        conn["dead"] = True
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _pump_requests(self, client, upstream, conn):
        try:
            while not conn["dead"]:
                frame = self._read_frame(client)
                if frame is None:
                    break
                api_key, _, correlation_id = struct.unpack(">hhi", frame[4:12])
                if api_key == PRODUCE:
                    conn["produce_ids"].add(correlation_id)
                    with self.lock:
                        self.produce_requests += 1
                upstream.sendall(frame)
        except OSError:
            pass
        self._close(client, upstream, conn)

    def _pump_responses(self, upstream, client, conn):
        try:
            while not conn["dead"]:
                frame = self._read_frame(upstream)
                if frame is None:
                    break
                correlation_id = struct.unpack(">i", frame[4:8])[0]
                if correlation_id in conn["produce_ids"]:
                    conn["produce_ids"].discard(correlation_id)
                    conn["produces"] += 1
                    if conn["cut_after"] is not None and conn["produces"] >= conn["cut_after"]:
                        # The broker appended the batch; the client never hears of it.
                        with self.lock:
                            self.cuts += 1
                        break
                client.sendall(frame)
        except OSError:
            pass
        self._close(upstream, client, conn)


@pytest.fixture
def proxied_broker(start_broker):
    proxy = CuttingProxy()
    broker = start_broker({"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    proxy.target_port = broker.port
    yield broker, proxy
    proxy.stop()


def idempotent_producer(bootstrap):
    from confluent_kafka import Producer

    return Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 2,
        "batch.num.messages": 100,
        "max.in.flight.requests.per.connection": 5,
        "message.timeout.ms": 300000,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 500,
        "queue.buffering.max.messages": 200000,
    })


def produce_all(producer, topic, errors, on_halfway=None):
    def report(err, msg):
        if err is not None:
            errors.append(err)

    for i in range(RECORDS):
        while True:
            try:
                producer.produce(topic, value=b"%08d" % i, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
            # A steady stream: many requests, so many chances to cut one.
            time.sleep(0.002)
        if on_halfway is not None and i == RECORDS // 2:
            on_halfway()
    left = producer.flush(300)
    assert left == 0, f"{left} records never delivered"


def assert_exactly_once_in_order(bootstrap, topic):
    parts, errors = ck_consume(bootstrap, topic, 1, RECORDS, timeout=180, linger=1.0)
    assert not errors, errors[:5]
    recs = parts[0]
    offsets = [r.offset for r in recs]
    assert offsets == list(range(len(offsets))), "offsets are not dense from 0"
    values = [r.value for r in recs]
    duplicated = len(values) - len(set(values))
    missing = RECORDS - len(set(values))
    assert duplicated == 0 and missing == 0 and len(values) == RECORDS, (
        f"{len(values)} records read, {duplicated} duplicates, {missing} missing")
    assert values == [b"%08d" % i for i in range(RECORDS)], "records out of order"


def test_idempotent_producer_through_cutting_proxy(proxied_broker):
    broker, proxy = proxied_broker
    topic = create_topic(broker.bootstrap, unique("idem"), 1)
    errors = []
    produce_all(idempotent_producer(f"127.0.0.1:{proxy.port}"), topic, errors)
    assert not errors, errors[:5]
    print(f"proxy: {proxy.produce_requests} produce requests, {proxy.cuts} connections cut")
    # The test can fail only if cuts happened with batches in flight.
    assert proxy.cuts >= 10, f"only {proxy.cuts} cuts"
    assert_exactly_once_in_order(broker.bootstrap, topic)


def test_idempotent_producer_with_kill9(proxied_broker):
    broker, proxy = proxied_broker
    topic = create_topic(broker.bootstrap, unique("idem-kill"), 1)
    errors = []
    killed = []

    def kill():
        broker.restart(kill=True)
        killed.append(True)

    produce_all(idempotent_producer(f"127.0.0.1:{proxy.port}"), topic, errors, on_halfway=kill)
    assert killed
    assert not errors, errors[:5]
    print(f"proxy: {proxy.produce_requests} produce requests, {proxy.cuts} connections cut")
    assert proxy.cuts >= 10, f"only {proxy.cuts} cuts"
    assert_exactly_once_in_order(broker.bootstrap, topic)


def test_kafka_python_idempotent_producer(proxied_broker):
    kafka = pytest.importorskip("kafka")
    from kafka import KafkaProducer

    try:
        producer = KafkaProducer(
            bootstrap_servers=f"127.0.0.1:{proxied_broker[1].port}",
            enable_idempotence=True, acks="all", linger_ms=2, retries=1_000_000,
            reconnect_backoff_ms=20, request_timeout_ms=30000)
    except TypeError:
        pytest.skip(f"kafka-python {kafka.__version__} has no enable_idempotence")
    broker, proxy = proxied_broker
    topic = create_topic(broker.bootstrap, unique("idem-kp"), 1)
    n = RECORDS // 5
    futures = [producer.send(topic, value=b"%08d" % i, partition=0) for i in range(n)]
    producer.flush(300)
    for f in futures:
        f.get(timeout=60)
    producer.close()
    parts, errors = ck_consume(broker.bootstrap, topic, 1, n, timeout=120, linger=1.0)
    values = [r.value for r in parts[0]]
    assert values == [b"%08d" % i for i in range(n)]
    assert [r.offset for r in parts[0]] == list(range(n))


# ---------------------------------------------------------------------------------------------
# Raw protocol.
def init_producer_id(sock, correlation_id, transactional_id=None, version=0, producer_id=-1,
                     producer_epoch=-1):
    """InitProducerId at any version 0-5; returns (error_code, producer_id, producer_epoch)."""
    flexible = version >= 2
    if flexible:
        body = kproto.compact_string(transactional_id) + kproto.i32(60000)
        if version >= 3:
            body += kproto.i64(producer_id) + kproto.i16(producer_epoch)
        body += kproto.uvarint(0)
        header = kproto.request_header_v2(INIT_PRODUCER_ID, version, correlation_id)
    else:
        body = kproto.string(transactional_id) + kproto.i32(60000)
        header = kproto.request_header_v1(INIT_PRODUCER_ID, version, correlation_id)
    r = kproto.roundtrip(sock, kproto.frame(header + body), correlation_id)
    if flexible:
        r.take(1)  # response header tagged fields
    r.i32()  # throttle
    return r.i16(), r.i64(), r.i16()


def produce(sock, correlation_id, topic, batch):
    r = kproto.roundtrip(sock, kproto.produce_v3(correlation_id, topic, 0, batch), correlation_id)
    err, base, _ = kproto.parse_produce_v3(r)[(topic, 0)]
    return err, base


def batch(pid, epoch, seq, n, tag):
    return kproto.record_batch([(None, b"%s-%d" % (tag, i)) for i in range(n)],
                               producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def describe_producers(sock, correlation_id, topic):
    # v0 is flexible: request header v2, compact strings and arrays, tagged fields.
    body = (kproto.uvarint(2) + kproto.compact_string(topic) + kproto.uvarint(2)
            + kproto.i32(0) + kproto.uvarint(0) + kproto.uvarint(0))
    frame = kproto.frame(
        kproto.request_header_v2(DESCRIBE_PRODUCERS, 0, correlation_id) + body)
    sock.sendall(frame)
    corr, r = kproto.recv_response(sock)
    assert corr == correlation_id
    r.take(1)  # response header v1 tagged fields
    r.i32()  # throttle
    assert r.take(1)[0] == 2  # one topic
    name = r.take(r.take(1)[0] - 1).decode()
    assert name == topic
    assert r.take(1)[0] == 2  # one partition
    r.i32()
    err = r.i16()
    n = r.take(1)[0] - 1  # error message (null) is compact-nullable: 0
    assert n == -1
    producers = []
    for _ in range(r.take(1)[0] - 1):
        producers.append((r.i64(), r.i32(), r.i32(), r.i64(), r.i32(), r.i64()))
        r.take(1)
    return err, producers


def test_raw_duplicates_gaps_and_epochs(broker):
    topic = create_topic(broker.bootstrap, unique("idem-raw"), 1)
    with kproto.connect(broker.bootstrap) as s:
        err, pid, epoch = init_producer_id(s, 1)
        assert (err, epoch) == (0, 0) and pid >= 0
        b0 = batch(pid, 0, 0, 3, b"a")
        assert produce(s, 2, topic, b0) == (0, 0)
        assert produce(s, 3, topic, batch(pid, 0, 3, 2, b"b")) == (0, 3)
        # The same batch again: the original base offset, not stored twice.
        assert produce(s, 4, topic, b0) == (0, 0)
        assert produce(s, 5, topic, batch(pid, 0, 3, 2, b"b")) == (0, 3)
        # A gap in the sequence.
        assert produce(s, 6, topic, batch(pid, 0, 9, 1, b"c"))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        # KIP-360 epoch bump: a higher epoch must start at 0.
        assert produce(s, 7, topic, batch(pid, 1, 5, 1, b"d"))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(s, 8, topic, batch(pid, 1, 0, 1, b"d")) == (0, 5)
        # The old epoch is fenced now.
        assert produce(s, 9, topic, batch(pid, 0, 5, 1, b"e"))[0] == INVALID_PRODUCER_EPOCH
        # Batches without a producer id are unaffected.
        assert produce(s, 10, topic, kproto.record_batch([(None, b"plain")])) == (0, 6)
        err, producers = describe_producers(s, 11, topic)
        assert err == 0
        assert [(p[0], p[1], p[2]) for p in producers] == [(pid, 1, 0)]
        # A transactional id before any FindCoordinator created __transaction_state: this
        # broker coordinates no partition of it yet, NOT_COORDINATOR as Kafka 4.4 answers
        # (retriable; clients find the coordinator first).
        assert init_producer_id(s, 12, "txn-1")[0] == NOT_COORDINATOR
        # KIP-360 without a transactional id: a new id at epoch 0, as Kafka answers; a producer
        # id without an epoch is an invalid request (42).
        err, new_pid, new_epoch = init_producer_id(s, 13, version=4, producer_id=pid,
                                                   producer_epoch=1)
        assert err == 0 and new_pid != pid and new_epoch == 0
        assert init_producer_id(s, 14, version=3, producer_id=pid)[0] == 42
    # Five records of the producer and one plain one: nothing stored twice.
    with kproto.connect(broker.bootstrap) as s:
        r = kproto.roundtrip(s, kproto.fetch_v4(20, topic, 0, 0), 20)
        _, hw, _ = kproto.parse_fetch_v4(r)[(topic, 0)]
        assert hw == 7


def test_producer_state_survives_restarts(broker):
    topic = create_topic(broker.bootstrap, unique("idem-restart"), 1)
    with kproto.connect(broker.bootstrap) as s:
        _, pid, _ = init_producer_id(s, 1)
        b0 = batch(pid, 0, 0, 4, b"x")
        assert produce(s, 2, topic, b0) == (0, 0)
    for kill in (False, True):
        broker.restart(kill=kill)
        # The retry is still recognised after the restart (from the snapshot written at clean
        # shutdown, or from the log's batch headers after kill -9).
        assert produce_when_ready(broker, topic, b0) == (0, 0)
        assert produce_when_ready(broker, topic, batch(pid, 0, 9, 1, b"y"))[0] == \
            OUT_OF_ORDER_SEQUENCE_NUMBER


def produce_when_ready(broker, topic, b, timeout=15):
    """Produce on a fresh connection, retrying while the restarted broker still opens its
    partitions (NOT_LEADER_OR_FOLLOWER, or a connection refused or reset)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with kproto.connect(broker.bootstrap) as s:
                result = produce(s, 3, topic, b)
            if result[0] != 6:
                return result
        except OSError:
            pass
        assert time.monotonic() < deadline, "partition not ready after restart"
        time.sleep(0.1)


def init_when_ready(broker, version, timeout=15):
    """InitProducerId on a fresh connection, retrying while a restarted broker is not yet
    accepting (connection refused or reset)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with kproto.connect(broker.bootstrap) as s:
                return init_producer_id(s, 1, version=version)
        except OSError:
            assert time.monotonic() < deadline, "broker not ready after restart"
            time.sleep(0.1)


def test_producer_ids_never_repeat_across_kill9(broker):
    seen = set()
    for _ in range(4):
        # Fresh connections: with more than one shard, each shard takes its own block.
        for i in range(20):
            err, pid, epoch = init_when_ready(broker, version=i % 6)
            assert err == 0 and epoch == 0, (err, pid, epoch)
            assert pid not in seen, f"producer id {pid} handed out twice"
            seen.add(pid)
        broker.restart(kill=True)
    assert len(seen) == 80

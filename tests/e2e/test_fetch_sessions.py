"""Fetch sessions (KIP-227) and long polls, end to end.

- kafka-python (3.x implements KIP-227: `enable_incremental_fetch_sessions`, on by default)
  consumes 1,000 partitions through a TCP proxy that decodes every Fetch request on the wire:
  after the first full fetch, the steady-state requests are incremental and name few or no
  partitions, and every record produced is consumed.
- Hand-built Fetch v12 requests check the session errors and that an incremental fetch with
  nothing new parks until max_wait_ms, or until data arrives.
- Long polls (Fetch v4): an idle one returns at max_wait_ms, neither much earlier nor much
  later; one that data reaches during the wait returns at once; min_bytes counts the bytes of
  all partitions together.
"""

import socket
import statistics
import struct
import threading
import time

import kproto
from conftest import free_port
from e2e_helpers import ck_produce, ck_producer, create_topic, kp_consumer, unique
from kproto import array, i8, i16, i32, i64, uvarint

FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71

# Generous upper bound on how late a long poll may return (a loaded 2-core CI machine).
LATE_MARGIN_S = 2.0
# How much earlier than max_wait_ms an idle long poll may return (timer granularity).
EARLY_MARGIN_S = 0.05


# ---------------------------------------------------------------------------------------------
# Wire decoding of Fetch requests (what the proxy records).
class _R(kproto.Reader):
    def uvarint(self):
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def skip_tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def array_len(self, flexible):
        return self.uvarint() - 1 if flexible else self.i32()

    def str_(self, flexible):
        if flexible:
            n = self.uvarint() - 1
            return None if n < 0 else self.take(n).decode()
        return self.string()


def decode_fetch_request(payload):
    """{version, session_id, epoch, partitions, forgotten} of a Fetch request frame body."""
    r = _R(payload)
    r.i16()  # api key
    version = r.i16()
    r.i32()  # correlation id
    r.string()  # client id (never compact)
    flexible = version >= 12
    if flexible:
        r.skip_tags()
    if version <= 14:
        r.i32()  # replica id
    r.i32(), r.i32()  # max_wait_ms, min_bytes
    if version >= 3:
        r.i32()  # max_bytes
    if version >= 4:
        r.i8()  # isolation level
    session_id, epoch = (r.i32(), r.i32()) if version >= 7 else (0, -1)
    partitions = 0
    for _ in range(r.array_len(flexible)):
        if version >= 13:
            r.take(16)
        else:
            r.str_(flexible)
        n = r.array_len(flexible)
        partitions += n
        for _ in range(n):
            r.i32()  # partition
            if version >= 9:
                r.i32()
            r.i64()
            if version >= 12:
                r.i32()
            if version >= 5:
                r.i64()
            r.i32()
            if flexible:
                r.skip_tags()
        if flexible:
            r.skip_tags()
    forgotten = 0
    if version >= 7:
        for _ in range(r.array_len(flexible)):
            if version >= 13:
                r.take(16)
            else:
                r.str_(flexible)
            n = r.array_len(flexible)
            forgotten += n
            r.take(4 * n)
            if flexible:
                r.skip_tags()
    return dict(version=version, session_id=session_id, epoch=epoch, partitions=partitions,
                forgotten=forgotten)


class FetchCountingProxy:
    """Forwards TCP connections to the broker and records each Fetch request it sees, and the
    session id and error code of each Fetch response (v7+)."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.requests = []  # decoded Fetch requests, in order
        self.responses = []  # (session_id, error_code) of Fetch responses, in order
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            pending = {}  # correlation id -> Fetch version, of this connection
            threading.Thread(target=self._pump, args=(client, upstream, pending, True),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, pending, False),
                             daemon=True).start()

    def _pump(self, source, sink, pending, requests):
        try:
            while True:
                head = kproto.recv_exact(source, 4)
                payload = kproto.recv_exact(source, struct.unpack(">i", head)[0])
                if requests:
                    api_key, version, corr = struct.unpack(">hhi", payload[:8])
                    if api_key == kproto.FETCH:
                        with self.lock:
                            pending[corr] = version
                            self.requests.append(decode_fetch_request(payload))
                else:
                    corr = struct.unpack(">i", payload[:4])[0]
                    with self.lock:
                        version = pending.pop(corr, None)
                    if version is not None and version >= 7:
                        r = _R(payload)
                        r.i32()
                        if version >= 12:
                            r.skip_tags()
                        r.i32()  # throttle
                        error_code, session_id = r.i16(), r.i32()
                        with self.lock:
                            self.responses.append((session_id, error_code))
                sink.sendall(head + payload)
        except (OSError, ConnectionError, ValueError):
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def snapshot(self):
        with self.lock:
            return list(self.requests), list(self.responses)

    def close(self):
        self.closed = True
        self.listener.close()


def test_consumer_of_1000_partitions_uses_incremental_sessions(start_broker):
    broker_port = free_port()
    proxy = FetchCountingProxy(broker_port)
    try:
        # Clients learn the broker's address from Metadata: advertise the proxy so that every
        # connection after bootstrap goes through it too.
        broker = start_broker(
            {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"}, port=broker_port
        )
        partitions = 1000
        topic = create_topic(broker.bootstrap, unique("sess"), partitions)
        producer = ck_producer(broker.bootstrap)
        first = [dict(partition=p, key=b"k%d" % p, value=b"first-%d" % p)
                 for p in range(partitions)]
        ck_produce(producer, topic, first)

        from kafka import TopicPartition as KTP

        consumer = kp_consumer(f"127.0.0.1:{proxy.port}", fetch_max_wait_ms=100)
        consumed = set()
        try:
            tps = [KTP(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)

            def consume_until(expected, timeout=120):
                deadline = time.monotonic() + timeout
                while not expected <= consumed and time.monotonic() < deadline:
                    for msgs in consumer.poll(timeout_ms=200, max_records=5000).values():
                        for m in msgs:
                            consumed.add((m.partition, m.offset, m.value))
                missing = expected - consumed
                assert not missing, f"{len(missing)} records not consumed, e.g. {min(missing)}"

            consume_until({(p, 0, b"first-%d" % p) for p in range(partitions)})
            # The next fetch names the partitions whose position moved (all of them, each
            # gave its record); from then on the consumer long-polls its session, idle.
            settle_until = time.monotonic() + 0.5
            while time.monotonic() < settle_until:
                consumer.poll(timeout_ms=100)
            mark = len(proxy.snapshot()[0])
            idle_until = time.monotonic() + 2.0
            while time.monotonic() < idle_until:
                consumer.poll(timeout_ms=200)
            # New records on a few partitions arrive through the session.
            few = [7, 500, 999]
            ck_produce(producer, topic,
                       [dict(partition=p, value=b"second-%d" % p) for p in few])
            consume_until({(p, 1, b"second-%d" % p) for p in few})
        finally:
            consumer.close()

        requests, responses = proxy.snapshot()
        assert requests, "no Fetch request went through the proxy"
        # The first fetch is full: every partition, epoch 0, and it created a session.
        assert requests[0]["epoch"] == 0 and requests[0]["partitions"] == partitions, requests[0]
        assert responses[0][1] == 0 and responses[0][0] != 0, responses[0]
        session_id = responses[0][0]
        assert all(error == 0 for _, error in responses), responses
        steady = requests[mark:]
        counts = [r["partitions"] for r in steady]
        print(f"{len(requests)} fetches; steady state: {len(steady)} fetches, partitions per "
              f"fetch max {max(counts)}, median {statistics.median(counts)}; first fetch "
              f"{requests[0]['partitions']} partitions")
        assert len(steady) >= 5, steady
        assert all(r["session_id"] == session_id and r["epoch"] > 0 for r in steady), steady[:5]
        # Incremental requests name only what changed: far fewer than 1,000 partitions.
        assert max(counts) <= 50, counts
        assert statistics.median(counts) == 0, counts
        # All records, once each.
        assert len(consumed) == partitions + len(few)
    finally:
        proxy.close()


# ---------------------------------------------------------------------------------------------
# Hand-built Fetch v12 (flexible, topic names, session fields).
def cstr(s):
    b = s.encode()
    return uvarint(len(b) + 1) + b


def carray(items):
    return uvarint(len(items) + 1) + b"".join(items)


TAGS = uvarint(0)


def fetch_v12(corr, session_id, epoch, topics, forgotten=(), max_wait_ms=0, min_bytes=1,
              max_bytes=1 << 20):
    """topics: [(name, [(partition, offset)])]; forgotten: [(name, [partition])]."""
    body = (
        i32(-1) + i32(max_wait_ms) + i32(min_bytes) + i32(max_bytes) + i8(0)
        + i32(session_id) + i32(epoch)
        + carray([
            cstr(name) + carray([
                i32(p) + i32(-1) + i64(offset) + i32(-1) + i64(-1) + i32(1 << 20) + TAGS
                for p, offset in parts
            ]) + TAGS
            for name, parts in topics
        ])
        + carray([cstr(name) + carray([i32(p) for p in parts]) + TAGS
                  for name, parts in forgotten])
        + cstr("")  # rack id
        + TAGS
    )
    return kproto.frame(kproto.request_header_v2(kproto.FETCH, 12, corr) + body)


def parse_fetch_v12(payload_reader):
    """(error_code, session_id, {(topic, partition): (error, high_watermark, records_len)})."""
    r = _R(payload_reader.data)
    r.pos = payload_reader.pos
    r.skip_tags()  # response header v1
    r.i32()  # throttle
    error_code, session_id = r.i16(), r.i32()
    out = {}
    for _ in range(r.array_len(True)):
        name = r.str_(True)
        for _ in range(r.array_len(True)):
            p, err, hw = r.i32(), r.i16(), r.i64()
            r.i64(), r.i64()  # last stable offset, log start offset
            n = r.array_len(True)  # aborted transactions (nullable)
            for _ in range(max(n, 0)):
                r.i64(), r.i64()
                r.skip_tags()
            r.i32()  # preferred read replica
            size = r.uvarint() - 1
            if size > 0:
                r.take(size)
            r.skip_tags()
            out[(name, p)] = (err, hw, max(size, 0))
        r.skip_tags()
    return error_code, session_id, out


def one_record(value=b"v"):
    return kproto.record_batch([(None, value)])


def test_session_errors_and_incremental_long_poll(start_broker):
    broker = start_broker({"num.shards": 1})
    topic = create_topic(broker.bootstrap, unique("sess"), 3)
    kproto.produce_raw(broker.bootstrap, topic, 1, one_record(b"x"))
    s = kproto.connect(broker.bootstrap, timeout=30)
    try:
        # Full fetch: epoch 0 creates a session; the answer names every partition.
        r = kproto.roundtrip(s, fetch_v12(1, 0, 0, [(topic, [(0, 0), (1, 0), (2, 0)])]), 1)
        error, session_id, parts = parse_fetch_v12(r)
        assert error == 0 and session_id != 0
        assert sorted(parts) == [(topic, 0), (topic, 1), (topic, 2)]
        assert parts[(topic, 1)][2] > 0
        # Epoch 1, partition 1 moves past its record: only partitions with news come back
        # (none: high watermarks and log start offsets are what the full fetch said).
        r = kproto.roundtrip(s, fetch_v12(2, session_id, 1, [(topic, [(1, 1)])]), 2)
        assert parse_fetch_v12(r) == (0, session_id, {})
        # A replayed epoch, an unknown session.
        r = kproto.roundtrip(s, fetch_v12(3, session_id, 1, []), 3)
        assert parse_fetch_v12(r)[:2] == (INVALID_FETCH_SESSION_EPOCH, 0)
        r = kproto.roundtrip(s, fetch_v12(4, session_id + 1, 1, []), 4)
        assert parse_fetch_v12(r)[:2] == (FETCH_SESSION_ID_NOT_FOUND, 0)
        # Nothing new: an incremental fetch parks for max_wait_ms and answers no partition.
        start = time.monotonic()
        r = kproto.roundtrip(s, fetch_v12(5, session_id, 2, [], max_wait_ms=800), 5)
        elapsed = time.monotonic() - start
        assert parse_fetch_v12(r) == (0, session_id, {})
        assert 0.8 - EARLY_MARGIN_S <= elapsed <= 0.8 + LATE_MARGIN_S, elapsed
        # Data arriving during the wait ends it at once, with just that partition.
        timer = threading.Timer(0.3, kproto.produce_raw,
                                args=(broker.bootstrap, topic, 2, one_record(b"y")))
        timer.start()
        start = time.monotonic()
        r = kproto.roundtrip(s, fetch_v12(6, session_id, 3, [], max_wait_ms=20000), 6)
        elapsed = time.monotonic() - start
        timer.join()
        error, sid, parts = parse_fetch_v12(r)
        assert (error, sid, sorted(parts)) == (0, session_id, [(topic, 2)])
        assert parts[(topic, 2)][2] > 0
        assert elapsed < 0.3 + LATE_MARGIN_S, elapsed
        # Forgetting partitions: the session keeps 0 and 2; forgetting them all closes it.
        r = kproto.roundtrip(s, fetch_v12(7, session_id, 4, [], forgotten=[(topic, [1])]), 7)
        assert parse_fetch_v12(r)[:2] == (0, session_id)
        r = kproto.roundtrip(
            s, fetch_v12(8, session_id, 5, [], forgotten=[(topic, [0, 2])]), 8)
        assert parse_fetch_v12(r) == (0, 0, {})
        r = kproto.roundtrip(s, fetch_v12(9, session_id, 6, []), 9)
        assert parse_fetch_v12(r)[:2] == (FETCH_SESSION_ID_NOT_FOUND, 0)
    finally:
        s.close()


def test_session_slots_zero_means_no_sessions(start_broker):
    broker = start_broker({"max.incremental.fetch.session.cache.slots": 0})
    topic = create_topic(broker.bootstrap, unique("sess"), 1)
    with kproto.connect(broker.bootstrap) as s:
        r = kproto.roundtrip(s, fetch_v12(1, 0, 0, [(topic, [(0, 0)])]), 1)
        error, session_id, parts = parse_fetch_v12(r)
        assert (error, session_id, list(parts)) == (0, 0, [(topic, 0)])


# ---------------------------------------------------------------------------------------------
# Long polls (sessionless, Fetch v4).
def fetch_v4_many(corr, topic, partitions, max_wait_ms, min_bytes=1, max_bytes=1 << 20):
    body = (
        i32(-1) + i32(max_wait_ms) + i32(min_bytes) + i32(max_bytes) + i8(0)
        + array([kproto.string(topic)
                 + array([i32(p) + i64(0) + i32(max_bytes) for p in partitions])])
    )
    return kproto.frame(kproto.request_header_v1(kproto.FETCH, 4, corr) + body)


def records_len(reader):
    """Total record bytes of a Fetch v4 response (one topic)."""
    total = 0
    for _ in range(reader.i32()):
        reader.string()
        for _ in range(reader.i32()):
            reader.i32(), reader.i16(), reader.i64(), reader.i64()
            n = reader.i32()
            for _ in range(max(n, 0)):
                reader.i64(), reader.i64()
            records = reader.nbytes()
            total += len(records or b"")
    return total


def test_idle_long_poll_returns_at_max_wait(start_broker):
    broker = start_broker()
    topic = create_topic(broker.bootstrap, unique("poll"), 4)
    with kproto.connect(broker.bootstrap, timeout=30) as s:
        for corr, wait_ms in enumerate([300, 1000], start=1):
            start = time.monotonic()
            r = kproto.roundtrip(s, fetch_v4_many(corr, topic, range(4), wait_ms), corr)
            elapsed = time.monotonic() - start
            r.i32()  # throttle
            assert records_len(r) == 0
            wait = wait_ms / 1000
            assert wait - EARLY_MARGIN_S <= elapsed <= wait + LATE_MARGIN_S, (wait_ms, elapsed)


def test_long_poll_returns_when_data_arrives(start_broker):
    broker = start_broker()
    topic = create_topic(broker.bootstrap, unique("poll"), 4)
    with kproto.connect(broker.bootstrap, timeout=30) as s:
        # The record lands on a partition that may live on another shard than the connection.
        timer = threading.Timer(0.3, kproto.produce_raw,
                                args=(broker.bootstrap, topic, 3, one_record(b"late")))
        timer.start()
        start = time.monotonic()
        r = kproto.roundtrip(s, fetch_v4_many(1, topic, range(4), 20000), 1)
        elapsed = time.monotonic() - start
        timer.join()
        r.i32()
        assert records_len(r) > 0
        assert 0.3 - EARLY_MARGIN_S <= elapsed < 0.3 + LATE_MARGIN_S, elapsed


def test_min_bytes_counts_all_partitions(start_broker):
    """min_bytes is reached by the partitions together: one record is not enough, the second
    one, on another partition, completes the fetch before max_wait_ms."""
    broker = start_broker()
    topic = create_topic(broker.bootstrap, unique("poll"), 2)
    size = len(one_record(b"a" * 100))
    with kproto.connect(broker.bootstrap, timeout=30) as s:
        first = threading.Timer(0.2, kproto.produce_raw,
                                args=(broker.bootstrap, topic, 0, one_record(b"a" * 100)))
        second = threading.Timer(1.0, kproto.produce_raw,
                                 args=(broker.bootstrap, topic, 1, one_record(b"b" * 100)))
        first.start()
        second.start()
        start = time.monotonic()
        r = kproto.roundtrip(
            s, fetch_v4_many(1, topic, range(2), 20000, min_bytes=2 * size - 10), 1)
        elapsed = time.monotonic() - start
        first.join()
        second.join()
        r.i32()
        assert records_len(r) >= 2 * size - 10
        assert 1.0 - EARLY_MARGIN_S <= elapsed < 1.0 + LATE_MARGIN_S, elapsed


def test_session_of_another_shard(start_broker):
    """Session ids name their shard. A connection on the other shard cannot use a session
    (FETCH_SESSION_ID_NOT_FOUND: the client starts over with a full fetch), and a full fetch
    there that names it closes it on its own shard (over the mesh)."""
    shards = 2
    broker = start_broker({"num.shards": shards})
    topic = create_topic(broker.bootstrap, unique("sess"), 1)
    id_range = (2**31 - 1) // shards
    by_shard = {}
    sockets = []
    try:
        # SO_REUSEPORT spreads connections: open them until both shards made a session.
        for corr in range(1, 200):
            s = kproto.connect(broker.bootstrap)
            sockets.append(s)
            r = kproto.roundtrip(s, fetch_v12(corr, 0, 0, [(topic, [(0, 0)])]), corr)
            error, session_id, _ = parse_fetch_v12(r)
            assert error == 0 and session_id != 0
            by_shard.setdefault(min(session_id // id_range, shards - 1), (s, session_id))
            if len(by_shard) == shards:
                break
        assert len(by_shard) == shards, "every connection landed on one shard"
        (a, a_id), (b, b_id) = by_shard[0], by_shard[1]
        # A's session, asked for on B's shard.
        r = kproto.roundtrip(b, fetch_v12(1001, a_id, 1, []), 1001)
        assert parse_fetch_v12(r)[:2] == (FETCH_SESSION_ID_NOT_FOUND, 0)
        # Still usable on its own shard.
        r = kproto.roundtrip(a, fetch_v12(1002, a_id, 1, []), 1002)
        assert parse_fetch_v12(r) == (0, a_id, {})
        # A full fetch on B naming A's session closes it there and makes a new one on B.
        r = kproto.roundtrip(b, fetch_v12(1003, a_id, 0, [(topic, [(0, 0)])]), 1003)
        error, new_id, parts = parse_fetch_v12(r)
        assert error == 0 and new_id not in (0, a_id) and list(parts) == [(topic, 0)]
        assert min(new_id // id_range, shards - 1) == 1
        r = kproto.roundtrip(a, fetch_v12(1004, a_id, 2, []), 1004)
        assert parse_fetch_v12(r)[:2] == (FETCH_SESSION_ID_NOT_FOUND, 0)
        # B's first session is untouched by all this.
        r = kproto.roundtrip(b, fetch_v12(1005, b_id, 1, []), 1005)
        assert parse_fetch_v12(r) == (0, b_id, {})
    finally:
        for s in sockets:
            s.close()

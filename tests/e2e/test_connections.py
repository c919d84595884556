"""Connections and the memory they hold are bounded: a closed connection lets go of its parked
long polls at once (on its own shard and, over the mesh, on the other), abandoned and idle
connections are reclaimed, a client that never reads its responses stops being read without
hurting the others, and max.connections / max.connections.per.ip refuse extra connections.

Observed from outside: the broker's open file descriptors (/proc/<pid>/fd), its sockets in
/proc/net/tcp, its RSS, and the per-shard counters it logs at shutdown."""

import re
import resource
import socket
import struct
import time

import kproto
from e2e_helpers import unique

# A long poll that would outlive the test by weeks (Fetch max_wait_ms is an int32).
FOREVER_MS = 2**31 - 1
TCP_STATES = {"01": "ESTABLISHED", "08": "CLOSE_WAIT", "09": "LAST_ACK"}


def raise_own_fd_limit(wanted):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def fd_count(pid):
    import os
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def broker_side_sockets(port, states=("01", "08")):
    """Broker-side TCP sockets of the listener port (local port == port), by client port."""
    out = {}
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(path).read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if int(local.rsplit(":", 1)[1], 16) == port and state in states:
                out[int(remote.rsplit(":", 1)[1], 16)] = TCP_STATES.get(state, state)
    return out


def wait_until(predicate, timeout, step=0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(step)


def create_topic(bootstrap, name, partitions):
    with kproto.connect(bootstrap) as s:
        r = kproto.roundtrip(s, kproto.create_topics_v2(1, name, partitions), 1)
        assert kproto.parse_create_topics_v2(r)[name][0] == kproto.NONE


def fetch_v4_many(correlation_id, topic, partitions, max_wait_ms, max_bytes=1 << 20,
                  min_bytes=1):
    """Fetch v4 of several partitions from offset 0."""
    body = (
        kproto.i32(-1)  # replica_id
        + kproto.i32(max_wait_ms)
        + kproto.i32(min_bytes)
        + kproto.i32(max_bytes)
        + kproto.i8(0)  # isolation_level
        + kproto.array([kproto.string(topic) + kproto.array(
            [kproto.i32(p) + kproto.i64(0) + kproto.i32(max_bytes) for p in partitions])])
    )
    return kproto.frame(kproto.request_header_v1(kproto.FETCH, 4, correlation_id) + body)


def settle_fd_count(pid, timeout=3.0):
    """The fd count once it has stopped moving (start-up opens files lazily)."""
    last = fd_count(pid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = fd_count(pid)
        if now == last:
            return now
        last = now
    return last


def healthy_roundtrip(bootstrap):
    with kproto.connect(bootstrap, timeout=5) as s:
        r = kproto.roundtrip(s, kproto.api_versions(3), 3)
        err, apis, _ = kproto.parse_api_versions_v0(r)
        assert err == kproto.NONE and kproto.FETCH in apis


def test_closed_long_poll_frees_its_connection_at_once(start_broker):
    """Fetches parked 'forever' (max_wait_ms = int32 max, min_bytes = 1, empty partitions): the
    clients disconnect, and within 1 s the broker has closed their sockets. Each fetch names
    both partitions of a 2-shard broker, so one of them is parked on the other shard; the
    owner logs that it cancelled it."""
    b = start_broker({"num.shards": 2})
    topic = unique("longpoll")
    create_topic(b.bootstrap, topic, 2)
    pid = b.proc.pid
    baseline = settle_fd_count(pid)
    clients = []
    for i in range(6):
        s = kproto.connect(b.bootstrap)
        s.sendall(fetch_v4_many(100 + i, topic, [0, 1], FOREVER_MS))
        clients.append(s)
    ports = {s.getsockname()[1] for s in clients}
    time.sleep(0.5)
    for s in clients:  # parked: no answer
        s.settimeout(0.05)
        try:
            assert s.recv(1) == b"", "a parked fetch was answered early"
        except socket.timeout:
            pass
    assert fd_count(pid) >= baseline + len(clients)
    assert set(broker_side_sockets(b.port)) >= ports
    half = len(clients) // 2
    for s in clients[:half]:  # orderly close (FIN)
        s.close()
    for s in clients[half:]:  # abortive close (RST)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    closed_at = time.monotonic()
    freed = wait_until(lambda: fd_count(pid) <= baseline
                       and not (set(broker_side_sockets(b.port)) & ports), 1.0)
    elapsed = time.monotonic() - closed_at
    assert freed, (f"after {elapsed:.2f}s: fds {fd_count(pid)} (baseline {baseline}), "
                   f"broker-side sockets {broker_side_sockets(b.port)}")
    healthy_roundtrip(b.bootstrap)
    assert b.stop() == 0
    stats = b.shard_stats()
    cancelled = sum(int(m) for m in re.findall(r"cancelled_waits=(\d+)", b.output()))
    assert sorted(stats) == [0, 1], b.tail()
    # Each client's fetch had one of its two partitions on the other shard, parked there
    # until the close: each close cancels exactly one remote wait.
    assert cancelled == len(clients), f"cancelled_waits={cancelled}\n{b.tail()}"


def test_abandoned_and_idle_connections_are_reclaimed(start_broker):
    """2,000 connections closed by their clients, then 2,000 left open and idle past a short
    connections.max.idle.ms: the fd count returns to its baseline each time and new
    connections are served."""
    n = 2000
    raise_own_fd_limit(n + 500)
    b = start_broker({"num.shards": 2, "connections.max.idle.ms": 1500})
    pid = b.proc.pid
    healthy_roundtrip(b.bootstrap)
    baseline = settle_fd_count(pid)

    socks = [socket.create_connection(("127.0.0.1", b.port), timeout=10) for _ in range(n)]
    assert wait_until(lambda: fd_count(pid) >= baseline + n, 10), fd_count(pid)
    for s in socks:
        s.close()
    assert wait_until(lambda: fd_count(pid) <= baseline, 10), (fd_count(pid), baseline)
    healthy_roundtrip(b.bootstrap)

    socks = [socket.create_connection(("127.0.0.1", b.port), timeout=10) for _ in range(n)]
    assert wait_until(lambda: fd_count(pid) >= baseline + n, 10), fd_count(pid)
    # Idle for 1.5 s: the broker closes them (the clients see EOF).
    assert wait_until(lambda: fd_count(pid) <= baseline, 10), (fd_count(pid), baseline)
    assert all(kproto.wait_closed(s, 1.0) for s in socks[:50])
    for s in socks:
        s.close()
    healthy_roundtrip(b.bootstrap)
    # A connection in use is not idle.
    with kproto.connect(b.bootstrap, timeout=5) as s:
        for i in range(6):
            kproto.roundtrip(s, kproto.api_versions(10 + i), 10 + i)
            time.sleep(0.5)


def test_client_that_never_reads_is_not_read_and_others_work(start_broker):
    """A client pipelines large fetches and never reads: the broker stops reading it (its
    sends block) while its RSS stays bounded, and another client works normally meanwhile."""
    b = start_broker({"num.shards": 1})
    pid = b.proc.pid
    topic = unique("noread")
    create_topic(b.bootstrap, topic, 1)
    value = b"x" * (900 * 1024)
    for i in range(9):  # ~8 MiB in the partition: every fetch below answers ~8 MiB
        err, _ = kproto.produce_raw(b.bootstrap, topic, 0, kproto.record_batch([(None, value)]),
                                    correlation_id=i)
        assert err == kproto.NONE
    healthy_roundtrip(b.bootstrap)
    rss_before = rss_kib(pid)

    hog = kproto.connect(b.bootstrap)
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    request = fetch_v4_many(1, topic, [0], 0, max_bytes=16 << 20)
    hog.settimeout(0.05)
    sent = 0
    blocked_since = None
    peak = rss_before
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            sent += hog.send(request * 64)
            blocked_since = None
        except socket.timeout:
            blocked_since = blocked_since or time.monotonic()
            if time.monotonic() - blocked_since > 2.0:
                break
        peak = max(peak, rss_kib(pid))
    assert blocked_since is not None, f"the broker kept reading: {sent} bytes accepted in 30 s"
    requests_sent = sent // len(request)

    # Meanwhile another client is served normally.
    with kproto.connect(b.bootstrap, timeout=5) as s:
        r = kproto.roundtrip(s, kproto.fetch_v4(5, topic, 0, 0, max_wait_ms=0, max_bytes=1024), 5)
        res = kproto.parse_fetch_v4(r)
        assert res[(topic, 0)][0] == kproto.NONE and res[(topic, 0)][1] == 9
        batch = kproto.record_batch([(b"k", b"v")])
        r = kproto.roundtrip(s, kproto.produce_v3(6, topic, 0, batch), 6)
        assert kproto.parse_produce_v3(r)[(topic, 0)][0] == kproto.NONE
    for _ in range(10):
        peak = max(peak, rss_kib(pid))
        time.sleep(0.1)
    growth_mib = (peak - rss_before) / 1024
    # Held: at most 16 MiB of responses, one fetch in process (~8 MiB, read and copied into
    # its response) and the socket buffers. Before the bound, 64 responses of 8 MiB were.
    assert growth_mib < 160, (f"RSS grew by {growth_mib:.0f} MiB while {requests_sent} "
                              f"requests were accepted")
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    hog.close()
    healthy_roundtrip(b.bootstrap)


def test_connection_limits_refuse_extra_connections(start_broker):
    """max.connections.per.ip and max.connections: the extra connections are accepted and
    closed at once, with a logged reason; the connections already open keep working."""
    b = start_broker({"num.shards": 2, "max.connections.per.ip": 3})
    # (The fixture's readiness probe was a connection too: it may not be released yet.)
    kept = [open_served(b.bootstrap) for _ in range(3)]
    extra = kproto.connect(b.bootstrap)
    assert kproto.wait_closed(extra, 2.0), "4th connection from one IP not closed"
    for i, s in enumerate(kept):
        kproto.roundtrip(s, kproto.api_versions(20 + i), 20 + i)
    kept[0].close()
    # The freed place is taken again.
    assert wait_until(lambda: _served(b.bootstrap), 3.0)
    for s in kept[1:]:
        s.close()
    assert "max.connections.per.ip (3) reached" in b.output(), b.tail()

    c = start_broker({"num.shards": 2, "max.connections": 4})
    kept = [open_served(c.bootstrap) for _ in range(4)]
    for i, s in enumerate(kept):
        kproto.roundtrip(s, kproto.api_versions(30 + i), 30 + i)
    extra = [kproto.connect(c.bootstrap) for _ in range(3)]
    for s in extra:
        assert kproto.wait_closed(s, 2.0), "connection beyond max.connections not closed"
    for i, s in enumerate(kept):
        kproto.roundtrip(s, kproto.api_versions(40 + i), 40 + i)
    assert "max.connections (4) reached" in c.output(), c.tail()
    for s in kept:
        s.close()
    assert wait_until(lambda: _served(c.bootstrap), 3.0)


def _served(bootstrap):
    try:
        healthy_roundtrip(bootstrap)
        return True
    except (OSError, ConnectionError, AssertionError, ValueError):
        return False


def open_served(bootstrap, timeout=3.0):
    """A connection the broker serves (retried while the broker is still releasing others)."""
    deadline = time.monotonic() + timeout
    while True:
        s = kproto.connect(bootstrap, timeout=5)
        try:
            kproto.roundtrip(s, kproto.api_versions(50), 50)
            return s
        except (OSError, ConnectionError):
            s.close()
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def test_frame_larger_than_the_byte_bounds_is_still_served(start_broker):
    """A 20 MiB frame is above the connection's 16 MiB bound and a 1 MiB shard budget: it is
    read whole and answered (MESSAGE_TOO_LARGE), not left waiting for itself; the bounds hold
    back further reading only."""
    b = start_broker({"num.shards": 1, "queued.max.request.bytes": 1 << 20})
    topic = unique("bigframe")
    create_topic(b.bootstrap, topic, 1)
    with kproto.connect(b.bootstrap, timeout=20) as s:
        # One well-formed batch (Kafka's validateRecords passes it), over max.message.bytes.
        batch = kproto.record_batch([(None, b"\0" * (20 << 20))])
        big = kproto.produce_v3(9, topic, 0, batch)
        s.sendall(big + kproto.api_versions(10))
        r = kproto.roundtrip(s, b"", 9)
        assert kproto.parse_produce_v3(r)[(topic, 0)][0] == kproto.MESSAGE_TOO_LARGE
        corr, _ = kproto.recv_response(s)
        assert corr == 10

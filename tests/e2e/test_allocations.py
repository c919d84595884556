"""Heap allocations per request, whole requests through the real server (issue 25 item 2).

The broker started with `BROKER_COUNT_ALLOCATIONS=1` counts the allocations each shard's
thread makes (`broker/src/alloc_count.rs`) and exports them as
`broker_heap_allocations_total`. With one shard, every request below is read, handled and
answered on that thread, so the count's growth over a phase of requests of one API, less what
the idle shard allocates in the same time (the metrics publisher's own snapshots), divided by
the requests of that API the broker counted, is what one such request costs in steady state:
the connection, the topic and the fetch position are warmed up first and stay open.

The clients are librdkafka's (confluent-kafka): one record per Produce request (linger 0,
flushed one by one), one batch per Fetch (max.partition.fetch.bytes below two batches, a queue of one record
without librdkafka's 1 s back-off, so the consumer fetches as it polls), and
Metadata for one topic (AdminClient.list_topics). Heartbeats are raw (`kproto`): librdkafka
sends at most about 3 a second whatever `heartbeat.interval.ms` says, so a member that
joined and synced its classic group (JoinGroup, SyncGroup v0) sends Heartbeat v0 requests
back to back on one connection, each answered with no error.

The bounds are today's counts (a ratchet, lowered as allocations go; each is printed): the
issue's goal is none per request, which this test will then assert.
"""

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import kproto as kp
from conftest import free_port
from e2e_helpers import admin as ck_admin, create_topic, unique
from test_metrics import samples, total

WARM_UP = 200
REQUESTS = 600
VALUE = b"v" * 100

# Allocations per request, measured (see the module doc) with a fifth or so of headroom:
# glommio allocates per turn of its reactor loop (preemption timer sources, a SmallVec per
# submission) and how many turns a request takes varies with the machine's load.
# Measured 2026-12-05, before that day's changes: Produce 47.1-53.6, Fetch 110.8, Metadata
# 54.7; after our own cuts (plans without Vecs, 4 KiB header reads, no event listeners
# without a wait): Produce 37.9-44.7, Fetch 60.9-72.3, Metadata 47.1-50.3; then with the
# vendored glommio's timer map popped instead of split on every loop turn
# (vendor/glommio/wakeup.patch): Produce 21.0-23.9, Fetch 38.8-40.5, Metadata 26.1-26.3 (quiet
# and with two busy cores), Heartbeat (first measured) 14.2-14.6. Keeping glommio's armed
# preemption timers across loop turns (vendor/glommio/timer-keep.patch) took them to 15.0-16.1,
# 31.3-32.6, 20.1-21.1 and 11.4-12.6, but it stalled an executor, so it is not applied. A change that allocates more per request fails here; one that
# allocates less lowers these.
BOUNDS = {
    "Produce": 29,
    "Fetch": 50,
    "Metadata": 32,
    "Heartbeat": 18,
}


def join_and_sync(sock, group):
    """A one-member classic group, v0 requests: returns (generation, member id)."""
    protocols = kp.array([kp.string("range") + kp.i32(0)])
    body = (kp.string(group) + kp.i32(30000) + kp.string("") + kp.string("consumer")
            + protocols)
    r = kp.roundtrip(sock, kp.frame(kp.request_header_v1(11, 0, 1) + body), 1)
    error, generation = r.i16(), r.i32()
    r.string()  # protocol
    r.string()  # leader
    member = r.string()
    assert error == 0, f"JoinGroup error {error}"
    body = (kp.string(group) + kp.i32(generation) + kp.string(member)
            + kp.array([kp.string(member) + kp.i32(0)]))
    r = kp.roundtrip(sock, kp.frame(kp.request_header_v1(14, 0, 2) + body), 2)
    assert r.i16() == 0, "SyncGroup error"
    return generation, member


def heartbeats(sock, group, generation, member, n):
    frame = kp.frame(kp.request_header_v1(12, 0, 3)
                     + kp.string(group) + kp.i32(generation) + kp.string(member))
    for _ in range(n):
        error = kp.roundtrip(sock, frame, 3).i16()
        assert error == 0, f"Heartbeat error {error}"


def heap(scraped):
    return total(scraped, "broker_heap_allocations_total")


def requests(scraped, api):
    return total(scraped, "broker_requests_total", api=api)


def all_requests(scraped):
    return total(scraped, "broker_requests_total")


class Meter:
    def __init__(self, port):
        self.port = port
        # The idle shard's own rate (metrics snapshots), measured once.
        s0 = samples(port)
        t0 = time.monotonic()
        time.sleep(2.0)
        s1 = samples(port)
        self.idle_per_s = (heap(s1) - heap(s0)) / (time.monotonic() - t0)
        print(f"idle shard: {self.idle_per_s:.1f} allocations/s (metrics snapshots)")

    def per_request(self, api, run):
        s0 = samples(self.port)
        t0 = time.monotonic()
        run()
        s1 = samples(self.port)
        seconds = time.monotonic() - t0
        n = requests(s1, api) - requests(s0, api)
        others = all_requests(s1) - all_requests(s0) - n
        allocations = heap(s1) - heap(s0) - self.idle_per_s * seconds
        per = allocations / max(n, 1)
        print(f"{api}: {n:.0f} requests ({others:.0f} of other APIs), "
              f"{allocations:.0f} allocations: {per:.1f} per request")
        assert n >= REQUESTS * 0.9, f"{api}: only {n} requests counted"
        assert others <= n * 0.05, f"{api}: {others} requests of other APIs in the phase"
        return per


@pytest.fixture
def counted(start_broker, monkeypatch):
    monkeypatch.setenv("BROKER_COUNT_ALLOCATIONS", "1")
    port = free_port()
    b = start_broker({"num.shards": 1, "metrics.listener": f"http://127.0.0.1:{port}"})
    return b, port


def test_allocations_per_request_are_bounded(counted):
    b, port = counted
    scraped = samples(port)
    assert "broker_heap_allocations_total" in {name for name, _ in scraped}, \
        "the broker did not count (BROKER_COUNT_ALLOCATIONS=1)"
    topic = unique("alloc")
    create_topic(b.bootstrap, topic, 1)
    meter = Meter(port)
    figures = {}

    producer = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "acks": 1,
                         "enable.idempotence": False})

    def produce(n):
        for _ in range(n):
            producer.produce(topic, VALUE, partition=0)
            producer.flush(10)

    produce(WARM_UP)
    figures["Produce"] = meter.per_request("Produce", lambda: produce(REQUESTS))
    produce(WARM_UP)  # the backlog the fetch phase reads
    producer.flush(10)

    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique("g"),
                         "enable.auto.commit": False, "max.partition.fetch.bytes": 200,
                         "fetch.max.bytes": 1000, "message.max.bytes": 1000,
                         "fetch.wait.max.ms": 100,
                         "queued.min.messages": 1, "fetch.queue.backoff.ms": 0})
    consumer.assign([TopicPartition(topic, 0, 0)])

    def consume(n):
        got = 0
        deadline = time.monotonic() + 60
        while got < n and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is not None and not m.error():
                got += 1
        assert got == n, f"consumed {got} of {n}"

    consume(WARM_UP)
    figures["Fetch"] = meter.per_request("Fetch", lambda: consume(REQUESTS))
    consumer.close()

    admin = ck_admin(b.bootstrap)

    def metadata(n):
        for _ in range(n):
            admin.list_topics(topic, timeout=10)

    metadata(WARM_UP)
    figures["Metadata"] = meter.per_request("Metadata", lambda: metadata(REQUESTS))

    with kp.connect(b.bootstrap) as sock:
        group = unique("hb")
        generation, member = join_and_sync(sock, group)
        heartbeats(sock, group, generation, member, WARM_UP)
        figures["Heartbeat"] = meter.per_request(
            "Heartbeat", lambda: heartbeats(sock, group, generation, member, REQUESTS))

    over = {api: round(per, 1) for api, per in figures.items() if per > BOUNDS[api]}
    assert not over, f"allocations per request over the bounds {BOUNDS}: {over}"

"""Connection handoff (num.shards=2): a plaintext connection whose produce or fetch requests
touch partitions of the other shard moves there, so its requests stop crossing the mesh.

Which shard accepts a connection is up to SO_REUSEPORT's hash of the client's port, so each
test opens many connections that each touch one partition: with N of them, the chance that
none lands on the shard not owning its partition is 2^-N (N >= 20 here), and every assertion
on counts is a bound that holds whichever connections landed where."""

import re
import threading
import time

import pytest

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from e2e_helpers import (by_partition, ck_consumer, ck_produce, ck_producer, create_topic,
                         kp_consumer, unique)

HANDOFF = re.compile(
    r"shard (\d+) stats: .*?forwarded_in=(\d+) forwarded_out=(\d+) .*?"
    r"handoffs_out=(\d+) handoffs_in=(\d+)"
)

PARTITIONS = 4
PRODUCERS_PER_PARTITION = 6
MESSAGES_PER_PRODUCER = 200
# Requests a connection on the wrong shard forwards before it moves: one decision window
# (handoff::DECIDE_EVERY_REQUESTS = 4) and what was in flight then, counted generously (a
# fetch forwards a read and may park a wait, twice over).
FORWARDS_PER_MOVE = 16
# Control-plane calls that cross the mesh whatever the connections do (topic creation and
# its image updates, the coordinator lookups of the consumer).
CONTROL_FORWARDS = 100


def handoff_stats(broker):
    out = {}
    for m in HANDOFF.finditer(broker.output()):
        out[int(m.group(1))] = dict(zip(["forwarded_in", "forwarded_out", "handoffs_out",
                                         "handoffs_in"], map(int, m.groups()[1:])))
    assert sorted(out) == [0, 1], f"expected stats lines for shards 0 and 1:\n{broker.tail()}"
    return out


def produce_one_partition_per_connection(bootstrap, topic):
    """PRODUCERS_PER_PARTITION producers per partition, each writing only its partition, one
    record per request (a flush after each). Returns the delivery log of all of them."""
    producers = [(p, i, ck_producer(bootstrap, **{"linger.ms": 0}))
                 for p in range(PARTITIONS) for i in range(PRODUCERS_PER_PARTITION)]
    log = None
    for n in range(MESSAGES_PER_PRODUCER):
        for p, i, producer in producers:
            msg = dict(partition=p, key=f"p{p}-{i}".encode(), value=f"{p}-{i}-{n}".encode())
            log = ck_produce(producer, topic, [msg], log=log)
    assert not log.errors, log.errors[:3]
    return log


def consume_all(bootstrap, topic):
    """One consumer per partition (so that its connection, too, has one owner to move to)."""
    out = {}
    expected = PRODUCERS_PER_PARTITION * MESSAGES_PER_PRODUCER
    for p in range(PARTITIONS):
        c = ck_consumer(bootstrap)
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING)])
        got = out.setdefault(p, [])
        deadline = time.monotonic() + 120
        try:
            while len(got) < expected and time.monotonic() < deadline:
                for m in c.consume(num_messages=10000, timeout=0.2):
                    assert not m.error(), m.error()
                    got.append(m)
        finally:
            c.close()
    return out


def check_everything_read(log, consumed):
    produced = by_partition(log.ok)
    assert sum(len(v) for v in produced.values()) == (
        PARTITIONS * PRODUCERS_PER_PARTITION * MESSAGES_PER_PRODUCER)
    for p, recs in produced.items():
        assert [r.offset for r in recs] == list(range(len(recs))), f"partition {p} not dense"
        got = consumed.get(p, [])
        assert [(m.offset(), m.key(), m.value()) for m in got] == [
            (r.offset, r.key, r.value) for r in recs], f"partition {p}: consumed != produced"
        # Each producer's records are in the order it sent them.
        for i in range(PRODUCERS_PER_PARTITION):
            mine = [int(m.value().split(b"-")[2]) for m in got if m.key() == f"p{p}-{i}".encode()]
            assert mine == list(range(MESSAGES_PER_PRODUCER)), f"partition {p} producer {i}"


def run_producers(start_broker, handoff):
    b = start_broker({"num.shards": 2, "offsets.topic.num.partitions": 2,
                      "connection.handoff.enable": str(handoff).lower()})
    topic = create_topic(b.bootstrap, unique("handoff"), PARTITIONS)
    log = produce_one_partition_per_connection(b.bootstrap, topic)
    consumed = consume_all(b.bootstrap, topic)
    check_everything_read(log, consumed)
    assert b.stop() == 0
    stats = handoff_stats(b)
    print("handoff" if handoff else "no handoff", stats)
    return stats


def test_producers_move_to_the_owner(start_broker):
    stats = run_producers(start_broker, handoff=True)
    moves = sum(s["handoffs_out"] for s in stats.values())
    assert moves == sum(s["handoffs_in"] for s in stats.values()), stats
    # Some of the PRODUCERS_PER_PARTITION * PARTITIONS connections landed on the shard not
    # owning their partition (all on the right one: probability 2^-24).
    assert moves >= 1, stats
    # A connection moves at most once here (the cooldown outlasts nothing, but only a
    # connection on the wrong shard has a reason to move): at most one move per connection.
    assert moves <= PARTITIONS * PRODUCERS_PER_PARTITION + 2, stats
    forwarded = sum(s["forwarded_out"] for s in stats.values())
    # Without handoff every request of a connection on the wrong shard is forwarded: at least
    # MESSAGES_PER_PRODUCER per such connection. With it, a few per move.
    # (The consumers, one per partition, forward a few fetches each before moving, or
    # finish first.)
    assert forwarded <= CONTROL_FORWARDS + FORWARDS_PER_MOVE * (moves + PARTITIONS), stats


def test_without_handoff_requests_are_forwarded(start_broker):
    stats = run_producers(start_broker, handoff=False)
    assert all(s["handoffs_out"] == 0 and s["handoffs_in"] == 0 for s in stats.values()), stats
    # At least one producer connection is on the wrong shard (probability 1 - 2^-24), and
    # every one of its MESSAGES_PER_PRODUCER requests crosses the mesh.
    forwarded = sum(s["forwarded_out"] for s in stats.values())
    assert forwarded >= MESSAGES_PER_PRODUCER, stats


CONSUMERS_PER_PARTITION = 10
ROUNDS = 30
PER_ROUND = 10


def ck_poller(bootstrap, topic, partition):
    c = ck_consumer(bootstrap, **{"fetch.wait.max.ms": 300})
    c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])

    def poll():
        out = []
        for m in c.consume(num_messages=1000, timeout=0.2):
            if m.error():
                raise AssertionError(m.error())
            out.append((m.offset(), m.value()))
        return out
    return poll, c.close


def kp_poller(bootstrap, topic, partition):
    """kafka-python uses KIP-227 fetch sessions: after a move its session is on the old shard,
    so its next incremental fetch gets FETCH_SESSION_ID_NOT_FOUND and it starts over."""
    from kafka import TopicPartition as KTP

    c = kp_consumer(bootstrap, fetch_max_wait_ms=300)
    c.assign([KTP(topic, partition)])
    c.seek_to_beginning(KTP(topic, partition))

    def poll():
        return [(m.offset, m.value) for msgs in c.poll(timeout_ms=200).values() for m in msgs]
    return poll, c.close


@pytest.mark.parametrize("poller", [ck_poller, kp_poller], ids=["librdkafka", "kafka-python"])
def test_long_polling_consumers_move_and_miss_nothing(start_broker, poller):
    """Consumers each assigned one partition long-poll while records arrive in rounds; the
    producer alternates partitions (its windows are split evenly, so it never moves): every
    handoff is a consumer's, made between a fetch response and the next fetch."""
    b = start_broker({"num.shards": 2, "offsets.topic.num.partitions": 2})
    topic = create_topic(b.bootstrap, unique("handoff-poll"), 2)
    total = ROUNDS * PER_ROUND
    received = {}
    errors = []
    stop = threading.Event()

    def consume(key, partition):
        got = received.setdefault(key, [])
        try:
            poll, close = poller(b.bootstrap, topic, partition)
        except Exception as error:  # noqa: BLE001 (reported by the main thread)
            errors.append(error)
            return
        try:
            deadline = time.monotonic() + 120
            while len(got) < total and time.monotonic() < deadline and not stop.is_set():
                got.extend(poll())
        except Exception as error:  # noqa: BLE001
            errors.append(error)
        finally:
            close()

    threads = [threading.Thread(target=consume, args=((p, i), p))
               for p in range(2) for i in range(CONSUMERS_PER_PARTITION)]
    for t in threads:
        t.start()
    try:
        # Long polls park (nothing to read yet) for a few decision windows first.
        time.sleep(2)
        producer = ck_producer(b.bootstrap, **{"linger.ms": 0})
        log = None
        for r in range(ROUNDS):
            for n in range(PER_ROUND):
                for p in range(2):
                    msg = dict(partition=p, value=f"{p}-{r * PER_ROUND + n}".encode())
                    log = ck_produce(producer, topic, [msg], log=log)
            time.sleep(0.05)
        assert not log.errors, log.errors[:3]
        # Destroyed while its broker is up (librdkafka's destroy can wait long for a gone one).
        del producer
        for t in threads:
            t.join(timeout=150)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert not errors, errors[:3]
    produced = by_partition(log.ok)
    for (p, i), got in received.items():
        assert got == [(r.offset, r.value) for r in produced[p]], f"consumer {i} of {p}"
    assert b.stop() == 0
    stats = handoff_stats(b)
    print("long polls", stats)
    moves = sum(s["handoffs_out"] for s in stats.values())
    assert moves == sum(s["handoffs_in"] for s in stats.values()), stats
    # 20 consumer connections: none on the wrong shard with probability 2^-20.
    assert moves >= 1, stats

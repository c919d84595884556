"""Transactions on a 3-node cluster (issue 22 with issue 21's replication): the transaction
coordinator is the leader of the id's `__transaction_state` partition (replicated, rf 3), and
the partitions a transaction writes are led by other brokers too, so its markers travel as
WriteTxnMarkers between brokers.

- test_transactions_across_brokers: a librdkafka transactional producer commits and aborts
  transactions over a 6-partition rf-3 topic whose leaders are spread over the three nodes;
  read_committed reads exactly the committed records and every partition's last stable offset
  reaches its high watermark (every marker written, wherever the leader is).
- test_coordinator_failover: the node leading the transactional id's `__transaction_state`
  partition is killed with a transaction open; a new producer with the same id, served by the
  new coordinator (loaded from its replica of the partition), aborts it and commits its own
  transaction; read_committed sees only the committed records.
"""

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from cluster_harness import wait_until
from test_replication import create_replicated, make_cluster, unique  # noqa: F401 (fixture)

PARTITIONS = 6


def read_all(bootstrap, topic, isolation, expect, timeout=30):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("rd"),
                  "auto.offset.reset": "earliest", "isolation.level": isolation,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = []
    deadline = time.time() + timeout
    while time.time() < deadline and len(got) < expect:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    # A little longer, so records past `expect` (there must be none) would show.
    end = time.time() + 2
    while time.time() < end:
        m = c.poll(0.3)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.close()
    return got


def stable_offsets(bootstrap, topic):
    """{partition: (last stable offset, high watermark)} via ListOffsets at both levels."""
    out = {}
    for isolation in ("read_committed", "read_uncommitted"):
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("wm"),
                      "isolation.level": isolation})
        for p in range(PARTITIONS):
            _, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            out.setdefault(p, []).append(hi)
        c.close()
    return {p: tuple(v) for p, v in out.items()}


def producer(bootstrap, txn_id):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "linger.ms": 5, "transaction.timeout.ms": 60000})
    p.init_transactions(60)
    return p


def test_transactions_across_brokers(make_cluster):
    c = make_cluster()
    topic = unique("txc")
    create_replicated(c, topic, PARTITIONS, 3)
    bootstrap = c.bootstrap()
    p = producer(bootstrap, unique("tx"))
    committed = []
    for n in range(4):
        p.begin_transaction()
        values = [f"{n}-{i}" for i in range(60)]
        for i, v in enumerate(values):
            p.produce(topic, value=v.encode(), partition=i % PARTITIONS)
        if n % 2 == 0:
            p.commit_transaction(60)
            committed += values
        else:
            p.flush(30)  # else librdkafka drops what it has not sent at abort
            p.abort_transaction(60)
    got = read_all(bootstrap, topic, "read_committed", len(committed))
    assert sorted(got) == sorted(committed), \
        f"read_committed read {len(got)} records, expected the {len(committed)} committed"
    assert len(read_all(bootstrap, topic, "read_uncommitted", 240)) == 240
    # Every partition got its 4 markers: the last stable offset is the high watermark.
    offsets = wait_until(
        lambda: (lambda o: o if all(a == b for a, b in o.values()) else None)(
            stable_offsets(bootstrap, topic)),
        20, "every partition's last stable offset reaching its high watermark",
        lambda: stable_offsets(bootstrap, topic), interval=0.5)
    assert all(hw == 40 + 4 for _, hw in offsets.values()), offsets


def test_coordinator_failover(make_cluster):
    c = make_cluster()
    topic = unique("txf")
    create_replicated(c, topic, PARTITIONS, 3)
    txn_id = unique("txf")
    bootstrap = c.bootstrap()
    p = producer(bootstrap, txn_id)
    p.begin_transaction()
    for i in range(12):
        p.produce(topic, value=f"kept-{i}".encode(), partition=i % PARTITIONS)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(12):
        p.produce(topic, value=f"open-{i}".encode(), partition=i % PARTITIONS)
    p.flush(30)
    # Find the leader of the id's __transaction_state partition (Kafka's hash).
    h = 0
    for ch in txn_id:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    part = (0 if h == -(1 << 31) else abs(h)) % 50
    states = c.partition_states(c.live_brokers()[0], "__transaction_state")
    coordinator = states[part]["leader"]
    c.kill9(coordinator)
    bootstrap = c.bootstrap()
    p2 = producer(bootstrap, txn_id)
    p2.begin_transaction()
    for i in range(12):
        p2.produce(topic, value=f"after-{i}".encode(), partition=i % PARTITIONS)
    p2.commit_transaction(60)
    expected = [f"kept-{i}" for i in range(12)] + [f"after-{i}" for i in range(12)]
    got = read_all(bootstrap, topic, "read_committed", len(expected), timeout=60)
    assert sorted(got) == sorted(expected), f"read_committed after coordinator failover: {sorted(got)}"

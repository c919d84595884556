"""KIP-848 consumer groups end to end: librdkafka with `group.protocol=consumer` (the broker
assigns partitions with its `uniform` assignor through ConsumerGroupHeartbeat), and the
protocol's epochs and fencing on the wire (kproto).

Every record must be read exactly once by a group of three; a member that leaves hands its
partitions to the others; consumers that restart resume from their commits.
"""

import time

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from e2e_helpers import ck_produce, ck_producer, create_topic, unique

PARTITIONS = 6
TIMEOUT = 90


def consumer(bootstrap, group, **conf):
    c = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    c.update(conf)
    return Consumer(c)


def produce(bootstrap, topic, start, count, partitions=PARTITIONS):
    msgs = [dict(partition=i % partitions, key=f"k{i}".encode(), value=f"v{i}".encode())
            for i in range(start, start + count)]
    ck_produce(ck_producer(bootstrap), topic, msgs)
    return {m["value"] for m in msgs}


class Member:
    """One consumer, polled by `pump` from the test's thread (librdkafka consumers are not
    shared between threads here); commits after every record and records what it read."""

    def __init__(self, bootstrap, group, topic, name):
        self.c = consumer(bootstrap, group, **{"client.id": name})
        self.c.subscribe([topic])
        self.read = []
        self.errors = []
        self.closed = False

    def step(self):
        m = self.c.poll(0.05)
        if m is None:
            return
        if m.error():
            if m.error().code() != KafkaError._PARTITION_EOF:
                self.errors.append(m.error())
            return
        self.read.append((m.partition(), m.offset(), m.value()))
        self.c.commit(message=m, asynchronous=False)

    def assignment(self):
        return {tp.partition for tp in self.c.assignment()}

    def close(self):
        self.closed = True
        self.c.close()


def wait(members, predicate, what, timeout=TIMEOUT):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for m in members:
            if not m.closed:
                m.step()
        if predicate():
            return
    raise AssertionError(f"timed out waiting for {what}")


def values(members):
    return [v for m in members for (_, _, v) in m.read]


def test_three_consumers_split_leave_and_resume(broker):
    b = broker.bootstrap
    topic = unique("kip848")
    group = unique("g848")
    create_topic(b, topic, PARTITIONS)
    sent = produce(b, topic, 0, 600)

    members = [Member(b, group, topic, f"m{i}") for i in range(3)]
    wait(members, lambda: len(values(members)) >= len(sent), "the group to read every record")
    wait(members, lambda: sorted(len(m.assignment()) for m in members) == [2, 2, 2],
         "a 2/2/2 split of the partitions")
    owned = [m.assignment() for m in members]
    assert set().union(*owned) == set(range(PARTITIONS)), owned
    read = values(members)
    assert sorted(read) == sorted(sent), "records missed or read twice"

    # The group as the broker describes it (ConsumerGroupDescribe) and lists it.
    admin = AdminClient({"bootstrap.servers": b})
    desc = admin.describe_consumer_groups([group])[group].result(timeout=30)
    assert len(desc.members) == 3
    listed = admin.list_consumer_groups().result(timeout=30)
    assert group in {g.group_id for g in listed.valid}

    # One member leaves: its two partitions move to the other two; new records reach them.
    leaver = members.pop()
    leaver.close()
    wait(members, lambda: sorted(len(m.assignment()) for m in members) == [3, 3],
         "the leaver's partitions to move")
    more = produce(b, topic, 600, 300)
    wait(members, lambda: more <= set(values(members)), "the remaining members to read the new records")
    assert not any(m.errors for m in members), [m.errors for m in members]

    # Everyone stops (commits were synchronous); a new group incarnation resumes from the
    # commits: it reads only what is produced afterwards.
    for m in members:
        m.close()
    consumed_before = values(members) + values([leaver])
    assert sorted(consumed_before) == sorted(sent | more)
    broker.restart()
    b = broker.bootstrap
    later = produce(b, topic, 900, 120)
    resumed = [Member(b, group, topic, f"r{i}") for i in range(2)]
    wait(resumed, lambda: set(values(resumed)) >= later, "resumed members to read the new records")
    # Nothing more arrives (a re-read of older records would show up here).
    try:
        wait(resumed, lambda: len(values(resumed)) > len(later), "", timeout=3)
    except AssertionError:
        pass
    for m in resumed:
        m.close()
    assert sorted(values(resumed)) == sorted(later), "resumed consumers re-read or skipped"


def test_committed_offsets_are_the_members(broker):
    """OffsetCommit with a member epoch (v9): a stale epoch is refused; the group's commits
    are what `committed()` returns."""
    b = broker.bootstrap
    topic = unique("kip848c")
    group = unique("g848c")
    create_topic(b, topic, 1)
    produce_all = produce(b, topic, 0, 10, partitions=1)
    assert len(produce_all) == 10
    c = consumer(b, group)
    c.subscribe([topic])
    got = []
    deadline = time.time() + TIMEOUT
    while len(got) < 10 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m)
    assert len(got) == 10
    c.commit(message=got[4], asynchronous=False)
    committed = c.committed([TopicPartition(topic, 0)], timeout=30)
    assert committed[0].offset == 5
    c.close()

"""KIP-848 consumer groups end to end: librdkafka with `group.protocol=consumer` (the broker
assigns partitions with its `uniform` assignor through ConsumerGroupHeartbeat), and the
protocol's epochs and fencing on the wire (kproto).

Every record must be read exactly once by a group of three; a member that leaves hands its
partitions to the others; consumers that restart resume from their commits.
"""

import gc
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
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
        self.commit(m)

    def commit(self, m, attempts=50):
        # KIP-848: a commit sent with the member epoch the broker has just moved past (the
        # next heartbeat brings the new one) gets STALE_MEMBER_EPOCH, which librdkafka hands
        # to the application; poll (heartbeats) and commit again, as an application would.
        for _ in range(attempts):
            try:
                self.c.commit(message=m, asynchronous=False)
                return
            except KafkaException as e:
                if e.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                    raise
            time.sleep(0.1)
        raise AssertionError(f"commit of {m.partition()}@{m.offset()} stayed stale")

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

    # The records are produced once the split is settled: a member that fetched a record and
    # loses its partition before its commit lands hands it over uncommitted, and the new owner
    # reads it again. That is Kafka's at-least-once across a rebalance, not a broker fault, so
    # "exactly once" is asserted only where no partition moves.
    members = [Member(b, group, topic, f"m{i}") for i in range(3)]
    wait(members, lambda: sorted(len(m.assignment()) for m in members) == [2, 2, 2],
         "a 2/2/2 split of the partitions")
    sent = produce(b, topic, 0, 600)
    wait(members, lambda: len(values(members)) >= len(sent), "the group to read every record")
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
    del admin
    gc.collect()
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


# --- ConsumerGroupHeartbeat on the wire (v0, flexible) -------------------------------------

CONSUMER_GROUP_HEARTBEAT = 68
FIND_COORDINATOR = 10
UNKNOWN_MEMBER_ID = 25
FENCED_MEMBER_EPOCH = 110
UNSUPPORTED_ASSIGNOR = 112
INVALID_REQUEST = 42
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15


def _read_uvarint(r):
    shift = n = 0
    while True:
        b = r.i8() & 0xFF
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n
        shift += 7


def _compact_string(r):
    n = _read_uvarint(r)
    return None if n == 0 else r.take(n - 1).decode()


def heartbeat_v0(corr, group, member_id, epoch, topics=None, owned=None, rebalance_timeout=-1,
                 assignor=None):
    from kproto import compact_string, i16, i32, request_header_v2, uvarint, frame

    def compact_array(items):
        return uvarint(0) if items is None else uvarint(len(items) + 1) + b"".join(items)

    body = (compact_string(group) + compact_string(member_id) + i32(epoch)
            + compact_string(None) + compact_string(None) + i32(rebalance_timeout)
            + compact_array(None if topics is None else [compact_string(t) for t in topics])
            + compact_string(assignor)
            + compact_array(None if owned is None else [
                tid + compact_array([i32(p) for p in parts]) + uvarint(0)
                for tid, parts in owned])
            + uvarint(0))
    return frame(request_header_v2(CONSUMER_GROUP_HEARTBEAT, 0, corr) + body)


def parse_heartbeat(r):
    _read_uvarint(r)  # response header tagged fields
    r.i32()  # throttle
    error = r.i16()
    _compact_string(r)
    member_id = _compact_string(r)
    epoch = r.i32()
    r.i32()  # heartbeat interval
    assignment = None
    if r.i8() >= 0:
        assignment = {}
        for _ in range(_read_uvarint(r) - 1):
            tid = bytes(r.take(16))
            assignment[tid] = [r.i32() for _ in range(_read_uvarint(r) - 1)]
            _read_uvarint(r)
        _read_uvarint(r)
    return error, member_id, epoch, assignment


def test_heartbeat_epochs_and_fencing_on_the_wire(broker):
    import kproto
    from kproto import frame, i8, request_header_v1, string

    b = broker.bootstrap
    topic = unique("kip848w")
    group = unique("g848w")
    create_topic(b, topic, 4)
    s = kproto.connect(b)
    corr = iter(range(1, 10_000))

    def call(req_fn, *args, **kw):
        c = next(corr)
        return parse_heartbeat(kproto.roundtrip(s, req_fn(c, *args, **kw), c))

    # FindCoordinator (v1, key type 0) creates __consumer_offsets; then join until loaded.
    c = next(corr)
    kproto.roundtrip(s, frame(request_header_v1(FIND_COORDINATOR, 1, c) + string(group) + i8(0)), c)
    deadline = time.time() + 30
    while True:
        err, member, epoch, assignment = call(heartbeat_v0, group, "m1", 0, topics=[topic],
                                              owned=[], rebalance_timeout=30000)
        if err not in (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) or time.time() > deadline:
            break
        time.sleep(0.2)
    assert (err, member, epoch) == (0, "m1", 1)
    (tid, parts), = assignment.items()
    assert sorted(parts) == [0, 1, 2, 3]

    # A steady heartbeat: same epoch, no assignment sent.
    assert call(heartbeat_v0, group, "m1", 1) == (0, "m1", 1, None)
    # Epochs the coordinator does not know are fenced; unknown members are refused.
    assert call(heartbeat_v0, group, "m1", 7)[0] == FENCED_MEMBER_EPOCH
    assert call(heartbeat_v0, group, "nobody", 1)[0] == UNKNOWN_MEMBER_ID
    assert call(heartbeat_v0, group, "m2", 0, topics=[topic], owned=[], rebalance_timeout=1,
                assignor="nope")[0] == UNSUPPORTED_ASSIGNOR
    assert call(heartbeat_v0, group, "m2", 0, topics=[topic], owned=None,
                rebalance_timeout=1000)[0] == INVALID_REQUEST

    # A second member: it waits (epoch 2, nothing yet) until m1 revokes half.
    err, _, epoch, assignment = call(heartbeat_v0, group, "m2", 0, topics=[topic], owned=[],
                                     rebalance_timeout=30000)
    assert (err, epoch, assignment) == (0, 2, {})
    err, _, epoch, assignment = call(heartbeat_v0, group, "m1", 1, owned=[(tid, [0, 1, 2, 3])])
    assert err == 0 and epoch == 1 and len(assignment[tid]) == 2, (err, epoch, assignment)
    kept = assignment[tid]
    err, _, epoch, _ = call(heartbeat_v0, group, "m1", 1, owned=[(tid, kept)])
    assert (err, epoch) == (0, 2)
    err, _, epoch, assignment = call(heartbeat_v0, group, "m2", 2, owned=[])
    assert err == 0 and sorted(assignment[tid] + kept) == [0, 1, 2, 3]

    # Leaving (-1): the member is gone.
    err, member, epoch, _ = call(heartbeat_v0, group, "m2", -1)
    assert (err, member, epoch) == (0, "m2", -1)
    assert call(heartbeat_v0, group, "m2", 2)[0] == UNKNOWN_MEMBER_ID
    s.close()

"""`broker consume --group` (kafka-console-consumer.sh --group) against our broker.

Records produced by librdkafka are read by two `consume --group` runs in turn: the first
commits exactly what it printed (librdkafka's `committed()` agrees), the second starts there
and prints the rest, no record twice. While a long run is in the group, librdkafka's admin
client describes it as the one member owning every partition; once it exits (LeaveGroup) the
group is Empty. A librdkafka member joining a running `consume` makes it rejoin; the range
assignment splits the partitions and every record is read by exactly one of them."""

import subprocess
import time

from confluent_kafka import Consumer, ConsumerGroupState, TopicPartition

from conftest import BROKER_BIN
from e2e_helpers import admin, ck_produce, ck_producer, create_topic, unique

PARTS = 3
RECORDS = 100
TIMEOUT = 60


def consume(bootstrap, topic, *flags):
    res = subprocess.run(
        [BROKER_BIN, "consume", "--bootstrap-server", bootstrap, "--topic", topic, *flags],
        capture_output=True, text=True, timeout=TIMEOUT)
    assert res.returncode == 0, f"consume {flags}: rc={res.returncode} {res.stderr}"
    return res.stdout.splitlines()


def committed(bootstrap, group, topic):
    """{partition: committed offset} as librdkafka reads them for `group`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTS)], timeout=30)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in tps}


def describe(admin_client, group):
    # The admin client must outlive the future, or librdkafka cancels the request.
    (f,) = admin_client.describe_consumer_groups([group], request_timeout=30).values()
    return f.result(timeout=30)


def produce(bootstrap, topic):
    values = [f"v{i}" for i in range(RECORDS)]
    log = ck_produce(ck_producer(bootstrap), topic,
                     [{"key": str(i).encode(), "value": v.encode()} for i, v in enumerate(values)])
    assert not log.errors and len(log.ok) == RECORDS
    assert len({r.partition for r in log.ok}) == PARTS, "keys should spread over every partition"
    return values


def test_two_group_runs_split_the_records_and_commit_what_they_printed(broker):
    b = broker.bootstrap
    topic = create_topic(b, unique("cgrp"), PARTS)
    values = produce(b, topic)
    group = unique("g")

    first = consume(b, topic, "--group", group, "--from-beginning", "--max-messages", "60")
    assert len(first) == 60
    offsets = committed(b, group, topic)
    # Committed offsets are the next to read: over the partitions they add up to what was
    # printed.
    assert set(offsets) == set(range(PARTS)) and all(o >= 0 for o in offsets.values())
    assert sum(offsets.values()) == 60

    # No --from-beginning: the committed offsets, not the latest, decide where to start;
    # group.id through --consumer-property is the same group.
    second = consume(b, topic, "--consumer-property", f"group.id={group}",
                     "--max-messages", "40", "--timeout-ms", "10000")
    assert len(second) == 40
    assert sorted(first + second) == sorted(values), "every record once across the two runs"
    assert sum(committed(b, group, topic).values()) == RECORDS

    # A third run finds nothing left and times out without printing.
    assert consume(b, topic, "--group", group, "--timeout-ms", "2000") == []


def test_a_running_consume_is_the_groups_member_until_it_exits(broker):
    b = broker.bootstrap
    topic = create_topic(b, unique("cgrp2"), PARTS)
    group = unique("g2")
    a = admin(b)
    proc = subprocess.Popen(
        [BROKER_BIN, "consume", "--bootstrap-server", b, "--topic", topic, "--group", group,
         "--timeout-ms", "8000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + TIMEOUT
        while True:
            d = describe(a, group)
            if d.state == ConsumerGroupState.STABLE and d.members:
                break
            assert time.time() < deadline, f"group never Stable: {d.state} {d.members}"
            time.sleep(0.2)
        (member,) = d.members
        assert d.partition_assignor == "range"
        got = sorted((tp.topic, tp.partition) for tp in member.assignment.topic_partitions)
        assert got == [(topic, p) for p in range(PARTS)]
        # Heartbeats keep it a member past a heartbeat interval or two.
        time.sleep(4)
        assert describe(a, group).state == ConsumerGroupState.STABLE
        out, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0, err
        assert out == ""
    finally:
        if proc.poll() is None:
            proc.kill()
    d = describe(a, group)
    assert d.state == ConsumerGroupState.EMPTY and not d.members


def test_group_flags_are_checked_as_kafkas(broker):
    b = broker.bootstrap
    topic = create_topic(b, unique("cgrp3"), 1)

    def fails(*flags):
        res = subprocess.run(
            [BROKER_BIN, "consume", "--bootstrap-server", b, "--topic", topic, *flags],
            capture_output=True, text=True, timeout=TIMEOUT)
        assert res.returncode != 0, flags
        return res.stderr

    assert "do not match" in fails("--group", "a", "--consumer-property", "group.id=b")
    assert "--from-beginning" in fails("--group", "a", "--from-beginning",
                                       "--consumer-property", "auto.offset.reset=latest")
    assert "unsupported consumer property" in fails("--consumer-property", "fetch.min.bytes=1")
    assert fails("--group", "a", "--partition", "0")


def test_shares_the_partitions_with_a_librdkafka_member(broker):
    """A librdkafka consumer joining makes the running `consume` rejoin (Heartbeat answers
    REBALANCE_IN_PROGRESS); the range assignment splits the partitions and each record is
    read by exactly one of the two."""
    b = broker.bootstrap
    topic = create_topic(b, unique("cgrp4"), PARTS)
    group = unique("g4")
    a = admin(b)
    proc = subprocess.Popen(
        [BROKER_BIN, "consume", "--bootstrap-server", b, "--topic", topic, "--group", group,
         "--timeout-ms", "12000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    c = Consumer({"bootstrap.servers": b, "group.id": group, "auto.offset.reset": "earliest",
                  "partition.assignment.strategy": "range", "enable.auto.commit": False})
    try:
        deadline = time.time() + TIMEOUT
        # Only once its first generation is Stable, so that the join below is a rebalance.
        while (d := describe(a, group)).state != ConsumerGroupState.STABLE or not d.members:
            assert time.time() < deadline, "consume never joined"
            time.sleep(0.2)
        c.subscribe([topic])
        while not c.assignment():
            c.poll(0.2)
            assert time.time() < deadline, "librdkafka never got an assignment"
        d = describe(a, group)
        assert d.state == ConsumerGroupState.STABLE and len(d.members) == 2
        owned = sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions)
        assert owned == list(range(PARTS)), "every partition owned once"
        mine = {tp.partition for tp in c.assignment()}
        assert 0 < len(mine) < PARTS
        values = produce(b, topic)
        got = []
        while time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                if len(got) and time.time() > quiet:
                    break
                continue
            assert not m.error(), m.error()
            assert m.partition() in mine
            got.append(m.value().decode())
            quiet = time.time() + 3
        out, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0, err
    finally:
        c.close()
        if proc.poll() is None:
            proc.kill()
    theirs = out.splitlines()
    assert theirs and got
    assert sorted(theirs + got) == sorted(values), "each record read by exactly one member"

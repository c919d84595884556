"""`broker groups list|describe|reset-offsets` (kafka-consumer-groups.sh) against our broker.

A librdkafka consumer in a group consumes and commits chosen offsets; `groups list` shows the
group and its state, `groups describe` shows the committed offsets, log end offsets and lag that
librdkafka committed and produced, and the member that owns each partition. reset-offsets is
refused while that member is active; once it left, --dry-run (and no flag) change nothing,
--execute moves the offsets (each scenario), and a fresh librdkafka consumer in the group starts
where the reset put it. KIP-848 groups (group.protocol=consumer) are described through
ConsumerGroupDescribe."""

import json
import subprocess
import time

from confluent_kafka import Consumer, KafkaError, TopicPartition

from conftest import BROKER_BIN
from e2e_helpers import ck_produce, ck_producer, create_topic, unique

PER_PARTITION = 10
TIMEOUT = 60


def groups(bootstrap, *args, check=True):
    cmd, rest = args[0], args[1:]
    res = subprocess.run(
        [BROKER_BIN, "groups", cmd, "--bootstrap-server", bootstrap, *rest],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check:
        assert res.returncode == 0, f"groups {args}: rc={res.returncode} {res.stderr}"
    return res


def json_lines(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def offsets(bootstrap, group):
    """{partition: (current, log_end, lag, consumer_id)} from `groups describe --json`."""
    rows = json_lines(groups(bootstrap, "describe", "--group", group, "--json").stdout)
    return {r["partition"]: (r["current_offset"], r["log_end_offset"], r["lag"], r["consumer_id"])
            for r in rows}


def state(bootstrap, group):
    (s,) = json_lines(groups(bootstrap, "describe", "--group", group, "--state", "--json").stdout)
    return s


def group_consumer(bootstrap, group, **conf):
    c = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "client.id": "admin-groups-test",
    }
    c.update(conf)
    if c.get("group.protocol") != "consumer":
        # Classic groups only: the broker owns the session timeout of a KIP-848 member.
        c.setdefault("session.timeout.ms", 6000)
    return Consumer(c)


def read_all(c, n, timeout=TIMEOUT):
    """Polls `c` until n records arrived: [(partition, offset, value)]."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            continue
        got.append((m.partition(), m.offset(), m.value()))
    assert len(got) >= n, f"read {len(got)} of {n} records"
    return got


def wait_state(bootstrap, group, wanted, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = state(bootstrap, group)["state"]
        if last == wanted:
            return
        time.sleep(0.2)
    raise AssertionError(f"group {group} stayed {last}, wanted {wanted}")


def setup_topic(broker):
    topic = create_topic(broker.bootstrap, unique("ag"), 2)
    log = ck_produce(ck_producer(broker.bootstrap), topic, [
        {"partition": p, "value": f"v{p}-{i}".encode()}
        for p in (0, 1) for i in range(PER_PARTITION)
    ])
    assert not log.errors and len(log.ok) == 2 * PER_PARTITION
    return topic


def test_list_describe_and_reset_a_classic_group(broker):
    b = broker.bootstrap
    topic = setup_topic(broker)
    group = unique("agrp")
    c = group_consumer(b, group)
    c.subscribe([topic])
    read_all(c, 2 * PER_PARTITION)
    c.commit(offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 4)],
             asynchronous=False)
    member_id = c.memberid()
    assert member_id

    # list: the name, and with --state its state.
    assert group in groups(b, "list").stdout.split()
    listed = {g["group"]: g for g in json_lines(groups(b, "list", "--json").stdout)}
    assert listed[group]["state"] == "Stable"
    table = groups(b, "list", "--state").stdout.splitlines()
    assert table[0].split() == ["GROUP", "STATE"]
    assert [group, "Stable"] in [ln.split() for ln in table[1:]]
    assert group not in groups(b, "list", "--state", "Empty").stdout

    # describe: what librdkafka committed, what was produced, the lag, the owner.
    assert offsets(b, group) == {
        0: (7, PER_PARTITION, PER_PARTITION - 7, member_id),
        1: (4, PER_PARTITION, PER_PARTITION - 4, member_id),
    }
    text = groups(b, "describe", "--group", group).stdout.splitlines()
    assert text[0] == "" and text[1].split() == [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
        "CONSUMER-ID", "HOST", "CLIENT-ID"]
    row0 = text[2].split()
    assert row0[:6] == [group, topic, "0", "7", str(PER_PARTITION), str(PER_PARTITION - 7)]
    assert row0[6] == member_id and row0[-1] == "admin-groups-test"
    (member,) = json_lines(groups(b, "describe", "--group", group, "--members", "--json").stdout)
    assert member["consumer_id"] == member_id and member["partitions"] == 2
    assert member["assignment"] == [{"topic": topic, "partitions": [0, 1]}]
    verbose = groups(b, "describe", "--group", group, "--members", "--verbose").stdout
    assert f"{topic}(0,1)" in verbose
    s = state(b, group)
    assert s["state"] == "Stable" and s["members"] == 1 and s["assignment_strategy"]
    assert "COORDINATOR (ID)" in groups(b, "describe", "--group", group, "--state").stdout

    # Refused while a member is active, and nothing changes.
    res = groups(b, "reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
                 "--execute", check=False)
    assert res.returncode != 0
    assert "inactive" in res.stderr and "Stable" in res.stderr
    assert offsets(b, group)[0][0] == 7

    c.close()
    wait_state(b, group, "Empty")
    res = groups(b, "describe", "--group", group)
    assert "has no active members" in res.stderr
    assert offsets(b, group) == {
        0: (7, PER_PARTITION, PER_PARTITION - 7, None),
        1: (4, PER_PARTITION, PER_PARTITION - 4, None),
    }

    def reset(*flags):
        res = groups(b, "reset-offsets", "--group", group, *flags)
        return {r["partition"]: r["new_offset"] for r in json_lines(res.stdout)}, res

    # --dry-run and no flag at all: the new offsets are printed, nothing is committed.
    plan, _ = reset("--topic", topic, "--to-earliest", "--dry-run", "--json")
    assert plan == {0: 0, 1: 0}
    plan, res = reset("--topic", topic, "--to-earliest", "--json")
    assert plan == {0: 0, 1: 0} and "--execute" in res.stderr
    res = groups(b, "reset-offsets", "--group", group, "--topic", topic, "--to-earliest")
    lines = res.stdout.splitlines()
    assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert [ln.split() for ln in lines[2:]] == [[group, topic, "0", "0"], [group, topic, "1", "0"]]
    assert {p: o[0] for p, o in offsets(b, group).items()} == {0: 7, 1: 4}

    # --execute, each scenario (clamped to [earliest, latest] as Kafka).
    assert reset(f"--topic={topic}:0", "--to-offset", "2", "--execute", "--json")[0] == {0: 2}
    assert {p: o[0] for p, o in offsets(b, group).items()} == {0: 2, 1: 4}
    assert reset("--all-topics", "--shift-by", "-3", "--execute", "--json")[0] == {0: 0, 1: 1}
    assert reset("--topic", topic, "--to-offset", "99", "--execute", "--json")[0] == {
        0: PER_PARTITION, 1: PER_PARTITION}
    assert reset("--topic", topic, "--by-duration", "P1D", "--execute", "--json")[0] == {0: 0, 1: 0}
    assert reset("--topic", topic, "--to-datetime", "2999-01-01T00:00:00.000Z", "--execute",
                 "--json")[0] == {0: PER_PARTITION, 1: PER_PARTITION}
    assert reset("--topic", topic, "--to-latest", "--dry-run", "--json")[0] == {
        0: PER_PARTITION, 1: PER_PARTITION}
    assert reset("--topic", topic, "--to-offset", "6", "--execute", "--json")[0] == {0: 6, 1: 6}
    assert {p: o[0] for p, o in offsets(b, group).items()} == {0: 6, 1: 6}

    # A fresh consumer of the group starts where the reset put it.
    c2 = group_consumer(b, group)
    c2.subscribe([topic])
    got = read_all(c2, 2 * (PER_PARTITION - 6))
    c2.close()
    firsts = {}
    for p, o, _ in got:
        firsts.setdefault(p, o)
    assert firsts == {0: 6, 1: 6}, got

    # Errors: an unknown group, a bad partition.
    res = groups(b, "describe", "--group", unique("nope"), check=False)
    assert res.returncode != 0 and "does not exist" in res.stderr
    res = groups(b, "reset-offsets", "--group", group, "--topic", f"{topic}:7", "--to-earliest",
                 check=False)
    assert res.returncode != 0 and "UNKNOWN_TOPIC_OR_PARTITION" in res.stderr


def test_describe_a_kip848_group(broker):
    b = broker.bootstrap
    topic = setup_topic(broker)
    group = unique("agrp848")
    c = group_consumer(b, group, **{"group.protocol": "consumer"})
    c.subscribe([topic])
    read_all(c, 2 * PER_PARTITION)
    c.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 9)],
             asynchronous=False)
    try:
        s = state(b, group)
        assert s["type"] == "consumer" and s["members"] == 1
        listed = {g["group"]: g for g in json_lines(groups(b, "list", "--json").stdout)}
        assert listed[group]["type"] == "Consumer"
        got = offsets(b, group)
        assert {p: v[:3] for p, v in got.items()} == {
            0: (3, PER_PARTITION, PER_PARTITION - 3), 1: (9, PER_PARTITION, 1)}
        assert {v[3] for v in got.values()} == {c.memberid()}
        res = groups(b, "reset-offsets", "--group", group, "--all-topics", "--to-earliest",
                     "--execute", check=False)
        assert res.returncode != 0 and "inactive" in res.stderr
    finally:
        c.close()
    # Once the member left, an admin commit moves the KIP-848 group's offsets too, and a new
    # member starts there.
    wait_state(b, group, "Empty")
    res = groups(b, "reset-offsets", "--group", group, "--all-topics", "--to-offset", "8",
                 "--execute", "--json")
    assert {r["partition"]: r["new_offset"] for r in json_lines(res.stdout)} == {0: 8, 1: 8}
    assert {p: v[0] for p, v in offsets(b, group).items()} == {0: 8, 1: 8}
    c2 = group_consumer(b, group, **{"group.protocol": "consumer"})
    c2.subscribe([topic])
    got = read_all(c2, 2 * (PER_PARTITION - 8))
    c2.close()
    assert sorted((p, o) for p, o, _ in got) == [(0, 8), (0, 9), (1, 8), (1, 9)]

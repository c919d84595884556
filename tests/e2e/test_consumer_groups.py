"""Consumer groups end to end, with unchanged clients: confluent-kafka (librdkafka), kafka-python,
kafkajs and `kcat -G`, each member its own process (group_harness.py).

Every test compares record sets exactly: each produced (partition, offset) read once by the
group as a whole, none missing, none extra. Assignments are read from the clients' own rebalance
callbacks. Session timeouts are short (6 s) so that a killed member is noticed quickly.

Run alone (after scripts/test.sh has installed target/venv and kafkajs in target/e2e-js):

    BROKER_BIN=$PWD/target/release/broker target/venv/bin/python -m pytest -q \
        tests/e2e/test_consumer_groups.py

The group.protocol=consumer (KIP-848) cases skip, printing why, only while the broker does not
advertise ConsumerGroupHeartbeat.
"""

import time

import pytest
from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaException,
    TopicPartition,
)

import kproto
from e2e_helpers import admin, ck_consumer, create_topic, unique
from group_harness import (
    SESSION_MS,
    Members,
    assert_exactly_once,
    produce,
    records_of,
    wait_consumed,
    wait_for,
    wait_split,
)

PARTS = list(range(6))
N = 600  # records per produced batch: 100 per partition
FORM_TIMEOUT = 45  # group formation: initial rebalance delay (3 s) + joins + syncs
CONSUME_TIMEOUT = 30

CONSUMER_GROUP_HEARTBEAT = 68
OFFSET_DELETE = 47
GROUP_SUBSCRIBED_TO_TOPIC = 86


@pytest.fixture
def group(broker, tmp_path):
    """Members of a fresh group on a fresh 6-partition topic; all stopped at the end."""
    topic = create_topic(broker.bootstrap, unique("cg"), len(PARTS))
    g = Members(broker.bootstrap, topic, unique("grp"), tmp_path)
    yield g
    g.stop_all()


def start(group, client, n, **kw):
    return [getattr(group, client)(**kw) for _ in range(n)]


def close_all(members):
    """Closes members together (each leaves the group), as an application shutting down."""
    for m in members:
        m.request_close()
    for m in members:
        rc = m.wait_exit()
        assert rc == 0, f"{m.name} exited with {rc}: {m.describe()}"


def committed_kp(bootstrap, group_id, topic, partitions=PARTS):
    """Like `committed`, read with kafka-python. confluent-kafka's binding reads commit metadata
    as a NUL-terminated string (and writes it with the NUL), so metadata written by other
    clients is compared through this one."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    k = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group_id, enable_auto_commit=False)
    try:
        out = {}
        for p in partitions:
            om = k.committed(KTP(topic, p), metadata=True)
            out[p] = None if om is None else (om.offset, om.metadata)
        return out
    finally:
        k.close(autocommit=False)


def committed(bootstrap, group_id, topic, partitions=PARTS):
    """{partition: (offset, metadata)} committed for the group (OffsetFetch through librdkafka)."""
    c = ck_consumer(bootstrap, **{"group.id": group_id})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in partitions], timeout=30)
    finally:
        c.close()
    for tp in tps:
        assert tp.error is None, tp.error
    # Kafka answers "" for a commit without metadata; librdkafka may hand that over as None.
    return {tp.partition: (tp.offset, tp.metadata or "") for tp in tps}


def end_offsets(produced):
    ends = {}
    for p, o in produced:
        ends[p] = max(ends.get(p, 0), o + 1)
    return ends


def require_kip848(bootstrap):
    """Skips (with the reason printed) only when the broker does not serve
    ConsumerGroupHeartbeat: then librdkafka's group.protocol=consumer cannot work at all."""
    sock = kproto.connect(bootstrap)
    try:
        r = kproto.roundtrip(sock, kproto.api_versions(1), 1)
        err, keys, _ = kproto.parse_api_versions_v0(r)
    finally:
        sock.close()
    assert err == 0
    if CONSUMER_GROUP_HEARTBEAT not in keys:
        reason = ("broker answers UNSUPPORTED for ConsumerGroupHeartbeat (API key 68 is not in "
                  "its ApiVersions): KIP-848 group.protocol=consumer is not served yet")
        print(f"SKIP: {reason}")
        pytest.skip(reason)


# ---------------------------------------------------------------------------------------------
# Three members split a topic.
@pytest.mark.parametrize("client", ["ck", "kp", "kafkajs", "ck-consumer-protocol"])
def test_three_members_split_the_topic(broker, group, client):
    kw = {}
    if client == "ck-consumer-protocol":
        require_kip848(broker.bootstrap)
        client, kw = "ck", {"classic": False}
    members = start(group, client, 3, **kw)
    shares = wait_split(group, members, PARTS, FORM_TIMEOUT)
    produced = produce(broker.bootstrap, group.topic, N, "a", PARTS)
    wait_consumed(group, members, produced, CONSUME_TIMEOUT)
    assert_exactly_once(members, produced)
    for m in members:
        got = records_of(m, produced)
        assert got, f"{m.name} read nothing: {m.describe()}"
        assert {p for p, _ in got} <= shares[m.name], (
            f"{m.name} read partitions {sorted({p for p, _ in got})} outside its share "
            f"{sorted(shares[m.name])}")
    close_all(members)


def test_kcat_group_split(broker, group):
    members = start(group, "kcat", 3)
    shares = wait_split(group, members, PARTS, FORM_TIMEOUT)
    produced = produce(broker.bootstrap, group.topic, N, "a", PARTS)
    wait_consumed(group, members, produced, CONSUME_TIMEOUT)
    assert_exactly_once(members, produced)
    for m in members:
        got = records_of(m, produced)
        assert got and {p for p, _ in got} <= shares[m.name], m.describe()
    close_all(members)


# ---------------------------------------------------------------------------------------------
# Members leaving and dying.
@pytest.mark.parametrize("client", ["ck", "kp", "kafkajs"])
def test_member_leaves_partitions_move_within_session_timeout(broker, group, client):
    members = start(group, client, 3)
    shares = wait_split(group, members, PARTS, FORM_TIMEOUT)
    first = produce(broker.bootstrap, group.topic, N, "a", PARTS)
    wait_consumed(group, members, first, CONSUME_TIMEOUT)

    leaver, rest = members[0], members[1:]
    assert leaver.close() == 0, leaver.describe()
    # LeaveGroup starts the rebalance at once; without it the broker would wait for the session
    # timeout, so the move must complete within it.
    after = wait_split(group, rest, PARTS, SESSION_MS / 1000, settle=0)
    for p in shares[leaver.name]:
        assert any(p in s for s in after.values()), (p, after)

    second = produce(broker.bootstrap, group.topic, N, "b", PARTS)
    wait_consumed(group, members, {**first, **second}, CONSUME_TIMEOUT)
    assert_exactly_once(members, {**first, **second})
    assert not records_of(leaver, second), "the closed member read records"
    close_all(rest)


@pytest.mark.parametrize("client", ["ck", "kp"])
def test_member_killed_partitions_move_after_session_timeout(broker, group, client):
    members = start(group, client, 3)
    shares = wait_split(group, members, PARTS, FORM_TIMEOUT)
    first = produce(broker.bootstrap, group.topic, N, "a", PARTS)
    wait_consumed(group, members, first, CONSUME_TIMEOUT)
    victim, rest = members[0], members[1:]
    # Kill only once the victim has committed all it read, so nothing it read comes back.
    ends = end_offsets(first)
    wait_for(lambda: all(victim.committed.get(p) == ends[p] for p in shares[victim.name]),
             CONSUME_TIMEOUT, f"{victim.name} to commit its share", victim.describe)

    victim.kill()
    killed_at = time.monotonic()
    second = produce(broker.bootstrap, group.topic, N, "b", PARTS)
    # No LeaveGroup: the broker notices after session.timeout.ms, then the survivors rejoin.
    after = wait_split(group, rest, PARTS, SESSION_MS / 1000 + 20, settle=0)
    moved_after = time.monotonic() - killed_at
    for p in shares[victim.name]:
        assert any(p in s for s in after.values()), (p, after)
    wait_consumed(group, members, {**first, **second}, CONSUME_TIMEOUT)
    assert_exactly_once(members, {**first, **second})
    print(f"partitions of the killed member moved after {moved_after:.1f}s")
    close_all(rest)


# ---------------------------------------------------------------------------------------------
# Committed offsets survive the members.
@pytest.mark.parametrize("client", ["ck", "kp", "kafkajs", "ck-consumer-protocol"])
def test_commit_stop_restart_resumes_from_committed(broker, group, client):
    kw = {}
    if client == "ck-consumer-protocol":
        require_kip848(broker.bootstrap)
        client, kw = "ck", {"classic": False}
    gen1 = start(group, client, 3, **kw)
    wait_split(group, gen1, PARTS, FORM_TIMEOUT)
    first = produce(broker.bootstrap, group.topic, N, "a", PARTS)
    wait_consumed(group, gen1, first, CONSUME_TIMEOUT)
    close_all(gen1)
    assert committed(broker.bootstrap, group.group, group.topic) == {
        p: (o, "") for p, o in end_offsets(first).items()}

    second = produce(broker.bootstrap, group.topic, N, "b", PARTS)
    gen2 = start(group, client, 3, **kw)
    wait_consumed(group, gen2, second, FORM_TIMEOUT + CONSUME_TIMEOUT)
    # Nothing of the first batch again (resumed from the commits), nothing of the second skipped.
    assert_exactly_once(gen2, second)
    assert_exactly_once(gen1, first)
    close_all(gen2)
    ends = end_offsets({**first, **second})
    assert committed(broker.bootstrap, group.group, group.topic) == {
        p: (o, "") for p, o in ends.items()}


# ---------------------------------------------------------------------------------------------
# Static membership (KIP-345).
@pytest.mark.parametrize("client", ["ck", "kp"])
def test_static_member_restart_keeps_partitions_without_rebalance(broker, group, client):
    session_ms = 10000  # room for a process restart on a loaded machine
    if client == "ck":
        def member(i):
            return group.ck(conf={"group.instance.id": f"{group.group}-{i}",
                                  "session.timeout.ms": session_ms})
    else:
        def member(i):
            return group.kp(conf={"group_instance_id": f"{group.group}-{i}",
                                  "session_timeout_ms": session_ms})
    members = [member(i) for i in range(3)]
    shares = wait_split(group, members, PARTS, FORM_TIMEOUT)
    first = produce(broker.bootstrap, group.topic, N, "a", PARTS)
    wait_consumed(group, members, first, CONSUME_TIMEOUT)

    a, b, c = members
    marks = {m.name: m.mark() for m in (a, c)}
    # A static member sends no LeaveGroup on close; its replacement with the same
    # group.instance.id takes its place (and its assignment) without a rebalance.
    assert b.close() == 0, b.describe()
    b2 = member(1)
    wait_for(lambda: b2.now, session_ms / 1000, "the restarted static member's assignment",
             group.describe)
    assert b2.now == shares[b.name], (
        f"restarted static member got {sorted(b2.now)}, had {sorted(shares[b.name])}")

    second = produce(broker.bootstrap, group.topic, N, "b", PARTS)
    everyone = [a, b, c, b2]
    wait_consumed(group, everyone, {**first, **second}, CONSUME_TIMEOUT)
    assert_exactly_once(everyone, {**first, **second})
    for m in (a, c):
        evs = m.since(marks[m.name])
        assert not evs, f"{m.name} went through a rebalance when a static member restarted: {evs}"
        assert m.now == shares[m.name]
    close_all([a, c, b2])


# ---------------------------------------------------------------------------------------------
# Cooperative rebalancing (KIP-429).
def test_cooperative_sticky_moves_only_what_must_move(broker, group):
    conf = {"partition.assignment.strategy": "cooperative-sticky"}
    old = [group.ck(conf=conf) for _ in range(2)]
    before = wait_split(group, old, PARTS, FORM_TIMEOUT)
    first = produce(broker.bootstrap, group.topic, N, "a", PARTS)
    wait_consumed(group, old, first, CONSUME_TIMEOUT)
    marks = {m.name: m.mark() for m in old}

    new = group.ck(conf=conf)
    members = old + [new]
    after = wait_split(group, members, PARTS, FORM_TIMEOUT)
    moved = set()
    for m in old:
        assert after[m.name] <= before[m.name], (
            f"{m.name} was given partitions it did not have: {sorted(before[m.name])} -> "
            f"{sorted(after[m.name])}")
        moved |= before[m.name] - after[m.name]
        evs = m.since(marks[m.name])
        assert all(e["protocol"] == "COOPERATIVE" for e in evs if e["ev"] == "assign"), evs
        revoked = {p for e in evs if e["ev"] in ("revoke", "lost") for p in e["parts"]}
        assert revoked == before[m.name] - after[m.name], (
            f"{m.name} had {sorted(revoked)} revoked, lost {sorted(before[m.name] - after[m.name])}"
            f": {evs}")
        assert not [e for e in evs if e["ev"] == "lost"], evs
    assert moved == after[new.name], (moved, after)
    assert len(moved) == 2, f"6 partitions over 3 members: 2 must move, {sorted(moved)} did"

    second = produce(broker.bootstrap, group.topic, N, "b", PARTS)
    wait_consumed(group, members, {**first, **second}, CONSUME_TIMEOUT)
    assert_exactly_once(members, {**first, **second})
    close_all(members)


# ---------------------------------------------------------------------------------------------
# Durability of commits.
def test_commits_survive_broker_kill9(broker, group):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    bs, topic = broker.bootstrap, group.topic
    members = start(group, "ck", 2)
    wait_split(group, members, PARTS, FORM_TIMEOUT)
    first = produce(bs, topic, N, "a", PARTS)
    wait_consumed(group, members, first, CONSUME_TIMEOUT)
    close_all(members)

    # Commits outside any generation (admin tools, manual assignment) with metadata, through
    # librdkafka and kafka-python.
    g_ck, g_kp = unique("manual-ck"), unique("manual-kp")
    c = ck_consumer(bs, **{"group.id": g_ck})
    c.commit(offsets=[TopicPartition(topic, p, 10 + p, f"ck-meta-{p}") for p in PARTS],
             asynchronous=False)
    c.close()
    k = KafkaConsumer(bootstrap_servers=bs, group_id=g_kp, enable_auto_commit=False)
    k.commit({KTP(topic, p): OffsetAndMetadata(20 + p, f"kp-meta-{p}", -1) for p in PARTS})
    k.close(autocommit=False)

    expect = {
        (group.group, committed): {p: (o, "") for p, o in end_offsets(first).items()},
        (g_ck, committed): {p: (10 + p, f"ck-meta-{p}") for p in PARTS},
        (g_kp, committed_kp): {p: (20 + p, f"kp-meta-{p}") for p in PARTS},
    }
    for (g, read), want in expect.items():
        assert read(bs, g, topic) == want, g

    broker.restart(kill=True)

    for (g, read), want in expect.items():
        assert read(bs, g, topic) == want, f"{g} after kill -9"
    a = admin(bs)
    res = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g_ck)])[g_ck].result(30)
    assert {tp.partition: tp.offset for tp in res.topic_partitions} == {p: 10 + p for p in PARTS}

    # The group resumes where it was: only records produced after the restart are read.
    second = produce(bs, topic, 60, "b", PARTS)
    again = start(group, "ck", 1)
    wait_consumed(group, again, second, FORM_TIMEOUT + CONSUME_TIMEOUT)
    assert_exactly_once(again, second)
    close_all(again)


# ---------------------------------------------------------------------------------------------
# Admin APIs: ListGroups, DescribeGroups, OffsetFetch, OffsetCommit (alter), OffsetDelete,
# DeleteGroups.
def offset_delete_raw(bootstrap, group_id, topic, partitions):
    """OffsetDelete v0 (no client library exposes it in all versions we test). Returns
    (top-level error, {partition: error})."""
    body = (kproto.string(group_id)
            + kproto.array([kproto.string(topic)
                            + kproto.array([kproto.i32(p) for p in partitions])]))
    req = kproto.frame(kproto.request_header_v1(OFFSET_DELETE, 0, 5) + body)
    sock = kproto.connect(bootstrap)
    try:
        r = kproto.roundtrip(sock, req, 5)
    finally:
        sock.close()
    err = r.i16()
    r.i32()  # throttle
    out = {}
    for _ in range(r.i32()):
        assert r.string() == topic
        for _ in range(r.i32()):
            p = r.i32()
            out[p] = r.i16()
    return err, out


def wait_group_state(a, group_id, state, timeout=SESSION_MS / 1000 + 10):
    def ok():
        d = a.describe_consumer_groups([group_id])[group_id].result(10)
        return d.state == state

    wait_for(ok, timeout, f"group {group_id} in state {state}")


def test_admin_confluent(broker, group):
    bs, topic = broker.bootstrap, group.topic
    a = admin(bs)
    members = start(group, "ck", 2)
    shares = wait_split(group, members, PARTS, FORM_TIMEOUT)
    produced = produce(bs, topic, 60, "a", PARTS)
    wait_consumed(group, members, produced, CONSUME_TIMEOUT)

    empty = unique("empty")
    c = ck_consumer(bs, **{"group.id": empty})
    c.commit(offsets=[TopicPartition(topic, p, 3) for p in PARTS], asynchronous=False)
    c.close()

    listed = a.list_consumer_groups(request_timeout=10).result(30)
    assert not listed.errors, listed.errors
    states = {g.group_id: g.state for g in listed.valid}
    assert states.get(group.group) == ConsumerGroupState.STABLE, states
    assert states.get(empty) == ConsumerGroupState.EMPTY, states
    simple = {g.group_id: g.is_simple_consumer_group for g in listed.valid}
    # Kafka lists a group that only ever had offsets committed (no JoinGroup) with protocol
    # type "", which librdkafka reports as a simple consumer group.
    assert simple[group.group] is False and simple[empty] is True, simple
    only_empty = a.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(30)
    ids = {g.group_id for g in only_empty.valid}
    assert empty in ids and group.group not in ids, ids

    desc = a.describe_consumer_groups([group.group, empty])
    d = desc[group.group].result(30)
    assert d.state == ConsumerGroupState.STABLE
    assert not d.is_simple_consumer_group
    assert d.partition_assignor == "range", d.partition_assignor  # librdkafka's first choice
    assert len(d.members) == 2, d.members
    assigned = sorted(tp.partition for mem in d.members for tp in mem.assignment.topic_partitions)
    assert assigned == PARTS, assigned
    assert sorted(sorted(tp.partition for tp in mem.assignment.topic_partitions)
                  for mem in d.members) == sorted(sorted(s) for s in shares.values())
    for mem in d.members:
        assert mem.member_id and mem.client_id and mem.host, vars(mem)
    de = desc[empty].result(30)
    assert de.state == ConsumerGroupState.EMPTY and de.members == []

    def offsets(g):
        r = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)])[g].result(30)
        return {tp.partition: tp.offset for tp in r.topic_partitions if tp.offset >= 0}

    assert offsets(group.group) == end_offsets(produced)
    assert offsets(empty) == {p: 3 for p in PARTS}

    # alter: allowed on an empty group; a group with members refuses it (UNKNOWN_MEMBER_ID).
    def alter(g, tps):
        """Errors of AlterConsumerGroupOffsets (OffsetCommit outside any generation)."""
        try:
            r = a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(g, tps)])[g].result(30)
        except KafkaException as e:
            return [str(e)]
        return [str(tp.error) for tp in r.topic_partitions if tp.error]

    assert alter(empty, [TopicPartition(topic, p, 7 + p) for p in PARTS]) == []
    assert offsets(empty) == {p: 7 + p for p in PARTS}
    errs = alter(group.group, [TopicPartition(topic, 0, 0)])
    assert errs and "UNKNOWN_MEMBER_ID" in errs[0], errs
    assert offsets(group.group) == end_offsets(produced)

    # OffsetDelete: the empty group loses the named partitions only; the active group is
    # subscribed to the topic and refuses.
    err, per_part = offset_delete_raw(bs, empty, topic, [0, 1])
    assert (err, per_part) == (0, {0: 0, 1: 0})
    assert offsets(empty) == {p: 7 + p for p in PARTS[2:]}
    err, per_part = offset_delete_raw(bs, group.group, topic, [0])
    assert (err, per_part) == (0, {0: GROUP_SUBSCRIBED_TO_TOPIC})

    # DeleteGroups: refused while members are in it, done once it is empty.
    with pytest.raises(KafkaException) as e:
        a.delete_consumer_groups([group.group])[group.group].result(30)
    assert "NON_EMPTY_GROUP" in str(e.value) or "not empty" in str(e.value).lower(), e.value
    a.delete_consumer_groups([empty])[empty].result(30)
    close_all(members)
    wait_group_state(a, group.group, ConsumerGroupState.EMPTY)
    a.delete_consumer_groups([group.group])[group.group].result(30)

    ids = {g.group_id for g in a.list_consumer_groups().result(30).valid}
    assert group.group not in ids and empty not in ids, ids
    assert offsets(group.group) == {} and offsets(empty) == {}


def kp_admin_view(a):
    """kafka-python's admin API, 2.x (…_consumer_groups) or 3.x (…_groups): returns
    (list_groups() -> {group: state or None}, describe(group) -> dict,
    offsets(group) -> {partition: offset}, delete([groups]) -> {group: 'OK' or error name})."""
    if hasattr(a, "describe_groups"):  # 3.x
        def list_groups():
            return {g["group_id"]: g.get("group_state") for g in a.list_groups()}

        def describe(g):
            d = a.describe_groups([g])[g]
            return {"state": d["group_state"], "protocol_type": d["protocol_type"],
                    "protocol": d["protocol_data"], "members": len(d["members"])}

        def offsets(g):
            return {tp.partition: om.offset for tp, om in a.list_group_offsets(g)[g].items()
                    if om.offset >= 0}

        def delete(gs):
            return {g: r for g, r in a.delete_groups(gs).items()}
    else:  # 2.x
        def list_groups():
            return {g[0]: None for g in a.list_consumer_groups()}

        def describe(g):
            try:
                d = a.describe_consumer_groups([g])[0]
            except ValueError as e:
                # 2.x asks for authorized operations (DescribeGroups v3+) and decodes the bit
                # field: bits outside Kafka's ACL operations (e.g. bit 31 of i32::MIN, the
                # "not requested" value) fail here.
                raise AssertionError(f"DescribeGroups authorized_operations: {e}") from e
            return {"state": d.state, "protocol_type": d.protocol_type, "protocol": d.protocol,
                    "members": len(d.members)}

        def offsets(g):
            return {tp.partition: om.offset
                    for tp, om in a.list_consumer_group_offsets(g).items() if om.offset >= 0}

        def delete(gs):
            def name(e):  # 2.x answers error classes (NoError for success)
                n = e.__name__ if isinstance(e, type) else type(e).__name__
                return "OK" if n == "NoError" else n
            return {g: name(e) for g, e in a.delete_consumer_groups(gs)}
    return list_groups, describe, offsets, delete


def test_admin_kafka_python(broker, group):
    from kafka import KafkaAdminClient

    bs, topic = broker.bootstrap, group.topic
    members = start(group, "kp", 2)
    wait_split(group, members, PARTS, FORM_TIMEOUT)
    produced = produce(bs, topic, 60, "a", PARTS)
    wait_consumed(group, members, produced, CONSUME_TIMEOUT)

    empty = unique("empty")
    c = ck_consumer(bs, **{"group.id": empty})
    c.commit(offsets=[TopicPartition(topic, p, 4) for p in PARTS], asynchronous=False)
    c.close()

    a = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=30000)
    try:
        list_groups, describe, offsets, delete = kp_admin_view(a)
        groups = list_groups()
        assert group.group in groups and empty in groups, groups
        d = describe(group.group)
        assert (d["state"], d["protocol_type"], d["members"]) == ("Stable", "consumer", 2), d
        assert d["protocol"] in ("range", "roundrobin"), d  # kafka-python's default assignors
        de = describe(empty)
        assert (de["state"], de["members"]) == ("Empty", 0), de
        assert offsets(group.group) == end_offsets(produced)
        assert offsets(empty) == {p: 4 for p in PARTS}

        res = delete([group.group, empty])
        assert res[empty] == "OK", res
        assert res[group.group] in ("NonEmptyGroupError", "NON_EMPTY_GROUP"), res
        close_all(members)
        wait_for(lambda: describe(group.group)["state"] == "Empty", SESSION_MS / 1000 + 10,
                 "the group to be empty after its members closed")
        assert delete([group.group]) == {group.group: "OK"}
        groups = list_groups()
        assert group.group not in groups and empty not in groups, groups
        assert offsets(group.group) == {} and offsets(empty) == {}
    finally:
        a.close()

"""Leader elections an operator or the controller asks for (issue 21), through cluster_harness,
with independently written admin clients: confluent-kafka's AdminClient.elect_leaders
(librdkafka) and kafka-python's KafkaAdminClient.perform_leader_election, as
kafka-leader-election.sh sends them (ElectLeaders, API 43, KIP-460).

- test_preferred_election_by_each_client: after kill -9 and restart of preferred leaders, their
  partitions stay with their new leaders (auto.leader.rebalance.enable=false) until
  ElectLeaders PREFERRED moves them back: kafka-python naming partitions (one moves, one its
  preferred replica leads gets ELECTION_NOT_NEEDED, an unknown one
  UNKNOWN_TOPIC_OR_PARTITION), then librdkafka asking for every partition (null), answered
  with only the partition that moved. No acknowledged record is lost on the way.
- test_auto_leader_rebalance: with leader.imbalance.check.interval.seconds=1 the controller
  moves leadership back by itself once the returned replica is in the ISR.
- test_unclean_election: a partition whose only in-sync replica is dead stays without a leader
  (unclean.leader.election.enable=false, Kafka's default) while an out-of-sync replica lives;
  ElectLeaders UNCLEAN makes that replica lead (the records only the dead one held are lost,
  as in Kafka), and so does setting unclean.leader.election.enable=true on the topic for its
  other partition; the old leader, restarted, truncates to the new leader's log and rejoins.
"""

import time

from confluent_kafka import Consumer, ElectionType, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic)
from kafka import KafkaAdminClient

from cluster_harness import BROKER, COMBINED, wait_until
from test_replication import make_cluster, read_replica_log, unique  # noqa: F401 (fixture)

ELECTION_NOT_NEEDED = 84
UNKNOWN_TOPIC_OR_PARTITION = 3


def error_code(e):
    """A partition's code in confluent-kafka's ElectLeaders result (None, a KafkaError, or a
    KafkaException wrapping one)."""
    if e is None:
        return 0
    return e.code() if hasattr(e, "code") else e.args[0].code()


def create(c, name, assignment, configs):
    """CreateTopics through confluent-kafka with an explicit replica assignment."""
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    fut = admin.create_topics([NewTopic(name, num_partitions=len(assignment),
                                       replica_assignment=assignment, config=configs)],
                              request_timeout=30)
    fut[name].result(timeout=40)
    c.wait_topic(name, len(assignment))
    return c.wait_isr_full(name, len(assignment), timeout=30)


def leaders(c, topic):
    """{partition: leader} as every live broker agrees, else None."""
    views = [c.partition_states(i, topic) for i in c.live_brokers()]
    if not views or any(v is None for v in views):
        return None
    first = {p: s["leader"] for p, s in views[0].items()}
    return first if all({p: s["leader"] for p, s in v.items()} == first for v in views) \
        else None


def produce(bootstrap, topic, partitions, n, tag):
    """n acks=all records to each partition through librdkafka; every one must be delivered."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 30000})
    failed = []
    for part in partitions:
        for k in range(n):
            p.produce(topic, f"{tag}-{part}-{k}".encode(), partition=part,
                      on_delivery=lambda err, _m: err and failed.append(err))
    left = p.flush(45)
    assert left == 0 and not failed, f"undelivered {left}, failed {failed[:3]}"


def consume_all(bootstrap, topic, partitions, expect):
    """The values of every record of the partitions, read from offset 0 (at most `expect`)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"),
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in partitions])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < expect and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.close()
    return got


def test_preferred_election_by_each_client(make_cluster):
    c = make_cluster({"auto.leader.rebalance.enable": "false"})
    name = unique("pref")
    # Each node is the preferred leader of one partition.
    create(c, name, [[1, 2, 3], [2, 3, 1], [3, 1, 2]], {"min.insync.replicas": "2"})
    produce(c.bootstrap(), name, range(3), 20, "before")

    # Node 1 (p0's preferred) then node 3 (p2's) go and return: p0 is led by 2, p2 by 1.
    for victim in (1, 3):
        c.kill9(victim)
        wait_until(lambda: (ls := leaders(c, name)) and all(
            l in c.live() for l in ls.values()), 30,
            f"new leaders after kill -9 of {victim}", lambda: c.describe_isr(name))
        c.restart(victim)
        c.wait_isr_full(name, 3, timeout=60)
    moved = leaders(c, name)
    assert moved == {0: 2, 1: 2, 2: 1}, f"leaders after the kills: {moved}"
    time.sleep(1.5)
    assert leaders(c, name) == moved, "leaders moved with auto.leader.rebalance.enable=false"
    produce(c.bootstrap(), name, range(3), 20, "moved")

    # kafka-python names the partitions: p0 moves back, p1 needs nothing, p7 is unknown.
    kadmin = KafkaAdminClient(bootstrap_servers=c.bootstrap(), request_timeout_ms=40000)
    try:
        response = kadmin.elect_leaders(0, {name: [0, 1, 7]}, raise_errors=False)
    finally:
        kadmin.close()
    codes = {p.partition_id: p.error_code for t in response.replica_election_results
             if t.topic == name for p in t.partition_result}
    assert codes == {0: 0, 1: ELECTION_NOT_NEEDED, 7: UNKNOWN_TOPIC_OR_PARTITION}, codes
    wait_until(lambda: (ls := leaders(c, name)) and ls[0] == 1, 10,
               "partition 0 led by its preferred replica 1", lambda: c.describe_isr(name))
    assert leaders(c, name)[2] == 1, "ElectLeaders moved a partition it did not name"

    # confluent-kafka (librdkafka), every partition (null): only p2 needed an election.
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    result = admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=40)
    assert {(tp.topic, tp.partition): error_code(e) for tp, e in result.items()} == \
        {(name, 2): 0}, result
    wait_until(lambda: leaders(c, name) == {0: 1, 1: 2, 2: 3}, 10,
               "every partition led by its preferred replica", lambda: c.describe_isr(name))

    # Nothing left to elect: each named partition says so.
    result = admin.elect_leaders(ElectionType.PREFERRED,
                                 [TopicPartition(name, p) for p in range(3)]).result(timeout=40)
    assert {tp.partition: error_code(e) for tp, e in result.items()} == \
        {p: ELECTION_NOT_NEEDED for p in range(3)}, result

    produce(c.bootstrap(), name, range(3), 20, "after")
    got = consume_all(c.bootstrap(), name, range(3), 180)
    want = {f"{tag}-{p}-{k}" for tag in ("before", "moved", "after")
            for p in range(3) for k in range(20)}
    assert len(got) == len(set(got)) == 180 and set(got) == want, \
        f"{len(got)} records read, {len(set(got))} distinct; missing {sorted(want - set(got))[:5]}"


def test_auto_leader_rebalance(make_cluster):
    c = make_cluster({"leader.imbalance.check.interval.seconds": 1})
    name = unique("auto")
    create(c, name, [[1, 2, 3], [2, 3, 1], [3, 1, 2]], {"min.insync.replicas": "2"})
    c.kill9(1)
    wait_until(lambda: (ls := leaders(c, name)) and ls[0] in c.live(), 30,
               "a new leader for partition 0", lambda: c.describe_isr(name))
    c.restart(1)
    t0 = time.monotonic()
    wait_until(lambda: leaders(c, name) == {0: 1, 1: 2, 2: 3}, 60,
               "leadership back with the preferred replicas", lambda: c.describe_isr(name))
    print(f"rebalanced {time.monotonic() - t0:.2f}s after the restart of node 1")


def log_end(c, node, topic, partition):
    return max((b.last + 1 for b in read_replica_log(c.data_dir(node), topic, partition)),
               default=0)


def test_unclean_election(make_cluster):
    # Nodes 1-3 are the quorum; node 4 (broker only) leads both partitions, node 3 follows:
    # both of them can be down at once while the quorum stands.
    c = make_cluster(roles=[COMBINED, COMBINED, COMBINED, BROKER])
    name = unique("unclean")
    leader, follower = 4, 3
    create(c, name, [[leader, follower], [leader, follower]], {"min.insync.replicas": "1"})
    produce(c.bootstrap(), name, [0, 1], 5, "both")

    c.kill9(follower)
    wait_until(lambda: all(s["isr"] == [leader] for s in
                           (c.partition_states(1, name) or {0: {"isr": []}}).values()),
               30, f"ISRs shrunk to [{leader}]", lambda: c.describe_isr(name))
    produce(c.bootstrap(), name, [0, 1], 3, "leader-only")  # acks=all with min ISR 1
    c.kill9(leader)
    c.restart(follower)
    wait_until(lambda: (ls := leaders(c, name)) == {0: -1, 1: -1}, 30,
               "both partitions without a leader", lambda: c.describe_isr(name))
    time.sleep(2)
    assert leaders(c, name) == {0: -1, 1: -1}, "an unclean leader was elected by default"

    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    result = admin.elect_leaders(ElectionType.UNCLEAN,
                                 [TopicPartition(name, 0)]).result(timeout=40)
    assert [(tp.partition, error_code(e)) for tp, e in result.items()] == [(0, 0)], result
    wait_until(lambda: leaders(c, name) == {0: follower, 1: -1}, 10,
               f"partition 0 led by {follower}", lambda: c.describe_isr(name))

    resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("unclean.leader.election.enable", "true",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=40)
    wait_until(lambda: leaders(c, name) == {0: follower, 1: follower}, 20,
               f"partition 1 led by {follower} once the topic allows it",
               lambda: c.describe_isr(name))

    # The new leader has what it had: 5 records per partition; the 3 only the old leader held
    # are gone. Producing goes on from offset 5.
    produce(c.bootstrap(), name, [0, 1], 2, "new")
    got = consume_all(c.bootstrap(), name, [0, 1], 14)
    want = {f"{tag}-{p}-{k}" for p in (0, 1) for tag, n in (("both", 5), ("new", 2))
            for k in range(n)}
    assert sorted(got) == sorted(want), got

    # The old leader returns: it truncates its 3 records away and copies the new ones.
    c.restart(leader)
    c.wait_isr_full(name, 2, timeout=60)
    for p in (0, 1):
        wait_until(lambda: log_end(c, leader, name, p) == 7, 20,
                   f"node {leader}'s log of partition {p} at the new leader's end 7",
                   lambda: log_end(c, leader, name, p))
        old = read_replica_log(c.data_dir(leader), name, p)
        new = read_replica_log(c.data_dir(follower), name, p)
        assert [b.raw for b in old] == [b.raw for b in new], f"partition {p} differs"

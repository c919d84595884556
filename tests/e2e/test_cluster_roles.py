"""KRaft's node roles (issue 20): broker-only nodes (quorum observers, process.roles=broker)
and controller-only nodes (process.roles=controller), through cluster_harness.

- 3 combined nodes + 1 broker-only node: the broker-only node registers and every broker
  lists it; it follows the committed metadata (a topic created through another node appears
  there); CreateTopics through it (forwarded) with rf 4 gives it a leadership; librdkafka
  produces (idempotent: InitProducerId, AllocateProducerIds forwarded) and consumes through it;
  killed and restarted, it registers again and sees a topic created while it was down.
- 3 controller-only nodes + 2 broker-only nodes: both brokers register and see each other;
  DescribeCluster names a broker as the controller (clients cannot reach a controller-only
  node); CreateTopics and AllocateProducerIds are executed by a controller-only active
  controller; librdkafka produces and consumes through one broker; a controller-only active
  controller killed: another takes over and CreateTopics works again.
"""

import gc

import pytest

from cluster_harness import BROKER, COMBINED, CONTROLLER, Cluster, wait_until
from e2e_helpers import assert_same, by_partition, ck_consume, ck_produce, ck_producer, unique

FAST = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500}
N = 100


@pytest.fixture
def make_cluster(request, tmp_path):
    made = []
    request.node._e2e_brokers = []

    def make(roles):
        c = Cluster(tmp_path / f"cluster{len(made)}", overrides=FAST, roles=roles)
        made.append(c)
        request.node._e2e_brokers.extend(c.nodes.values())
        c.start()
        return c

    yield make
    gc.collect()
    for c in made:
        c.close(kill=True)  # see cluster_harness.running_cluster


def messages(prefix, partitions, n=N):
    return [dict(partition=p, key=f"{prefix}-{p}-{k}".encode(), value=f"v{k}".encode() * 5)
            for p in range(partitions) for k in range(n)]


def produce_and_consume(c, through, name, partitions, idempotent):
    prod = ck_producer(c.bootstrap(through), **{"enable.idempotence": idempotent})
    log = ck_produce(prod, name, messages(name, partitions), flush_timeout=60)
    assert not log.errors, log.errors[:3]
    produced = by_partition(log.ok)
    assert sorted(produced) == list(range(partitions))
    consumed, errors = ck_consume(c.bootstrap(through), name, partitions, partitions * N,
                                  timeout=60)
    assert not errors, errors[:3]
    assert_same(produced, consumed)


def test_broker_only_node_beside_three_combined_nodes(make_cluster):
    c = make_cluster([COMBINED, COMBINED, COMBINED, BROKER])
    for i in c.ids:
        assert c.brokers_seen(i) == [1, 2, 3, 4], c.describe_state()
    # Created elsewhere, seen by the observer.
    name = unique("elsewhere")
    assert c.create_topic(1, name, 2, 3)[0] == 0
    c.wait_topic(name, 2)
    # Created through the observer (forwarded): rf 4, one leadership on each node.
    name = unique("rf4")
    assert c.create_topic(4, name, 4, 4)[0] == 0
    parts = c.wait_topic(name, 4)
    assert sorted(p["leader"] for p in parts.values()) == [1, 2, 3, 4], parts
    assert all(sorted(p["replicas"]) == [1, 2, 3, 4] for p in parts.values()), parts
    produce_and_consume(c, 4, name, 4, idempotent=True)

    # kill -9 of the observer; a topic created meanwhile; restarted, it registers again and
    # follows from an empty image to the current one.
    c.kill9(4)
    while_down = unique("while-down")
    assert c.create_topic(2, while_down, 1, 3)[0] == 0
    c.restart(4)
    c.wait_topic(while_down, 1, among=[4])
    assert c.brokers_seen(4) == [1, 2, 3, 4]


def test_three_controller_only_nodes_and_two_broker_only_nodes(make_cluster):
    c = make_cluster([CONTROLLER, CONTROLLER, CONTROLLER, BROKER, BROKER])
    for i in c.broker_ids:
        assert c.brokers_seen(i) == [4, 5], c.describe_state()
    assert c.controller_id() == 4, c.controllers()  # the lowest unfenced broker
    name = unique("rf2")
    assert c.create_topic(5, name, 2, 2)[0] == 0
    parts = c.wait_topic(name, 2)
    assert sorted(p["leader"] for p in parts.values()) == [4, 5], parts
    produce_and_consume(c, 4, name, 2, idempotent=True)

    # The active controller (a controller-only node) killed: another one takes over.
    leader = active_controller(c, 5)
    assert leader in c.voter_ids
    c.kill9(leader)
    name = unique("after")
    wait_until(lambda: c.try_(c.create_topic, 4, name, 2, 2, timeout_ms=5000) == (0, None)
               or topic_exists(c, 4, name),
               30, "CreateTopics after the active controller's kill", c.describe_state)
    c.wait_topic(name, 2)
    produce_and_consume(c, 5, name, 2, idempotent=False)


def topic_exists(c, i, name):
    # Every topic, not [name]: Metadata v1 naming a missing topic auto-creates it with one
    # partition (auto.create.topics.enable), which raced the CreateTopics retried above.
    md = c.try_(c.metadata, i)
    return bool(md and name in md["topics"] and md["topics"][name]["error"] == 0)


def active_controller(c, through):
    """The quorum's leader as DescribeQuorum through broker `through` names it (forwarded to
    the active controller, KIP-836); also checks the voters it lists."""
    from kafka.admin import KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=c.bootstrap(through), request_timeout_ms=10000)
    try:
        quorum = kp.describe_metadata_quorum()
    finally:
        kp.close()
    (partition,) = quorum["topics"][0]["partitions"]
    assert sorted(v["replica_id"] for v in partition["current_voters"]) == c.voter_ids
    return partition["leader_id"]

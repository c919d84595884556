"""Three combined broker+controller nodes as one cluster (issue 20), through cluster_harness.

What is checked, from every node where it matters:
- Metadata lists every unfenced registered broker (ids 1..3 at their PLAINTEXT addresses) and
  DescribeCluster names the same controller from every node (raw requests, librdkafka and
  kafka-python);
- CreateTopics through any node (forwarded to the active controller): replication factor 3 and
  3 partitions put all 3 nodes in every replica list and give each node one leadership;
  replication factor 4 is INVALID_REPLICATION_FACTOR;
- librdkafka, kafka-python and kafkajs produce and consume every partition through a bootstrap
  of one node (they follow the leaders); a Produce to a node that does not lead the partition
  is NOT_LEADER_OR_FOLLOWER;
- kill -9 of the active controller: the survivors name another controller within 10 s, take
  CreateTopics, and the killed node restarted on its dir rejoins and sees those topics;
- a SIGSTOPped node is fenced after broker.session.timeout.ms (gone from Metadata, leads
  nothing) and listed again soon after SIGCONT.

Records live only on their partition's leader (no replication yet): nothing here expects data
to survive a leader change.
"""

import gc
import json
import os
import subprocess
import time

import pytest
from conftest import BROKER_BIN

import kproto as kp
from cluster_harness import (INVALID_REPLICATION_FACTOR, NOT_LEADER_OR_FOLLOWER, Cluster,
                             request, wait_until)
from e2e_helpers import (admin, assert_same, by_partition, ck_consume, ck_produce,
                         ck_producer, kp_consume, kp_produce, kp_producer, unique)

# Short sessions so fencing is seen within seconds (Kafka's defaults: 9000 / 2000).
FAST = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500}
SESSION_S = FAST["broker.session.timeout.ms"] / 1000
FAILOVER_LIMIT_S = 10


@pytest.fixture
def make_cluster(request, tmp_path):
    """Factory: make_cluster(overrides=None) -> a started, formed 3-node Cluster. Every node's
    log tail is attached to a failure report (conftest's hook); all nodes are stopped after."""
    made = []
    request.node._e2e_brokers = []

    def make(overrides=None):
        c = Cluster(tmp_path / f"cluster{len(made)}", overrides=overrides)
        made.append(c)
        request.node._e2e_brokers.extend(c.nodes.values())
        c.start()
        return c

    yield make
    gc.collect()  # client objects a failed test left behind go before their brokers
    for c in made:
        c.close(kill=True)  # see cluster_harness.running_cluster


@pytest.fixture
def cluster(make_cluster):
    return make_cluster()


def rf3_topic(c, through=1, partitions=3, prefix="rf3"):
    name = unique(prefix)
    err = c.create_topic(through, name, partitions, 3)
    assert err[0] == 0, f"CreateTopics through node {through}: {err}"
    return name, c.wait_topic(name, partitions)


def leaders(parts):
    return {p: v["leader"] for p, v in parts.items()}


def wait_leads_nothing(c, node, name, among, timeout):
    """Until no node in `among` names `node` the leader of a partition of `name` (the leader
    may be another node or none: without replication a follower may not be eligible)."""
    def done():
        out = {}
        for i in among:
            md = c.try_(c.metadata, i, [name])
            if md is None or name not in md["topics"]:
                return None
            out[i] = leaders(md["topics"][name]["partitions"])
            if node in out[i].values():
                return None
        return out

    return wait_until(done, timeout, f"node {node} leads no partition of {name}",
                      lambda: c.describe_state(name), interval=0.1)


# ---------------------------------------------------------------------------------------------
def test_every_node_lists_every_broker_and_names_one_controller(cluster):
    c = cluster
    expected = {i: ("127.0.0.1", c.broker_ports[i]) for i in c.ids}
    controllers, cluster_ids = set(), set()
    for i in c.ids:
        md = c.metadata(i)
        assert md["brokers"] == expected, f"node {i}'s Metadata"
        d = c.describe_cluster(i)
        assert d["error"] == 0, d
        assert d["brokers"] == expected, f"node {i}'s DescribeCluster"
        controllers.add(d["controller"])
        cluster_ids.add(d["cluster_id"])
    assert len(controllers) == 1 and controllers <= set(c.ids), controllers
    assert len(cluster_ids) == 1 and None not in cluster_ids, cluster_ids
    (controller,) = controllers

    # The same through the clients, bootstrapped with one node each.
    from kafka.admin import KafkaAdminClient

    for i in c.ids:
        ck = admin(c.bootstrap(i))  # held: a dropped client cancels its futures
        desc = ck.describe_cluster(request_timeout=10).result()
        assert desc.controller.id == controller, f"librdkafka through node {i}"
        assert sorted((n.id, n.host, n.port) for n in desc.nodes) == \
            [(j, *expected[j]) for j in c.ids]
        kp = KafkaAdminClient(bootstrap_servers=c.bootstrap(i), request_timeout_ms=10000)
        try:
            info = kp.describe_cluster()
        finally:
            kp.close()
        assert info["controller_id"] == controller, f"kafka-python through node {i}: {info}"
        assert sorted(b["broker_id"] for b in info["brokers"]) == c.ids


def test_create_topics_through_any_node_places_three_replicas(cluster):
    c = cluster
    for through in c.ids:
        name, parts = rf3_topic(c, through)
        for p, v in parts.items():
            assert sorted(v["replicas"]) == c.ids, f"{name}/{p} through node {through}: {v}"
        assert sorted(leaders(parts).values()) == c.ids, \
            f"{name} through node {through}: leaders {leaders(parts)} not one per node"
        # Every node tells the same placement.
        for i in c.ids:
            other = c.metadata(i, [name])["topics"][name]["partitions"]
            assert {p: (v["leader"], v["replicas"]) for p, v in other.items()} == \
                {p: (v["leader"], v["replicas"]) for p, v in parts.items()}, f"node {i}"

    # librdkafka sends CreateTopics where it thinks the controller is: it works as well.
    from confluent_kafka.admin import NewTopic

    name = unique("ck-rf3")
    a = admin(c.bootstrap(2))
    fs = a.create_topics([NewTopic(name, num_partitions=3, replication_factor=3)],
                         operation_timeout=20, request_timeout=30)
    fs[name].result(timeout=40)
    parts = c.wait_topic(name, 3)
    assert all(sorted(v["replicas"]) == c.ids for v in parts.values()), parts


def test_replication_factor_four_is_refused_by_every_node(cluster):
    c = cluster
    for through in c.ids:
        name = unique("rf4")
        err, msg = c.create_topic(through, name, 3, 4)
        assert err == INVALID_REPLICATION_FACTOR, f"through node {through}: {err} {msg}"
        assert "only 3 broker(s) are registered" in (msg or ""), msg
        for i in c.ids:
            assert name not in c.metadata(i)["topics"], f"node {i} has the refused topic"


def test_produce_to_a_follower_is_not_leader(cluster):
    c = cluster
    name, parts = rf3_topic(c, 3)
    for p, v in parts.items():
        err, base = c.produce(v["leader"], name, p, b"to-the-leader")
        assert (err, base) == (0, 0), f"partition {p} on its leader {v['leader']}"
        for i in c.ids:
            if i != v["leader"]:
                err, _ = c.produce(i, name, p, b"to-a-follower")
                assert err == NOT_LEADER_OR_FOLLOWER, \
                    f"partition {p} (leader {v['leader']}) through node {i}: error {err}"
                # KIP-951 (Produce v10+): the refusal names the leader, its epoch and its
                # endpoint, so the client moves without a Metadata round trip.
                batch = kp.record_batch([(None, b"to-a-follower")])
                out, endpoints = request(
                    c.addr(i), lambda corr: kp.produce_v10(corr, name, p, batch),
                    kp.parse_produce_v10)
                err, _, leader = out[(name, p)]
                assert err == NOT_LEADER_OR_FOLLOWER
                assert leader == (v["leader"], 0), f"current leader through node {i}: {leader}"
                assert endpoints == {v["leader"]: ("127.0.0.1", c.broker_ports[v["leader"]])}
                # The same for a consumer's Fetch (v12+).
                fetched = request(c.addr(i), lambda corr: kp.fetch_v12(corr, name, p, 0),
                                  kp.parse_fetch_v12)
                assert fetched[(name, p)] == (NOT_LEADER_OR_FOLLOWER, (v["leader"], 0)), \
                    f"Fetch of {name}/{p} through node {i}: {fetched}"


# ---------------------------------------------------------------------------------------------
# Clients following the leaders. Topics: replication factor 3, 3 partitions, so each node
# leads one and a client bootstrapped with one node must reach the two others.
N = 200


def messages(prefix, partitions, n=N):
    return [dict(partition=p, key=f"{prefix}-{p}-{k}".encode(), value=f"v{k}".encode() * 5)
            for p in range(partitions) for k in range(n)]


def test_librdkafka_every_partition_through_one_node(cluster):
    c = cluster
    name, _ = rf3_topic(c, 1, prefix="ck")
    prod = ck_producer(c.bootstrap(1))
    log = ck_produce(prod, name, messages("ck", 3), flush_timeout=60)
    assert not log.errors, log.errors[:3]
    produced = by_partition(log.ok)
    assert sorted(produced) == [0, 1, 2]
    consumed, errors = ck_consume(c.bootstrap(2), name, 3, 3 * N, timeout=60)
    assert not errors, errors[:3]
    assert_same(produced, consumed)


def test_kafka_python_every_partition_through_one_node(cluster):
    c = cluster
    name, _ = rf3_topic(c, 2, prefix="kp")
    prod = kp_producer(c.bootstrap(3))
    try:
        recs = kp_produce(prod, name, messages("kp", 3), timeout=60)
    finally:
        prod.close()
    produced = by_partition(recs)
    assert sorted(produced) == [0, 1, 2]
    consumed, _ = kp_consume(c.bootstrap(1), name, 3, 3 * N, timeout=60)
    assert_same(produced, consumed)


KAFKAJS_PRODUCE = r"""
'use strict';
const { Kafka, logLevel } = require('kafkajs');
const [bootstrap, topic, partitions, count] = process.argv.slice(2);
async function main() {
  const kafka = new Kafka({ clientId: 'e2e-cluster', brokers: [bootstrap], logLevel: logLevel.WARN,
                            retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 2000 } });
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const sent = [];
  for (let p = 0; p < Number(partitions); p++) {
    const messages = [];
    for (let k = 0; k < Number(count); k++) {
      messages.push({ partition: p, key: `js-${p}-${k}`, value: `v${k}` });
    }
    for (const r of await producer.send({ topic, acks: -1, messages })) {
      sent.push({ partition: r.partition, error: r.errorCode, base: Number(r.baseOffset) });
    }
  }
  await producer.disconnect();
  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.fetchTopicOffsets(topic);
  const md = await admin.fetchTopicMetadata({ topics: [topic] });
  await admin.disconnect();
  console.log(JSON.stringify({
    sent,
    high: Object.fromEntries(offsets.map((o) => [o.partition, Number(o.high)])),
    leaders: Object.fromEntries(md.topics[0].partitions.map((p) => [p.partitionId, p.leader])),
  }));
}
main().catch((e) => { console.error(e); process.exit(1); });
"""


def test_kafkajs_every_partition_through_one_node(cluster, tmp_path):
    from group_harness import NODE_MODULES, check_kafkajs

    check_kafkajs()
    c = cluster
    name, parts = rf3_topic(c, 3, prefix="js")
    script = tmp_path / "cluster_produce.js"
    script.write_text(KAFKAJS_PRODUCE)
    env = dict(os.environ, NODE_PATH=str(NODE_MODULES), KAFKAJS_NO_PARTITIONER_WARNING="1")
    n = 100
    res = subprocess.run(["node", str(script), c.bootstrap(2), name, "3", str(n)],
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, f"kafkajs failed:\n{res.stdout}\n{res.stderr}"
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert sorted((s["partition"], s["error"], s["base"]) for s in out["sent"]) == \
        [(p, 0, 0) for p in range(3)], out["sent"]
    assert out["high"] == {str(p): n for p in range(3)}, out["high"]
    assert out["leaders"] == {str(p): v["leader"] for p, v in parts.items()}, out["leaders"]
    consumed, errors = ck_consume(c.bootstrap(1), name, 3, 3 * n, timeout=60)
    assert not errors, errors[:3]
    for p in range(3):
        got = [(r.offset, r.key, r.value) for r in consumed[p]]
        assert got == [(k, f"js-{p}-{k}".encode(), f"v{k}".encode()) for k in range(n)], \
            f"partition {p}: {got[:3]}..."


# ---------------------------------------------------------------------------------------------
# Failures.
def test_kill9_of_the_controller_fails_over_and_the_node_rejoins(make_cluster):
    c = make_cluster(FAST)
    old = c.wait_formed()
    survivors = [i for i in c.ids if i != old]
    before, _ = rf3_topic(c, 1, prefix="before")

    c.kill9(old)
    new, took = c.wait_new_controller(old, survivors, timeout=FAILOVER_LIMIT_S)
    print(f"controller {old} killed: survivors name controller {new} after {took:.3f}s")
    assert new in survivors and took < FAILOVER_LIMIT_S

    # The dead node is fenced once its session runs out: survivors stop listing it.
    wait_until(lambda: all(c.brokers_seen(i) == survivors for i in survivors),
               SESSION_S + 10, f"node {old} fenced", c.describe_state)

    # CreateTopics through each survivor (one forwards to the new controller, one is it).
    created = {}
    for through in survivors:
        for rf in (1, 2):
            name = unique(f"after-rf{rf}")
            err, msg = c.create_topic(through, name, 2, rf)
            assert err == 0, f"rf {rf} through node {through}: {err} {msg}"
            parts = c.wait_topic(name, 2, among=survivors)
            for p, v in parts.items():
                assert len(v["replicas"]) == rf and set(v["replicas"]) <= set(survivors), \
                    f"{name}/{p} placed on the dead node: {v}"
            created[name] = 2
    # The dead node leads nothing of the topic made before.
    wait_leads_nothing(c, old, before, survivors, timeout=10)

    # Same command, same dir: it rejoins and catches up on what it missed.
    c.restart(old)
    c.wait_registered(old, among=c.ids)
    for name, n in created.items():
        c.wait_topic(name, n, among=[old])
    assert c.wait_formed() in c.ids


def test_sigstop_fences_the_node_and_sigcont_brings_it_back(make_cluster):
    c = make_cluster(FAST)
    controller = c.wait_formed()
    victim = next(i for i in c.ids if i != controller)
    others = [i for i in c.ids if i != victim]
    name, parts = rf3_topic(c, controller, prefix="stop")
    assert victim in leaders(parts).values()

    c.sigstop(victim)
    t0 = time.monotonic()
    wait_until(lambda: all(c.brokers_seen(i) == others for i in others), SESSION_S + 15,
               f"node {victim} fenced", c.describe_state)
    fenced_after = time.monotonic() - t0
    print(f"node {victim} SIGSTOPped: fenced after {fenced_after:.2f}s "
          f"(broker.session.timeout.ms={FAST['broker.session.timeout.ms']})")
    moved = wait_leads_nothing(c, victim, name, others, timeout=10)
    print(f"leaders of {name} seen by {others}: {moved}")
    # Still fenced a session later (the frozen node cannot heartbeat).
    time.sleep(SESSION_S)
    assert all(c.brokers_seen(i) == others for i in others), c.describe_state()

    c.sigcont(victim)
    t0 = time.monotonic()
    c.wait_registered(victim, timeout=15, among=c.ids)
    print(f"node {victim} SIGCONTed: listed again after {time.monotonic() - t0:.2f}s")
    assert c.wait_formed(timeout=15) in c.ids
    after = c.metadata(victim, [name])["topics"][name]["partitions"]
    print(f"leaders of {name} after SIGCONT: {leaders(after)}")



def test_describe_quorum_through_any_node_names_the_leader_and_three_voters(cluster):
    """DescribeQuorum (kafka-metadata-quorum.sh) asked of any broker is answered by the active
    controller (KIP-836): its id and epoch, a high watermark every voter has reached, and the
    three voters with their CONTROLLER endpoints; our own command prints the same."""
    from kafka.admin import KafkaAdminClient

    c = cluster
    controller = c.controller_id()
    for i in c.ids:
        kp = KafkaAdminClient(bootstrap_servers=c.bootstrap(i), request_timeout_ms=10000)
        try:
            quorum = kp.describe_metadata_quorum()
        finally:
            kp.close()
        (partition,) = quorum["topics"][0]["partitions"]
        assert partition["leader_id"] == controller, f"through node {i}: {partition}"
        assert partition["leader_epoch"] >= 1
        voters = {v["replica_id"]: v for v in partition["current_voters"]}
        assert sorted(voters) == c.ids
        assert partition["high_watermark"] > 0
        assert voters[controller]["log_end_offset"] >= partition["high_watermark"]
        endpoints = {n["node_id"]: n["listeners"][0] for n in quorum["nodes"]}
        assert sorted(endpoints) == c.ids
        assert all(e["name"] == "CONTROLLER" for e in endpoints.values())
    out = subprocess.run(
        [BROKER_BIN, "metadata-quorum", "describe", "--bootstrap-server", c.bootstrap(1),
         "--status"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"LeaderId:               {controller}" in out.stdout, out.stdout
    assert "kafka-tpc-cluster" in out.stdout, out.stdout


def test_config_changes_through_a_node_that_is_not_the_controller(cluster):
    """IncrementalAlterConfigs and AlterConfigs sent to a broker whose controller is not the
    active one are forwarded (KIP-590): the change is committed once and every node's
    DescribeConfigs shows it."""
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)

    c = cluster
    controller = c.controller_id()
    other = next(i for i in c.ids if i != controller)
    name, _ = rf3_topic(c, other)
    ck = admin(c.bootstrap(other))
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "3600000",
                    incremental_operation=AlterConfigOpType.SET)])
    ck.incremental_alter_configs([resource])[resource].result(timeout=30)

    def retention(i):
        reader = admin(c.bootstrap(i))
        res = ConfigResource(ResourceType.TOPIC, name)
        return reader.describe_configs([res])[res].result(timeout=30)["retention.ms"].value

    for i in c.ids:
        wait_until(lambda: retention(i) == "3600000", 10, f"retention.ms on node {i}",
                   lambda: retention(i))
    # The legacy AlterConfigs (a whole new override set) takes the same way.
    legacy = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "7200000"})
    ck.alter_configs([legacy])[legacy].result(timeout=30)
    for i in c.ids:
        wait_until(lambda: retention(i) == "7200000", 10, f"retention.ms on node {i}",
                   lambda: retention(i))

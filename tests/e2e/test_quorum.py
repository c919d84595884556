"""The metadata quorum as Kafka's tools see it (DescribeQuorum, API 55).

A node started with no quorum configured (the README's one-node command) is its own quorum:
kafka-python's `describe_metadata_quorum` finds it the leader and only voter, its high
watermark the metadata log's end, which moves when a topic is created and survives a
restart. A DescribeQuorum for another partition is UNKNOWN_TOPIC_OR_PARTITION. Our own
`broker metadata-quorum describe` prints what kafka-metadata-quorum.sh prints.
"""

import json
import subprocess
import time

from kafka.admin import KafkaAdminClient
from kafka.protocol.admin.cluster import DescribeQuorumRequest

from conftest import BROKER_BIN, broker_env
from e2e_helpers import create_topic, unique, wait_for_topic


def quorum(bootstrap):
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        return client.describe_metadata_quorum()
    finally:
        client.close()


def metadata_partition(info):
    (topic,) = info["topics"]
    assert topic["topic_name"] == "__cluster_metadata"
    (partition,) = topic["partitions"]
    assert partition["partition_index"] == 0
    assert partition["error"] is None
    return partition


def test_single_node_is_its_own_quorum(broker):
    before = metadata_partition(quorum(broker.bootstrap))
    assert before["leader_id"] == 1
    assert before["leader_epoch"] >= 1
    (voter,) = before["current_voters"]
    assert voter["replica_id"] == 1
    assert voter["log_end_offset"] == before["high_watermark"]
    now_ms = time.time() * 1000
    assert abs(voter["last_caught_up_timestamp"] - now_ms) < 60_000
    assert before["observers"] == []

    info = quorum(broker.bootstrap)
    (node,) = info["nodes"]
    assert node["node_id"] == 1
    assert node["listeners"][0]["port"] == broker.port

    topic = unique("quorum")
    create_topic(broker.bootstrap, topic, partitions=3)
    wait_for_topic(broker.bootstrap, topic, 3)
    after = metadata_partition(quorum(broker.bootstrap))
    assert after["high_watermark"] > before["high_watermark"]

    broker.restart()
    again = metadata_partition(quorum(broker.bootstrap))
    assert again["high_watermark"] == after["high_watermark"]


def test_another_partition_is_unknown(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        _Topic = DescribeQuorumRequest.TopicData
        request = DescribeQuorumRequest(topics=[
            _Topic(topic_name="__cluster_metadata",
                   partitions=[_Topic.PartitionData(partition_index=1)])])
        response = client._manager.run(client._manager.send, request)
    finally:
        client.close()
    (topic,) = response.topics
    (partition,) = topic.partitions
    assert partition.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert partition.leader_id == -1


def metadata_quorum(bootstrap, *args):
    return subprocess.run([BROKER_BIN, "metadata-quorum", "describe", "--bootstrap-server",
                           bootstrap, *args], capture_output=True, text=True, timeout=60,
                          check=True, env=broker_env()).stdout


def test_admin_command_prints_what_kafkas_tool_prints(broker):
    status = metadata_quorum(broker.bootstrap, "--status")
    fields = dict(line.split(":", 1) for line in status.splitlines())
    assert [k for k in fields] == ["ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark",
                                   "MaxFollowerLag", "MaxFollowerLagTimeMs", "CurrentVoters",
                                   "CurrentObservers"], status
    assert fields["LeaderId"].strip() == "1"
    assert fields["MaxFollowerLag"].strip() == "0"
    (voter,) = json.loads(fields["CurrentVoters"])
    assert voter["id"] == 1
    assert voter["endpoints"] == [f"PLAINTEXT://127.0.0.1:{broker.port}"]
    hw = int(fields["HighWatermark"])
    assert hw == metadata_partition(quorum(broker.bootstrap))["high_watermark"]

    rows = [line.split() for line in
            metadata_quorum(broker.bootstrap, "--replication").splitlines()]
    assert rows[0] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
                       "LastCaughtUpTimestamp", "Status"]
    assert len(rows) == 2 and rows[1][0] == "1" and rows[1][-1] == "Leader"
    assert int(rows[1][2]) == hw and rows[1][3] == "0"

    (line,) = metadata_quorum(broker.bootstrap, "--status", "--json").splitlines()
    assert json.loads(line)["leader_id"] == 1


def test_replication_factor_beyond_the_registered_brokers(broker):
    """Placement answers as Kafka's controller: a node with no quorum is its cluster's only
    broker, so three replicas cannot be placed (INVALID_REPLICATION_FACTOR, Kafka's words)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    from e2e_helpers import admin

    a = admin(broker.bootstrap)  # kept alive: a collected client cancels its futures
    fs = a.create_topics(
        [NewTopic(unique("rf3"), num_partitions=2, replication_factor=3)], operation_timeout=10)
    (f,) = fs.values()
    try:
        f.result(timeout=30)
        raise AssertionError("three replicas were placed on one broker")
    except KafkaException as e:
        err = e.args[0]
        assert err.name() == "INVALID_REPLICATION_FACTOR", err
        assert ("The target replication factor of 3 cannot be reached because only 1 "
                "broker(s) are registered.") in err.str(), err.str()

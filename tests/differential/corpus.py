"""The fixed differential corpus (issue 24 item 5): raw requests sent unchanged to Apache Kafka
and to our broker by scripts/differential.py, whose answers are compared field by field.

Each case is a dict:
  name      unique, printed per line
  api       kafka-python protocol class prefix (ApiVersions, Metadata, Produce, ...)
  version   the request version sent (and the response version decoded)
  request   the request's fields (nested dicts/lists; missing fields take the schema default)
  mode      "rpc" (default): one request, one response
            "no_response": acks=0, no answer expected; a Metadata request follows on the same
                           connection: its correlation id, or that the connection closed
            "wire_version": the request is encoded at `version`, then the header's version is
                           replaced by `wire_version` (unsupported versions)
  retry     optional {field: value or [values]}: the request is repeated (up to 30 s) while the
            answer's top-level or first-element field has that value (FindCoordinator while the
            offsets topic is being created, OffsetFetch while the coordinator loads it)
  setup     run also when -k leaves the case out (it creates the topics)
Cases run in order, on a fresh connection each; later cases see the effects of earlier ones
(the topics created first, the records produced).
"""
import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import kproto  # noqa: E402  (record batches and CRC-32C)

# The group coordinator's "not ready yet" codes, which Kafka's own clients retry:
# COORDINATOR_LOAD_IN_PROGRESS (14), COORDINATOR_NOT_AVAILABLE (15), NOT_COORDINATOR (16).
# A Kafka peer just started answers any of them while __consumer_offsets loads (CI, stop 34:
# 14 for OffsetFetch, which the case then reported as a difference).
COORDINATOR_NOT_READY = [14, 15, 16]

TS = 1_700_000_000_000  # fixed CreateTime: stored batches are byte-identical on both brokers


def batch(n=3, size=10, corrupt_crc=False, first=0):
    return kproto.record_batch(
        [(b"k%d" % (first + i), bytes([65 + i % 26]) * size) for i in range(n)],
        base_timestamp=TS, corrupt_crc=corrupt_crc)


def produce(topic, partition, records, acks=-1):
    return {"transactional_id": None, "acks": acks, "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": records}]}]}


def fetch(topic, partition, offset):
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def list_offsets(topic, partition, timestamp):
    return {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}]}]}


def create(*topics, validate_only=False):
    return {"topics": [
        {"name": t[0], "num_partitions": t[1], "replication_factor": t[2], "assignments": [],
         "configs": [{"name": k, "value": v} for k, v in (t[3] if len(t) > 3 else {}).items()]}
        for t in topics], "timeout_ms": 30000, "validate_only": validate_only}


def metadata(*names, auto_create=False):
    return {"topics": [{"name": n} for n in names],
            "allow_auto_topic_creation": auto_create,
            "include_topic_authorized_operations": False}


CASES = [
    # --- ApiVersions ------------------------------------------------------------------------
    {"name": "api_versions_v0", "api": "ApiVersions", "version": 0, "request": {}},
    {"name": "api_versions_v3", "api": "ApiVersions", "version": 3,
     "request": {"client_software_name": "differential", "client_software_version": "1"}},
    {"name": "api_versions_v99_kip511", "api": "ApiVersions", "version": 3, "wire_version": 99,
     "mode": "wire_version",
     "request": {"client_software_name": "differential", "client_software_version": "1"}},
    {"name": "metadata_v99_unsupported", "api": "Metadata", "version": 12, "wire_version": 99,
     "mode": "wire_version", "request": metadata("diff-a")},
    # --- CreateTopics (setup first: the topics the later cases use) ---------------------------
    {"name": "create_topics_setup", "api": "CreateTopics", "version": 7, "setup": True,
     "request": create(("diff-a", 2, 1), ("diff-small", 1, 1, {"max.message.bytes": "1024"}))},
    {"name": "create_topics_exists", "api": "CreateTopics", "version": 7,
     "request": create(("diff-a", 1, 1))},
    {"name": "create_topics_duplicate_names", "api": "CreateTopics", "version": 7,
     "request": create(("diff-dup", 1, 1), ("diff-dup", 1, 1))},
    {"name": "create_topics_invalid_config_value", "api": "CreateTopics", "version": 7,
     "request": create(("diff-badcfg", 1, 1, {"cleanup.policy": "bogus"}))},
    {"name": "create_topics_unknown_config", "api": "CreateTopics", "version": 7,
     "request": create(("diff-unkcfg", 1, 1, {"no.such.config": "1"}))},
    {"name": "create_topics_partitions_0_and_-5", "api": "CreateTopics", "version": 7,
     "request": create(("diff-p0", 0, 1), ("diff-pm5", -5, 1))},
    {"name": "create_topics_rf_too_large", "api": "CreateTopics", "version": 7,
     "request": create(("diff-rf3", 1, 3))},
    {"name": "create_topics_invalid_name", "api": "CreateTopics", "version": 7,
     "request": create(("bad name!", 1, 1))},
    {"name": "create_topics_validate_only", "api": "CreateTopics", "version": 7,
     "request": create(("diff-validate", 3, 1), validate_only=True)},
    {"name": "create_topics_default_partitions", "api": "CreateTopics", "version": 7,
     "request": create(("diff-default", -1, -1))},
    # --- Metadata ---------------------------------------------------------------------------
    {"name": "metadata_known_topic", "api": "Metadata", "version": 12,
     "request": metadata("diff-a")},
    {"name": "metadata_unknown_topic", "api": "Metadata", "version": 12,
     "request": metadata("diff-unknown")},
    {"name": "metadata_validate_only_not_created", "api": "Metadata", "version": 12,
     "request": metadata("diff-validate")},
    {"name": "metadata_invalid_name", "api": "Metadata", "version": 12,
     "request": metadata("bad name!")},
    # --- Produce ----------------------------------------------------------------------------
    {"name": "produce_acks1", "api": "Produce", "version": 9,
     "request": produce("diff-a", 0, batch(3), acks=1)},
    {"name": "produce_acks_all", "api": "Produce", "version": 9,
     "request": produce("diff-a", 0, batch(2, first=3), acks=-1)},
    {"name": "produce_acks0", "api": "Produce", "version": 9, "mode": "no_response",
     "request": produce("diff-a", 0, batch(1, first=5), acks=0)},
    {"name": "produce_acks0_unknown_topic", "api": "Produce", "version": 9,
     "mode": "no_response", "request": produce("diff-unknown", 0, batch(1), acks=0)},
    {"name": "produce_unknown_topic", "api": "Produce", "version": 9,
     "request": produce("diff-unknown", 0, batch(1))},
    {"name": "produce_partition_out_of_range", "api": "Produce", "version": 9,
     "request": produce("diff-a", 7, batch(1))},
    {"name": "produce_bad_crc", "api": "Produce", "version": 9,
     "request": produce("diff-a", 1, batch(2, corrupt_crc=True))},
    {"name": "produce_too_large", "api": "Produce", "version": 9,
     "request": produce("diff-small", 0, batch(1, size=4000))},
    # all topics: after the produce cases, as Kafka's metadata cache learns of a new topic a
    # moment after CreateTopics answers
    {"name": "metadata_v1_all_topics", "api": "Metadata", "version": 1, "request": {"topics": None}},
    # --- Fetch ------------------------------------------------------------------------------
    {"name": "fetch_from_0", "api": "Fetch", "version": 12, "request": fetch("diff-a", 0, 0)},
    {"name": "fetch_offset_out_of_range", "api": "Fetch", "version": 12,
     "request": fetch("diff-a", 0, 1000)},
    {"name": "fetch_unknown_partition", "api": "Fetch", "version": 12,
     "request": fetch("diff-a", 9, 0)},
    {"name": "fetch_unknown_topic", "api": "Fetch", "version": 12,
     "request": fetch("diff-unknown", 0, 0)},
    # --- ListOffsets ------------------------------------------------------------------------
    {"name": "list_offsets_earliest", "api": "ListOffsets", "version": 7,
     "request": list_offsets("diff-a", 0, -2)},
    {"name": "list_offsets_latest", "api": "ListOffsets", "version": 7,
     "request": list_offsets("diff-a", 0, -1)},
    {"name": "list_offsets_max_timestamp", "api": "ListOffsets", "version": 7,
     "request": list_offsets("diff-a", 0, -3)},
    {"name": "list_offsets_future_timestamp", "api": "ListOffsets", "version": 7,
     "request": list_offsets("diff-a", 0, TS + 10**9)},
    {"name": "list_offsets_unknown_partition", "api": "ListOffsets", "version": 7,
     "request": list_offsets("diff-a", 9, -1)},
    # --- other admin ------------------------------------------------------------------------
    {"name": "delete_topics_unknown", "api": "DeleteTopics", "version": 4,
     "request": {"topic_names": ["diff-unknown"], "timeout_ms": 10000}},
    {"name": "describe_configs_unknown_topic", "api": "DescribeConfigs", "version": 4,
     "request": {"resources": [{"resource_type": 2, "resource_name": "diff-unknown",
                                "configuration_keys": None}],
                 "include_synonyms": False, "include_documentation": False}},
    # --- groups -----------------------------------------------------------------------------
    {"name": "find_coordinator_group", "api": "FindCoordinator", "version": 4,
     "request": {"key_type": 0, "coordinator_keys": ["diff-group"]},
     "retry": {"error_code": COORDINATOR_NOT_READY}},
    {"name": "offset_fetch_unknown_group", "api": "OffsetFetch", "version": 8,
     "request": {"groups": [{"group_id": "diff-group", "topics": [
         {"name": "diff-a", "partition_indexes": [0, 1]}]}], "require_stable": False},
     "retry": {"error_code": COORDINATOR_NOT_READY}},
    {"name": "offset_fetch_unknown_group_all", "api": "OffsetFetch", "version": 8,
     "request": {"groups": [{"group_id": "diff-group", "topics": None}],
                 "require_stable": False}, "retry": {"error_code": COORDINATOR_NOT_READY}},
    # --- more error paths (last: they may append to diff-a partition 1) ---------------------
    {"name": "produce_v2_unsupported_format", "api": "Produce", "version": 2,
     "request": {"acks": -1, "timeout_ms": 10000, "topic_data": [{"name": "diff-a",
                 "partition_data": [{"index": 1, "records": batch(1)}]}]}},
    {"name": "produce_invalid_acks", "api": "Produce", "version": 9,
     "request": produce("diff-a", 1, batch(1), acks=2)},
    {"name": "produce_duplicate_partition", "api": "Produce", "version": 9,
     "request": {"transactional_id": None, "acks": -1, "timeout_ms": 10000,
                 "topic_data": [{"name": "diff-a", "partition_data": [
                     {"index": 1, "records": batch(1)}, {"index": 1, "records": batch(1)}]}]}},
    {"name": "fetch_mid_batch", "api": "Fetch", "version": 12, "request": fetch("diff-a", 0, 4)},
    {"name": "fetch_tiny_partition_max_bytes", "api": "Fetch", "version": 12,
     "request": {**fetch("diff-a", 0, 0), "topics": [{"topic": "diff-a", "partitions": [{
         "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
         "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1}]}]}},
    {"name": "fetch_v4_from_0", "api": "Fetch", "version": 4,
     "request": {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                 "isolation_level": 0, "topics": [{"topic": "diff-a", "partitions": [
                     {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}},
    {"name": "fetch_stale_leader_epoch", "api": "Fetch", "version": 12,
     "request": {**fetch("diff-a", 0, 0), "topics": [{"topic": "diff-a", "partitions": [{
         "partition": 0, "current_leader_epoch": 5, "fetch_offset": 0,
         "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}},
    {"name": "list_offsets_unknown_topic", "api": "ListOffsets", "version": 7,
     "request": list_offsets("diff-unknown", 0, -1)},
    {"name": "list_offsets_duplicate_partition", "api": "ListOffsets", "version": 7,
     "request": {"replica_id": -1, "isolation_level": 0, "topics": [{"name": "diff-a",
                 "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1},
                                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -2}]}]}},
    {"name": "delete_topics_unknown_id", "api": "DeleteTopics", "version": 6,
     "request": {"topics": [{"name": None,
                             "topic_id": uuid.UUID("5b1e0f3c-1d2e-4f5a-8b9c-0d1e2f3a4b5c")}],
                 "timeout_ms": 10000}},
    {"name": "describe_configs_unknown_broker", "api": "DescribeConfigs", "version": 4,
     "request": {"resources": [{"resource_type": 4, "resource_name": "999",
                                "configuration_keys": None}],
                 "include_synonyms": False, "include_documentation": False}},
]

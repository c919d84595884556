"""The generated differential corpus (issue 24 item 5): random requests built from Kafka's own
JSON message schemas (as bundled with kafka-python >= 3, whose classes encode and decode them),
for scripts/differential.py --generated N --seed S.

Every case is a function of (seed, index) alone: `generate(seed, i, apis)` seeds its own
random.Random with "seed/i", so a case can be regenerated without the ones before it. The
request is walked field by field from the schema of the chosen version (only the fields that
version has; tagged fields included); each value is drawn from a pool chosen by the field's
entityType (topicName, groupId, brokerId, producerId, transactionalId), its name (partition,
offset, timestamp, acks, resource type, config name ...) or else its type. A pool has valid
values (the topics set up first, partitions 0..n-1, offsets near the log end, sane timeouts)
and invalid ones (unknown topics, bad names, negative or huge partitions and offsets, bad
configs, null where nullable, boundary integers, duplicate array entries); a case draws the
invalid ones with a probability of its own (0, 0.1 or 0.35), so about a third are valid.

The generated request is a plain dict, as in corpus.py. A topic id cannot be the same on two
brokers, so a valid one is the string "@id:TOPIC", which the runner replaces with each
broker's own id of that topic (looked up after the set-up).
"""
import os
import random
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import kproto  # noqa: E402  (record batches and CRC-32C)

TS = 1_700_000_000_000  # fixed CreateTime: the stored batches are byte-identical on both

# The topics the set-up creates (name -> partitions; configs) and fills with records. The
# generated cases read and write them; the mutating APIs touch only the ones named for them.
SETUP_TOPICS = {
    "gen-a": (3, {}),
    "gen-b": (1, {}),
    "gen-c": (2, {"cleanup.policy": "compact,delete"}),
    "gen-grow": (1, {}),       # CreatePartitions only
    "gen-cfg": (1, {}),        # AlterConfigs / IncrementalAlterConfigs only
    "gen-del": (2, {}),        # DeleteRecords only
}
SETUP_RECORDS = 3  # batches of 2 records produced to every partition of gen-a/-b/-c/-del
SETUP_GROUP = "gen-committed"  # has committed offsets for gen-a 0..2 (set-up)

# The APIs generated (kafka-python class prefix). The run intersects their versions with
# kafka-python's schema and both brokers' ApiVersions; an API one broker lacks is left out.
# Weights: how often each is drawn.
APIS = {
    "Produce": 8, "Fetch": 8, "ListOffsets": 6, "Metadata": 6, "OffsetCommit": 4,
    "OffsetFetch": 4, "FindCoordinator": 3, "JoinGroup": 3, "SyncGroup": 3, "Heartbeat": 3,
    "LeaveGroup": 3, "ListGroups": 2, "DescribeGroups": 3, "ApiVersions": 2,
    "CreateTopics": 5, "DeleteTopics": 3, "DescribeConfigs": 4, "AlterConfigs": 3,
    "IncrementalAlterConfigs": 3, "CreatePartitions": 3, "DeleteRecords": 3,
    "DescribeCluster": 2, "DescribeProducers": 3, "ListTransactions": 2,
    "DescribeLogDirs": 2, "OffsetDelete": 3, "DeleteGroups": 2, "InitProducerId": 2,
    "OffsetForLeaderEpoch": 3, "DescribeTransactions": 2, "DescribeAcls": 1,
    "DescribeClientQuotas": 1, "DescribeUserScramCredentials": 1, "ElectLeaders": 1,
    "AddOffsetsToTxn": 1, "EndTxn": 1, "TxnOffsetCommit": 1, "AddPartitionsToTxn": 1,
}

BIG32, BIG64 = 2**31 - 1, 2**63 - 1
INT_BOUNDS = {
    "int8": [0, 1, -1, 127, -128], "int16": [0, 1, -1, 32767, -32768],
    "uint16": [0, 1, 65535], "int32": [0, 1, -1, BIG32, -2**31, 1000],
    "int64": [0, 1, -1, BIG64, -2**63, 10**12],
}
CONFIG_NAMES = ["retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes",
                "min.insync.replicas", "compression.type", "message.timestamp.type",
                "retention.bytes", "segment.ms", "min.cleanable.dirty.ratio"]
BAD_CONFIG_NAMES = ["no.such.config", "", "log.retention.ms", "RETENTION.MS"]
CONFIG_VALUES = {
    "retention.ms": (["86400000", "-1", "1000"], ["abc", "", "-5", "99999999999999999999"]),
    "cleanup.policy": (["delete", "compact", "compact,delete"], ["bogus", "", "delete,delete,x"]),
    "max.message.bytes": (["1048588", "2048"], ["-1", "x", "0"]),
    "segment.bytes": (["1073741824", "16777216"], ["1", "-1", "x"]),
    "min.insync.replicas": (["1"], ["0", "5", "-1"]),
    "compression.type": (["producer", "gzip", "zstd", "lz4", "snappy", "uncompressed"], ["bzip2", ""]),
    "message.timestamp.type": (["CreateTime", "LogAppendTime"], ["Wallclock"]),
    "retention.bytes": (["-1", "1000000"], ["x", "-7"]),
    "segment.ms": (["604800000"], ["0", "x"]),
    "min.cleanable.dirty.ratio": (["0.5", "0.01"], ["2.0", "-1", "x"]),
}
BROKER_CONFIG_NAMES = ["log.retention.ms", "num.io.threads", "message.max.bytes", "log.cleaner.threads",
                       "no.such.config"]


ARRAY_RULES = {"states_filter", "types_filter", "state_filters", "producer_id_filters",
               "partition_indexes", "broker_ids"}


class Gen:
    def __init__(self, seed, index):
        self.rng = random.Random(f"{seed}/{index}")
        self.index = index
        self.p_bad = self.rng.choice([0.0, 0.1, 0.35])
        self.topic = None  # the topic of the struct being generated (for its partitions)

    # -- helpers ----------------------------------------------------------------------------
    def pick(self, good, bad=()):
        if bad and (not good or self.rng.random() < self.p_bad):
            return self.rng.choice(list(bad))
        return self.rng.choice(list(good))

    def partitions_of(self, topic):
        if isinstance(topic, str) and topic in SETUP_TOPICS:
            return SETUP_TOPICS[topic][0]
        return 1

    # -- pools ------------------------------------------------------------------------------
    def topic_name(self, api):
        mutating = {"CreatePartitions": ["gen-grow"], "AlterConfigs": ["gen-cfg"],
                    "IncrementalAlterConfigs": ["gen-cfg"], "DeleteRecords": ["gen-del"]}
        if api == "CreateTopics":
            good = [f"gen-new-{self.index}", f"gen-new-{self.index}-x", "gen-a"]
            bad = ["", "bad name!", "a" * 250, ".", "..", "gen.dot_clash", "__consumer_offsets"]
        elif api == "DeleteTopics":
            # topics of earlier cases (created by some CreateTopics) and unknown ones; never
            # the set-up topics, whose deletion would change every later case
            good = [f"gen-new-{self.rng.randrange(max(self.index, 1))}", "gen-unknown"]
            bad = ["", "bad name!", "a" * 250, "__consumer_offsets"]
        elif api in mutating:
            good = mutating[api]
            bad = ["gen-unknown", "", "bad name!", "__consumer_offsets"]
        else:
            good = ["gen-a", "gen-a", "gen-b", "gen-c", "gen-del"]
            bad = ["gen-unknown", "", "bad name!", "a" * 250, "__consumer_offsets", "gen-a "]
        return self.pick(good, bad)

    def group_id(self):
        return self.pick([f"gen-g-{self.index}", "gen-shared", SETUP_GROUP],
                         ["", "gen-unknown-group", "x" * 300])

    def partition(self):
        n = self.partitions_of(self.topic)
        return self.pick(list(range(n)), [n, -1, BIG32, -2**31, 100])

    def offset(self):
        return self.pick([0, 1, 2, 3, 4, 5, 6, 3, -1], [-2, -3, 100, BIG64, -2**63, 10**6])

    def records(self):
        r = self.rng.random()
        n = self.rng.choice([1, 2, 3])
        first = self.rng.randrange(100)
        batch = kproto.record_batch(
            [(b"k%d" % (first + i), b"v" * self.rng.choice([1, 10, 100])) for i in range(n)],
            base_timestamp=TS, corrupt_crc=False)
        if r < 1 - self.p_bad:
            return batch
        return self.rng.choice([
            kproto.record_batch([(b"k", b"v")], base_timestamp=TS, corrupt_crc=True),
            b"", b"\x00" * 7, batch[:30], batch + b"\x00\x00\x00", None,
            kproto.record_batch([(b"k", b"x" * 200_000)], base_timestamp=TS),
        ])

    # -- fields -----------------------------------------------------------------------------
    def value(self, api, f, version):
        """A value for simple field f."""
        js = f._json
        name, typ, ent = f.name, f.type_str, js.get("entityType")
        nullable = f.nullable_for_version_q(version)
        rng = self.rng
        if nullable and rng.random() < self.p_bad * 0.3:
            return None
        if f.is_array() and name not in ARRAY_RULES:
            n = rng.choice([0, 1, 1, 2]) if self.p_bad else rng.choice([1, 1, 2])
            out = [self.value(api, f.array_of, version) for _ in range(n)]
            if out and rng.random() < self.p_bad * 0.5:
                out.append(out[0])  # a duplicate
            return out
        if name == "broker_ids":
            return self.pick([[1]], [[], [1, 1], [2], [-1]])
        if name == "producer_id_filters":
            return self.pick([[]], [[1, -1]])
        if ent == "topicName":
            t = self.topic_name(api)
            self.topic = t
            return t
        if ent == "groupId":
            return self.group_id()
        if ent == "transactionalId":
            return self.pick([None if nullable else "gen-txn", "gen-txn"], ["", "gen-unknown-txn"])
        if ent == "producerId":
            return self.pick([-1, 0, 1], [123456, BIG64, -2])
        if ent == "brokerId":
            return self.pick([1, -1], [0, 999, -2])
        if typ == "uuid":
            if name == "topic_id" or "topic" in name:
                t = self.pick(["gen-a", "gen-b", "gen-c"])
                self.topic = t
                return self.pick([f"@id:{t}"],
                                 [uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128), version=4)])
            return self.pick([uuid.UUID(int=0)], [uuid.UUID(int=rng.getrandbits(128), version=4)])
        if typ == "records":
            return self.records()
        if name in ("partition_index", "partition", "partition_id", "index"):
            return self.partition()
        if name in ("fetch_offset", "committed_offset", "offset", "log_start_offset"):
            return self.offset()
        if name == "timestamp":
            return self.pick([-1, -2, -3, TS, TS + 10**9, 0], [-4, -5, -6, -7, BIG64, TS - 1])
        if name == "acks":
            return self.pick([-1, 1, 0], [2, -2, 5])
        if name in ("timeout_ms",):
            return self.pick([5000, 100], [0, -1, 1])
        if name == "max_wait_ms":
            return self.pick([0, 10, 50], [-1, 1000])
        if name == "min_bytes":
            return self.pick([0, 1], [10**6, -1])
        if name in ("max_bytes", "partition_max_bytes"):
            return self.pick([1 << 20, 100, 1 << 16], [0, 1, -1, BIG32])
        if name in ("current_leader_epoch", "last_fetched_epoch", "leader_epoch"):
            return self.pick([-1, 0], [1, 5, -2, BIG32])
        if name == "replica_id":
            return self.pick([-1], [1, 0, -2, 5])
        if name == "replica_state" or name == "cluster_id":
            return None if nullable else ""
        if name == "isolation_level":
            return self.pick([0, 1], [2, -1])
        if name == "session_id":
            return self.pick([0], [12345, -1])
        if name == "session_epoch":
            return self.pick([-1], [0, 5, -2])
        if name == "rack_id":
            return self.pick([""], ["rack-x"])
        if name in ("session_timeout_ms",):
            return self.pick([10000, 45000], [1, 10**9, -1])
        if name == "rebalance_timeout_ms":
            return self.pick([10000, -1], [1, 10**9])
        if name in ("generation_id", "generation_id_or_member_epoch", "member_epoch"):
            return self.pick([-1, 0, 1], [99, -2, BIG32])
        if name == "member_id":
            return self.pick(["", f"gen-member-{self.index}"], ["x" * 300, "unknown"])
        if name == "group_instance_id":
            return self.pick([None if nullable else "gen-inst"], ["gen-inst", ""])
        if name == "protocol_type":
            return self.pick(["consumer"], ["", "gen-proto"])
        if name in ("protocol_name", "name") and api in ("JoinGroup", "SyncGroup"):
            return self.pick(["range"], ["", "roundrobin"])
        if name in ("metadata", "assignment") and typ == "bytes":
            return self.pick([b"", b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"], [b"\xff" * 3])
        if name == "key_type":
            return self.pick([0], [1, 2, 99, -1])
        if name in ("key",) and api == "FindCoordinator" or name == "coordinator_keys":
            return self.group_id()
        if name == "resource_type":
            return self.pick([2, 2, 4], [8, 16, 0, 99, -1])
        if name == "resource_name":
            return self.pick(["gen-a", "gen-cfg" if "Alter" in api else "gen-b", "1"],
                             ["0", "999", "", "gen-unknown", "x y"])
        if name == "config_operation":
            return self.pick([0, 1], [2, 3, 5, -1])
        if name == "num_partitions":
            return self.pick([1, 2, -1, 3], [0, -5, 100000, BIG32])
        if name == "replication_factor":
            return self.pick([1, -1], [0, 2, 3, -5, 32767])
        if name == "count":  # CreatePartitions
            return self.pick([2, 3, 4], [1, 0, -1, 100000])
        if name == "validate_only":
            return rng.random() < 0.5
        if name in ("include_synonyms", "include_documentation",
                    "include_cluster_authorized_operations", "include_topic_authorized_operations",
                    "include_authorized_operations"):
            return rng.random() < 0.3
        if name == "allow_auto_topic_creation":
            return self.pick([False], [True])
        if name == "require_stable":
            return rng.random() < 0.3
        if name in ("states_filter",):
            return self.pick([[], ["Stable"], ["Empty"]], [["Bogus"], ["empty"]])
        if name in ("types_filter",):
            return self.pick([[], ["classic"], ["consumer"]], [["bogus"]])
        if name == "state_filters":
            return self.pick([[], ["Ongoing"]], [["Bogus"]])
        if name == "producer_id_filters":
            return self.pick([[]], [[1, -1]])
        if name == "duration_filter":
            return self.pick([-1, 1000], [0, -5])
        if name == "transactional_id_pattern":
            return self.pick([None if nullable else ".*"], ["[", ""])
        if name == "producer_epoch":
            return self.pick([-1, 0], [1, 32767])
        if name == "transaction_timeout_ms":
            return self.pick([60000], [0, -1, BIG32])
        if name == "partition_indexes" or (f.is_array() and typ == "[]int32" and "partition" in name):
            n = rng.choice([0, 1, 2, 2, 3])
            out = [self.partition() for _ in range(n)]
            if out and rng.random() < self.p_bad:
                out.append(out[0])
            return out
        if name == "broker_ids":
            return self.pick([[1]], [[], [1, 1], [2], [-1]])
        if name == "committed_metadata" or name == "metadata":
            return self.pick(["", "gen"], [None] if nullable else ["x" * 5000])
        if name == "client_software_name":
            return self.pick(["differential"], ["", "bad name!", "-x"])
        if name == "client_software_version":
            return self.pick(["1.0"], ["", "1 0", "."])
        if name == "value" and api in ("CreateTopics", "AlterConfigs", "IncrementalAlterConfigs"):
            return None  # replaced by the config pair (see struct())
        if f.is_array():
            return self.pick([[]], [[self.simple_type(f.array_of, version)]])
        return self.simple_type(f, version)

    def simple_type(self, f, version):
        typ = f.type_str
        if typ in INT_BOUNDS:
            return self.pick([f.default if isinstance(f.default, int) else 0], INT_BOUNDS[typ])
        if typ == "bool":
            return self.rng.random() < 0.5
        if typ == "string":
            d = f.default if isinstance(f.default, str) else ""
            return self.pick([d], ["", "gen-x", "bad name!"])
        if typ == "bytes":
            return self.pick([b""], [b"\x00\x01"])
        if typ == "float64":
            return self.pick([0.0], [-1.0, 1e300])
        return f.default

    def array_len(self, nullable):
        if nullable and self.rng.random() < self.p_bad * 0.5:
            return None
        return self.rng.choices([0, 1, 2, 3], [1 if self.p_bad else 0.1, 6, 2, 1])[0]

    def struct(self, api, cls, version, depth=0):
        out = {}
        saved = self.topic
        for name, f in cls._struct.fields.items():
            if not f.for_version_q(version):
                continue
            nullable = f.nullable_for_version_q(version)
            if f.is_struct_array():
                n = self.array_len(nullable)
                if n is None:
                    out[name] = None
                    continue
                if name == "topics" and api == "Metadata" and not nullable and n == 0:
                    n = 1  # an empty list in v0 means all topics: keep it a list of one
                items = [self.struct(api, f.data_class, version, depth + 1) for _ in range(n)]
                if items and self.rng.random() < self.p_bad * 0.5:
                    items.append(dict(items[0]))  # a duplicate entry
                out[name] = items
            elif f.is_struct():
                out[name] = (None if nullable and self.rng.random() < self.p_bad * 0.3
                             else self.struct(api, f.data_class, version, depth + 1))
            else:
                out[name] = self.value(api, f, version)
        # a config entry: a name and a value that go together
        if "value" in out and "name" in out and api in ("CreateTopics", "AlterConfigs",
                                                        "IncrementalAlterConfigs"):
            broker = self.rng.random() < 0.15
            cname = self.pick(BROKER_CONFIG_NAMES if broker else CONFIG_NAMES, BAD_CONFIG_NAMES)
            good, bad = CONFIG_VALUES.get(cname, (["1"], ["x"]))
            out["name"] = cname
            out["value"] = self.pick(good, bad + ([None] if cls._struct.fields["value"]
                                                  .nullable_for_version_q(version) else []))
        if api == "CreateTopics" and depth == 1 and out.get("assignments"):
            out["num_partitions"], out["replication_factor"] = -1, -1  # as a client sends
        self.topic = saved if depth else self.topic
        return out


def choose(rng, versions):
    """An API and a version: versions maps api -> (lo, hi) both brokers and the schema serve."""
    apis = sorted(versions)
    api = rng.choices(apis, [APIS[a] for a in apis])[0]
    lo, hi = versions[api]
    # the newest versions a little more often (most clients use them)
    v = rng.choice([rng.randint(lo, hi), hi, rng.randint(max(lo, hi - 3), hi)])
    return api, v


def generate(seed, index, versions, classes):
    """Case `index` of seed `seed`: {"name", "api", "version", "request", "mode"}."""
    g = Gen(seed, index)
    api, version = choose(g.rng, versions)
    req = g.struct(api, classes[api + "Request"], version)
    case = {"name": f"gen-{seed}-{index}", "api": api, "version": version, "request": req,
            "p_bad": g.p_bad}
    if api == "Produce" and req.get("acks") == 0:
        case["mode"] = "no_response"
    return case

"""Authorization of every request, as Kafka 4's KafkaApis and ControllerApis check it, with
Kafka's StandardAuthorizer (`authorizer.class.name`), `super.users=User:admin`, a
SASL_PLAINTEXT listener with PLAIN users admin, alice and bob, and the PLAINTEXT listener
(User:ANONYMOUS).

ACLs are created by the super user with confluent-kafka's AdminClient (CreateAcls). Then a
table of rows, each (principal, API/action, resource, the ACLs it holds, the error Kafka
answers), written from Kafka's documentation (docs/security.html, "Operations and Resources
on Protocols") and KafkaApis, is run with raw requests (the error code is read from the
response, which clients hide or retry) and a few with confluent-kafka, and every mismatch is
reported. Also: Metadata hides topics a principal may not DESCRIBE, prefixed ACLs, DENY wins
over ALLOW, the host of an ACL, and a second broker with `allow.everyone.if.no.acl.found`.

    cargo build --release -p broker && BROKER_BIN=$PWD/target/release/broker \\
        target/venv/bin/python -m pytest -q tests/e2e/test_acl_matrix.py 2>/tmp/err.txt
"""

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

import kproto as kp
from conftest import free_port
from e2e_helpers import unique

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TIMEOUT = 30

ERRORS = {0: "NONE", 3: "UNKNOWN_TOPIC_OR_PARTITION", 15: "COORDINATOR_NOT_AVAILABLE",
          16: "NOT_COORDINATOR", 25: "UNKNOWN_MEMBER_ID", 29: "TOPIC_AUTHORIZATION_FAILED",
          30: "GROUP_AUTHORIZATION_FAILED", 31: "CLUSTER_AUTHORIZATION_FAILED",
          42: "INVALID_REQUEST", 47: "INVALID_PRODUCER_EPOCH", 48: "INVALID_TXN_STATE",
          49: "INVALID_PRODUCER_ID_MAPPING", 53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
          69: "GROUP_ID_NOT_FOUND", 84: "ELECTION_NOT_NEEDED", 37: "INVALID_PARTITIONS",
          36: "TOPIC_ALREADY_EXISTS", 40: "INVALID_CONFIG", 35: "UNSUPPORTED_VERSION"}


def jaas():
    users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    return ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="admin" password="admin-secret" {users};')


def acl_broker(start_broker, **extra):
    plain, sasl = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(),
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "auto.create.topics.enable": "true",
    }
    overrides.update(extra)
    b = start_broker(overrides, port=plain)
    b.sasl_bootstrap = f"127.0.0.1:{sasl}"
    return b


def sasl_conf(user):
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user]}


def admin_client(b):
    return AdminClient({"bootstrap.servers": b.sasl_bootstrap, **sasl_conf("admin")})


# ---------------------------------------------------------------------------------------------
# A raw connection: PLAIN authentication (SaslHandshake v1, SaslAuthenticate v1), then
# requests with header v1 and the responses' bodies.
class Conn:
    def __init__(self, b, user):
        self.sock = kp.connect(b.sasl_bootstrap if user else b.bootstrap)
        self.corr = 0
        if user:
            r = self.call(17, 1, kp.string("PLAIN"))
            assert r.i16() == 0
            token = f"\0{user}\0{USERS[user]}".encode()
            r = self.call(36, 1, kp.i32(len(token)) + token)
            assert r.i16() == 0, r.string()

    def call(self, api_key, version, body):
        self.corr += 1
        frame = kp.frame(kp.request_header_v1(api_key, version, self.corr) + body)
        return kp.roundtrip(self.sock, frame, self.corr)

    def close(self):
        self.sock.close()


S = kp.string
I8, I16, I32, I64 = kp.i8, kp.i16, kp.i32, kp.i64


def A(items):
    return kp.array(list(items))


def skip_str(r):
    r.string()


# Each action: (conn, resource) -> error code (the first error the response holds).
def produce(c, topic, txn=None):
    attrs, pid, epoch = (0x10, 1, 0) if txn else (0, -1, -1)
    batch = kp.record_batch([(b"k", b"v")], attributes=attrs, producer_id=pid,
                            producer_epoch=epoch, base_sequence=0 if txn else -1)
    body = S(txn) + I16(-1) + I32(10000) + A([S(topic) + A([I32(0) + I32(len(batch)) + batch])])
    r = c.call(0, 3, body)
    r.i32()  # topics
    r.string()
    r.i32()
    r.i32()
    return r.i16()


def fetch(c, topic, replica=-1):
    body = (I32(replica) + I32(0) + I32(1) + I32(1 << 20) + I8(0)
            + A([S(topic) + A([I32(0) + I64(0) + I32(1 << 20)])]))
    r = c.call(1, 4, body)
    r.i32()  # throttle
    r.i32()
    r.string()
    r.i32()
    r.i32()
    return r.i16()


def list_offsets(c, topic):
    r = c.call(2, 1, I32(-1) + A([S(topic) + A([I32(0) + I64(-1)])]))
    r.i32()
    r.string()
    r.i32()
    r.i32()
    return r.i16()


def metadata(c, topics, auto_create=False, ops=False):
    """Metadata v8: {name: (error, topic_authorized_operations)}, cluster operations."""
    t = I32(-1) if topics is None else A([S(n) for n in topics])
    r = c.call(3, 8, t + I8(int(auto_create)) + I8(int(ops)) + I8(int(ops)))
    r.i32()
    for _ in range(r.i32()):
        r.i32(), r.string(), r.i32(), r.string()
    r.string()
    r.i32()
    out = {}
    for _ in range(r.i32()):
        err, name = r.i16(), r.string()
        r.i8()
        for _ in range(r.i32()):
            r.i16(), r.i32(), r.i32(), r.i32()
            for _ in range(3):
                for _ in range(r.i32()):
                    r.i32()
        out[name] = (err, r.i32())
    return out, r.i32()


def metadata_one(c, topic, auto_create=False):
    got, _ = metadata(c, [topic], auto_create)
    return got[topic][0]


def find_coordinator(c, key, key_type=0):
    r = c.call(10, 1, S(key) + I8(key_type))
    r.i32()
    return r.i16()


def heartbeat(c, group):
    r = c.call(12, 0, S(group) + I32(1) + S("member"))
    return r.i16()


def offset_commit(c, group, topic):
    body = (S(group) + I32(-1) + S("") + I64(-1)
            + A([S(topic) + A([I32(0) + I64(0) + S("")])]))
    r = c.call(8, 2, body)
    r.i32()
    r.string()
    r.i32()
    r.i32()
    return r.i16()


def offset_fetch(c, group, topic):
    r = c.call(9, 2, S(group) + A([S(topic) + A([I32(0)])]))
    n = r.i32()
    codes = []
    for _ in range(n):
        r.string()
        for _ in range(r.i32()):
            r.i32(), r.i64(), r.string()
            codes.append(r.i16())
    top = r.i16()
    return top or (codes[0] if codes else 0)


def list_groups(c):
    r = c.call(16, 0, b"")
    err = r.i16()
    return err, [(r.string(), r.string())[0] for _ in range(r.i32())]


def describe_group(c, group):
    r = c.call(15, 0, A([S(group)]))
    r.i32()
    return r.i16()


def delete_group(c, group):
    r = c.call(42, 0, A([S(group)]))
    r.i32()
    r.i32()
    r.string()
    return r.i16()


def create_topic_raw(c, topic):
    r = c.call(19, 2, A([S(topic) + I32(1) + I16(1) + A([]) + A([])]) + I32(10000) + I8(0))
    r.i32()
    r.i32()
    r.string()
    return r.i16()


def delete_topic(c, topic):
    r = c.call(20, 1, A([S(topic)]) + I32(10000))
    r.i32()
    r.i32()
    r.string()
    return r.i16()


def create_partitions(c, topic):
    r = c.call(37, 0, A([S(topic) + I32(3) + I32(-1)]) + I32(10000) + I8(0))
    r.i32()
    r.i32()
    r.string()
    return r.i16()


def delete_records(c, topic):
    r = c.call(21, 0, A([S(topic) + A([I32(0) + I64(0)])]) + I32(10000))
    r.i32()
    r.i32()
    r.string()
    r.i32()
    r.i32()
    r.i64()
    return r.i16()


def describe_configs(c, rtype, name):
    r = c.call(32, 0, A([I8(rtype) + S(name) + I32(-1)]))
    r.i32()
    r.i32()
    return r.i16()


def alter_configs(c, rtype, name, key, value):
    r = c.call(33, 0, A([I8(rtype) + S(name) + A([S(key) + S(value)])]) + I8(1))
    r.i32()
    r.i32()
    return r.i16()


def init_producer_id(c, txn=None):
    r = c.call(22, 0, S(txn) + I32(60000))
    r.i32()
    return r.i16()


def end_txn(c, txn):
    r = c.call(26, 0, S(txn) + I64(1) + I16(0) + I8(1))
    r.i32()
    return r.i16()


def add_offsets_to_txn(c, txn, group):
    r = c.call(25, 0, S(txn) + I64(1) + I16(0) + S(group))
    r.i32()
    return r.i16()


def write_txn_markers(c, topic):
    body = A([I64(1) + I16(0) + I8(1) + A([S(topic) + A([I32(0)])]) + I32(0)])
    r = c.call(27, 0, body)
    r.i32()
    r.i64()
    r.i32()
    r.string()
    r.i32()
    r.i32()
    return r.i16()


def elect_leaders(c, topic):
    r = c.call(43, 1, I8(0) + A([S(topic) + A([I32(0)])]) + I32(10000))
    r.i32()
    return r.i16()


def offset_for_leader_epoch(c, topic):
    r = c.call(23, 2, A([S(topic) + A([I32(0) + I32(-1) + I32(0)])]))
    r.i32()
    r.i32()
    r.string()
    r.i32()
    return r.i16()


def name(code):
    return ERRORS.get(code, str(code))


def add_acls(b, *bindings):
    a = admin_client(b)
    for f in a.create_acls(list(bindings), request_timeout=TIMEOUT).values():
        f.result(timeout=TIMEOUT)


def acl(rtype, rname, principal, op, perm=AclPermissionType.ALLOW,
        pattern=ResourcePatternType.LITERAL, host="*"):
    return AclBinding(rtype, rname, pattern, f"User:{principal}", host, op, perm)


def make_topics(b, *names):
    a = admin_client(b)
    fs = a.create_topics([NewTopic(n, num_partitions=1, replication_factor=1) for n in names],
                         request_timeout=TIMEOUT)
    for f in fs.values():
        f.result(timeout=TIMEOUT)


@pytest.fixture(scope="module")
def matrix_broker(request, tmp_path_factory):
    from conftest import Broker
    b = Broker(tmp_path_factory.mktemp("acl"), overrides={}, port=free_port())
    plain = b.port
    sasl = free_port()
    b.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas(),
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "auto.create.topics.enable": "true",
    })
    b.start()
    b.sasl_bootstrap = f"127.0.0.1:{sasl}"
    yield b
    b.stop()


T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER, \
    ResourceType.TRANSACTIONAL_ID
O = AclOperation
DENY = AclPermissionType.DENY
PREFIXED = ResourcePatternType.PREFIXED


def test_acl_matrix(matrix_broker):
    b = matrix_broker
    u = unique("m")
    t_read, t_write, t_desc, t_none = f"{u}-read", f"{u}-write", f"{u}-desc", f"{u}-none"
    t_pre, t_deny, t_alter, t_del = f"{u}-pre-x", f"{u}-deny", f"{u}-alter", f"{u}-del"
    t_conf = f"{u}-conf"
    g_read, g_desc, g_none, g_del = f"{u}-gread", f"{u}-gdesc", f"{u}-gnone", f"{u}-gdel"
    x_write, x_desc = f"{u}-xwrite", f"{u}-xdesc"
    make_topics(b, t_read, t_write, t_desc, t_none, t_pre, t_deny, t_alter, t_del, t_conf)
    add_acls(
        b,
        acl(T, t_read, "alice", O.READ),
        acl(T, t_write, "alice", O.WRITE),
        acl(T, t_desc, "alice", O.DESCRIBE),
        acl(T, f"{u}-pre-", "alice", O.ALL, pattern=PREFIXED),
        acl(T, t_deny, "alice", O.ALL),
        acl(T, t_deny, "alice", O.WRITE, perm=DENY),
        acl(T, t_alter, "alice", O.ALTER),
        acl(T, t_del, "alice", O.DELETE),
        acl(T, t_conf, "alice", O.ALTER_CONFIGS),
        acl(G, g_read, "alice", O.READ),
        acl(G, g_desc, "alice", O.DESCRIBE),
        acl(G, g_del, "alice", O.DELETE),
        acl(X, x_write, "alice", O.WRITE),
        acl(X, x_desc, "alice", O.DESCRIBE),
        # An ACL for another host never applies to 127.0.0.1.
        acl(T, t_none, "alice", O.ALL, host="10.9.9.9"),
    )
    conns = {who: Conn(b, who) for who in ("admin", "alice", "bob")}
    conns["anonymous"] = Conn(b, None)
    rows = [
        # (principal, action, resource, expected error)
        ("alice", "Produce", t_write, produce, "NONE"),
        ("alice", "Produce", t_read, produce, "TOPIC_AUTHORIZATION_FAILED"),
        ("bob", "Produce", t_write, produce, "TOPIC_AUTHORIZATION_FAILED"),
        ("anonymous", "Produce", t_write, produce, "TOPIC_AUTHORIZATION_FAILED"),
        ("admin", "Produce (super user)", t_none, produce, "NONE"),
        ("alice", "Produce (prefixed ALL)", t_pre, produce, "NONE"),
        ("alice", "Produce (DENY WRITE over ALLOW ALL)", t_deny, produce,
         "TOPIC_AUTHORIZATION_FAILED"),
        ("alice", "Produce (ACL for another host)", t_none, produce,
         "TOPIC_AUTHORIZATION_FAILED"),
        ("alice", "Produce unknown topic, no ACL", f"{u}-missing", produce,
         "TOPIC_AUTHORIZATION_FAILED"),
        ("alice", "Produce transactional, no txn WRITE", t_write,
         lambda c, t: produce(c, t, txn=f"{u}-nope"), "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
        ("alice", "Fetch", t_read, fetch, "NONE"),
        ("alice", "Fetch (WRITE only)", t_write, fetch, "TOPIC_AUTHORIZATION_FAILED"),
        ("alice", "Fetch (DENY WRITE keeps READ)", t_deny, fetch, "NONE"),
        ("alice", "Fetch as follower (no CLUSTER_ACTION)", t_read,
         lambda c, t: fetch(c, t, replica=1), "TOPIC_AUTHORIZATION_FAILED"),
        ("alice", "ListOffsets (READ implies DESCRIBE)", t_read, list_offsets, "NONE"),
        ("bob", "ListOffsets", t_read, list_offsets, "TOPIC_AUTHORIZATION_FAILED"),
        ("alice", "Metadata named", t_desc, metadata_one, "NONE"),
        ("bob", "Metadata named", t_desc, metadata_one, "TOPIC_AUTHORIZATION_FAILED"),
        ("bob", "Metadata auto-create, no CREATE", f"{u}-auto",
         lambda c, t: metadata_one(c, t, auto_create=True), "TOPIC_AUTHORIZATION_FAILED"),
        ("alice", "OffsetForLeaderEpoch", t_desc, offset_for_leader_epoch, "NONE"),
        ("bob", "OffsetForLeaderEpoch", t_desc, offset_for_leader_epoch,
         "TOPIC_AUTHORIZATION_FAILED"),
        ("alice", "FindCoordinator group (READ implies DESCRIBE)", g_read, find_coordinator,
         "NONE"),
        ("bob", "FindCoordinator group", g_read, find_coordinator, "GROUP_AUTHORIZATION_FAILED"),
        ("alice", "FindCoordinator txn", x_desc, lambda c, k: find_coordinator(c, k, 1), "NONE"),
        ("bob", "FindCoordinator txn", x_desc, lambda c, k: find_coordinator(c, k, 1),
         "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
        ("alice", "Heartbeat (group READ)", g_read, heartbeat, "UNKNOWN_MEMBER_ID"),
        ("alice", "Heartbeat (group DESCRIBE only)", g_desc, heartbeat,
         "GROUP_AUTHORIZATION_FAILED"),
        ("alice", "OffsetCommit", g_read, lambda c, g: offset_commit(c, g, t_read), "NONE"),
        ("alice", "OffsetCommit, topic without READ", g_read,
         lambda c, g: offset_commit(c, g, t_write), "TOPIC_AUTHORIZATION_FAILED"),
        ("alice", "OffsetCommit, group without READ", g_desc,
         lambda c, g: offset_commit(c, g, t_read), "GROUP_AUTHORIZATION_FAILED"),
        ("alice", "OffsetFetch", g_desc, lambda c, g: offset_fetch(c, g, t_read), "NONE"),
        ("alice", "OffsetFetch, topic without DESCRIBE", g_desc,
         lambda c, g: offset_fetch(c, g, t_none), "TOPIC_AUTHORIZATION_FAILED"),
        ("bob", "OffsetFetch", g_desc, lambda c, g: offset_fetch(c, g, t_read),
         "GROUP_AUTHORIZATION_FAILED"),
        ("alice", "DescribeGroups", g_desc, describe_group, "NONE"),
        ("alice", "DescribeGroups", g_none, describe_group, "GROUP_AUTHORIZATION_FAILED"),
        ("alice", "DeleteGroups", g_read, delete_group, "GROUP_AUTHORIZATION_FAILED"),
        ("alice", "DeleteGroups", g_del, delete_group, "GROUP_ID_NOT_FOUND"),
        ("alice", "CreateTopics (no CREATE)", f"{u}-new", create_topic_raw,
         "TOPIC_AUTHORIZATION_FAILED"),
        ("admin", "CreateTopics", f"{u}-new", create_topic_raw, "NONE"),
        ("alice", "DeleteTopics (no DELETE)", t_read, delete_topic,
         "TOPIC_AUTHORIZATION_FAILED"),
        ("alice", "CreatePartitions", t_alter, create_partitions, "NONE"),
        ("alice", "CreatePartitions (no ALTER)", t_read, create_partitions,
         "TOPIC_AUTHORIZATION_FAILED"),
        ("alice", "DeleteRecords", t_del, delete_records, "NONE"),
        ("alice", "DeleteRecords (no DELETE)", t_read, delete_records,
         "TOPIC_AUTHORIZATION_FAILED"),
        ("alice", "DescribeConfigs topic (ALTER_CONFIGS implies)", t_conf,
         lambda c, t: describe_configs(c, 2, t), "NONE"),
        ("alice", "DescribeConfigs topic", t_read, lambda c, t: describe_configs(c, 2, t),
         "TOPIC_AUTHORIZATION_FAILED"),
        ("alice", "DescribeConfigs broker", "1", lambda c, n: describe_configs(c, 4, n),
         "CLUSTER_AUTHORIZATION_FAILED"),
        ("alice", "AlterConfigs topic", t_conf,
         lambda c, t: alter_configs(c, 2, t, "retention.ms", "86400000"), "NONE"),
        ("alice", "AlterConfigs topic", t_read,
         lambda c, t: alter_configs(c, 2, t, "retention.ms", "86400000"),
         "TOPIC_AUTHORIZATION_FAILED"),
        ("alice", "AlterConfigs broker", "",
         lambda c, n: alter_configs(c, 4, n, "log.retention.ms", "86400000"),
         "CLUSTER_AUTHORIZATION_FAILED"),
        ("alice", "InitProducerId idempotent (WRITE on a topic)", None,
         lambda c, _: init_producer_id(c), "NONE"),
        ("bob", "InitProducerId idempotent", None, lambda c, _: init_producer_id(c),
         "CLUSTER_AUTHORIZATION_FAILED"),
        ("alice", "InitProducerId transactional", x_desc, init_producer_id,
         "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
        ("alice", "EndTxn", x_desc, end_txn, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"),
        ("alice", "AddOffsetsToTxn, group without READ", x_write,
         lambda c, x: add_offsets_to_txn(c, x, g_desc), "GROUP_AUTHORIZATION_FAILED"),
        ("alice", "WriteTxnMarkers", t_write, write_txn_markers,
         "CLUSTER_AUTHORIZATION_FAILED"),
        ("alice", "ElectLeaders", t_write, elect_leaders, "CLUSTER_AUTHORIZATION_FAILED"),
    ]
    mismatches = []
    for principal, action, resource, run, expected in rows:
        got = name(run(conns[principal], resource))
        if got != expected:
            mismatches.append(f"{principal} {action} {resource}: got {got}, want {expected}")
    for c in conns.values():
        c.close()
    assert not mismatches, f"{len(mismatches)} of {len(rows)} rows differ:\n" + \
        "\n".join(mismatches)


def test_metadata_hides_topics_and_reports_operations(matrix_broker):
    b = matrix_broker
    u = unique("h")
    seen, hidden = f"{u}-seen", f"{u}-hidden"
    make_topics(b, seen, hidden)
    add_acls(b, acl(T, seen, "alice", O.READ))
    alice = Conn(b, "alice")
    topics, cluster_ops = metadata(alice, None, ops=True)
    assert seen in topics and hidden not in topics
    # READ implies DESCRIBE: bits READ (3) and DESCRIBE (8).
    assert topics[seen] == (0, (1 << 3) | (1 << 8))
    assert cluster_ops == 0  # no DESCRIBE on the cluster
    named, _ = metadata(alice, [hidden])
    assert named[hidden][0] == 29
    admin = Conn(b, "admin")
    topics, cluster_ops = metadata(admin, None, ops=True)
    assert seen in topics and hidden in topics
    assert cluster_ops == sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
    err, groups = list_groups(alice)
    assert err == 0


def test_clients_see_the_errors(matrix_broker):
    """librdkafka reports the broker's refusal to the application."""
    from confluent_kafka import Producer
    b = matrix_broker
    topic = unique("ck")
    make_topics(b, topic)
    p = Producer({"bootstrap.servers": b.sasl_bootstrap, **sasl_conf("bob"),
                  "message.timeout.ms": 5000})
    errors = []
    p.produce(topic, b"v", on_delivery=lambda err, _: errors.append(err))
    p.flush(15)
    assert errors and errors[0] is not None
    assert errors[0].name() == "TOPIC_AUTHORIZATION_FAILED", errors[0]
    # librdkafka's describe_acls answers an empty list for a refused DescribeAcls: the raw
    # request shows Kafka's error.
    bob = Conn(b, "bob")
    r = bob.call(29, 1, I8(1) + S(None) + I8(1) + S(None) + S(None) + I8(1) + I8(1))
    r.i32()
    assert name(r.i16()) == "CLUSTER_AUTHORIZATION_FAILED"
    # CreateAcls by a principal without ALTER on the cluster: librdkafka reports it.
    a = AdminClient({"bootstrap.servers": b.sasl_bootstrap, **sasl_conf("bob")})
    for f in a.create_acls([acl(T, topic, "bob", O.READ)], request_timeout=TIMEOUT).values():
        with pytest.raises(KafkaException) as refused:
            f.result(timeout=TIMEOUT)
        assert refused.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"

def test_allow_everyone_if_no_acl_found(start_broker):
    b = acl_broker(start_broker, **{"allow.everyone.if.no.acl.found": "true"})
    u = unique("e")
    free, guarded = f"{u}-free", f"{u}-guarded"
    make_topics(b, free, guarded)
    add_acls(b, acl(T, guarded, "alice", O.READ))
    bob = Conn(b, "bob")
    # No ACL on the topic: everyone may; an ACL for someone else: no one else may.
    assert name(produce(bob, free)) == "NONE"
    assert name(produce(bob, guarded)) == "TOPIC_AUTHORIZATION_FAILED"
    anonymous = Conn(b, None)
    assert name(fetch(anonymous, free)) == "NONE"
    assert name(fetch(anonymous, guarded)) == "TOPIC_AUTHORIZATION_FAILED"


def test_bad_super_users_stop_start_up(tmp_path):
    import subprocess
    from conftest import BROKER_BIN
    argv = [BROKER_BIN, "start"]
    for key, value in {"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
                       "log.dirs": str(tmp_path / "data"),
                       "authorizer.class.name": AUTHORIZER,
                       "super.users": "admin"}.items():
        argv += ["--override", f"{key}={value}"]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert run.returncode != 0
    assert "super.users" in run.stderr + run.stdout, (run.stderr + run.stdout)[-2000:]


"""A 3-node cluster of the real broker binary for tests/e2e/test_cluster.py and
scripts/cluster_figures.py.

Every node is a combined broker and controller started as issue 20 describes:

    broker start --override process.roles=broker,controller --override node.id=N
                 --override controller.quorum.voters=1@H:C1,2@H:C2,3@H:C3
                 --override listeners=PLAINTEXT://H:BN,CONTROLLER://H:CN
                 --override controller.listener.names=CONTROLLER
                 --override log.dirs=DIR/node-N/data --override num.shards=1 [more overrides]

Each node is a conftest.Broker (same log handling: DIR/node-N/nodeN.stderr.log, every start
appended with its command line; SIGKILL on pytest's death). The cluster is asked what it
thinks with raw requests sent to ONE chosen node (no client library that would pick another
node or cache an answer): Metadata v1 (brokers, leaders, replicas), DescribeCluster v0 (the
controller id), CreateTopics v2 and Produce v3.

    c = Cluster(tmp_path, overrides={"broker.session.timeout.ms": 3000})
    c.start()                       # all nodes at once; waits until the cluster has formed
    c.controller_id()               # the id every live node names, or None while they differ
    c.kill9(i); c.restart(i)        # SIGKILL; the same command, dir and ports again
    c.sigstop(i); c.sigcont(i)
    c.close()                       # SIGCONT + SIGTERM to all (SIGKILL after 30 s)
    c.close(kill=True)              # SIGKILL to all (the fixture's teardown)

For replication (issue 21, tests/e2e/test_replication.py): CreateTopics v2 with topic configs
(`create_topic_configs`), ListOffsets v2 latest at READ_UNCOMMITTED (`latest_offset`, the high
watermark a consumer sees), each partition's ISR as one node tells it (`partition_states`),
`wait_isr_full` and each node's data dir (`data_dir`).
"""

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import kproto as kp
from conftest import Broker, free_port

DESCRIBE_CLUSTER = 60
LIST_OFFSETS = 2
NOT_ENOUGH_REPLICAS = 19
NOT_LEADER_OR_FOLLOWER = 6
INVALID_REPLICATION_FACTOR = 38
NOT_CONTROLLER = 41
REQUEST_TIMEOUT = float(os.environ.get("CLUSTER_REQUEST_TIMEOUT", "5"))
FORM_TIMEOUT = float(os.environ.get("CLUSTER_FORM_TIMEOUT", "60"))


class Unreachable(Exception):
    """The node did not answer (refused, reset, timed out)."""


def wait_until(cond, timeout, what, describe=lambda: "", interval=0.05):
    """Polls cond() until it returns something truthy (returned) or `timeout` seconds pass
    (AssertionError naming `what` and describe()'s last state)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not within {timeout}s; last state: {describe()}")
        time.sleep(interval)


def unique_ports(n):
    """n distinct free ports (free_port can hand out the same one twice)."""
    ports = []
    while len(ports) < n:
        p = free_port()
        if p not in ports:
            ports.append(p)
    return ports


# ---------------------------------------------------------------------------------------------
# Raw requests to one node.
def _uvarint(r):
    shift = n = 0
    while True:
        b = r.take(1)[0]
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n


def _compact_str(r):
    n = _uvarint(r)
    return None if n == 0 else r.take(n - 1).decode()


_corr = [100]
_corr_lock = threading.Lock()


def _next_corr():
    with _corr_lock:
        _corr[0] += 1
        return _corr[0]


def request(addr, build, parse, timeout=REQUEST_TIMEOUT):
    """One request on a fresh connection to addr ("host:port"): build(corr) -> frame,
    parse(reader) -> result. Connection trouble raises Unreachable."""
    corr = _next_corr()
    try:
        with kp.connect(addr, timeout=timeout) as s:
            s.settimeout(timeout)
            r = kp.roundtrip(s, build(corr), corr)
    except (OSError, ConnectionError) as e:
        raise Unreachable(f"{addr}: {e}") from e
    return parse(r)


def parse_metadata_v1(r):
    """{"brokers": {id: (host, port)}, "controller": id, "topics": {name: {"error": e,
        "partitions": {p: {"error": e, "leader": id, "replicas": [id], "isr": [id]}}}}}"""
    brokers = {}
    for _ in range(r.i32()):
        node = r.i32()
        host = r.string()
        port = r.i32()
        r.string()  # rack
        brokers[node] = (host, port)
    controller = r.i32()
    topics = {}
    for _ in range(r.i32()):
        err = r.i16()
        name = r.string()
        r.i8()  # is_internal
        parts = {}
        for _ in range(r.i32()):
            perr = r.i16()
            p = r.i32()
            leader = r.i32()
            replicas = [r.i32() for _ in range(r.i32())]
            isr = [r.i32() for _ in range(r.i32())]
            parts[p] = {"error": perr, "leader": leader, "replicas": replicas, "isr": isr}
        topics[name] = {"error": err, "partitions": parts}
    return {"brokers": brokers, "controller": controller, "topics": topics}


def describe_cluster_v0(corr):
    body = kp.i8(0) + kp.uvarint(0)  # include_cluster_authorized_operations, tagged fields
    return kp.frame(kp.request_header_v2(DESCRIBE_CLUSTER, 0, corr) + body)


def parse_describe_cluster_v0(r):
    """{"error", "message", "cluster_id", "controller", "brokers": {id: (host, port)}}"""
    _uvarint(r)  # response header tagged fields
    out = {"throttle": r.i32(), "error": r.i16(), "message": _compact_str(r)}
    out["cluster_id"] = _compact_str(r)
    out["controller"] = r.i32()
    out["brokers"] = {}
    for _ in range(_uvarint(r) - 1):
        node, host, port = r.i32(), _compact_str(r), r.i32()
        _compact_str(r)  # rack
        _uvarint(r)  # tagged fields
        out["brokers"][node] = (host, port)
    return out


def create_topics_v2_configs(corr, name, partitions, rf, configs, timeout_ms=30000):
    """CreateTopics v2 of one topic with topic configs ({name: value})."""
    cfg = [kp.string(k) + kp.string(str(v)) for k, v in (configs or {}).items()]
    body = (kp.array([kp.string(name) + kp.i32(partitions) + kp.i16(rf) + kp.array([])
                      + kp.array(cfg)])
            + kp.i32(timeout_ms) + kp.i8(0))
    return kp.frame(kp.request_header_v1(kp.CREATE_TOPICS, 2, corr) + body)


def list_offsets_v2(corr, topic, partitions, timestamp=-1):
    """ListOffsets v2 (a consumer's: replica -1, READ_UNCOMMITTED) at `timestamp` (-1 latest,
    -2 earliest) for each of `partitions`."""
    parts = [kp.i32(p) + kp.i64(timestamp) for p in partitions]
    body = kp.i32(-1) + kp.i8(0) + kp.array([kp.string(topic) + kp.array(parts)])
    return kp.frame(kp.request_header_v1(LIST_OFFSETS, 2, corr) + body)


def parse_list_offsets_v2(r):
    """{partition: (error_code, offset)} of the one topic asked."""
    r.i32()  # throttle_time_ms
    out = {}
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            p, err = r.i32(), r.i16()
            r.i64()  # timestamp
            out[p] = (err, r.i64())
    return out


# ---------------------------------------------------------------------------------------------
class Node(Broker):
    """A conftest.Broker whose start can leave the wait for its port to the caller: a node may
    not listen before a quorum exists, so the cluster spawns all nodes, then waits."""

    defer_ready = False

    def wait_ready(self, timeout=None):
        if not self.defer_ready:
            super().wait_ready(*([timeout] if timeout is not None else []))


COMBINED, CONTROLLER, BROKER = "broker,controller", "controller", "broker"


def running_cluster(request, workdir, **kw):
    """For a fixture to `yield from`: a started Cluster (its nodes' logs reported with a failed
    test), closed after the test."""
    import gc

    request.node._e2e_brokers = []
    c = Cluster(workdir, **kw)
    request.node._e2e_brokers.extend(c.nodes.values())
    c.start()
    yield c
    gc.collect()  # drop client objects a failed test left behind before the nodes go away
    # Killed, not stopped: nodes stopped all at once each wait out their controlled shutdown
    # (CONTROLLED_SHUTDOWN_WAIT, 10 s: no other live broker can take their leaderships), and
    # nothing after a test reads their exit. Tests of the graceful path call stop() or close().
    c.close(kill=True)


class Cluster:
    """`roles`: one process.roles per node (default: every node combined). Voters are the
    nodes with the controller role; a controller-only node has only its CONTROLLER listener
    (it is waited for there), a broker-only node only its PLAINTEXT one. Questions go to
    broker nodes only."""

    def __init__(self, workdir, n=3, overrides=None, host="127.0.0.1", roles=None,
                 extra_listener=None, node_overrides=None):
        """`extra_listener`: (name, security protocol) of one more listener on each broker
        node, on `extra_ports[i]` (e.g. a SASL listener between brokers);
        `node_overrides`: {node id: {key: value}} applied after `overrides`."""
        self.workdir = Path(workdir)
        self.roles = {i: r for i, r in enumerate(roles or [COMBINED] * n, start=1)}
        self.n = n = len(self.roles)
        self.host = host
        ports = unique_ports(3 * n)
        self.broker_ports = {i: ports[3 * (i - 1)] for i in range(1, n + 1)}
        self.controller_ports = {i: ports[3 * (i - 1) + 1] for i in range(1, n + 1)}
        self.extra_ports = {i: ports[3 * (i - 1) + 2] for i in range(1, n + 1)}
        voters = ",".join(f"{i}@{host}:{self.controller_ports[i]}" for i in self.voter_ids)
        self.nodes = {}
        for i in self.ids:
            node_dir = self.workdir / f"node-{i}"
            role = self.roles[i]
            listeners = []
            if "broker" in role:
                listeners.append(f"PLAINTEXT://{host}:{self.broker_ports[i]}")
            if "controller" in role:
                listeners.append(f"CONTROLLER://{host}:{self.controller_ports[i]}")
            protocol_map = {}
            if extra_listener and "broker" in role:
                name, protocol = extra_listener
                listeners.append(f"{name}://{host}:{self.extra_ports[i]}")
                protocol_map = {"listener.security.protocol.map":
                                f"PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,{name}:{protocol}"}
            settings = {
                "process.roles": role,
                "node.id": i,
                "controller.quorum.voters": voters,
                "listeners": ",".join(listeners),
                "controller.listener.names": "CONTROLLER",
                "log.dirs": str(node_dir / "data"),
                "num.shards": 1,
            }
            settings.update(protocol_map)
            settings.update(overrides or {})
            settings.update((node_overrides or {}).get(i, {}))
            port = self.broker_ports[i] if "broker" in role else self.controller_ports[i]
            self.nodes[i] = Node(node_dir, overrides=settings, port=port, name=f"node{i}")
        self.stopped = set()  # SIGSTOPped
        self.cut_off = set()  # unreachable by iptables (see `cut`)

    # -- addresses ---------------------------------------------------------------------------
    @property
    def ids(self):
        return list(range(1, self.n + 1))

    @property
    def voter_ids(self):
        return [i for i in self.ids if "controller" in self.roles[i]]

    @property
    def broker_ids(self):
        return [i for i in self.ids if "broker" in self.roles[i]]

    def addr(self, i):
        return f"{self.host}:{self.broker_ports[i]}"

    def bootstrap(self, i=None):
        """One node's address (i), or all the brokers'."""
        return self.addr(i) if i is not None else ",".join(self.addr(j)
                                                             for j in self.broker_ids)

    def alive(self, i):
        return self.nodes[i].alive()

    def live(self):
        """Ids of the nodes running, not SIGSTOPped and not cut off."""
        return [i for i in self.ids
                if self.alive(i) and i not in self.stopped and i not in self.cut_off]

    def live_brokers(self):
        """Ids of the live nodes with the broker role (those clients can ask)."""
        return [i for i in self.live() if i in self.broker_ids]

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, wait=True):
        """Starts every node at once (one alone may not open its ports before a quorum
        exists), waits for each to listen and, with wait, until the cluster has formed.
        Spawned from this thread: the nodes get SIGKILL when the thread that spawned them
        ends (conftest's PR_SET_PDEATHSIG)."""
        for i in self.ids:
            node = self.nodes[i]
            node.defer_ready = True
            try:
                node.start()
            finally:
                node.defer_ready = False
        for i in self.ids:
            self.nodes[i].wait_ready()
        if wait:
            self.wait_formed()
        return self

    def _parallel(self, calls):
        errors = []

        def run(fn):
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(fn,)) for fn in calls]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def kill9(self, i):
        self.stopped.discard(i)
        return self.nodes[i].kill()

    def stop(self, i):
        self.sigcont(i)
        return self.nodes[i].stop()

    def restart(self, i, wait=True):
        """Starts node i again with the same command (dir, ports); it must not be running.
        With wait, waits until every live node lists it as a broker again."""
        assert not self.alive(i), f"node {i} is still running"
        self.nodes[i].start()
        if wait:
            self.wait_registered(i)

    def sigstop(self, i):
        os.kill(self.nodes[i].proc.pid, signal.SIGSTOP)
        self.stopped.add(i)

    def sigcont(self, i):
        if self.alive(i):
            os.kill(self.nodes[i].proc.pid, signal.SIGCONT)
        self.stopped.discard(i)

    # -- network cuts (iptables; root) -----------------------------------------------------
    def _cut_rules(self, i):
        """Rules that make node i unreachable: nothing gets into its listeners and nothing its
        listeners send gets out. Its own outgoing connections (heartbeats to the controller,
        fetches from other leaders, Raft messages it sends) still go through: the others
        cannot reach it while it can reach them (an asymmetric cut)."""
        tag = ["-m", "comment", "--comment", f"e2e-cut-{os.getpid()}-{i}"]
        rules = []
        for port in (self.broker_ports[i], self.controller_ports[i]):
            rules.append(["INPUT", "-p", "tcp", "--dport", str(port), *tag, "-j", "DROP"])
            rules.append(["OUTPUT", "-p", "tcp", "--sport", str(port), *tag, "-j", "DROP"])
        return rules

    def cut(self, i):
        for rule in self._cut_rules(i):
            subprocess.run(["iptables", "-I", *rule], check=True, capture_output=True)
        self.cut_off.add(i)

    def heal(self, i):
        for rule in self._cut_rules(i):
            subprocess.run(["iptables", "-D", *rule], capture_output=True)
        self.cut_off.discard(i)

    def close(self, kill=False):
        for i in list(self.cut_off):
            self.heal(i)
        for i in self.ids:
            self.sigcont(i)
        self._parallel([(self.nodes[i].kill if kill else self.nodes[i].stop) for i in self.ids])

    # -- questions to one node ---------------------------------------------------------------
    def metadata(self, i, topics=None, timeout=REQUEST_TIMEOUT):
        """Metadata v1 from node i (all topics when topics is None)."""
        return request(self.addr(i), lambda c: kp.metadata_v1(c, topics), parse_metadata_v1,
                       timeout)

    def describe_cluster(self, i, timeout=REQUEST_TIMEOUT):
        return request(self.addr(i), describe_cluster_v0, parse_describe_cluster_v0, timeout)

    def create_topic(self, i, name, partitions, rf, timeout_ms=30000):
        """CreateTopics v2 through node i: (error_code, error_message)."""
        res = request(self.addr(i),
                      lambda c: kp.create_topics_v2(c, name, partitions, rf, timeout_ms),
                      kp.parse_create_topics_v2, timeout=timeout_ms / 1000 + 10)
        return res[name]

    def produce(self, i, topic, partition, value=b"v", acks=-1):
        """Produce v3 of one record through node i: (error_code, base_offset)."""
        batch = kp.record_batch([(None, value)])
        return request(self.addr(i),
                       lambda c: kp.produce_v3(c, topic, partition, batch, acks=acks),
                       lambda r: kp.parse_produce_v3(r)[(topic, partition)][:2])

    def create_topic_configs(self, i, name, partitions, rf, configs, timeout_ms=30000):
        """CreateTopics v2 with topic configs through node i: (error_code, error_message)."""
        res = request(self.addr(i),
                      lambda c: create_topics_v2_configs(c, name, partitions, rf, configs,
                                                         timeout_ms),
                      kp.parse_create_topics_v2, timeout=timeout_ms / 1000 + 10)
        return res[name]

    def latest_offset(self, i, topic, partitions, timestamp=-1):
        """ListOffsets v2 latest (or `timestamp`) through node i: {partition: (error, offset)}.
        At READ_UNCOMMITTED a partition's leader answers its high watermark."""
        return request(self.addr(i), lambda c: list_offsets_v2(c, topic, partitions, timestamp),
                       parse_list_offsets_v2)

    def partition_states(self, i, topic):
        """{partition: {"error", "leader", "replicas", "isr"}} as node i's Metadata v1 tells
        it, or None when it does not answer or does not know the topic."""
        md = self.try_(self.metadata, i, [topic])
        t = md and md["topics"].get(topic)
        return t["partitions"] if t and t["error"] == 0 else None

    def data_dir(self, i):
        """Node i's log.dirs (a partition is <data_dir>/<topic>-<partition>)."""
        return self.nodes[i].data_dir

    def wait_isr_full(self, topic, partitions, timeout=60, among=None):
        """Every node in `among` (default: the live brokers) names, for every partition of
        `topic`, a live leader and an ISR holding every replica. Returns the partitions as the
        first of them tells them."""
        def full():
            first = None
            for i in among or self.live_brokers():
                parts = self.partition_states(i, topic)
                if not parts or len(parts) != partitions:
                    return None
                for v in parts.values():
                    if v["error"] != 0 or v["leader"] not in self.live() or \
                            sorted(v["isr"]) != sorted(v["replicas"]):
                        return None
                first = first or parts
            return first

        return wait_until(full, timeout, f"every ISR of {topic} full",
                          lambda: self.describe_isr(topic), interval=0.1)

    def describe_isr(self, topic):
        out = []
        for i in self.ids:
            parts = self.partition_states(i, topic) if i in self.live_brokers() else None
            view = None if parts is None else {
                p: (v["error"], v["leader"], v["replicas"], v["isr"])
                for p, v in sorted(parts.items())}
            out.append(f"node {i}: {view}")
        return "; ".join(out)

    def try_(self, fn, *args, **kw):
        """fn(*args) or None when the node does not answer."""
        try:
            return fn(*args, **kw)
        except Unreachable:
            return None

    def brokers_seen(self, i):
        """The broker ids node i's Metadata lists, or None when it does not answer."""
        md = self.try_(self.metadata, i, [])
        return None if md is None else sorted(md["brokers"])

    def controllers(self, among=None):
        """{node: controller id its DescribeCluster names (None: no answer or an error)}."""
        out = {}
        for i in among or self.live_brokers():
            d = self.try_(self.describe_cluster, i, timeout=2)
            out[i] = d["controller"] if d and d["error"] == 0 else None
        return out

    def controller_id(self, among=None):
        """The controller every asked node (default: the live ones) names, if they agree on
        one that is a live node; else None."""
        seen = set(self.controllers(among).values())
        if len(seen) == 1:
            (c,) = seen
            if c is not None and c in self.live():
                return c
        return None

    # -- waiting -----------------------------------------------------------------------------
    def wait_formed(self, timeout=FORM_TIMEOUT):
        """Every live node lists every live node as a broker (at its PLAINTEXT address) and
        all name the same live controller. Returns the controller id."""
        def formed():
            live = self.live_brokers()
            for i in live:
                md = self.try_(self.metadata, i, [])
                if md is None or sorted(md["brokers"]) != live:
                    return None
                if any(md["brokers"][j] != (self.host, self.broker_ports[j]) for j in live):
                    return None
            return self.controller_id()

        return wait_until(formed, timeout, "cluster formed", self.describe_state, interval=0.1)

    def wait_registered(self, i, timeout=FORM_TIMEOUT, among=None):
        """Every live node (or `among`) lists broker i."""
        def listed():
            return all(i in (self.brokers_seen(j) or [])
                       for j in (among or self.live_brokers()))

        return wait_until(listed, timeout, f"node {i} listed by all", self.describe_state,
                          interval=0.1)

    def wait_new_controller(self, old, among, timeout):
        """Polls DescribeCluster on `among` until every one names the same controller other
        than `old`; returns (controller, seconds waited)."""
        t0 = time.monotonic()

        def new():
            c = self.controller_id(among)
            return c if c is not None and c != old else None

        c = wait_until(new, timeout, f"a controller other than {old}",
                       lambda: self.controllers(among), interval=0.02)
        return c, time.monotonic() - t0

    def wait_topic(self, name, partitions, among=None, timeout=30, leaders_live=True):
        """Every node in `among` (default: the live ones) has `name` with `partitions`
        partitions, each with a leader (a live node when leaders_live). Returns the
        partitions as the first of them sees them."""
        def ready():
            first = None
            for i in among or self.live_brokers():
                md = self.try_(self.metadata, i, [name])
                t = md and md["topics"].get(name)
                if not t or t["error"] != 0 or len(t["partitions"]) != partitions:
                    return None
                for p in t["partitions"].values():
                    if p["leader"] < 0 or (leaders_live and p["leader"] not in self.live()):
                        return None
                first = first or t["partitions"]
            return first

        return wait_until(ready, timeout, f"topic {name} with {partitions} partitions",
                          lambda: self.describe_state(name), interval=0.1)

    def describe_state(self, topic=None):
        lines = []
        for i in self.ids:
            state = ("SIGSTOPped" if i in self.stopped else "alive") if self.alive(i) \
                else "dead"
            asked = i in self.live_brokers()
            md = self.try_(self.metadata, i, [topic] if topic else []) if asked else None
            dc = self.try_(self.describe_cluster, i, timeout=2) if asked else None
            brokers = sorted(md["brokers"]) if md else None
            parts = None
            if md and topic and topic in md["topics"]:
                parts = {p: (v["error"], v["leader"], v["replicas"])
                         for p, v in sorted(md["topics"][topic]["partitions"].items())}
            lines.append(f"node {i} ({state}): brokers={brokers} "
                         f"controller={dc and dc['controller']} "
                         + (f"{topic}={parts}" if topic else ""))
        return "; ".join(lines)

    def tails(self, lines=40):
        return "\n".join(f"--- node {i} ({self.roles[i]}) ---\n{self.nodes[i].tail(lines)}"
                         for i in self.ids)


"""Record replication across 3 real broker processes (issue 21), through cluster_harness.

The behaviour checked is Kafka's: a topic of replication factor 2 or 3 with
`min.insync.replicas=2`; followers fetch from the leader; the high watermark (HW) is the least
log end over the ISR and consumers see only records below it; acks=all is answered once the HW
passes the batch, NOT_ENOUGH_REPLICAS (19) when the ISR is smaller than min.insync.replicas
before appending; the leader drops from the ISR a follower that has not caught up for
`replica.lag.time.max.ms` (3000 here) and a fenced broker leaves every ISR; a new leader is
elected from the ISR; a returning broker truncates divergent records and rejoins the ISR once
caught up. As in Kafka 4 with KIP-966 (eligible leader replicas), the HW does not move while
the ISR is smaller than min.insync.replicas, so an acks=1 record written then is not visible
until the ISR grows again.

Tests:
- test_min_insync_replicas_seed: rf 2, one replica killed -9: acks=all is NOT_ENOUGH_REPLICAS
  (nothing appended), acks=1 accepted, the HW (ListOffsets latest, Fetch's high watermark) stays
  put; the replica restarted rejoins the ISR, the HW reaches the log end and acks=all works.
- test_faults_lose_no_acknowledged_record: an idempotent librdkafka producer (acks=all) writes
  keyed, counted records to 3 partitions (rf 3) for the whole run while the main thread
  applies faults in turn (kill -9 of a leader, kill -9 of the active controller, SIGSTOP of a
  leader past the session timeout, a leader cut off by iptables so that no one reaches it
  while it reaches everyone, a rolling restart); then every acknowledged record must be
  read back at its offset, no value twice, counters in order per partition, and every replica's
  segment files identical below the HW. After each fault it waits for a new leader (and
  fencing) and for every partition to be acknowledged again; after each return, for every ISR
  to be full again (REPLICATION_HEAL_TIMEOUT, default 60 s): when one is not, the faults stop
  there, the checks run, and the test fails on that after them. Sized by
  REPLICATION_FAULT_RECORDS (at least this many acknowledged records, default 6,000; the run
  goes on until both the faults and this are done), REPLICATION_FAULT_ROUNDS (rounds of the 4
  faults, default 1) and REPLICATION_FAULT_RATE (records/s, default 300): the default run is
  meant to stay under 3 minutes on 2 cores; REPLICATION_FAULT=0 skips it. The long run:
  REPLICATION_FAULT_RECORDS=100000 REPLICATION_FAULT_RATE=1500 REPLICATION_FAULT_ROUNDS=3.
- test_checkers_catch_a_lossy_history: the consistency checks (pure functions of the
  acknowledged records, the consumed records and the replicas' logs) fail on histories with a
  lost, moved, duplicated or reordered record and on divergent or short replicas.
"""

import functools
import gc
import os
import shutil
import struct
import threading
import time
from collections import namedtuple
from pathlib import Path

import pytest
from conftest import BROKER_BIN

import kproto as kp
from cluster_harness import NOT_ENOUGH_REPLICAS, Cluster, request, wait_until

SESSION_MS = 3000
LAG_MS = 3000
FAST = {"broker.session.timeout.ms": SESSION_MS, "broker.heartbeat.interval.ms": 500}
SESSION_S = SESSION_MS / 1000
LAG_S = LAG_MS / 1000
MIN_ISR = {"min.insync.replicas": 2}

FAULT_RECORDS = int(os.environ.get("REPLICATION_FAULT_RECORDS", "6000"))
FAULT_ROUNDS = int(os.environ.get("REPLICATION_FAULT_ROUNDS", "1"))
FAULT_RATE = float(os.environ.get("REPLICATION_FAULT_RATE", "300"))
FAULT_ENABLED = os.environ.get("REPLICATION_FAULT", "1") != "0"
# The iptables cut (fault 5) needs root and iptables (scripts/test.sh installs it);
# REPLICATION_CUT=0 leaves it out.
CUT_ENABLED = (os.environ.get("REPLICATION_CUT", "1") != "0" and os.geteuid() == 0
               and shutil.which("iptables") is not None)
# How long a returned node may take to be in every ISR again (a follower catching up).
HEAL_TIMEOUT = float(os.environ.get("REPLICATION_HEAL_TIMEOUT", "60"))


@functools.lru_cache(maxsize=None)
def binary_knows(key):
    """Whether the broker binary names the config `key` (an unknown --override is refused at
    start, so a key the binary predates is left out rather than failing every start)."""
    needle = key.encode()
    try:
        with open(BROKER_BIN, "rb") as f:
            tail = b""
            while True:
                chunk = f.read(1 << 24)
                if not chunk:
                    return False
                if needle in tail + chunk:
                    return True
                tail = chunk[-len(needle):]
    except OSError:
        return False


def cluster_overrides():
    out = dict(FAST)
    if binary_knows("replica.lag.time.max.ms"):
        out["replica.lag.time.max.ms"] = LAG_MS
    return out


@pytest.fixture
def make_cluster(request, tmp_path):
    """Factory: make_cluster(overrides, roles) -> a started, formed Cluster (3 combined nodes
    unless `roles` says otherwise) with short sessions and replica.lag.time.max.ms=3000; node
    logs attached to a failure report; all stopped after."""
    made = []
    request.node._e2e_brokers = []

    def make(overrides=None, roles=None):
        settings = cluster_overrides()
        settings.update(overrides or {})
        c = Cluster(tmp_path / f"cluster{len(made)}", overrides=settings, roles=roles)
        made.append(c)
        request.node._e2e_brokers.extend(c.nodes.values())
        c.start()
        return c

    yield make
    gc.collect()
    for c in made:
        c.close(kill=True)  # see cluster_harness.running_cluster


def unique(prefix):
    import uuid
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_replicated(c, name, partitions, rf, through=None):
    through = through or c.controller_id() or c.live_brokers()[0]
    err = c.create_topic_configs(through, name, partitions, rf, MIN_ISR)
    assert err[0] == 0, f"CreateTopics {name} (rf {rf}, {MIN_ISR}) through node {through}: {err}"
    c.wait_topic(name, partitions)
    return c.wait_isr_full(name, partitions, timeout=30)


# ---------------------------------------------------------------------------------------------
# Kafka's record batch v2 as stored in a segment file: baseOffset i64, batchLength i32,
# partitionLeaderEpoch i32, magic i8, crc u32, attributes i16, lastOffsetDelta i32, ...
Batch = namedtuple("Batch", "base last raw")
BATCH_HEADER = 12  # baseOffset + batchLength
MIN_BATCH_LENGTH = 49  # batchLength of a batch without records


def parse_batches(data):
    """The complete v2 batches at the start of `data` (a segment file or a Fetch's records),
    in order. Stops at a torn or zero-filled tail (a preallocated segment, a kill -9)."""
    out = []
    pos = 0
    while pos + BATCH_HEADER <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        end = pos + BATCH_HEADER + length
        if length < MIN_BATCH_LENGTH or end > len(data) or data[pos + 16] != 2:
            break
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append(Batch(base, base + last_delta, bytes(data[pos:end])))
        pos = end
    return out


def read_replica_log(data_dir, topic, partition):
    """Every batch of one replica's segment files (<data_dir>/<topic>-<partition>/*.log, by
    base offset); [] when the node holds no such directory."""
    d = Path(data_dir) / f"{topic}-{partition}"
    batches = []
    for seg in sorted(d.glob("*.log")) if d.is_dir() else []:
        batches += parse_batches(seg.read_bytes())
    return batches


def replica_logs(c, topic, partitions, replicas):
    """{partition: {node: [Batch]}} for every replica of every partition."""
    return {p: {n: read_replica_log(c.data_dir(n), topic, p) for n in replicas[p]}
            for p in range(partitions)}


# ---------------------------------------------------------------------------------------------
# Consistency checks: pure functions, each returning a list of problems (empty: consistent).
#   acked:    [(partition, offset, value)] from the producer's successful delivery reports
#   consumed: {partition: [(offset, value)]} in the order a consumer read them
#   logs:     {partition: {node: [Batch]}} every replica's log
#   hw:       {partition: high watermark}
# A value is b"<partition>:<counter>", the counter counting up per partition as produced.
def counter_of(value):
    return int(value.split(b":", 1)[1])


def check_acked_present(acked, consumed):
    """Every acknowledged record is read back at its acknowledged offset."""
    at = {p: {o: v for o, v in recs} for p, recs in consumed.items()}
    problems = []
    for p, o, v in acked:
        got = at.get(p, {}).get(o)
        if got != v:
            problems.append(f"acked {v!r} at {p}/{o}: read "
                            + ("nothing" if got is None else repr(got)))
    return problems


def check_no_duplicates(consumed):
    seen = {}
    problems = []
    for p, recs in consumed.items():
        for o, v in recs:
            if v in seen:
                problems.append(f"{v!r} at {p}/{o} and at {seen[v]}")
            else:
                seen[v] = f"{p}/{o}"
    return problems


def check_counter_order(consumed):
    """Offsets increase and, per partition, the counters increase with the offsets (an
    idempotent producer keeps a partition's order through retries)."""
    problems = []
    for p, recs in consumed.items():
        prev = None
        for o, v in recs:
            if prev is not None:
                po, pv = prev
                if o <= po:
                    problems.append(f"partition {p}: offset {o} read after {po}")
                if counter_of(v) <= counter_of(pv):
                    problems.append(f"partition {p}: {v!r} at {o} after {pv!r} at {po}")
            prev = (o, v)
    return problems


def check_replicas_identical(logs, hw):
    """Every replica holds the same batches, byte for byte, from its first batch up to the
    high watermark, with no gap, and reaches it."""
    problems = []
    for p, by_node in logs.items():
        h = hw[p]
        below = {}
        for node, batches in by_node.items():
            mine = [b for b in batches if b.base < h]
            for a, b in zip(mine, mine[1:]):
                if b.base != a.last + 1:
                    problems.append(f"partition {p} node {node}: batch at {b.base} after one "
                                    f"ending at {a.last}")
            end = mine[-1].last + 1 if mine else (0 if h == 0 else None)
            if end != h:
                problems.append(f"partition {p} node {node}: its log below the high watermark "
                                f"{h} ends at {end}")
            below[node] = [(b.base, b.last, b.raw) for b in mine]
        nodes = sorted(below)
        for n in nodes[1:]:
            if below[n] != below[nodes[0]]:
                first = next((i for i, (x, y) in enumerate(zip(below[nodes[0]], below[n]))
                              if x != y), min(len(below[n]), len(below[nodes[0]])))
                where = [b[0] for b in (below[nodes[0]][first:first + 1]
                                        or below[n][first:first + 1])]
                problems.append(f"partition {p}: nodes {nodes[0]} and {n} differ below the "
                                f"high watermark {h} from batch #{first} (base offset {where})")
    return problems


def consistency_problems(acked, consumed, logs, hw):
    """Every check's problems, the client's first."""
    out = []
    for name, probs in (("acknowledged record lost or moved", check_acked_present(acked, consumed)),
                        ("value read twice", check_no_duplicates(consumed)),
                        ("order", check_counter_order(consumed)),
                        ("replicas differ", check_replicas_identical(logs, hw))):
        out += [f"{name}: {x}" for x in probs]
    return out


def assert_consistent(acked, consumed, logs, hw):
    problems = consistency_problems(acked, consumed, logs, hw)
    kinds = {}
    for x in problems:
        kinds.setdefault(x.split(":", 1)[0], []).append(x)
    assert not problems, (
        f"{len(problems)} problems ({len(acked)} acknowledged records): "
        + ", ".join(f"{len(v)} {k}" for k, v in kinds.items()) + "; first of each:\n"
        + "\n".join(x for v in kinds.values() for x in v[:8]))


# ---------------------------------------------------------------------------------------------
def fetch_v4_records(c, node, topic, partition, offset=0):
    """(error, high watermark, [Batch]) of a consumer's Fetch v4 from node."""
    res = request(c.addr(node), lambda corr: kp.fetch_v4(corr, topic, partition, offset),
                  kp.parse_fetch_v4)
    err, hw, records = res[(topic, partition)]
    return err, hw, parse_batches(records or b"")


def test_min_insync_replicas_seed(make_cluster):
    c = make_cluster()
    name = unique("seed")
    parts = create_replicated(c, name, 1, 2)
    leader = parts[0]["leader"]
    (follower,) = [n for n in parts[0]["replicas"] if n != leader]
    other = next(n for n in c.ids if n not in parts[0]["replicas"])

    def latest():
        err, off = c.latest_offset(leader, name, [0])[0]
        assert err == 0, f"ListOffsets latest through the leader {leader}: error {err}"
        return off

    for k in range(5):
        assert c.produce(leader, name, 0, f"before-{k}".encode(), acks=-1) == (0, k)
    assert latest() == 5

    c.kill9(follower)
    t0 = time.monotonic()

    def shrunk():
        views = {n: c.partition_states(n, name) for n in (leader, other)}
        return all(v and v[0]["isr"] == [leader] and v[0]["leader"] == leader
                   for v in views.values()) and views

    wait_until(shrunk, SESSION_S + LAG_S + 20,
               f"ISR of {name}/0 shrunk to the leader {leader} after kill -9 of follower "
               f"{follower}", lambda: c.describe_isr(name), interval=0.1)
    print(f"follower {follower} killed: ISR [{leader}] after {time.monotonic() - t0:.2f}s")

    # acks=all with an ISR of 1 < min.insync.replicas 2: refused before appending.
    err, _ = c.produce(leader, name, 0, b"refused", acks=-1)
    assert err == NOT_ENOUGH_REPLICAS, f"acks=all with ISR [{leader}]: error {err}"
    assert latest() == 5
    # acks=1 is appended at the log end (the refused record was not), but the high watermark
    # stays put: a consumer sees none of it.
    assert c.produce(leader, name, 0, b"acks-1", acks=1) == (0, 5)
    for _ in range(5):
        assert latest() == 5, "the high watermark moved with an ISR below min.insync.replicas"
        err, hw, batches = fetch_v4_records(c, leader, name, 0)
        assert (err, hw) == (0, 5), (err, hw)
        assert batches and max(b.last for b in batches) == 4, \
            f"a consumer's Fetch got offsets {[(b.base, b.last) for b in batches]}"
        time.sleep(0.2)

    c.restart(follower)
    t0 = time.monotonic()
    c.wait_isr_full(name, 1, timeout=LAG_S + 30)
    print(f"follower {follower} restarted: back in the ISR after {time.monotonic() - t0:.2f}s")
    wait_until(lambda: latest() == 6, 10, "high watermark at the log end 6", latest)
    err, hw, batches = fetch_v4_records(c, leader, name, 0)
    assert (err, hw) == (0, 6) and batches[-1].last == 5, (err, hw, batches[-1:])
    assert c.produce(leader, name, 0, b"after", acks=-1) == (0, 6)
    assert latest() == 7
    # The follower holds the leader's batches byte for byte.
    wait_until(lambda: not check_replicas_identical(
        replica_logs(c, name, 1, {0: [leader, follower]}), {0: 7}), 10,
        "replicas identical below the high watermark",
        lambda: check_replicas_identical(replica_logs(c, name, 1, {0: [leader, follower]}),
                                         {0: 7}))


# ---------------------------------------------------------------------------------------------
class Workload(threading.Thread):
    """An idempotent librdkafka producer, acks=all, writing keyed records to every partition in
    turn at `rate` records/s until stopped. Value b"<p>:<counter>", the counter per partition.
    Every successful delivery report lands in `acked` as (partition, offset, value). A fatal
    producer error (possible while a new leader lacks the producer's state) is recorded and a
    new producer takes over, counters continuing."""

    def __init__(self, bootstrap, topic, partitions, rate):
        super().__init__(daemon=True, name="replication-workload")
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.acked = []
        self.acked_by = [0] * partitions
        self.errors = []
        self.fatal = []
        self.sent = 0
        self.stop_event = threading.Event()
        self.left = None
        self.crash = None

    def _producer(self):
        from confluent_kafka import Producer

        def on_error(err):
            if err.fatal():
                self.fatal.append(str(err))

        return Producer({
            "bootstrap.servers": self.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 10,
            "message.timeout.ms": 300000,
            # A request in flight to a SIGSTOPped leader is given up (and retried where the
            # new leader is) after 10 s instead of librdkafka's 30 s / 60 s.
            "request.timeout.ms": 10000,
            "socket.timeout.ms": 10000,
            "queue.buffering.max.messages": 1000000,
            "error_cb": on_error,
        })

    def _report(self, err, msg):
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))
            self.acked_by[msg.partition()] += 1
        else:
            self.errors.append(str(err))

    def run(self):
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.crash = e

    def _run(self):
        from confluent_kafka import KafkaException

        prod = self._producer()
        fatal_seen = 0
        counters = [0] * self.partitions
        t0 = time.monotonic()
        while not self.stop_event.is_set():
            due = int((time.monotonic() - t0) * self.rate)
            while self.sent < due and not self.stop_event.is_set():
                p = self.sent % self.partitions
                value = f"{p}:{counters[p]}".encode()
                try:
                    prod.produce(self.topic, key=f"k{p}".encode(), value=value, partition=p,
                                 on_delivery=self._report)
                except BufferError:
                    prod.poll(0.05)
                    continue
                except KafkaException as e:  # a fatal producer refuses every produce()
                    if not e.args[0].fatal():
                        raise
                    if len(self.fatal) == fatal_seen:
                        self.fatal.append(str(e.args[0]))
                    break
                counters[p] += 1
                self.sent += 1
            prod.poll(0.01)
            if len(self.fatal) > fatal_seen:
                fatal_seen = len(self.fatal)
                prod.flush(5)  # fails what is left with the fatal error
                prod = self._producer()
        self.left = prod.flush(120)


def consume_all(bootstrap, topic, hw, timeout=120):
    """{partition: [(offset, value)]} read from the beginning up to each high watermark."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"),
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "fetch.wait.max.ms": 100, "enable.partition.eof": False})
    out = {p: [] for p in hw}
    try:
        cons.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in hw])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all((out[p][-1][0] if out[p] else -1) >= hw[p] - 1 for p in hw):
                break
            for m in cons.consume(num_messages=10000, timeout=0.2):
                if m.error() is None:
                    out[m.partition()].append((m.offset(), m.value()))
    finally:
        cons.close()
    return out


def leaders_of(c, topic, among):
    for i in among:
        parts = c.partition_states(i, topic)
        if parts:
            return {p: v["leader"] for p, v in parts.items()}
    return {}


@pytest.mark.skipif(not FAULT_ENABLED, reason="REPLICATION_FAULT=0")
@pytest.mark.timeout(max(300, int(FAULT_RECORDS / FAULT_RATE * 3) + 300 * FAULT_ROUNDS))
def test_faults_lose_no_acknowledged_record(make_cluster):
    c = make_cluster()
    P = 3
    name = unique("faults")
    parts = create_replicated(c, name, P, 3)
    replicas = {p: v["replicas"] for p, v in parts.items()}
    work = Workload(c.bootstrap(), name, P, FAULT_RATE)
    work.start()
    log = []

    def note(what):
        line = f"{time.monotonic() - t_start:7.1f}s acked={len(work.acked)} {what}"
        log.append(line)
        print(line)

    def progress(what, n=20, timeout=90):
        """Every partition gets n more acknowledgements (writes go on through the fault)."""
        start = list(work.acked_by)
        wait_until(lambda: all(a >= b + n for a, b in zip(work.acked_by, start)) or work.crash,
                   timeout, f"{n} acknowledgements on every partition after {what}",
                   lambda: f"acked by partition {work.acked_by} (from {start}) "
                           f"errors={work.errors[-3:]} fatal={work.fatal[-3:]}; "
                           f"{c.describe_isr(name)}", interval=0.1)
        assert work.crash is None, f"workload crashed: {work.crash!r}"
        note(f"{what}: every partition acknowledged {n} more")

    unhealed = []

    def healed(what):
        """Every node back in every ISR. Without it a further fault could leave a partition
        no eligible leader, so the faults stop there and the run goes on to its checks (the
        broker of before replication never grows an ISR again: its lost records are then
        what the checks report first)."""
        c.wait_formed()
        try:
            c.wait_isr_full(name, P, timeout=HEAL_TIMEOUT)
        except AssertionError as e:
            unhealed.append(f"after {what}: {e}")
            note(f"{what}: ISRs not full within {HEAL_TIMEOUT}s; no further faults")
            return False
        note(f"{what}: every ISR full")
        return True

    def survivors_name_leaders_except(victim, others, timeout):
        def moved():
            for i in others:
                parts = c.partition_states(i, name)
                if not parts or any(v["leader"] in (victim, -1) for v in parts.values()):
                    return None
            return True

        wait_until(moved, timeout, f"node {victim} leads no partition of {name}",
                   lambda: c.describe_isr(name), interval=0.1)

    def fenced(victim, others):
        wait_until(lambda: all(c.brokers_seen(i) == others for i in others), SESSION_S + 20,
                   f"node {victim} fenced", c.describe_state)
        note(f"node {victim} fenced")

    def faults(rnd):
        # 1. kill -9 of a partition leader; a new leader; writes go on; restart.
        victim = leaders_of(c, name, c.live_brokers())[rnd % P]
        others = [i for i in c.ids if i != victim]
        c.kill9(victim)
        note(f"round {rnd}: kill -9 of node {victim} (leader of {name}/{rnd % P})")
        survivors_name_leaders_except(victim, others, SESSION_S + 20)
        progress(f"kill -9 of leader {victim}")
        c.restart(victim)
        if not healed(f"node {victim} restarted"):
            return False

        # 2. kill -9 of the active controller; a new controller; fenced; restart.
        ctl = c.wait_formed()
        others = [i for i in c.ids if i != ctl]
        c.kill9(ctl)
        note(f"round {rnd}: kill -9 of the active controller {ctl}")
        c.wait_new_controller(ctl, others, timeout=30)
        fenced(ctl, others)
        survivors_name_leaders_except(ctl, others, 20)
        progress(f"kill -9 of controller {ctl}")
        c.restart(ctl)
        if not healed(f"node {ctl} restarted"):
            return False

        # 3. SIGSTOP of a leader (not the controller) past the session timeout, SIGCONT.
        ctl = c.wait_formed()
        lead = leaders_of(c, name, c.live_brokers())
        victim = next((n for n in lead.values() if n != ctl), lead[0])
        others = [i for i in c.ids if i != victim]
        c.sigstop(victim)
        note(f"round {rnd}: SIGSTOP of node {victim}")
        fenced(victim, others)
        survivors_name_leaders_except(victim, others, 20)
        progress(f"SIGSTOP of leader {victim}")
        c.sigcont(victim)
        note(f"round {rnd}: SIGCONT of node {victim}")
        c.wait_registered(victim, among=c.ids)
        if not healed(f"node {victim} continued"):
            return False

        # 5. A leader (not the controller) cut off with iptables: nobody reaches it while its
        #    own connections go out. Its followers stop fetching, and its controller, hearing
        #    from no quorum leader, no longer tells its broker where to heartbeat, so it is
        #    fenced after the session timeout and its partitions are led elsewhere (were it
        #    still heard, it would shrink its ISRs to itself and acks=all would wait for min
        #    ISR 2). Nothing it acknowledged may be lost; healed, it rejoins every ISR.
        if CUT_ENABLED:
            ctl = c.wait_formed()
            lead = leaders_of(c, name, c.live_brokers())
            victim = next((n for n in lead.values() if n != ctl), None)
            if victim is not None:
                c.cut(victim)
                note(f"round {rnd}: node {victim} cut off (iptables, inbound)")
                time.sleep(SESSION_S + LAG_S + 2)
                note(f"while cut: {c.describe_isr(name)}")
                c.heal(victim)
                note(f"round {rnd}: node {victim} reachable again")
                if not healed(f"node {victim} healed"):
                    return False
                progress(f"cut of node {victim}")

        # 4. Rolling restart: SIGTERM (controlled shutdown) and start each node in turn.
        for i in c.ids:
            c.stop(i)
            note(f"round {rnd}: node {i} stopped (SIGTERM)")
            progress(f"SIGTERM of node {i}")
            c.restart(i)
            if not healed(f"node {i} restarted"):
                return False
        return True

    t_start = time.monotonic()
    try:
        progress("the start")
        for rnd in range(FAULT_ROUNDS):
            if not faults(rnd):
                break
        wait_until(lambda: len(work.acked) >= FAULT_RECORDS or work.crash,
                   FAULT_RECORDS / FAULT_RATE * 2 + 60, f"{FAULT_RECORDS} acknowledgements",
                   lambda: f"acked={len(work.acked)}", interval=0.5)
    finally:
        work.stop_event.set()
        work.join(180)
    note(f"producer stopped: sent={work.sent} acked={len(work.acked)} "
         f"errors={len(work.errors)} fatal={len(work.fatal)} left={work.left}")
    assert work.crash is None, f"workload crashed: {work.crash!r}"

    # Every node back and caught up; the high watermarks settle.
    for i in c.ids:
        if not c.alive(i):
            c.restart(i)
    c.wait_formed()
    if not unhealed:
        healed("the end")
    lead = leaders_of(c, name, c.ids)

    def hws():
        out = {}
        for p, n in lead.items():
            err, off = c.latest_offset(n, name, [p])[p]
            assert err == 0, f"ListOffsets {name}/{p} through leader {n}: {err}"
            out[p] = off
        return out

    hw = hws()
    for _ in range(50):
        time.sleep(0.3)
        again = hws()
        if again == hw:
            break
        hw = again
    note(f"high watermarks {hw}, leaders {lead}")

    consumed = consume_all(c.bootstrap(), name, hw)
    note(f"consumed {sum(len(v) for v in consumed.values())} records")

    def logs():
        return replica_logs(c, name, P, replicas)

    # Followers may write the last fetched batches a moment after the ISR says caught up.
    try:
        wait_until(lambda: not check_replicas_identical(logs(), hw), 20,
                   "replica logs identical below the high watermark",
                   lambda: check_replicas_identical(logs(), hw)[:5], interval=0.5)
    except AssertionError as e:
        note(str(e)[:300])
    print("\n".join(log))
    assert_consistent(work.acked, consumed, logs(), hw)
    assert not unhealed, f"ISRs not full again: {unhealed}"
    assert len(work.acked) >= FAULT_RECORDS
    assert not work.fatal, f"fatal producer errors: {work.fatal[:3]}"


# ---------------------------------------------------------------------------------------------
def _batch(base, values, epoch=0):
    raw = bytearray(kp.record_batch([(None, v) for v in values], base_offset=base,
                                    base_timestamp=1_700_000_000_000))
    struct.pack_into(">i", raw, 12, epoch)  # partitionLeaderEpoch (not under the CRC)
    return bytes(raw)


def test_checkers_catch_a_lossy_history():
    vals = {p: [f"{p}:{k}".encode() for k in range(6)] for p in range(2)}
    seg = {p: _batch(0, vals[p][:3]) + _batch(3, vals[p][3:]) for p in range(2)}
    # The segment reader: two batches, a torn tail and a zero-filled tail are ignored.
    assert [(b.base, b.last) for b in parse_batches(seg[0])] == [(0, 2), (3, 5)]
    assert [(b.base, b.last) for b in parse_batches(seg[0] + seg[0][:30])] == [(0, 2), (3, 5)]
    assert [(b.base, b.last) for b in parse_batches(seg[0] + bytes(4096))] == [(0, 2), (3, 5)]

    acked = [(p, o, vals[p][o]) for p in range(2) for o in range(6)]
    consumed = {p: [(o, vals[p][o]) for o in range(6)] for p in range(2)}
    logs = {p: {n: parse_batches(seg[p]) for n in (1, 2, 3)} for p in range(2)}
    hw = {0: 6, 1: 6}
    assert consistency_problems(acked, consumed, logs, hw) == []

    def fails(kind, acked=acked, consumed=consumed, logs=logs, hw=hw):
        probs = consistency_problems(acked, consumed, logs, hw)
        assert any(p.startswith(kind) for p in probs), (kind, probs)
        with pytest.raises(AssertionError):
            assert_consistent(acked, consumed, logs, hw)

    # A leader killed before a follower had the last batch: the new leader's partition lost
    # offsets 3..5 and took other records there.
    lost = {**consumed, 0: consumed[0][:3] + [(3, b"0:9"), (4, b"0:10"), (5, b"0:11")]}
    fails("acknowledged record lost", consumed=lost)
    fails("acknowledged record lost", consumed={**consumed, 0: consumed[0][:4]})
    # The same value twice (a retry written again).
    dup = {**consumed, 1: consumed[1] + [(6, vals[1][5])]}
    fails("value read twice", consumed=dup)
    # Counters out of order within a partition.
    swapped = [(o, v) for o, v in consumed[0]]
    swapped[2], swapped[3] = (2, swapped[3][1]), (3, swapped[2][1])
    acked_swapped = [(0, o, v) for o, v in swapped] + [a for a in acked if a[0] == 1]
    fails("order", acked=acked_swapped, consumed={**consumed, 0: swapped})
    # A replica diverging below the high watermark (another leader epoch, other records).
    other = parse_batches(_batch(0, vals[0][:3]) + _batch(3, [b"0:7", b"0:8", b"0:9"], 1))
    fails("replicas differ", logs={**logs, 0: {**logs[0], 2: other}})
    # Same records, different leader epoch in the header: bytes differ.
    epoch = parse_batches(_batch(0, vals[0][:3]) + _batch(3, vals[0][3:], 1))
    fails("replicas differ", logs={**logs, 0: {**logs[0], 3: epoch}})
    # A replica short of the high watermark, or missing.
    short = parse_batches(_batch(0, vals[0][:3]))
    fails("replicas differ", logs={**logs, 0: {**logs[0], 2: short}})
    fails("replicas differ", logs={**logs, 1: {**logs[1], 3: []}})
    # Beyond the high watermark a follower may lag: not a difference.
    assert consistency_problems(acked, consumed, {**logs, 0: {**logs[0], 2: short}},
                                {0: 3, 1: 6}) == []


def test_group_coordinator_fails_over_with_its_committed_offsets(make_cluster):
    """`__consumer_offsets` is replicated (rf 3 with 3 brokers): a group's committed offsets
    survive kill -9 of its coordinator, whose partition's new leader loads them from its
    replica of the log (issue 21, item 4)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    c = make_cluster()
    topic = unique("grp")
    create_replicated(c, topic, 1, 3)
    p = Producer({"bootstrap.servers": c.bootstrap(), "acks": "all"})
    for i in range(50):
        p.produce(topic, value=b"%d" % i, partition=0)
    assert p.flush(30) == 0
    group = unique("g")
    cons = Consumer({"bootstrap.servers": c.bootstrap(), "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    cons.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.time() + 30
    while got < 50 and time.time() < deadline:
        m = cons.poll(0.5)
        if m is not None and not m.error():
            got += 1
    assert got == 50
    cons.commit(offsets=[TopicPartition(topic, 0, 42)], asynchronous=False)
    cons.close()
    admin = AdminClient({"bootstrap.servers": c.bootstrap()})
    described = admin.describe_consumer_groups([group])[group].result(30)
    coordinator = described.coordinator.id
    # The commit is acknowledged once the high watermark passed it, i.e. on every member of
    # the ISR; wait until every ISR of the offsets topic is full so that the election below
    # may pick any replica.
    n = len(c.partition_states(c.live_brokers()[0], "__consumer_offsets"))
    assert n > 0
    c.wait_isr_full("__consumer_offsets", n, timeout=60)
    c.kill9(coordinator)
    survivors = ",".join(c.addr(i) for i in c.live_brokers())

    def committed():
        k = Consumer({"bootstrap.servers": survivors, "group.id": group,
                      "enable.auto.commit": False, "socket.timeout.ms": 3000})
        try:
            return k.committed([TopicPartition(topic, 0)], timeout=5)[0].offset
        except Exception:  # noqa: BLE001 - coordinator moving: asked again
            return None
        finally:
            k.close()

    found = {}

    def moved():
        found["offset"] = committed()
        return found["offset"] == 42

    wait_until(moved, 60, "the committed offset from the new coordinator",
               lambda: f"last answer {found.get('offset')}")

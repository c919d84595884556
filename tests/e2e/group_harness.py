"""Consumer-group members as separate processes, for tests/e2e/test_consumer_groups.py.

Every member is its own client in its own process (confluent-kafka and kafka-python through
group_member.py, kafkajs through js/group_member.js, and kcat -G), so a member can be closed
(LeaveGroup) or SIGKILLed (no LeaveGroup) like a real application. Each reports its assignment
changes and every record it read; the tests compare those with what was produced.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from conftest import REPO, _die_with_parent
from e2e_helpers import ck_produce, ck_producer

HERE = Path(__file__).resolve().parent
NODE_MODULES = Path(os.environ.get("E2E_NODE_PATH") or REPO / "target" / "e2e-js" / "node_modules")

# Short timeouts keep every test well under a minute; Kafka's group.min.session.timeout.ms
# (6000) is the floor for the session timeout.
SESSION_MS = 6000
HEARTBEAT_MS = 500
REBALANCE_MS = 20000  # max.poll.interval.ms: how long a rebalance waits for slow members
CLOSE_TIMEOUT = 30

# Classic-protocol timeouts per client (librdkafka names, kafka-python names).
CK_CLASSIC = {
    "session.timeout.ms": SESSION_MS,
    "heartbeat.interval.ms": HEARTBEAT_MS,
    "max.poll.interval.ms": REBALANCE_MS,
}
KP_CLASSIC = {
    "session_timeout_ms": SESSION_MS,
    "heartbeat_interval_ms": HEARTBEAT_MS,
    "max_poll_interval_ms": REBALANCE_MS,
}


class Member:
    """One member process. `now` is its current assignment (a set of partitions), `recs` the
    (partition, offset, key) of every record it reported, `events` everything it reported."""

    def __init__(self, name, argv, log_dir, env=None):
        self.name = name
        self.argv = argv
        self.events = []
        self.recs = []
        self.now = set()
        self.committed = {}
        self.errors = []
        self._cond = threading.Condition()
        self.stderr_path = Path(log_dir) / f"{name}.stderr.log"
        self._stderr = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            preexec_fn=_die_with_parent,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # -- reporting -------------------------------------------------------------------------
    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if line:
                self._handle(line)

    def _handle(self, line):
        try:
            ev = json.loads(line)
        except ValueError:
            ev = {"ev": "raw", "line": line}
        with self._cond:
            ev["t"] = time.monotonic()
            self.events.append(ev)
            kind = ev.get("ev")
            if kind in ("assign", "revoke", "lost"):
                self.now = set(ev["now"])
            elif kind == "recs":
                self.recs.extend((p, o, k) for p, o, k in ev["recs"])
            elif kind == "committed":
                self.committed.update({int(p): o for p, o in ev["offsets"].items()})
            elif kind == "error":
                self.errors.append(ev["msg"])
            self._cond.notify_all()

    def mark(self):
        """An index into `events`: `since(mark)` is what happened after it."""
        with self._cond:
            return len(self.events)

    def since(self, mark, kinds=("assign", "revoke", "lost")):
        with self._cond:
            return [e for e in self.events[mark:] if e.get("ev") in kinds]

    def alive(self):
        return self.proc.poll() is None

    def describe(self):
        with self._cond:
            evs = [e for e in self.events if e.get("ev") != "recs"]
            shown = [{k: v for k, v in e.items() if k != "t"} for e in evs[-12:]]
            return (f"{self.name}: {'alive' if self.alive() else f'exited {self.proc.returncode}'}"
                    f", now={sorted(self.now)}, {len(self.recs)} records, errors={self.errors[-3:]}"
                    f", last events={shown}, stderr tail: {self.stderr_tail(6)!r}")

    def stderr_tail(self, lines=20):
        try:
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # -- lifecycle -------------------------------------------------------------------------
    def close(self, timeout=CLOSE_TIMEOUT):
        """Asks the member to close its consumer cleanly (LeaveGroup for dynamic members) and
        waits for the process to exit. Returns its exit code."""
        self.request_close()
        return self.wait_exit(timeout)

    def request_close(self):
        if self.alive():
            try:
                self.proc.stdin.write(b"close\n")
                self.proc.stdin.flush()
                self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass

    def wait_exit(self, timeout=CLOSE_TIMEOUT):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"{self.name} did not exit within {timeout}s of being asked to "
                                 f"close: {self.describe()}")
        self._reader.join(5)
        return rc

    def kill(self):
        """SIGKILL: the member vanishes without LeaveGroup."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._reader.join(5)

    def stop_quietly(self):
        if self.alive():
            self.proc.kill()
            self.proc.wait(10)
        self._stderr.close()


class KcatMember(Member):
    """`kcat -G group topic`: records as "partition offset key" lines on stdout; assignments
    from kcat's own rebalance lines on stderr ("% Group G rebalanced (memberid ..): assigned:
    topic [0], topic [3]" / "revoked: ..."). Closed with SIGTERM, on which kcat closes its
    consumer (LeaveGroup)."""

    def __init__(self, name, argv, log_dir, env=None):
        super().__init__(name, argv, log_dir, env)
        self.proc.stdin.close()

    def _handle(self, line):
        parts = line.split(" ", 2)
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            key = parts[2] if len(parts) == 3 else None
            ev = {"ev": "recs", "recs": [[int(parts[0]), int(parts[1]), key]]}
            line = json.dumps(ev)
        else:
            ev = parse_kcat_status(line)
            line = json.dumps(ev) if ev else json.dumps({"ev": "raw", "line": line})
        super()._handle(line)

    def request_close(self):
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)


def parse_kcat_status(line):
    """kcat's rebalance notices (stderr, verbosity 1) as assign/revoke events."""
    if "rebalanced" not in line:
        return None
    for word, kind in (("assigned:", "assign"), ("revoked:", "revoke")):
        if word in line:
            rest = line.split(word, 1)[1]
            parts = sorted(int(tok.split("]")[0]) for tok in rest.split("[")[1:])
            now = parts if kind == "assign" else []
            return {"ev": kind, "parts": parts, "now": now, "protocol": "EAGER"}
    return None


# ---------------------------------------------------------------------------------------------
# Starting members.
class Members:
    """Starts members of one group on one topic and stops every one it started."""

    def __init__(self, bootstrap, topic, group, log_dir):
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self.log_dir = Path(log_dir)
        self.all = []
        self._n = 0

    def _name(self, client):
        self._n += 1
        return f"{client}-{self._n}"

    def ck(self, commit=True, conf=None, classic=True, group=None):
        """confluent-kafka; classic=False for group.protocol=consumer (KIP-848), where the
        session and heartbeat settings belong to the broker."""
        c = dict(CK_CLASSIC) if classic else {"group.protocol": "consumer"}
        c.update(conf or {})
        return self._py("ck", c, commit, group)

    def kp(self, commit=True, conf=None, group=None):
        c = dict(KP_CLASSIC)
        c.update(conf or {})
        return self._py("kp", c, commit, group)

    def _py(self, client, conf, commit, group):
        argv = [sys.executable, str(HERE / "group_member.py"), "--client", client,
                "--bootstrap", self.bootstrap, "--group", group or self.group,
                "--topic", self.topic]
        if commit:
            argv.append("--commit")
        for k, v in conf.items():
            argv += ["--conf", f"{k}={str(v).lower() if isinstance(v, bool) else v}"]
        return self._start(Member, self._name(client), argv)

    def kafkajs(self, commit=True, instance_id=None, group=None):
        check_kafkajs()
        argv = ["node", str(HERE / "js" / "group_member.js"), "--bootstrap", self.bootstrap,
                "--group", group or self.group, "--topic", self.topic,
                "--session-timeout", str(SESSION_MS), "--heartbeat-interval", str(HEARTBEAT_MS),
                "--rebalance-timeout", str(REBALANCE_MS)]
        if commit:
            argv.append("--commit")
        if instance_id:
            argv += ["--instance-id", instance_id]
        env = dict(os.environ)
        env["NODE_PATH"] = str(NODE_MODULES)
        return self._start(Member, self._name("kafkajs"), argv, env)

    def kcat(self, conf=None, group=None):
        kcat = shutil.which("kcat") or shutil.which("kafkacat")
        assert kcat, "kcat is not installed (scripts/test.sh installs it with apt-get)"
        c = dict(CK_CLASSIC)
        c["auto.offset.reset"] = "earliest"
        c["fetch.wait.max.ms"] = 100
        c.update(conf or {})
        argv = [kcat, "-b", self.bootstrap, "-G", group or self.group, self.topic,
                "-f", "%p %o %k\\n", "-u"]
        for k, v in c.items():
            argv += ["-X", f"{k}={v}"]
        # kcat writes records to stdout and its rebalance notices to stderr: read both.
        argv = ["sh", "-c", 'exec "$@" 2>&1', "kcat"] + argv
        return self._start(KcatMember, self._name("kcat"), argv)

    def _start(self, cls, name, argv, env=None):
        m = cls(name, argv, self.log_dir, env)
        self.all.append(m)
        return m

    def describe(self, members=None):
        return "\n".join(m.describe() for m in (members or self.all))

    def stop_all(self):
        for m in self.all:
            m.stop_quietly()


def check_kafkajs():
    if not (NODE_MODULES / "kafkajs" / "package.json").exists():
        raise AssertionError(
            f"kafkajs is not installed in {NODE_MODULES}: scripts/test.sh installs it "
            "(npm ci of tests/e2e/js into target/e2e-js), or set E2E_NODE_PATH"
        )
    if not shutil.which("node"):
        raise AssertionError("node is not installed")


# ---------------------------------------------------------------------------------------------
# Waiting and checking.
def wait_for(cond, timeout, what, describe=lambda: ""):
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n{describe()}")
        time.sleep(0.05)


def split_ok(members, partitions):
    """Every member holds a non-empty share and the shares partition `partitions` exactly."""
    nows = [set(m.now) for m in members]
    if any(not n for n in nows):
        return False
    held = [p for n in nows for p in n]
    return len(held) == len(set(held)) and set(held) == set(partitions)


def wait_split(group, members, partitions, timeout, settle=1.0):
    """Waits until `members` hold disjoint non-empty shares covering `partitions` and no
    assignment event arrived for `settle` seconds (longer than two heartbeat intervals, so a
    rebalance under way would have shown). Returns {member name: set of partitions}."""
    def stable():
        if not split_ok(members, partitions) or any(not m.alive() for m in members):
            return False
        latest = max((e["t"] for m in members for e in m.since(0)), default=0.0)
        return time.monotonic() - latest >= settle

    wait_for(stable, timeout, f"{len(members)} members to split partitions {sorted(partitions)}",
             lambda: group.describe())
    return {m.name: set(m.now) for m in members}


def produce(bootstrap, topic, n, tag, partitions):
    """n records spread round-robin over `partitions`, keys "<tag>-<i>". Returns
    {(partition, offset): key} of what the broker acknowledged."""
    p = ck_producer(bootstrap)
    log = ck_produce(p, topic, [
        dict(key=f"{tag}-{i}".encode(), value=f"value-{tag}-{i}".encode(),
             partition=partitions[i % len(partitions)])
        for i in range(n)
    ])
    assert not log.errors, log.errors[:3]
    assert len(log.ok) == n
    return {(r.partition, r.offset): r.key.decode() for r in log.ok}


def consumed(members):
    """Counter of (partition, offset) over every member, and {(partition, offset): key}."""
    count = Counter()
    keys = {}
    for m in members:
        for p, o, k in list(m.recs):
            count[(p, o)] += 1
            keys[(p, o)] = k
    return count, keys


def wait_consumed(group, members, produced, timeout, linger=0.5):
    """Waits until every produced record was reported by some member, then `linger` seconds
    more so that duplicates arriving late are caught by assert_exactly_once."""
    def done():
        count, _ = consumed(members)
        return all(k in count for k in produced)

    def missing():
        count, _ = consumed(members)
        miss = sorted(k for k in produced if k not in count)
        head = f"{len(miss)} of {len(produced)} records unread, e.g. {miss[:8]}\n"
        return head + group.describe()

    wait_for(done, timeout, "every produced record to be read", missing)
    time.sleep(linger)


def assert_exactly_once(members, produced):
    count, keys = consumed(members)
    dups = sorted((po, n) for po, n in count.items() if n > 1)
    assert not dups, f"{len(dups)} records read more than once, e.g. {dups[:8]}"
    extra = sorted(set(count) - set(produced))
    assert not extra, f"{len(extra)} records read that were not expected, e.g. {extra[:8]}"
    missing = sorted(set(produced) - set(count))
    assert not missing, f"{len(missing)} records never read, e.g. {missing[:8]}"
    wrong = [(po, keys[po], produced[po]) for po in produced if keys[po] != produced[po]]
    assert not wrong, f"records with the wrong key (got, produced): {wrong[:5]}"


def records_of(member, produced):
    """The (partition, offset) pairs of `produced` that `member` read."""
    return {(p, o) for p, o, _ in member.recs if (p, o) in produced}

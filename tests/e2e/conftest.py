"""Fixtures for the end-to-end suite: start the real broker binary on a free port.

`BROKER_BIN` selects the binary (default: target/release/broker of this checkout).

    def test_x(broker):                      # default broker
        broker.bootstrap, broker.data_dir, broker.proc
        broker.restart()                      # SIGTERM + start again (same port, same data dir)
        broker.restart(kill=True)             # SIGKILL + start again

    def test_y(start_broker):
        b = start_broker({"num.shards": 2})   # extra --override key=value pairs

Every broker is stopped (SIGTERM, then SIGKILL) at the end of its test; when a test fails, the
tail of each of its brokers' stderr is attached to the failure report.
"""

import contextlib
import ctypes
import gc
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BROKER_BIN = os.environ.get("BROKER_BIN") or str(REPO / "target" / "release" / "broker")
START_TIMEOUT = float(os.environ.get("E2E_BROKER_START_TIMEOUT", "60"))
STOP_TIMEOUT = float(os.environ.get("E2E_BROKER_STOP_TIMEOUT", "30"))

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
STATS = re.compile(
    r"shard (\d+) stats: requests=(\d+) produce_batches=(\d+) fetches=(\d+) "
    r"forwarded_in=(\d+) forwarded_out=(\d+) partitions=(\d+)"
)

_libc = None


def _die_with_parent():
    """preexec_fn: the broker gets SIGKILL if pytest dies (e.g. a hard timeout), so no broker
    outlives the suite holding ports and disk."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:  # noqa: BLE001 - best effort
        pass


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port, timeout=0.5):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_port_free(port, seconds=30.0):
    """None once nothing listens on `port` (waiting up to `seconds`: another test's broker
    may be on its way out), else who holds it, as `ss -ltnp` tells, for the skip reason."""
    deadline = time.monotonic() + seconds
    while port_open(port):
        if time.monotonic() > deadline:
            try:
                owner = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True,
                                       text=True, timeout=10).stdout.strip()
            except (OSError, subprocess.SubprocessError) as error:
                owner = f"(ss failed: {error})"
            return owner or "(unknown)"
        time.sleep(0.5)
    return None


# Ports tried by a broker whose port conftest picked (see `Broker._port_picked`).
PORT_PICKS = 3


def broker_env():
    env = dict(os.environ)
    env.setdefault("RUST_BACKTRACE", "1")
    env["NO_COLOR"] = "1"
    return env


class Broker:
    """One broker process (restartable on the same port and data dir)."""

    def __init__(self, workdir: Path, overrides=None, config_file=None, port=None, name="broker"):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.log_path = self.workdir / f"{name}.stderr.log"
        self.port = port or free_port()
        # A port picked here may be picked by another xdist worker's broker too: its start
        # then fails with "address in use" (the broker's listener claim), and `start` picks
        # another (a port the test chose is kept).
        self._port_picked = port is None
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.overrides = dict(overrides or {})
        self.config_file = config_file
        self.proc = None
        self.starts = 0
        self._log = None
        self._log_offset = 0  # where the current run's output starts in log_path

    # -- lifecycle -------------------------------------------------------------------------
    def argv(self):
        argv = [BROKER_BIN, "start"]
        if self.config_file:
            argv += ["--config", str(self.config_file)]
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir),
        }
        settings.update({k: str(v) for k, v in self.overrides.items()})
        for k, v in settings.items():
            argv += ["--override", f"{k}={v}"]
        return argv

    def start(self, timeout=START_TIMEOUT):
        for attempt in range(PORT_PICKS):
            try:
                return self._start(timeout)
            except AssertionError as error:
                taken = "address in use" in str(error)
                if not (taken and self._port_picked and self.starts == 1
                        and attempt + 1 < PORT_PICKS):
                    raise
                self.proc = None
                self.starts = 0
                self.port = free_port()
                self.bootstrap = f"127.0.0.1:{self.port}"

    def _start(self, timeout):
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        if not Path(BROKER_BIN).exists():
            pytest.fail(f"broker binary not found: {BROKER_BIN} (build it or set BROKER_BIN)")
        self.starts += 1
        self._log = open(self.log_path, "ab")
        self._log.write(f"\n===== start #{self.starts}: {' '.join(self.argv())}\n".encode())
        self._log.flush()
        self._log_offset = self._log.tell()
        self.proc = subprocess.Popen(
            self.argv(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            env=broker_env(),
            preexec_fn=_die_with_parent,
        )
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        # The port may be open before this broker listens: another broker (another xdist
        # worker's, given the same port) may hold it while this one is about to fail with
        # "address in use". So an open port counts once this broker's log says it listens,
        # or after a second more of this process running (a log level may hide the line).
        open_since = None
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                raise AssertionError(
                    f"broker exited with {rc} during startup; stderr tail:\n{self.tail()}"
                )
            if port_open(self.port):
                open_since = open_since or time.monotonic()
                if "listening on" in self.output() or time.monotonic() - open_since > 1.0:
                    return
            time.sleep(0.05)
        raise AssertionError(
            f"broker did not accept connections on {self.bootstrap} within {timeout}s; "
            f"stderr tail:\n{self.tail()}"
        )

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM and wait; SIGKILL if it does not exit in time. Returns the exit code
        (negative = killed by that signal)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                self._note(f"did not exit within {timeout}s of SIGTERM; killed")
        self._close_log()
        return self.proc.returncode

    def kill(self):
        """SIGKILL (kill -9) and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._close_log()
        return self.proc.returncode

    def restart(self, kill=False):
        """Stop (SIGTERM, or SIGKILL when kill=True) and start again on the same port and data
        dir. Returns the exit code of the stopped process."""
        rc = self.kill() if kill else self.stop()
        self.start()
        return rc

    def _close_log(self):
        if self._log is not None:
            self._log.close()
            self._log = None

    def _note(self, msg):
        with open(self.log_path, "ab") as f:
            f.write(f"===== [e2e] {msg}\n".encode())

    # -- output ----------------------------------------------------------------------------
    def output(self, current_run_only=True):
        """The broker's stderr/stdout (of the current/last run by default), ANSI stripped."""
        if self._log is not None:
            self._log.flush()
        try:
            with open(self.log_path, "rb") as f:
                if current_run_only:
                    f.seek(self._log_offset)
                data = f.read()
        except FileNotFoundError:
            return ""
        return ANSI.sub("", data.decode("utf-8", "replace"))

    def tail(self, lines=60):
        text = self.output(current_run_only=False)
        return "\n".join(text.splitlines()[-lines:])

    def shard_stats(self):
        """Parses the per-shard stats lines of the last run: {shard: {field: int}}."""
        out = {}
        names = ["requests", "produce_batches", "fetches", "forwarded_in", "forwarded_out",
                 "partitions"]
        for m in STATS.finditer(self.output()):
            out[int(m.group(1))] = dict(zip(names, map(int, m.groups()[1:])))
        return out


@contextlib.contextmanager
def broker_as_typed(args, workdir, log_path, ports):
    """The release binary run with `args` from `workdir`, as a user types it (README tests):
    yields the process once every port in `ports` listens, then stops it (SIGTERM, then kill)."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([BROKER_BIN, *args], cwd=workdir, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=log, env=broker_env(),
                                preexec_fn=_die_with_parent)
    try:
        deadline = time.monotonic() + 60
        while not all(port_open(port) for port in ports):
            assert proc.poll() is None, \
                f"broker exited with {proc.returncode}:\n{log_path.read_text()}"
            assert time.monotonic() < deadline, \
                f"broker not listening on {ports}:\n{log_path.read_text()}"
            time.sleep(0.05)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    brokers = getattr(item, "_e2e_brokers", [])
    if rep.failed and brokers:
        for i, b in enumerate(brokers):
            state = "alive" if b.alive() else f"exited rc={b.proc.returncode if b.proc else None}"
            rep.sections.append(
                (f"broker #{i} {b.bootstrap} ({state}) stderr tail [{rep.when}]", b.tail())
            )


@pytest.fixture
def start_broker(request, tmp_path):
    """Factory: start_broker(overrides=None, config_file=None) -> running Broker."""
    brokers = []
    request.node._e2e_brokers = brokers

    def _start(overrides=None, config_file=None, **kw):
        b = Broker(tmp_path / f"broker{len(brokers)}", overrides=overrides,
                   config_file=config_file, **kw)
        brokers.append(b)
        b.start()
        return b

    yield _start
    gc.collect()  # drop client objects a failed test left behind before their broker goes away
    for b in brokers:
        try:
            b.stop()
        except Exception as e:  # noqa: BLE001
            print(f"error stopping broker {b.bootstrap}: {e}")


@pytest.fixture
def broker(start_broker):
    """A broker with default settings (auto topic creation on, num.shards = all cores)."""
    return start_broker()


@pytest.fixture
def null_broker():
    """The bench crate's null broker (Produce, Fetch, ListOffsets, Metadata, ApiVersions,
    CreateTopics and DeleteTopics only): its HOST:PORT."""
    bench = os.environ.get("BENCH_BIN") or str(Path(BROKER_BIN).with_name("bench"))
    if not os.path.exists(bench):
        pytest.skip(f"no bench binary at {bench}")
    proc = subprocess.Popen([bench, "null-broker", "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        m = re.search(r"listening on (\S+)", line)
        assert m, f"null broker said {line!r}"
        yield m.group(1)
    finally:
        proc.kill()
        proc.wait()

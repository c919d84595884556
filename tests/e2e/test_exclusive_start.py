"""A second broker on a busy port or on a data directory in use fails at start with a reason,
instead of sharing the port through SO_REUSEPORT (taking part of the first broker's
connections) or writing into the same logs."""

import subprocess
import time

from conftest import BROKER_BIN, broker_env, free_port


def start_second(argv, timeout=30):
    return subprocess.run([BROKER_BIN, "start"] + argv, capture_output=True, text=True,
                          env=broker_env(), timeout=timeout, stdin=subprocess.DEVNULL)


def test_second_broker_on_same_port_fails(broker, tmp_path):
    other = tmp_path / "other-data"
    done = start_second(["--override", f"listeners=PLAINTEXT://{broker.bootstrap}",
                         "--override", f"log.dirs={other}"])
    assert done.returncode != 0, done.stderr[-2000:]
    assert "not available" in done.stderr and "in use" in done.stderr.lower(), done.stderr[-2000:]
    assert broker.proc.poll() is None, "the first broker keeps running"


def test_second_broker_on_same_data_dir_fails(broker):
    done = start_second(["--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
                         "--override", f"log.dirs={broker.data_dir}"])
    assert done.returncode != 0, done.stderr[-2000:]
    assert "in use by another broker" in done.stderr, done.stderr[-2000:]
    assert broker.proc.poll() is None


def test_two_brokers_started_at_once_on_one_port(tmp_path):
    """Both probe the port before either listens, so only the listener claim (an abstract
    Unix socket named after the address) tells them apart: one serves, the other fails."""
    for round_ in range(3):
        port = free_port()
        logs = [tmp_path / f"r{round_}-{i}.log" for i in range(2)]
        procs = [subprocess.Popen(
            [BROKER_BIN, "start", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", f"log.dirs={tmp_path / f'r{round_}-data{i}'}"],
            stdin=subprocess.DEVNULL, stdout=open(log, "w"), stderr=subprocess.STDOUT,
            env=broker_env()) for i, log in enumerate(logs)]
        try:
            deadline = time.monotonic() + 30
            while all(p.poll() is None for p in procs) and time.monotonic() < deadline:
                time.sleep(0.05)
            failed = [i for i, p in enumerate(procs) if p.poll() is not None]
            assert len(failed) == 1, f"round {round_}: exited: {failed}"
            (loser,) = failed
            assert procs[loser].returncode != 0
            text = logs[loser].read_text()
            assert "not available" in text and "address in use" in text, text[-2000:]
            time.sleep(0.5)
            assert procs[1 - loser].poll() is None, "the other broker keeps running"
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                p.wait(timeout=30)

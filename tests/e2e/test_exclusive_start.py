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



def test_broker_started_while_the_last_one_stops_takes_the_port(start_broker, tmp_path):
    """A restart on the same port: the next broker starts at the moment the previous one was
    told to stop, while that one still closes its logs. The previous broker's claim on the
    port ends with its stop signal, so the next one waits at most for its listeners to go,
    never fails with 'address in use' (the failure of the first version of the claim)."""
    first = start_broker()
    for round_ in range(3):
        log = tmp_path / f"next-{round_}.log"
        first.proc.terminate()
        second = subprocess.Popen(
            [BROKER_BIN, "start", "--override", f"listeners=PLAINTEXT://{first.bootstrap}",
             "--override", f"log.dirs={tmp_path / f'next-{round_}'}"],
            stdin=subprocess.DEVNULL, stdout=open(log, "w"), stderr=subprocess.STDOUT,
            env=broker_env())
        try:
            deadline = time.monotonic() + 30
            while (time.monotonic() < deadline and second.poll() is None
                   and "listening on" not in log.read_text()):
                time.sleep(0.05)
            text = log.read_text()
            assert second.poll() is None and "listening on" in text, f"round {round_}: {text[-2000:]}"
        finally:
            first.proc.wait(timeout=60)
            second.terminate()
            second.wait(timeout=60)
        first.start()

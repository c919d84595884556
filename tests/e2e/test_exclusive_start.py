"""A second broker on a busy port or on a data directory in use fails at start with a reason,
instead of sharing the port through SO_REUSEPORT (taking part of the first broker's
connections) or writing into the same logs."""

import subprocess

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

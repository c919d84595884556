"""The README's run command exactly as a new user types it: the release binary started with
`start` and nothing else (no --config, no --override), from its own fresh working directory,
so `log.dirs=./data` is relative and the listener is the default 127.0.0.1:9092. Then kcat,
confluent-kafka and kafka-python produce and consume through it.

Skipped (with the reason printed) only when something else already listens on 9092.
"""

import shutil
import signal
import subprocess

import pytest

from conftest import broker_as_typed, wait_port_free
from e2e_helpers import ck_consume, ck_produce, ck_producer, kp_consume, kp_produce, kp_producer

# Both README tests need ports 9092 and 9093: one xdist worker runs them, one after the other.
pytestmark = pytest.mark.xdist_group("readme-ports")

BOOTSTRAP = "127.0.0.1:9092"
N = 200


@pytest.fixture
def readme_broker(tmp_path):
    owner = wait_port_free(9092)
    if owner:
        pytest.skip(f"port 9092 is taken by another process ({owner}); the README-default "
                    "test needs it")
    workdir = tmp_path / "fresh-clone"
    workdir.mkdir()
    log_path = tmp_path / "broker.stderr.log"
    with broker_as_typed(["start"], workdir, log_path, [9092]) as proc:
        yield proc, workdir, log_path


def kcat(*args, stdin=None, timeout=60):
    exe = shutil.which("kcat") or shutil.which("kafkacat")
    assert exe, "kcat is not installed (scripts/test.sh installs it: apt-get install -y kcat)"
    return subprocess.run([exe, *args], input=stdin, capture_output=True, timeout=timeout)


def test_readme_run_command_stores_and_serves(readme_broker):
    proc, workdir, log_path = readme_broker

    # kcat: auto-created topic (Metadata), produce, then consume from the beginning.
    lines = [f"kcat-{i}".encode() for i in range(N)]
    produced = kcat("-P", "-b", BOOTSTRAP, "-t", "readme-kcat", "-X", "message.timeout.ms=20000",
                    stdin=b"\n".join(lines) + b"\n")
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = kcat("-C", "-b", BOOTSTRAP, "-t", "readme-kcat", "-o", "beginning", "-e", "-q")
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.split(b"\n")[:-1] == lines

    # confluent-kafka (librdkafka).
    producer = ck_producer(BOOTSTRAP)
    log = ck_produce(producer, "readme-ck",
                     (dict(key=f"k{i}".encode(), value=f"ck-{i}".encode()) for i in range(N)))
    assert not log.errors and len(log.ok) == N, log.errors[:3]
    consumed, _ = ck_consume(BOOTSTRAP, "readme-ck", 1, N)
    assert [rec.value for rec in consumed[0]] == [f"ck-{i}".encode() for i in range(N)]

    # kafka-python.
    producer = kp_producer(BOOTSTRAP)
    try:
        kp_produce(producer, "readme-kp",
                   (dict(key=f"k{i}".encode(), value=f"kp-{i}".encode()) for i in range(N)))
    finally:
        producer.close()
    consumed, _ = kp_consume(BOOTSTRAP, "readme-kp", 1, N)
    assert [rec.value for rec in consumed[0]] == [f"kp-{i}".encode() for i in range(N)]

    # The data went to ./data of the working directory, and the log says where that is.
    for topic in ("readme-kcat", "readme-ck", "readme-kp"):
        assert (workdir / "data" / f"{topic}-0").is_dir(), topic
    text = log_path.read_text()
    assert str((workdir / "data").resolve()) in text, text[-2000:]
    assert "offline" not in text, text[-2000:]

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, log_path.read_text()[-2000:]

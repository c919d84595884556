"""Startup configuration: Kafka-style server.properties and --override, strict validation."""

import subprocess
import time

import pytest

from conftest import BROKER_BIN, Broker, broker_env, free_port, port_open
from e2e_helpers import admin, ck_consume, ck_produce, ck_producer, unique, wait_for_topic


def run_expect_failure(tmp_path, *extra, timeout=30):
    port = free_port()
    argv = [BROKER_BIN, "start", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={tmp_path / 'data'}", *extra]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=broker_env())
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"broker kept running with {extra}; stderr: {err.decode()[-2000:]}")
    assert not port_open(port)
    return p.returncode, out.decode(errors="replace") + err.decode(errors="replace")


def test_unknown_key_rejected(tmp_path):
    rc, text = run_expect_failure(tmp_path, "--override", "no.such.setting=1")
    assert rc != 0
    assert "no.such.setting" in text, text


def test_invalid_value_rejected(tmp_path):
    rc, text = run_expect_failure(tmp_path, "--override", "num.partitions=abc")
    assert rc != 0
    assert "num.partitions" in text, text


@pytest.mark.parametrize("setting", ["num.shards=-1", "log.flush.policy=sometimes",
                                     "auto.create.topics.enable=maybe", "message.max.bytes=x"])
def test_other_invalid_values_rejected(tmp_path, setting):
    rc, text = run_expect_failure(tmp_path, "--override", setting)
    assert rc != 0
    assert setting.split("=")[0] in text, text


def test_unknown_key_in_config_file_rejected(tmp_path):
    cfg = tmp_path / "bad.properties"
    cfg.write_text("num.partitions=2\nlog.segmnt.bytes=1000000\n")
    rc, text = run_expect_failure(tmp_path, "--config", str(cfg))
    assert rc != 0
    assert "log.segmnt.bytes" in text, text


def test_config_file(tmp_path, request):
    port = free_port()
    data = tmp_path / "b" / "data"
    cfg = tmp_path / "server.properties"
    cfg.write_text(
        "# Kafka-style server.properties\n"
        "! bang comments too\n"
        "\n"
        f"listeners = PLAINTEXT://127.0.0.1:{port}\n"
        f"log.dirs={data}\n"
        "num.partitions:4\n"
        "auto.create.topics.enable=true\n"
        "log.segment.bytes=1048576\n"
        "log.flush.policy=ack\n"
        "num.shards=1\n"
    )
    b = Broker(tmp_path / "b", config_file=cfg, port=port)
    # no overrides except those Broker always passes (same listener and log.dirs as the file)
    request.node._e2e_brokers = [b]
    b.start()
    try:
        # auto-created topic gets num.partitions from the file
        topic = unique("auto")
        p = ck_producer(b.bootstrap)
        log = ck_produce(p, topic, [dict(key=f"k{i}".encode(), value=b"v") for i in range(40)])
        assert not log.errors, log.errors[:3]
        wait_for_topic(b.bootstrap, topic, 4)
        consumed, _ = ck_consume(b.bootstrap, topic, 4, 40)
        assert sum(len(v) for v in consumed.values()) == 40
        # the data went where log.dirs points
        assert any(data.iterdir()), f"nothing written under {data}"
        md = admin(b.bootstrap).list_topics(timeout=10)
        assert len(md.topics[topic].partitions) == 4
    finally:
        assert b.stop() == 0


def test_config_file_only(tmp_path, request):
    """The file alone (no --override at all) is enough to start."""
    port = free_port()
    data = tmp_path / "data"
    cfg = tmp_path / "server.properties"
    cfg.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={data}\nnum.partitions=2\n")
    p = subprocess.Popen([BROKER_BIN, "start", "--config", str(cfg)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=broker_env())
    try:
        deadline = time.monotonic() + 60
        while not port_open(port):
            assert p.poll() is None, p.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "broker did not start"
            time.sleep(0.05)
        a = admin(f"127.0.0.1:{port}")
        md = a.list_topics(timeout=10)
        assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", port)]
    finally:
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    assert p.returncode == 0, p.stderr.read().decode()[-2000:]

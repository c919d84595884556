"""The broker's logs: start-up lines, one line per event, log.format=json, and log levels that
change at run time by signal (SIGUSR1 / SIGUSR2) and by Kafka's admin request on the
BROKER_LOGGER resource, from kafka-python (an independent client) and `broker log-level`.

The debug event used to see a level change is "connection accepted" (target broker::server,
DEBUG), which a bare TCP connect triggers.
"""

import json
import re
import signal
import socket
import subprocess
import time

import pytest

from conftest import BROKER_BIN
from e2e_helpers import ck_produce, ck_producer, create_topic, unique

ACCEPTED = "connection accepted"
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\S+Z\s+(TRACE|DEBUG|INFO|WARN|ERROR) [\w:]+: ")


@pytest.fixture(autouse=True)
def no_rust_log(monkeypatch):
    """RUST_LOG wins over log.level: the runner's must not decide these tests."""
    monkeypatch.delenv("RUST_LOG", raising=False)


def event_lines(broker):
    """The broker's output lines of the current run (the harness's own `=====` lines out)."""
    return [line for line in broker.output().splitlines()
            if line.strip() and not line.startswith("===== ")]


def wait_for(predicate, what, timeout=15):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def connect_once(broker):
    with socket.create_connection(("127.0.0.1", broker.port), timeout=5):
        pass


def accepted_count(broker):
    return broker.output().count(ACCEPTED)


def accepts_are_logged(broker):
    """Connects once; whether the accept shows up in the log (waits for it a little)."""
    before = accepted_count(broker)
    connect_once(broker)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        if accepted_count(broker) > before:
            return True
        time.sleep(0.05)
    return False


def test_startup_lines_say_how_the_broker_runs(start_broker):
    b = start_broker({"num.shards": 2})
    out = b.output()
    addr = re.escape(b.bootstrap)
    assert re.search(rf"listener PLAINTEXT uses plaintext \(sendfile\) listener=PLAINTEXT "
                     rf"protocol=\"?PLAINTEXT\"? bind={addr} advertised={addr}", out), out
    assert re.search(r"shard-to-core map \(shard->cpu\) shards=2 cpus=\d+ map=0->\d+,1->\d+", out), out
    assert re.search(r"I/O path writes=.*page cache.* flush_policy=\"?ack", out), out
    assert "preallocate=" in out and "group_commit_rounds_in_flight=2" in out, out
    assert re.search(r"fetch path send=\"?zerocopy.* residency=\"?(cachestat|mincore)", out), out
    assert re.search(r"TLS path tls=\"?not in use", out), out
    assert "host tuning checked" in out, out
    # Every line is one event in the text format.
    lines = event_lines(b)
    assert lines and all(TEXT_LINE.match(line) for line in lines), \
        [line for line in lines if not TEXT_LINE.match(line)]


def test_json_format_every_line_is_an_object(start_broker):
    b = start_broker({"log.format": "json", "num.shards": 2})
    topic = create_topic(b.bootstrap, unique("json"), 2)
    producer = ck_producer(b.bootstrap)
    log = ck_produce(producer, topic, ({"value": b"v%d" % i, "partition": i % 2} for i in range(50)))
    assert not log.errors
    assert b.stop() == 0
    events = [json.loads(line) for line in event_lines(b)]  # raises on any other line
    assert all({"timestamp", "level", "target"} <= set(e) for e in events), events
    by_message = {e.get("message"): e for e in events}
    assert by_message["shard-to-core map (shard->cpu)"]["shards"] == 2
    assert by_message["I/O path"]["flush_policy"] == "ack"
    assert "residency" in by_message["fetch path"]
    assert any(str(m).startswith("listener PLAINTEXT uses") for m in by_message), by_message
    # Shutdown lines too (the per-shard figures).
    assert any(str(m).startswith("shard 1 stats:") for m in by_message)


def test_invalid_log_settings_fail_start(tmp_path):
    for override, expected in (("log.level=LOUD", "log.level"), ("log.format=xml", "log.format")):
        res = subprocess.run(
            [BROKER_BIN, "start", "--override", override,
             "--override", f"log.dirs={tmp_path / 'data'}",
             "--override", "listeners=PLAINTEXT://127.0.0.1:1"],
            capture_output=True, text=True, timeout=60)
        assert res.returncode != 0
        assert expected in res.stderr, res.stderr


def test_signals_step_the_levels(start_broker):
    b = start_broker()
    assert not accepts_are_logged(b), "debug events at the default INFO level"
    b.proc.send_signal(signal.SIGUSR1)
    wait_for(lambda: "cause=\"SIGUSR1\"" in b.output() or "cause=SIGUSR1" in b.output(),
             "the SIGUSR1 level change line")
    assert "levels=root=DEBUG" in b.output().replace('"', ""), b.output()
    assert accepts_are_logged(b), "SIGUSR1 did not make debug events appear"
    b.proc.send_signal(signal.SIGUSR2)
    wait_for(lambda: "SIGUSR2" in b.output(), "the SIGUSR2 level change line")
    assert not accepts_are_logged(b), "SIGUSR2 did not remove debug events"
    # Down to ERROR at most: a signal never silences the broker. (One signal at a time: the
    # kernel merges a signal sent while the same one is pending.)
    for level in ("WARN", "ERROR"):
        b.proc.send_signal(signal.SIGUSR2)
        wait_for(lambda: f"levels=root={level}" in b.output().replace('"', ""),
                 f"the change to {level}")
    b.proc.send_signal(signal.SIGUSR2)
    time.sleep(1)
    assert "root=OFF" not in b.output()
    assert b.alive()
    # Back up: the INFO lines are seen again.
    b.proc.send_signal(signal.SIGUSR1)
    wait_for(lambda: "levels=root=WARN" in b.output().replace('"', "").split("root=ERROR")[-1],
             "the change back to WARN")


def test_rust_log_wins_over_log_level(start_broker, monkeypatch):
    monkeypatch.setenv("RUST_LOG", "info,broker::server=debug")
    b = start_broker({"log.level": "WARN"})
    assert accepts_are_logged(b)
    assert "listener PLAINTEXT uses" in b.output()  # INFO, so root is RUST_LOG's


def test_broker_logger_with_kafka_python(start_broker):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
    b = start_broker({"node.id": 7})
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000)
    try:
        def loggers():
            res = ConfigResource(ConfigResourceType.BROKER_LOGGER, "7")
            described = a.describe_configs([res], config_filter="all")
            return described["broker_logger"]["7"]

        def alter(configs, **kw):
            res = ConfigResource(ConfigResourceType.BROKER_LOGGER, "7", configs=configs)
            return a.alter_configs([res], **kw)["broker_logger"]["7"]

        before = loggers()
        assert before["root"]["value"] == "INFO"
        assert before["root"]["config_source"] == "DYNAMIC_BROKER_LOGGER_CONFIG"
        assert before["broker::server"]["value"] == "INFO"
        assert not before["api::connection"]["read_only"]
        assert not accepts_are_logged(b)

        assert alter({"broker::server": "DEBUG"}) == "OK"
        after = loggers()
        assert after["broker::server"]["value"] == "DEBUG"
        assert after["api::connection"]["value"] == "INFO"
        assert after["root"]["value"] == "INFO"
        assert accepts_are_logged(b)
        assert re.search(r"log levels changed cause=\"?IncrementalAlterConfigs", b.output())

        # Kafka's level names only, upper case: INVALID_CONFIG with Kafka's message.
        for bad in ("LOUD", "debug"):
            result = alter({"broker::server": bad})
            assert "InvalidConfiguration" in result and "not a supported log level" in result, result
        result = alter({"broker::nothing": "DEBUG"}, raise_on_unknown=False)
        assert "InvalidConfiguration" in result and "does not exist" in result, result
        # Removing root's level is refused; DELETE makes a logger follow root again.
        result = alter({"root": ("DELETE", None)}, raise_on_unknown=False)
        assert "InvalidRequest" in result, result
        assert alter({"broker::server": ("DELETE", None)}) == "OK"
        assert loggers()["broker::server"]["value"] == "INFO"
        assert not accepts_are_logged(b)
        # validate_only changes nothing.
        assert alter({"broker::server": "DEBUG"}, validate_only=True) == "OK"
        assert loggers()["broker::server"]["value"] == "INFO"
        # Legacy AlterConfigs does not take loggers (as Kafka).
        result = alter({"broker::server": "DEBUG"}, incremental=False)
        assert "InvalidRequest" in result, result
    finally:
        a.close()


def log_level(bootstrap, *args):
    return subprocess.run([BROKER_BIN, "log-level", "--bootstrap-server", bootstrap, *args],
                          capture_output=True, text=True, timeout=60)


def test_log_level_cli(start_broker):
    b = start_broker()
    res = log_level(b.bootstrap)
    assert res.returncode == 0, res.stderr
    rows = dict(line.split() for line in res.stdout.splitlines()[1:])
    assert rows["root"] == "INFO" and rows["api::connection"] == "INFO", res.stdout

    res = log_level(b.bootstrap, "--logger", "broker::server", "debug")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["LOGGER", "LEVEL", "broker::server", "DEBUG"]
    assert accepts_are_logged(b)

    res = log_level(b.bootstrap, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["broker"] == 1 and doc["loggers"]["broker::server"] == "DEBUG"

    res = log_level(b.bootstrap, "--logger", "broker::server", "--reset")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[-1] == "INFO"
    assert not accepts_are_logged(b)

    res = log_level(b.bootstrap, "LOUD")
    assert res.returncode != 0 and "INVALID_CONFIG" in res.stderr, res.stderr
    res = log_level(b.bootstrap, "--reset")
    assert res.returncode != 0 and "INVALID_REQUEST" in res.stderr, res.stderr
    res = log_level(b.bootstrap, "--broker", "2", "DEBUG")
    assert res.returncode != 0 and "INVALID_REQUEST" in res.stderr, res.stderr
    assert "Unexpected node id" in res.stderr
    res = log_level(b.bootstrap, "--broker", "2")
    assert res.returncode != 0 and "Unexpected broker id" in res.stderr, res.stderr
    # Root: every logger without a level of its own follows it.
    res = log_level(b.bootstrap, "WARN")
    assert res.returncode == 0, res.stderr
    assert log_level(b.bootstrap, "--json").stdout.count('"WARN"') > 5

"""The Prometheus endpoint (`metrics.listener`): off by default; with it set, a scrape during
and after a librdkafka produce and consume shows request and byte counts covering what was
sent, log sizes and end offsets matching the partitions' files and deliveries, consumer group
lag matching a committed offset, fsyncs growing with acks=all and counted by reason
(partition creation, group commit, segment rolls), connection counts, a refused request
counted as an error, and error codes of answered responses counted by Kafka's error name
(MESSAGE_TOO_LARGE, UNKNOWN_TOPIC_OR_PARTITION). The text is read by `prometheus_client`'s parser (an
independent implementation of the format). The HTTP side refuses what it must (404, 405, 431),
and every metric the shipped Grafana dashboard queries exists in a real scrape.
"""

import http.client
import json
import os
import re
import socket
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from conftest import REPO, free_port
from e2e_helpers import (admin as ck_admin, ck_consume, ck_consumer, ck_produce, ck_producer,
                         create_topic, kp_consumer, unique)

DASHBOARD = REPO / "deploy" / "grafana" / "broker-dashboard.json"
PROMETHEUS_YML = REPO / "deploy" / "prometheus" / "prometheus.yml"
RECORDS = 400
VALUE_BYTES = 1000
PARTITIONS = 2


def scrape(port, path="/metrics"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read().decode()
    conn.close()
    return response, body


def samples(port):
    """{(sample name, frozenset(labels)): value} of one scrape, via prometheus_client."""
    response, body = scrape(port)
    assert response.status == 200, body
    assert response.getheader("Content-Type").startswith("text/plain; version=0.0.4")
    out = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def total(scraped, name, **labels):
    """Sum of `name` over every sample whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in scraped.items() if n == name and want <= set(ls))


def one(scraped, name, **labels):
    got = [v for (n, ls), v in scraped.items() if n == name and set(labels.items()) <= set(ls)]
    assert len(got) == 1, (name, labels, got)
    return got[0]


def listening_ports(pid):
    """TCP ports process `pid` listens on (its socket inodes matched in /proc/net/tcp*)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        m = re.fullmatch(r"socket:\[(\d+)\]", target)
        if m:
            inodes.add(m.group(1))
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A = LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def segment_file_bytes(broker, topic, partition):
    return sum(f.stat().st_size for f in (broker.data_dir / f"{topic}-{partition}").glob("*.log"))


def raw_exchange(port, request: bytes):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def test_metrics_endpoint_off_by_default(broker):
    assert listening_ports(broker.proc.pid) == {broker.port}


@pytest.fixture
def metered(start_broker):
    port = free_port()
    b = start_broker({
        "metrics.listener": f"http://127.0.0.1:{port}",
        "num.shards": 2,
        "log.flush.policy": "ack",
    })
    b.metrics_port = port
    return b


def test_metrics_listener_is_validated(tmp_path):
    from conftest import Broker
    b = Broker(tmp_path / "bad", overrides={"metrics.listener": "https://127.0.0.1:1"})
    with pytest.raises(AssertionError) as failed:
        b.start(timeout=20)
    assert "metrics.listener" in str(failed.value)


def test_metrics_http_refusals(metered):
    port = metered.metrics_port
    assert listening_ports(metered.proc.pid) == {metered.port, port}
    response, _ = scrape(port, "/")
    assert response.status == 404
    response, _ = scrape(port, "/metrics/x")
    assert response.status == 404
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/metrics", body=b"x")
    response = conn.getresponse()
    assert response.status == 405
    assert response.getheader("Allow") == "GET, HEAD"
    conn.close()
    huge = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 20000 + b"\r\n\r\n"
    assert raw_exchange(port, huge).startswith("HTTP/1.1 431 ")
    assert raw_exchange(port, b"garbage\r\n\r\n").startswith("HTTP/1.1 400 ")
    # A client that sends half a request head and stalls does not block other scrapes.
    stalled = socket.create_connection(("127.0.0.1", port), timeout=10)
    stalled.sendall(b"GET /metr")
    try:
        response, _ = scrape(port)
        assert response.status == 200
    finally:
        stalled.close()


def test_metrics_cover_produce_fetch_logs_lag_and_fsyncs(metered):
    port = metered.metrics_port
    topic = unique("metrics")
    create_topic(metered.bootstrap, topic, PARTITIONS)
    before = samples(port)
    fsyncs_before = total(before, "broker_fsyncs_total", reason="group_commit")

    values = [os.urandom(VALUE_BYTES) for _ in range(RECORDS)]
    producer = ck_producer(metered.bootstrap, acks="all", **{"linger.ms": 20})
    log = ck_produce(producer, topic, [{"value": v, "partition": i % PARTITIONS}
                                          for i, v in enumerate(values)])
    assert not log.errors and len(log.ok) == RECORDS

    during = samples(port)  # the producer's connection is still open
    assert total(during, "broker_connections_open") >= 1
    assert total(during, "broker_connections_accepted_total") >= 1
    del producer

    produce_requests = total(during, "broker_requests_total", api="Produce")
    assert 1 <= produce_requests <= RECORDS, produce_requests
    sent = RECORDS * VALUE_BYTES
    produce_in = total(during, "broker_request_bytes_total", api="Produce")
    # Covers every value sent, and is not absurdly more (batch and frame overhead only).
    assert sent <= produce_in <= sent * 1.25 + 64 * 1024, (produce_in, sent)
    assert total(during, "broker_response_bytes_total", api="Produce") > 0
    latency_count = total(during, "broker_request_duration_seconds_count", api="Produce")
    assert latency_count == produce_requests
    assert total(during, "broker_request_duration_seconds_bucket", api="Produce",
                 le="+Inf") == produce_requests
    assert total(during, "broker_request_duration_seconds_sum", api="Produce") > 0
    assert total(during, "broker_request_errors_total", api="Produce") == 0
    # acks=all under log.flush.policy=ack: every produce waited for an fdatasync.
    assert total(during, "broker_fsyncs_total", reason="group_commit") > fsyncs_before
    assert total(during, "broker_fsync_round_duration_seconds_count") >= 1

    # Log figures per partition match the deliveries and the segment files on disk.
    per_partition = {}
    for rec in log.ok:
        per_partition[rec.partition] = per_partition.get(rec.partition, 0) + 1
    for p in range(PARTITIONS):
        end = one(during, "broker_log_end_offset", topic=topic, partition=str(p))
        assert end == per_partition.get(p, 0)
        assert one(during, "broker_log_start_offset", topic=topic, partition=str(p)) == 0
        size = one(during, "broker_log_size_bytes", topic=topic, partition=str(p))
        values_bytes = per_partition.get(p, 0) * VALUE_BYTES
        # Batches hold the values plus record and batch headers; the active segment's file
        # may be longer (preallocated; checked exactly after the restart below).
        assert values_bytes <= size <= values_bytes * 1.25 + 4096, (p, size)
        assert size <= segment_file_bytes(metered, topic, p)

    # Fetch everything back, then commit an offset for a group and read its lag.
    got, errors = ck_consume(metered.bootstrap, topic, PARTITIONS, RECORDS, linger=0)
    assert not errors and sum(len(r) for r in got.values()) == RECORDS
    group = unique("g-metrics")
    committed = per_partition[0] // 3
    consumer = ck_consumer(metered.bootstrap, **{"group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, committed)], asynchronous=False)
    consumer.close()

    after = samples(port)
    fetch_out = total(after, "broker_response_bytes_total", api="Fetch")
    assert total(after, "broker_requests_total", api="Fetch") >= 1
    assert fetch_out >= sent, (fetch_out, sent)
    assert total(after, "broker_fetch_sendfile_bytes_total") + \
        total(after, "broker_fetch_copied_bytes_total") >= sent
    assert total(after, "broker_fetch_ranges_total") >= 1
    assert one(after, "broker_consumer_group_committed_offset", group=group, topic=topic,
               partition="0") == committed
    assert one(after, "broker_consumer_group_lag", group=group, topic=topic,
               partition="0") == per_partition[0] - committed
    assert total(after, "broker_requests_total", api="OffsetCommit") >= 1
    assert total(after, "broker_shards") == 2
    assert total(after, "broker_metrics_stale_shards") == 0

    # A request the broker refuses (a Produce version nobody defines) closes the connection
    # and is counted as a Produce error.
    with socket.create_connection(("127.0.0.1", metered.port), timeout=10) as s:
        body = struct.pack(">hhi", 0, 99, 7) + struct.pack(">h", 1) + b"x"
        s.sendall(struct.pack(">i", len(body)) + body)
        assert s.recv(1024) == b""
    errors_seen = samples(port)
    assert total(errors_seen, "broker_request_errors_total", api="Produce") == 1
    assert total(errors_seen, "broker_request_errors_total", api="Produce",
                 error="connection_closed") == 1

    # After a clean restart (which trims the active segments' preallocated space) the log
    # sizes equal the segment files' sizes, and the group's lag survived.
    metered.restart()
    restarted = samples(port)
    for p in range(PARTITIONS):
        size = one(restarted, "broker_log_size_bytes", topic=topic, partition=str(p))
        assert size == segment_file_bytes(metered, topic, p), p
    assert one(restarted, "broker_consumer_group_lag", group=group, topic=topic,
               partition="0") == per_partition[0] - committed

    # The shipped dashboard queries only metrics a real scrape has (so it cannot rot).
    names = {n for (n, _) in errors_seen}
    exprs = [t["expr"] for panel in json.loads(DASHBOARD.read_text())["panels"]
             for t in panel["targets"]]
    exprs += [json.loads(DASHBOARD.read_text())["templating"]["list"][1]["definition"]]
    used = {m for e in exprs for m in re.findall(r"\bbroker_[a-z0-9_]+", e)}
    assert used, "no broker_ metric in the dashboard"
    assert used <= names, sorted(used - names)


def test_response_error_codes_counted_by_kafka_name(start_broker):
    """Error codes of answered responses are counted by API and Kafka's error name: a record
    over the topic's max.message.bytes (librdkafka sends it; the broker answers
    MESSAGE_TOO_LARGE) and a Metadata request for a missing topic with auto-creation off
    (UNKNOWN_TOPIC_OR_PARTITION). Accepted records add nothing."""
    port = free_port()
    b = start_broker({
        "metrics.listener": f"http://127.0.0.1:{port}",
        "num.shards": 2,
        "auto.create.topics.enable": "false",
    })
    topic = create_topic(b.bootstrap, unique("errors"), 1, {"max.message.bytes": "1000"})
    producer = ck_producer(b.bootstrap, **{"message.send.max.retries": 0})
    ok = ck_produce(producer, topic, [{"value": b"v" * 100, "partition": 0}])
    assert not ok.errors
    clean = samples(port)
    assert total(clean, "broker_request_errors_total") == 0
    assert total(clean, "broker_requests_total", api="Produce") >= 1

    refused = ck_produce(producer, topic, [{"value": os.urandom(4000), "partition": 0}])
    assert [e.code() for e, _, _ in refused.errors] == [KafkaError.MSG_SIZE_TOO_LARGE]
    del producer
    scraped = samples(port)
    assert total(scraped, "broker_request_errors_total", api="Produce",
                 error="MESSAGE_TOO_LARGE") == 1
    assert total(scraped, "broker_request_errors_total", api="Produce") == 1

    missing = unique("missing")
    metadata = ck_admin(b.bootstrap).list_topics(topic=missing, timeout=10)
    assert metadata.topics[missing].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    scraped = samples(port)
    assert total(scraped, "broker_request_errors_total", api="Metadata",
                 error="UNKNOWN_TOPIC_OR_PARTITION") >= 1
    assert total(scraped, "broker_request_errors_total", api="Metadata",
                 error="connection_closed") == 0


def test_fsyncs_counted_by_reason(metered):
    """Every fsync of a partition log is counted with its reason: creating partitions (their
    directory entries and partition.metadata), acks=all group commits, and segment rolls
    (a topic with 2 KiB segments rolls many times under 40 batches of 500 bytes)."""
    port = metered.metrics_port
    before = samples(port)
    topic = create_topic(metered.bootstrap, unique("fsyncs"), PARTITIONS,
                         {"segment.bytes": "2048"})
    created = samples(port)

    def grew(after, then, reason):
        return total(after, "broker_fsyncs_total", reason=reason) - \
            total(then, "broker_fsyncs_total", reason=reason)
    # Per partition: the parent directory, then partition.metadata's file and directory.
    assert grew(created, before, "partition_create") == 3 * PARTITIONS
    assert grew(created, before, "segment_roll") == 0

    producer = ck_producer(metered.bootstrap, acks="all", **{"linger.ms": 0})
    for i in range(40):  # one batch each (flushed one at a time): ~3 batches a segment
        log = ck_produce(producer, topic, [{"value": os.urandom(500), "partition": i % 2}])
        assert not log.errors
    del producer
    after = samples(port)
    assert grew(after, created, "group_commit") >= 1
    # Each roll syncs the old segment's files and the directory in the next round.
    segments = sum(len(list((metered.data_dir / f"{topic}-{p}").glob("*.log")))
                   for p in range(PARTITIONS))
    assert segments > 2 * PARTITIONS, segments
    assert grew(after, created, "segment_roll") >= segments - PARTITIONS
    assert grew(after, created, "partition_create") == 0
    reasons = {dict(ls)["reason"] for (n, ls) in after if n == "broker_fsyncs_total"}
    assert reasons == {"group_commit", "segment_roll", "partition_create", "log_start_offset",
                       "open_close", "other"}


def test_fetch_sessions_counted(metered):
    """kafka-python fetches through an incremental fetch session (KIP-227): the scrape shows
    the session and its cached partitions (Kafka's NumIncrementalFetchSessions and
    NumIncrementalFetchPartitionsCached), none before it fetched."""
    from kafka import TopicPartition as KTP

    port = metered.metrics_port
    topic = create_topic(metered.bootstrap, unique("sessions"), PARTITIONS)
    before = samples(port)
    assert total(before, "broker_fetch_sessions") == 0
    assert total(before, "broker_fetch_session_partitions") == 0
    assert total(before, "broker_fetch_session_evictions_total") == 0
    consumer = kp_consumer(metered.bootstrap)
    try:
        consumer.assign([KTP(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
            during = samples(port)
            if total(during, "broker_fetch_session_partitions") >= PARTITIONS:
                break
        assert total(during, "broker_fetch_sessions") >= 1
        assert total(during, "broker_fetch_session_partitions") >= PARTITIONS
    finally:
        consumer.close()


def test_prometheus_example_scrapes_the_documented_listener():
    text = PROMETHEUS_YML.read_text()
    assert "metrics_path: /metrics" in text
    assert re.search(r"^\s*- 127\.0\.0\.1:9644\b", text, re.M)
    assert "metrics.listener=http://0.0.0.0:9644" in text

"""Group requests while a fresh broker creates and loads __consumer_offsets.

The first FindCoordinator creates the 50 partitions of __consumer_offsets; every shard opens
its share, then replays it. A group request for a partition its shard owns but has not
finished opening or loading must get COORDINATOR_LOAD_IN_PROGRESS (retriable, same
coordinator), as Kafka answers, never NOT_COORDINATOR (librdkafka's committed() fails on
that: it once failed test_delete_records_kafka_python on a loaded machine). The cores are
kept busy (two spinning processes on one of them, so that one shard opens its share later
than the other) so that requests arrive during the opening. The broker's
error counts (metrics) show every NOT_COORDINATOR answered, also those a client retried.
"""
import http.client
import os
import re
import subprocess
import threading

from confluent_kafka import TopicPartition

from conftest import free_port
from e2e_helpers import ck_consumer, create_topic, kp_consumer, unique

CONSUMERS_PER_CLIENT = 8
BUSY_PROCESSES = 2


def busy_on(cpu):
    """A process that spins on `cpu` until killed."""
    return subprocess.Popen(["yes"], stdout=subprocess.DEVNULL,
                            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))


def test_group_requests_during_coordinator_load(start_broker):
    metrics_port = free_port()
    broker = start_broker({"metrics.listener": f"http://127.0.0.1:{metrics_port}"})
    topic = create_topic(broker.bootstrap, unique("load"), 1)
    # Both on the last core: the shard pinned there opens its partitions well after the
    # other, whose clients then reach groups of partitions still being opened.
    last_cpu = min(os.sched_getaffinity(0))
    busy = [busy_on(last_cpu) for _ in range(BUSY_PROCESSES)]
    start = threading.Barrier(2 * CONSUMERS_PER_CLIENT)
    failures = []

    def confluent(index):
        c = ck_consumer(broker.bootstrap, **{"group.id": unique(f"ckload{index}")})
        tp = TopicPartition(topic, 0)
        try:
            start.wait()
            before = c.committed([tp], timeout=60)
            assert before[0].error is None and before[0].offset < 0, before
            c.commit(offsets=[TopicPartition(topic, 0, 7 + index)], asynchronous=False)
            after = c.committed([tp], timeout=60)
            assert after[0].error is None and after[0].offset == 7 + index, after
        except Exception as e:  # noqa: BLE001
            failures.append(f"confluent consumer {index}: {e!r}")
        finally:
            c.close()

    def kafka_python(index):
        from kafka import TopicPartition as KTP
        from kafka.structs import OffsetAndMetadata

        tp = KTP(topic, 0)
        c = kp_consumer(broker.bootstrap, group_id=unique(f"kpload{index}"))
        try:
            c.assign([tp])
            start.wait()
            assert c.committed(tp) is None
            assert c.position(tp) == 0
            c.commit({tp: OffsetAndMetadata(3 + index, "", -1)})
            assert c.committed(tp) == 3 + index
        except Exception as e:  # noqa: BLE001
            failures.append(f"kafka-python consumer {index}: {e!r}")
        finally:
            c.close()

    threads = [threading.Thread(target=confluent, args=(i,)) for i in range(CONSUMERS_PER_CLIENT)]
    threads += [threading.Thread(target=kafka_python, args=(i,))
                for i in range(CONSUMERS_PER_CLIENT)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=180)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert not any(t.is_alive() for t in threads), "a consumer hung"
    assert not failures, failures
    # Clients retry NOT_COORDINATOR on some paths (a new FindCoordinator), so the broker's
    # own count of answers is the check that sees every one.
    assert answered(metrics_port, "NOT_COORDINATOR") == {}, {
        error: answered(metrics_port, error)
        for error in ("NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS")}


def answered(port, error):
    """{api: count} of the answers that carried `error` (broker_request_errors_total)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/metrics")
    body = conn.getresponse().read().decode()
    conn.close()
    counts = {}
    for line in body.splitlines():
        m = re.match(r'broker_request_errors_total\{[^}]*api="([^"]+)",error="([^"]+)"\} (\S+)',
                     line)
        if m and m.group(2) == error and float(m.group(3)) > 0:
            counts[m.group(1)] = counts.get(m.group(1), 0) + float(m.group(3))
    return counts

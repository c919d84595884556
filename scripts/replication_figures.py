#!/usr/bin/env python3
"""Client failover with replication (issue 21): from kill -9 of a partition's leader to the
first acks=all produce a librdkafka producer gets acknowledged by the new leader.

Usage: BROKER_BIN=target/release/broker target/venv/bin/python scripts/replication_figures.py
           [--kills N] [--keep]

Starts 3 combined broker+controller nodes on 127.0.0.1 (tests/e2e/cluster_harness.py,
broker.session.timeout.ms=3000, broker.heartbeat.interval.ms=500 and, when the binary knows it,
replica.lag.time.max.ms=3000; CLUSTER_OVERRIDES="k=v k=v" replaces those). Then N times
(REPLICATION_FAILOVER_KILLS, default 20):

1. create a topic of one partition, replication factor 3, min.insync.replicas=2, wait until its
   ISR holds all 3 replicas on every node and one record produced with acks=all is acknowledged
   (the producer knows the current leader);
2. kill -9 the leader; from that instant, produce one record at a time (acks=all), each waited
   for, until one is acknowledged: the time from the kill to that acknowledgement is the
   failover time. The producer is tuned to notice quickly: message.timeout.ms 1500,
   request.timeout.ms 1000, retry.backoff.ms 50, reconnect.backoff 50..500 ms,
   topic.metadata.refresh.fast.interval.ms 50, socket.connection.setup.timeout.ms 1000;
3. restart the killed node (same dir and ports) before the next kill.

Prints every time, the median and the max; the last line is a JSON object with the figures.
Node logs stay under the printed directory with --keep (or when a step fails). Without
replication a new leader also takes writes (on an empty log), so this measures the client's
failover either way; the test suite (tests/e2e/test_replication.py) checks the records.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))

from cluster_harness import Cluster, wait_until  # noqa: E402
from conftest import BROKER_BIN  # noqa: E402
from test_replication import MIN_ISR, cluster_overrides  # noqa: E402


def overrides_from_env():
    text = os.environ.get("CLUSTER_OVERRIDES")
    if text is None:
        return cluster_overrides()
    return dict(kv.split("=", 1) for kv in text.split())


def producer(bootstrap):
    from confluent_kafka import Producer

    return Producer({
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": False,
        "linger.ms": 0,
        "message.timeout.ms": 1500,
        "request.timeout.ms": 1000,
        "retries": 1000,
        "retry.backoff.ms": 50,
        "retry.backoff.max.ms": 200,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
        "topic.metadata.refresh.fast.interval.ms": 50,
        "socket.connection.setup.timeout.ms": 1000,
    })


def produce_one(prod, topic, value, timeout=5.0):
    """Produces one record to partition 0 and waits for its delivery report: (ok, error)."""
    box = []
    prod.produce(topic, value=value, partition=0,
                 on_delivery=lambda err, msg: box.append((err, msg)))
    deadline = time.monotonic() + timeout
    while not box and time.monotonic() < deadline:
        prod.poll(0.01)
    if not box:
        return False, "no delivery report"
    err, _ = box[0]
    return err is None, err


def leader_of(c, topic):
    for i in c.live_brokers():
        parts = c.partition_states(i, topic)
        if parts and parts[0]["leader"] in c.live():
            return parts[0]["leader"]
    return None


def new_topic(c, k):
    """A fresh topic of one partition, rf 3, min.insync.replicas=2, its ISR full on every
    node (a fresh one per kill: a broker without replication never grows an ISR back)."""
    topic = f"failover-{k}-{int(time.time() * 1000) % 10**8}"
    err = c.create_topic_configs(c.controller_id() or c.live_brokers()[0], topic, 1, 3, MIN_ISR)
    assert err[0] == 0, f"CreateTopics {topic}: {err}"
    c.wait_topic(topic, 1)
    c.wait_isr_full(topic, 1, timeout=90)
    return topic


def failover(c, kills):
    times = []
    prod = producer(c.bootstrap())
    for k in range(1, kills + 1):
        c.wait_formed()
        topic = new_topic(c, k)
        wait_until(lambda: produce_one(prod, topic, b"warm")[0], 60, "a warm-up record")
        victim = leader_of(c, topic)
        t0 = time.monotonic()
        c.kill9(victim)
        tries = 0
        while True:
            tries += 1
            ok, err = produce_one(prod, topic, f"after-kill-{k}-{tries}".encode())
            if ok:
                took = time.monotonic() - t0
                break
            if time.monotonic() - t0 > 120:
                raise AssertionError(f"kill {k}: no acknowledgement within 120 s (last: {err})")
        new = leader_of(c, topic)
        times.append(took)
        print(f"kill {k:2d}: leader {victim} of {topic} killed, acks=all acknowledged after "
              f"{took:.3f}s ({tries} record(s) tried; leader now {new})", flush=True)
        c.restart(victim)
    prod.flush(10)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int,
                    default=int(os.environ.get("REPLICATION_FAILOVER_KILLS", "20")))
    ap.add_argument("--keep", action="store_true", help="keep the node logs and data")
    args = ap.parse_args()
    if not Path(BROKER_BIN).exists():
        sys.exit(f"no broker binary at {BROKER_BIN} (set BROKER_BIN)")
    work = Path(tempfile.mkdtemp(prefix="replication-figures-"))
    overrides = overrides_from_env()
    print(f"nodes under {work}; overrides {overrides}", flush=True)
    c = Cluster(work, overrides=overrides)
    ok = False
    try:
        c.start()
        times = failover(c, args.kills)
        figures = {
            "kills": len(times),
            "failover_median_s": round(statistics.median(times), 3),
            "failover_max_s": round(max(times), 3),
            "failover_s": [round(t, 3) for t in times],
            "overrides": {k: str(v) for k, v in overrides.items()},
        }
        print(f"client failover after kill -9 of the leader, {len(times)} kills: "
              f"median {figures['failover_median_s']:.2f} s, max {figures['failover_max_s']:.2f} s")
        print(json.dumps(figures))
        ok = True
    finally:
        c.close()
        if ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"node logs kept under {work}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Figures of the 3-node cluster (issue 20): controller failover, metadata changes per second,
and one CreateTopics of 1,000 partitions.

Usage: BROKER_BIN=target/release/broker target/venv/bin/python scripts/cluster_figures.py
           [--kills K] [--topics N] [--partitions P] [--via raw|librdkafka] [--keep]

Starts 3 combined broker+controller nodes on 127.0.0.1 (tests/e2e/cluster_harness.py, the
command of issue 20, broker.session.timeout.ms=3000 and broker.heartbeat.interval.ms=500 unless
CLUSTER_OVERRIDES="k=v k=v" says otherwise), then:

1. failover: K times (CLUSTER_FAILOVER_KILLS, default 20) kill -9 the active controller and
   time, from the kill, until DescribeCluster names another controller: with --via raw (the
   default) both survivors, asked directly, must name the same new one; with --via librdkafka
   a fresh confluent_kafka AdminClient bootstrapped with the survivors must name it. The node
   is restarted (same dir and ports) and the cluster re-formed before the next kill. Prints
   every time, the median and the max.
2. metadata changes per second: N topics (CLUSTER_TOPICS, default 200; 1 partition,
   replication factor 3) created one after another, each CreateTopics answered before the
   next is sent, on one connection to the controller, then the same through a node that
   forwards to it.
3. one CreateTopics of P partitions (CLUSTER_BIG_PARTITIONS, default 1000), replication
   factor 3, through the controller: time to its answer, and until every node's Metadata shows
   every partition with a leader.

The last line is a JSON object with every figure. Node logs stay under the printed directory
with --keep (or when a step fails).
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

import kproto as kp  # noqa: E402
from cluster_harness import Cluster, Unreachable, wait_until  # noqa: E402
from conftest import BROKER_BIN  # noqa: E402

DEFAULT_OVERRIDES = "broker.session.timeout.ms=3000 broker.heartbeat.interval.ms=500"


def overrides_from_env():
    text = os.environ.get("CLUSTER_OVERRIDES", DEFAULT_OVERRIDES)
    return dict(kv.split("=", 1) for kv in text.split())


def ck_controller(bootstrap):
    """The controller id a fresh librdkafka AdminClient reports, or None."""
    from confluent_kafka.admin import AdminClient

    try:
        a = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 1000})
        return a.describe_cluster(request_timeout=1).result(timeout=2).controller.id
    except Exception:  # noqa: BLE001 - not yet
        return None


def failover(c, kills, via):
    times = []
    for k in range(1, kills + 1):
        old = c.wait_formed()
        survivors = [i for i in c.ids if i != old]
        t0 = time.monotonic()
        c.kill9(old)
        if via == "raw":
            new, took = c.wait_new_controller(old, survivors, timeout=60)
        else:
            boot = ",".join(c.addr(i) for i in survivors)

            def seen():
                n = ck_controller(boot)
                return n if n is not None and n != old and n in survivors else None

            new = wait_until(seen, 60, f"librdkafka names a controller other than {old}",
                             interval=0.02)
            took = time.monotonic() - t0
        times.append(took)
        print(f"kill {k}/{kills}: controller {old} killed, {new} named after {took * 1000:.0f} ms",
              flush=True)
        c.restart(old)
    return {
        "kills": kills,
        "via": via,
        "median_ms": round(statistics.median(times) * 1000, 1),
        "max_ms": round(max(times) * 1000, 1),
        "times_ms": [round(t * 1000, 1) for t in times],
    }


def create_many(c, through, n, prefix):
    """n topics (1 partition, rf 3) created back to back on one connection to node `through`."""
    names = [f"{prefix}-{k}" for k in range(n)]
    with kp.connect(c.addr(through), timeout=60) as s:
        t0 = time.monotonic()
        for corr, name in enumerate(names, 1):
            r = kp.roundtrip(s, kp.create_topics_v2(corr, name, 1, 3, 30000), corr)
            err, msg = kp.parse_create_topics_v2(r)[name]
            if err != 0:
                raise SystemExit(f"CreateTopics {name} through node {through}: {err} {msg}")
        took = time.monotonic() - t0
    return {"through": through, "topics": n, "seconds": round(took, 3),
            "per_second": round(n / took, 1)}


def big_topic(c, controller, partitions):
    name = f"big-{partitions}-{int(time.time())}"
    t0 = time.monotonic()
    err, msg = c.create_topic(controller, name, partitions, 3, timeout_ms=120000)
    answered = time.monotonic() - t0
    if err != 0:
        raise SystemExit(f"CreateTopics of {partitions} partitions: {err} {msg}")
    c.wait_topic(name, partitions, timeout=120)
    visible = time.monotonic() - t0
    return {"partitions": partitions, "replication_factor": 3,
            "answer_ms": round(answered * 1000, 1), "on_every_node_ms": round(visible * 1000, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=int(os.environ.get("CLUSTER_FAILOVER_KILLS", 20)))
    ap.add_argument("--topics", type=int, default=int(os.environ.get("CLUSTER_TOPICS", 200)))
    ap.add_argument("--partitions", type=int,
                    default=int(os.environ.get("CLUSTER_BIG_PARTITIONS", 1000)))
    ap.add_argument("--via", choices=["raw", "librdkafka"], default="raw")
    ap.add_argument("--keep", action="store_true", help="keep the nodes' dirs and logs")
    args = ap.parse_args()
    if not os.access(BROKER_BIN, os.X_OK):
        raise SystemExit(f"broker binary not found: {BROKER_BIN} (build it or set BROKER_BIN)")

    workdir = Path(tempfile.mkdtemp(prefix="cluster-figures-"))
    print(f"nodes under {workdir}", flush=True)
    c = Cluster(workdir, overrides=overrides_from_env())
    figures, ok = {}, False
    try:
        c.start()
        if args.kills > 0:
            figures["failover"] = failover(c, args.kills, args.via)
            f = figures["failover"]
            print(f"failover over {f['kills']} kills: median {f['median_ms']} ms, "
                  f"max {f['max_ms']} ms", flush=True)
        controller = c.wait_formed()
        if args.topics > 0:
            other = next(i for i in c.ids if i != controller)
            stamp = int(time.time())
            figures["metadata_changes"] = [
                create_many(c, controller, args.topics, f"small-c-{stamp}"),
                create_many(c, other, args.topics, f"small-f-{stamp}"),
            ]
            for m in figures["metadata_changes"]:
                role = "controller" if m["through"] == controller else "forwarding node"
                print(f"{m['topics']} CreateTopics through the {role} (node {m['through']}): "
                      f"{m['seconds']} s, {m['per_second']} metadata changes/s", flush=True)
        if args.partitions > 0:
            figures["big_create"] = big_topic(c, c.wait_formed(), args.partitions)
            b = figures["big_create"]
            print(f"CreateTopics of {b['partitions']} partitions (rf 3): answered in "
                  f"{b['answer_ms']} ms, on every node's Metadata after {b['on_every_node_ms']} ms",
                  flush=True)
        ok = True
    except (AssertionError, Unreachable) as e:
        print(f"failed: {e}\n{c.tails()}", file=sys.stderr)
    finally:
        c.close()
        if ok and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"node dirs and logs kept under {workdir}", flush=True)
    print(json.dumps(figures))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

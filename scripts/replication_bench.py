#!/usr/bin/env python3
"""Replicated produce against unreplicated produce, one cluster, one sitting (issue 21, item 6).

Usage: BROKER_BIN=target/release/broker target/venv/bin/python scripts/replication_bench.py
           [--records N] [--record-size B] [--rounds R] [--partitions P] [--bootstrap HOST:PORT]

Starts 3 combined nodes on 127.0.0.1 (tests/e2e/cluster_harness.py; or, with --bootstrap, uses
another broker or cluster by address, where broker CPU is not read), creates two topics of P
partitions (default 3): `rf1` (replication factor 1) and `rf3` (replication factor 3,
min.insync.replicas=2), then runs `bench producer-perf` (librdkafka, acks=all, linger.ms=5,
unthrottled) R times on each, alternating (rf1 rf3 rf1 rf3 ...), and prints per topic the
median throughput (records/s, MiB/s), p99 latency, and the CPU seconds all broker processes
used per GiB produced (from /proc/<pid>/stat, the whole cluster: leaders and followers),
then rf3 / rf1 ratios measured in the same run. The last line is a JSON object.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))

from cluster_harness import Cluster  # noqa: E402

BENCH = os.environ.get("BENCH_BIN", str(REPO / "target" / "release" / "bench"))
TICKS = os.sysconf("SC_CLK_TCK")
SUMMARY = re.compile(
    r"(\d+) records sent, ([\d.]+|Infinity|NaN) records/sec \(([\d.]+|Infinity|NaN) MB/sec\), "
    r"([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, "
    r"(\d+) ms 99th"
)


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / TICKS


def perf(bootstrap, topic, records, size):
    cmd = [BENCH, "producer-perf", "--topic", topic, "--num-records", str(records),
           "--record-size", str(size), "--throughput", "-1", "--producer-props",
           f"bootstrap.servers={bootstrap}", "acks=all", "linger.ms=5"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    m = None
    for line in out.stdout.splitlines():
        m = SUMMARY.search(line) or m
    if m is None:
        raise RuntimeError(f"no summary from bench:\n{out.stdout}\n{out.stderr}")
    return {"records_per_s": float(m.group(2)), "mib_per_s": float(m.group(3)),
            "p99_ms": int(m.group(8))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=int(os.environ.get("REPL_BENCH_RECORDS", 200_000)))
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--bootstrap", default=None)
    args = ap.parse_args()
    cluster = None
    pids = []
    if args.bootstrap is None:
        cluster = Cluster(tempfile.mkdtemp(prefix="replbench-"),
                          overrides={"broker.session.timeout.ms": 3000,
                                     "broker.heartbeat.interval.ms": 500})
        cluster.start()
        bootstrap = cluster.bootstrap()
        pids = [n.proc.pid for n in cluster.nodes.values()]
    else:
        bootstrap = args.bootstrap
    try:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics([
            NewTopic("rf1", args.partitions, 1),
            NewTopic("rf3", args.partitions, 3, config={"min.insync.replicas": "2"}),
        ])
        for f in futures.values():
            f.result(30)
        time.sleep(2)
        runs = {"rf1": [], "rf3": []}
        for _ in range(args.rounds):
            for topic in ("rf1", "rf3"):
                before = cpu_seconds(pids)
                result = perf(bootstrap, topic, args.records, args.record_size)
                cpu = cpu_seconds(pids) - before
                gib = args.records * args.record_size / (1 << 30)
                result["cpu_s_per_gib"] = cpu / gib if pids else None
                runs[topic].append(result)
                print(topic, result, flush=True)
        med = {}
        for topic, rs in runs.items():
            med[topic] = {k: statistics.median(r[k] for r in rs) if rs[0][k] is not None else None
                          for k in rs[0]}
        print(f"{'topic':6} {'records/s':>12} {'MiB/s':>8} {'p99 ms':>7} {'CPU s/GiB':>10}")
        for topic, m in med.items():
            cpu = f"{m['cpu_s_per_gib']:.2f}" if m["cpu_s_per_gib"] is not None else "-"
            print(f"{topic:6} {m['records_per_s']:12.0f} {m['mib_per_s']:8.1f} {m['p99_ms']:7.0f} {cpu:>10}")
        ratios = {
            "throughput_rf3_over_rf1": med["rf3"]["records_per_s"] / med["rf1"]["records_per_s"],
            "p99_rf3_over_rf1": med["rf3"]["p99_ms"] / max(med["rf1"]["p99_ms"], 1),
        }
        if pids:
            ratios["cpu_rf3_over_rf1"] = med["rf3"]["cpu_s_per_gib"] / med["rf1"]["cpu_s_per_gib"]
        print("ratios (same run):", {k: round(v, 2) for k, v in ratios.items()})
        print(json.dumps({"records": args.records, "record_size": args.record_size,
                          "rounds": args.rounds, "medians": med, "ratios": ratios}))
    finally:
        if cluster is not None:
            cluster.close()


if __name__ == "__main__":
    main()

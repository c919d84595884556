#!/usr/bin/env python3
"""Broker CPU per GiB produced against the partition count (issue 10, item 5).

One broker per partition count (default config, 2 shards), each with one topic created and
warmed (one record produced to every partition) before anything is measured; then rounds of
`bench producer-perf` (librdkafka, 1 KiB records, acks=1, linger.ms=5) against each broker in
turn, so machine noise spreads over every point alike. Broker CPU is user + system time of the
broker process from /proc/<pid>/stat over the run. Prints one line per run and the medians and
ratios to the smallest partition count.

Run with the venv that has confluent-kafka:
  /work/main/target/venv/bin/python scripts/partition-cost.py --partitions 10 100 1000 10000
"""

import argparse
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

CLK_TCK = os.sysconf("SC_CLK_TCK")
GIB = float(1 << 30)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def raise_fd_limit():
    # A partition holds a few descriptors open (its active segment, its directory): 10,000
    # partitions need more than the usual 20,000. Raising the hard limit needs root.
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))
    except (ValueError, OSError):
        pass


FD_LIMIT = 200_000


class Broker:
    def __init__(self, binary, root, partitions, overrides):
        self.dir = tempfile.mkdtemp(prefix=f"pc{partitions}-", dir=root)
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        argv = [binary, "start", "--override", f"listeners=PLAINTEXT://{self.bootstrap}",
                "--override", f"log.dirs={self.dir}/data"]
        for kv in overrides:
            argv += ["--override", kv]
        self.log = open(f"{self.dir}/broker.log", "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=self.log,
                                     stdin=subprocess.DEVNULL, preexec_fn=raise_fd_limit)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("broker did not start")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        with open(f"{self.dir}/broker.log", "rb") as f:
            tail = [l for l in f.read().decode(errors="replace").splitlines() if "produce" in l]
        shutil.rmtree(self.dir, ignore_errors=True)
        return tail


def create_and_warm(bootstrap, topic, partitions):
    # Creating 10,000 partitions on a loaded machine takes minutes, past librdkafka's 60 s.
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=290,
                        request_timeout=295)[topic].result()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    deadline = time.time() + 120
    while True:
        md = producer.list_topics(topic, timeout=10).topics[topic]
        if len(md.partitions) == partitions and md.error is None:
            break
        if time.time() > deadline:
            raise RuntimeError("topic not visible")
        time.sleep(0.2)
    for p in range(partitions):
        producer.produce(topic, b"warm", partition=p)
        if p % 10000 == 9999:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("warm-up records not delivered")


def run_perf(bench, broker, topic, records, size, props, client):
    argv = [bench, "producer-perf", "--client", client, "--topic", topic, "--num-records", str(records),
            "--record-size", str(size), "--throughput", "-1", "--reporting-interval", "60000",
            "--producer-props", f"bootstrap.servers={broker.bootstrap}", "acks=1",
            "linger.ms=5", *props]
    before = cpu_seconds(broker.proc.pid)
    start = time.time()
    out = subprocess.run(argv, capture_output=True, text=True)
    wall = time.time() - start
    cpu = cpu_seconds(broker.proc.pid) - before
    if out.returncode != 0:
        raise RuntimeError(f"producer-perf failed: {out.stderr[-2000:]}")
    summary = [l for l in out.stdout.splitlines() if "records sent" in l][-1]
    return cpu / (records * size / GIB), records / wall, summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker", action="append",
                    help="broker binary; repeat to compare builds in the same rounds")
    ap.add_argument("--bench", default="target/release/bench")
    ap.add_argument("--partitions", type=int, nargs="+", default=[10, 100, 1000, 10000])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--root", default="/tmp")
    ap.add_argument("--override", action="append", default=[], help="broker key=value")
    ap.add_argument("--prop", action="append", default=[], help="extra producer property")
    ap.add_argument("--client", default="librdkafka", choices=["librdkafka", "native"],
                    help="bench's client engine (librdkafka sends one partition per request)")
    ap.add_argument("--hold", type=float, default=0,
                    help="seconds to keep the brokers up after warming (to attach perf)")
    args = ap.parse_args()
    binaries = args.broker or ["target/release/broker"]
    points = [(b, n) for b in binaries for n in args.partitions]

    brokers = {}
    try:
        for binary, n in points:
            b = Broker(binary, args.root, n, args.override)
            brokers[(binary, n)] = b
            t = time.time()
            create_and_warm(b.bootstrap, "t", n)
            print(f"# {binary} {n} partitions: created and warmed in {time.time() - t:.1f}s, "
                  f"pid {b.proc.pid}, {b.bootstrap}", flush=True)
        if args.hold:
            time.sleep(args.hold)
        results = {p: [] for p in points}
        for r in range(args.rounds):
            for binary, n in points:
                s_per_gib, rate, summary = run_perf(args.bench, brokers[(binary, n)], "t",
                                                    args.records, args.size, args.prop,
                                                    args.client)
                results[(binary, n)].append(s_per_gib)
                print(f"round {r} {binary} partitions {n:>6}: {s_per_gib:.3f} s/GiB  "
                      f"{rate:,.0f} rec/s(wall)  | {summary}", flush=True)
        print("broker  partitions  median_s_per_GiB  runs  ratio_to_first_count")
        for binary in binaries:
            base = statistics.median(results[(binary, args.partitions[0])])
            for n in args.partitions:
                m = statistics.median(results[(binary, n)])
                runs = " ".join(f"{x:.3f}" for x in results[(binary, n)])
                # Ratio within each round (points of a round run minutes apart at most, so
                # a change in machine load between rounds cancels), then the median.
                per_round = statistics.median(
                    x / b for x, b in zip(results[(binary, n)],
                                          results[(binary, args.partitions[0])]))
                print(f"{binary}  {n:>6}  {m:8.3f}  [{runs}]  {m / base:.2f}x  "
                      f"median per-round ratio {per_round:.2f}x")
    finally:
        for (binary, n), b in brokers.items():
            for line in b.stop()[-2:]:
                print(f"# {binary} {n}: {line.strip()}")


if __name__ == "__main__":
    sys.exit(main())

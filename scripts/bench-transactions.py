#!/usr/bin/env python3
"""Transactional produce against plain idempotent produce, one broker, one sitting.

Broker CPU (utime+stime from /proc/<pid>/stat) per GiB and throughput, for the same records
(librdkafka through confluent-kafka, acks=all, linger.ms=5) sent plainly and in transactions
of TXN_RECORDS records each, alternating rounds; and the commit latency (commit_transaction()
wall time) p50/p99 of the transactional rounds. Ratios are what to read: this machine is
shared and noisy.

    target/venv/bin/python scripts/bench-transactions.py        # N=200000 SIZE=1024 ROUNDS=3
"""

import os
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROKER = os.environ.get("BROKER_BIN", os.path.join(REPO, "target/release/broker"))
N = int(os.environ.get("N", "200000"))
SIZE = int(os.environ.get("SIZE", "1024"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
TXN_RECORDS = int(os.environ.get("TXN_RECORDS", "1000"))
PARTITIONS = int(os.environ.get("PARTITIONS", "4"))
PORT = int(os.environ.get("PORT", "19492"))
TCK = os.sysconf("SC_CLK_TCK")


def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TCK


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def run(bootstrap, topic, transactional, pid):
    conf = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "batch.size": 131072,
        "enable.idempotence": True,
        "queue.buffering.max.messages": 1000000,
    }
    if transactional:
        conf["transactional.id"] = f"bench-{topic}"
    p = Producer(conf)
    if transactional:
        p.init_transactions(30)
    value = b"x" * SIZE
    commits = []
    before, start = cpu(pid), time.time()
    sent = 0
    while sent < N:
        if transactional:
            p.begin_transaction()
        for i in range(min(TXN_RECORDS, N - sent)):
            while True:
                try:
                    p.produce(topic, value=value, partition=(sent + i) % PARTITIONS)
                    break
                except BufferError:
                    p.poll(0.01)
        sent += min(TXN_RECORDS, N - sent)
        if transactional:
            t = time.time()
            p.commit_transaction(60)
            commits.append((time.time() - t) * 1000)
    p.flush(60)
    elapsed, used = time.time() - start, cpu(pid) - before
    gib = N * SIZE / 2**30
    return N / elapsed, used / gib, commits


def main():
    data = tempfile.mkdtemp(prefix="txn-bench-")
    bootstrap = f"127.0.0.1:{PORT}"
    log = open(os.path.join(data, "broker.log"), "w")
    broker = subprocess.Popen(
        [BROKER, "start", "--override", f"listeners=PLAINTEXT://{bootstrap}",
         "--override", f"advertised.listeners=PLAINTEXT://{bootstrap}",
         "--override", f"log.dirs={data}/data"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        time.sleep(1.5)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        results = {False: [], True: []}
        commits = []
        for r in range(ROUNDS):
            for transactional in (False, True):
                topic = f"{'txn' if transactional else 'plain'}-{r}"
                admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result()
                rate, cpu_gib, c = run(bootstrap, topic, transactional, broker.pid)
                results[transactional].append((rate, cpu_gib))
                commits += c
                print(f"round {r} {'transactional' if transactional else 'plain        '}: "
                      f"{rate:10.0f} records/s, broker {cpu_gib:6.2f} CPU s/GiB", flush=True)
        med = lambda xs: sorted(xs)[len(xs) // 2]
        plain_rate = med([x[0] for x in results[False]])
        txn_rate = med([x[0] for x in results[True]])
        plain_cpu = med([x[1] for x in results[False]])
        txn_cpu = med([x[1] for x in results[True]])
        print(f"medians: transactional/plain throughput x{txn_rate / plain_rate:.2f}, "
              f"CPU per GiB x{txn_cpu / plain_cpu:.2f} ({N} x {SIZE} B, {TXN_RECORDS} records "
              f"per transaction, {PARTITIONS} partitions)")
        print(f"commit latency over {len(commits)} commits: p50 {percentile(commits, 0.5):.2f} ms, "
              f"p99 {percentile(commits, 0.99):.2f} ms")
    finally:
        broker.terminate()
        broker.wait(30)


if __name__ == "__main__":
    sys.exit(main())

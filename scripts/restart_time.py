#!/usr/bin/env python3
"""Clean-restart time of a broker holding many partitions, and what idle partitions cost.

Usage: restart_time.py BROKER_BIN PARTITIONS [PORT] [--override key=value ...]
       [--topic-partitions N] [--keep DIR]

Creates PARTITIONS partitions (topics of --topic-partitions, default 100), writes one record to
each, stops the broker with SIGTERM, starts it again and prints how long the new process took
to answer a Metadata request listing every topic (polled every 2 ms over a raw socket).

Also prints, for the broker before the restart (every partition written once) and after it
(every partition opened, none used since), its open file descriptors (/proc/PID/fd) and its
resident memory (VmRSS), each against the same figures of the broker before it held any
partition, divided by the partition count.

Run it under the fd limit the figures should hold under, e.g.
  (ulimit -n 20000; target/venv/bin/python scripts/restart_time.py target/release/broker 100000)
The broker inherits the limit; with the default log.fd.cache.size (10,000) it holds about
that many log fds whatever the partition count.
"""
import argparse
import contextlib
import os
import signal
import socket
import struct
import subprocess
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

# Topics created per CreateTopics request: one request for 100,000 partitions would pass
# librdkafka's request timeout on a small machine.
TOPICS_PER_REQUEST = 50


def metadata_v0(port):
    body = struct.pack(">hhih", 3, 0, 1, 1) + b"r" + struct.pack(">i", 0)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
    return data


def topic_count(resp):
    pos = 4
    n = struct.unpack_from(">i", resp, pos)[0]
    pos += 4
    for _ in range(n):
        pos += 4
        hl = struct.unpack_from(">h", resp, pos)[0]
        pos += 2 + hl + 4
    return struct.unpack_from(">i", resp, pos)[0]


def start(binary, data, port, overrides):
    argv = [binary, "start", "--override", f"log.dirs={data}",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}"]
    for kv in overrides:
        argv += ["--override", kv]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_answer(port, topics, deadline_s=600):
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s:
        try:
            if topic_count(metadata_v0(port)) >= topics:
                return
        except OSError:
            pass
        time.sleep(0.002)
    raise SystemExit("broker did not answer Metadata in time")


def usage(pid):
    """(open fds, resident KiB) of the process."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return fds, rss


def report(label, pid, base, partitions):
    fds, rss = usage(pid)
    per_fd = (fds - base[0]) / partitions
    per_kib = (rss - base[1]) / partitions
    print(f"{label}: fds={fds} ({per_fd:.4f} per partition) rss={rss / 1024:.1f} MiB "
          f"({per_kib * 1024:.0f} bytes per partition)", flush=True)


# Topics per producer: librdkafka scans every partition it knows on each loop of its broker
# thread, so one producer writing 100,000 partitions crawls (over 10 minutes here).
TOPICS_PER_PRODUCER = 20


def produce_one_each(port, names, per_topic):
    for at in range(0, len(names), TOPICS_PER_PRODUCER):
        prod = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 50,
                         "queue.buffering.max.messages": 200_000,
                         "message.timeout.ms": 300_000})
        for n in names[at:at + TOPICS_PER_PRODUCER]:
            for part in range(per_topic):
                prod.produce(n, b"v", partition=part)
            prod.poll(0)
        assert prod.flush(300) == 0
        del prod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("partitions", type=int)
    ap.add_argument("port", type=int, nargs="?", default=19392)
    ap.add_argument("--topic-partitions", type=int, default=100)
    ap.add_argument("--override", action="append", default=[], help="broker key=value")
    ap.add_argument("--keep", metavar="DIR", help="use DIR (new) as log.dirs and keep it, "
                    "e.g. to profile further restarts")
    args = ap.parse_args()
    per_topic = args.topic_partitions
    topics = (args.partitions + per_topic - 1) // per_topic
    partitions = topics * per_topic
    print(f"fd limit (soft) {os.sysconf('SC_OPEN_MAX')}, partitions {partitions}", flush=True)
    if args.keep:
        os.makedirs(args.keep)
    with (contextlib.nullcontext(args.keep) if args.keep else tempfile.TemporaryDirectory()) as data:
        p = start(args.binary, data, args.port, args.override)
        wait_answer(args.port, 0)
        time.sleep(0.5)
        empty = usage(p.pid)
        print(f"empty broker: fds={empty[0]} rss={empty[1] / 1024:.1f} MiB", flush=True)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{args.port}",
                             "socket.timeout.ms": 300_000})
        names = [f"rt{i}" for i in range(topics)]
        t0 = time.monotonic()
        for at in range(0, len(names), TOPICS_PER_REQUEST):
            batch = names[at:at + TOPICS_PER_REQUEST]
            futures = admin.create_topics([NewTopic(n, per_topic, 1) for n in batch],
                                          operation_timeout=290, request_timeout=295)
            for f in futures.values():
                f.result()
        print(f"created in {time.monotonic() - t0:.1f} s", flush=True)
        t0 = time.monotonic()
        produce_one_each(args.port, names, per_topic)
        print(f"produced one record to each in {time.monotonic() - t0:.1f} s", flush=True)
        time.sleep(1)
        report("before restart (each partition written once)", p.pid, empty, partitions)
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        assert p.wait(600) == 0
        print(f"clean shutdown took {time.monotonic() - t0:.3f} s", flush=True)
        t0 = time.monotonic()
        p = start(args.binary, data, args.port, args.override)
        wait_answer(args.port, topics)
        took = time.monotonic() - t0
        time.sleep(1)
        report("after restart (idle)", p.pid, empty, partitions)
        p.send_signal(signal.SIGTERM)
        p.wait(600)
    print(f"partitions={partitions} clean restart to Metadata answer: {took:.3f} s")


if __name__ == "__main__":
    main()

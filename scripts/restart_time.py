#!/usr/bin/env python3
"""Clean-restart time of a broker holding many partitions: process start -> first Metadata answer.

Usage: restart_time.py BROKER_BIN PARTITIONS [PORT]
Creates PARTITIONS partitions (topics of 100), writes one record to each, stops the broker with
SIGTERM, starts it again and prints how long the new process took to answer a Metadata request
listing every topic (polled every 2 ms over a raw socket). Needs about 2 fds per partition.
"""
import os, signal, socket, struct, subprocess, sys, tempfile, time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


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


def start(binary, data, port):
    return subprocess.Popen([binary, "start", "--override", f"log.dirs={data}",
                             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                             "--override", f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_answer(port, topics, deadline_s=120):
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s:
        try:
            if topic_count(metadata_v0(port)) >= topics:
                return
        except OSError:
            pass
        time.sleep(0.002)
    raise SystemExit("broker did not answer Metadata in time")


def main():
    binary, partitions = sys.argv[1], int(sys.argv[2])
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 19392
    topics = (partitions + 99) // 100
    with tempfile.TemporaryDirectory() as data:
        p = start(binary, data, port)
        wait_answer(port, 0)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        names = [f"rt{i}" for i in range(topics)]
        for f in admin.create_topics([NewTopic(n, 100, 1) for n in names],
                                     request_timeout=300).values():
            f.result()
        prod = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 50})
        for n in names:
            for part in range(100):
                prod.produce(n, b"v", partition=part)
        assert prod.flush(120) == 0
        p.send_signal(signal.SIGTERM)
        assert p.wait(120) == 0
        t0 = time.monotonic()
        p = start(binary, data, port)
        wait_answer(port, topics)
        took = time.monotonic() - t0
        p.send_signal(signal.SIGTERM)
        p.wait(120)
    print(f"partitions={topics * 100} clean restart to Metadata answer: {took:.3f} s")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Throughput benchmark (not a test): produce N records of SIZE bytes with acks=all through
confluent-kafka (librdkafka), then read them all back with a consumer.

    target/venv/bin/python scripts/throughput.py --bootstrap 127.0.0.1:9092 [--records 1000000]
        [--size 100] [--partitions 3] [--compression none] [--topic NAME]

Prints one summary line for produce and one for consume:
    produce: 1000000 records, 95.4 MB in 4.12 s: 242718 records/s, 23.15 MB/s (acks=all, ...)
    consume: 1000000 records, 95.4 MB in 2.01 s: 497512 records/s, 47.45 MB/s
"""

import argparse
import sys
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

MB = 1024 * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bootstrap", required=True, help="host:port of the broker")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100, help="value size in bytes")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--topic", default=None, help="default: a new topic bench-<random>")
    ap.add_argument("--compression", default="none")
    ap.add_argument("--linger-ms", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=1_000_000)
    ap.add_argument("--timeout", type=float, default=600, help="seconds for each phase")
    args = ap.parse_args()

    topic = args.topic or f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    md = admin.list_topics(timeout=10)
    if topic not in md.topics:
        fs = admin.create_topics([NewTopic(topic, args.partitions, 1)], request_timeout=30)
        fs[topic].result(timeout=30)
        time.sleep(0.2)
    partitions = len(admin.list_topics(topic=topic, timeout=10).topics[topic].partitions)

    # ---- produce
    p = Producer({
        "bootstrap.servers": args.bootstrap,
        "acks": "all",
        "enable.idempotence": False,
        "linger.ms": args.linger_ms,
        "batch.size": args.batch_size,
        "batch.num.messages": 100_000,
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 4 * 1024 * 1024,
        "compression.type": args.compression,
        "message.timeout.ms": int(args.timeout * 1000),
    })
    value = (b"0123456789abcdefghijklmnopqrstuvwxyz" * (args.size // 36 + 1))[: args.size]
    delivered = [0]
    failed = [0]

    def on_delivery(err, msg):
        if err is None:
            delivered[0] += 1
        else:
            failed[0] += 1

    t0 = time.perf_counter()
    for i in range(args.records):
        while True:
            try:
                p.produce(topic, value=value, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.001)
        if i % 10000 == 0:
            p.poll(0)
    left = p.flush(args.timeout)
    dt = time.perf_counter() - t0
    total_mb = args.records * args.size / MB
    print(f"produce: {delivered[0]} records, {total_mb:.1f} MB in {dt:.2f} s: "
          f"{delivered[0] / dt:.0f} records/s, {delivered[0] * args.size / MB / dt:.2f} MB/s "
          f"(acks=all, linger.ms={args.linger_ms}, batch.size={args.batch_size}, "
          f"compression={args.compression}, partitions={partitions}, failed={failed[0]}, "
          f"undelivered={left})", flush=True)
    if failed[0] or left:
        return 1

    # ---- consume
    c = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.max.bytes": 64 * MB,
        "max.partition.fetch.bytes": 16 * MB,
    })
    c.assign([TopicPartition(topic, q, OFFSET_BEGINNING) for q in range(partitions)])
    n = 0
    nbytes = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + args.timeout
    while n < args.records and time.monotonic() < deadline:
        for m in c.consume(num_messages=100_000, timeout=0.5):
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    print(f"consume error: {m.error()}", file=sys.stderr)
                continue
            n += 1
            nbytes += len(m.value())
    dt = time.perf_counter() - t0
    c.close()
    print(f"consume: {n} records, {nbytes / MB:.1f} MB in {dt:.2f} s: {n / dt:.0f} records/s, "
          f"{nbytes / MB / dt:.2f} MB/s", flush=True)
    return 0 if n >= args.records else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Fresh-broker group joins, over and over: the stress that found the executor stall of the
kept preemption timers of glommio (vendor/glommio/timer-keep.patch, not applied). Each round
starts a new broker (2 shards by default: one per core), creates a 2-partition topic,
produces 2 records and reads them with a new consumer group, which creates
`__consumer_offsets` (50 partitions opened across the shards at once). A round that cannot
read its records in 25 s is a stall; the broker is then left running (its pid and data
directory printed) for inspection.

Run it after any change to the executor (glommio, its patch) with the cores busy, e.g.
  yes >/dev/null & yes >/dev/null &
  target/venv/bin/python scripts/stress_group_join.py target/release/broker 120
It found the stall in 1 of 37 rounds with the first version of the kept timers. The second
(vendor/glommio/timer-keep.patch, which re-checks the kept timer before relying on it) ran
about 190 rounds without one, then stalled in a whole-suite run: passing here is evidence,
not proof.
usage: stress_group_join.py BROKER_BIN ROUNDS"""

import os
import socket
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROUND_TIMEOUT_S = 25


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_round(binary, workdir):
    port = free_port()
    log = open(os.path.join(workdir, "broker.log"), "w")
    broker = subprocess.Popen(
        [binary, "start", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", f"log.dirs={workdir}/data"], stdout=log, stderr=log)
    bootstrap = f"127.0.0.1:{port}"
    time.sleep(0.5)
    started = time.monotonic()
    # Kept in a name until the result is in: a dropped AdminClient cancels its requests.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("t", 2, 1)])["t"].result(ROUND_TIMEOUT_S)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition in range(2):
        producer.produce("t", b"x", partition=partition)
    assert producer.flush(ROUND_TIMEOUT_S) == 0, "records not acknowledged"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["t"])
    got = 0
    while got < 2 and time.monotonic() - started < ROUND_TIMEOUT_S:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            got += 1
    consumer.close()
    return broker, got == 2


def main():
    binary, rounds = sys.argv[1], int(sys.argv[2])
    for round_ in range(rounds):
        workdir = tempfile.mkdtemp(prefix="stress-group-join-")
        broker, ok = one_round(binary, workdir)
        if not ok:
            print(f"round {round_}: STALL (broker pid {broker.pid} left running, {workdir})")
            sys.exit(1)
        broker.terminate()
        broker.wait(30)
        subprocess.run(["rm", "-rf", workdir], check=False)
    print(f"{rounds} rounds, no stall")


if __name__ == "__main__":
    main()

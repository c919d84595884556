"""A shard's busy polling and its connections' gathered writes, seen from outside.

- Pipelined requests of one connection: every response arrives, in request order, and the
  shard's stats show responses written several per socket write (the writer gathers those
  already computed).
- After a burst of requests (enough to turn the shard "hot", `shard.busy.poll.us`), a broker
  left idle with a connection open goes back to sleep: its CPU over a few seconds stays far
  under a core. The bound is generous (5 %) so that a loaded test machine does not fail it;
  a broker that kept polling would use ~100 %.
"""

import os
import re
import time

import kproto as kp
from e2e_helpers import create_topic, unique

WRITES = re.compile(r"response_writes=(\d+) responses_written=(\d+)")
BUSY = re.compile(r"busy_polls=(\d+) busy_poll_ms=(\d+)")

# Requests sent back to back on one connection.
PIPELINED = 400
# Idle measurement window (seconds) and bound (share of one core).
IDLE_SECONDS = 5.0
IDLE_MAX_SHARE = 0.05


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 (1-based) of the whole line; 12 and 13 here.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pipelined_produce(bootstrap, topic, count):
    """Sends `count` single-record produce requests in one write; returns their responses."""
    sock = kp.connect(bootstrap)
    try:
        batch = kp.record_batch([(None, b"v" * 100)])
        requests = b"".join(
            kp.produce_v3(corr, topic, 0, batch, acks=1) for corr in range(count)
        )
        sock.sendall(requests)
        out = []
        for _ in range(count):
            corr, r = kp.recv_response(sock)
            out.append((corr, kp.parse_produce_v3(r)[(topic, 0)]))
        return out
    finally:
        sock.close()


def test_pipelined_responses_arrive_in_order_and_are_written_together(start_broker):
    broker = start_broker({"num.shards": 1})
    topic = unique("pipe")
    create_topic(broker.bootstrap, topic, 1)
    responses = pipelined_produce(broker.bootstrap, topic, PIPELINED)
    assert [corr for corr, _ in responses] == list(range(PIPELINED))
    assert all(err == 0 for _, (err, _, _) in responses), responses[:5]
    offsets = [base for _, (_, base, _) in responses]
    assert offsets == sorted(offsets) and len(set(offsets)) == PIPELINED
    broker.stop()
    writes, written = map(int, WRITES.findall(broker.output())[-1])
    assert written >= PIPELINED
    assert writes < written, f"{writes} writes for {written} responses: none gathered"


def test_idle_broker_sleeps_after_a_burst(start_broker):
    broker = start_broker({"num.shards": 1, "shard.busy.poll.us": 50})
    topic = unique("idle")
    create_topic(broker.bootstrap, topic, 1)
    for _ in range(3):
        pipelined_produce(broker.bootstrap, topic, PIPELINED)
    idle_client = kp.connect(broker.bootstrap)
    try:
        kp.roundtrip(idle_client, kp.api_versions(1), 1)
        time.sleep(1.0)
        before = cpu_seconds(broker.proc.pid)
        time.sleep(IDLE_SECONDS)
        used = cpu_seconds(broker.proc.pid) - before
    finally:
        idle_client.close()
    share = used / IDLE_SECONDS
    assert share < IDLE_MAX_SHARE, f"idle broker used {share:.1%} of a core"
    broker.stop()
    assert BUSY.findall(broker.output()), "stats line lacks busy_polls"

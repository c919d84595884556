"""A request listing one partition a million times (about 12 MB, within socket.request.max.bytes)
for OffsetForLeaderEpoch, DescribeProducers, Fetch, ListOffsets and DeleteRecords: repeated
partitions are merged before any cross-core call, so the big request is answered within seconds,
a second client is meanwhile answered within a second, and the broker's peak RSS (VmHWM) grows
by less than 512 MiB. Two shards, and each API is sent once per partition of a two-partition
topic, so one of the two requests crosses the mesh whichever shard accepts the connection.

What each API answers for the repeats is Kafka's: OffsetForLeaderEpoch and DescribeProducers
answer every listing; Fetch and DeleteRecords answer the partition once; ListOffsets answers
it once, INVALID_REQUEST (Kafka 4.4, checked by scripts/differential.py).
"""

import struct
import threading
import time

import kproto
from kproto import array, frame, i8, i16, i32, i64, string, uvarint
from e2e_helpers import create_topic, unique

REPEATS = 1_000_000
BIG_ANSWERED_WITHIN_S = 20.0
SMALL_ANSWERED_WITHIN_S = 1.0
PEAK_RSS_GROWTH_MAX_KIB = 512 * 1024

OFFSET_FOR_LEADER_EPOCH = 23
DELETE_RECORDS = 21
DESCRIBE_PRODUCERS = 61
INVALID_REQUEST = 42


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def repeated(entry: bytes) -> bytes:
    """A non-flexible array of REPEATS copies of `entry`."""
    return i32(REPEATS) + entry * REPEATS


def offset_for_leader_epoch_v2(corr, topic, partition):
    part = i32(partition) + i32(-1) + i32(0)  # current_leader_epoch, leader_epoch
    body = array([string(topic) + repeated(part)])
    return frame(kproto.request_header_v1(OFFSET_FOR_LEADER_EPOCH, 2, corr) + body)


def describe_producers_v0(corr, topic, partition):
    name = topic.encode()
    topic_entry = uvarint(len(name) + 1) + name + uvarint(REPEATS + 1) + i32(partition) * REPEATS
    body = uvarint(2) + topic_entry + b"\x00" + b"\x00"  # topic tags, request tags
    return frame(kproto.request_header_v2(DESCRIBE_PRODUCERS, 0, corr) + body)


def fetch_v4(corr, topic, partition):
    part = i32(partition) + i64(0) + i32(1 << 20)
    body = i32(-1) + i32(0) + i32(1) + i32(1 << 20) + i8(0) + array([string(topic) + repeated(part)])
    return frame(kproto.request_header_v1(kproto.FETCH, 4, corr) + body)


def list_offsets_v1(corr, topic, partition):
    part = i32(partition) + i64(-1)
    body = i32(-1) + array([string(topic) + repeated(part)])
    return frame(kproto.request_header_v1(kproto.LIST_OFFSETS, 1, corr) + body)


def delete_records_v0(corr, topic, partition):
    part = i32(partition) + i64(0)
    body = array([string(topic) + repeated(part)]) + i32(10_000)
    return frame(kproto.request_header_v1(DELETE_RECORDS, 0, corr) + body)


def check_offset_for_leader_epoch(r, partition):
    r.i32()  # throttle
    assert r.i32() == 1
    r.string()
    count = r.i32()
    assert count == REPEATS, count
    first = struct.unpack(">hiiq", r.take(18))
    assert first == (0, partition, 0, 0), first
    r.take(18 * (count - 2))
    assert struct.unpack(">hiiq", r.take(18)) == first


def check_describe_producers(r, partition):
    r.take(1)  # response header v1 tags
    r.i32()  # throttle
    assert r.take(1) == uvarint(2)
    n = r.take(1)[0] - 1
    r.take(n)
    count_plus_one = 0
    shift = 0
    while True:
        b = r.take(1)[0]
        count_plus_one |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    assert count_plus_one - 1 == REPEATS, count_plus_one
    # partition_index, error_code, error_message (null), active_producers (empty), tags
    entry = struct.unpack(">ih", r.take(6)) + tuple(r.take(3))
    assert entry == (partition, 0, 0, 1, 0), entry


def check_fetch(r, partition):
    r.i32()  # throttle
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1, "a partition listed many times is answered once"
    p, err = r.i32(), r.i16()
    assert (p, err) == (partition, 0)


def check_list_offsets(r, partition):
    # v1 has no throttle_time_ms
    assert r.i32() == 1
    r.string()
    count = r.i32()
    assert count == 1, f"a partition listed many times is answered once, not {count} times"
    first = struct.unpack(">ihqq", r.take(22))
    assert first[:2] == (partition, INVALID_REQUEST), first


def check_delete_records(r, partition):
    r.i32()  # throttle
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1, "a partition listed many times is answered once"
    p, low_watermark, err = r.i32(), r.i64(), r.i16()
    assert (p, low_watermark, err) == (partition, 0, 0)


APIS = [
    ("OffsetForLeaderEpoch", offset_for_leader_epoch_v2, check_offset_for_leader_epoch),
    ("DescribeProducers", describe_producers_v0, check_describe_producers),
    ("Fetch", fetch_v4, check_fetch),
    ("ListOffsets", list_offsets_v1, check_list_offsets),
    ("DeleteRecords", delete_records_v0, check_delete_records),
]


class Pinger(threading.Thread):
    """A second client sending ApiVersions in a loop; records each round trip's duration."""

    def __init__(self, bootstrap):
        super().__init__(daemon=True)
        self.sock = kproto.connect(bootstrap, timeout=30)
        self.stop = threading.Event()
        self.slowest = 0.0
        self.count = 0
        self.error = None

    def run(self):
        corr = 0
        try:
            while not self.stop.is_set():
                corr += 1
                started = time.monotonic()
                kproto.roundtrip(self.sock, kproto.api_versions(corr), corr)
                self.slowest = max(self.slowest, time.monotonic() - started)
                self.count += 1
                time.sleep(0.05)
        except Exception as error:  # noqa: BLE001
            self.error = error


def test_repeated_partitions_are_merged_before_any_call(start_broker):
    broker = start_broker({"num.shards": 2})
    topic = unique("repeated")
    create_topic(broker.bootstrap, topic, 2)
    pid = broker.proc.pid
    baseline = vm_hwm_kib(pid)
    report = []
    corr = 100
    for name, build, check in APIS:
        for partition in (0, 1):
            corr += 1
            request = build(corr, topic, partition)
            pinger = Pinger(broker.bootstrap)
            pinger.start()
            time.sleep(0.2)
            sock = kproto.connect(broker.bootstrap, timeout=BIG_ANSWERED_WITHIN_S)
            started = time.monotonic()
            sock.sendall(request)
            got, r = kproto.recv_response(sock)
            took = time.monotonic() - started
            sock.close()
            pinger.stop.set()
            pinger.join(timeout=5)
            assert got == corr
            check(r, partition)
            assert pinger.error is None, f"{name}: second client failed: {pinger.error!r}"
            assert pinger.count > 0, f"{name}: second client never answered"
            report.append((name, partition, len(request), round(took, 2), round(pinger.slowest, 3)))
            assert took < BIG_ANSWERED_WITHIN_S, (name, partition, took)
            assert pinger.slowest < SMALL_ANSWERED_WITHIN_S, (name, partition, pinger.slowest)
    growth = vm_hwm_kib(pid) - baseline
    print(f"peak RSS growth {growth} KiB; (api, partition, request bytes, s, slowest ping s): {report}")
    assert growth < PEAK_RSS_GROWTH_MAX_KIB, growth
    assert broker.alive()

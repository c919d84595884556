"""Every response bounded as Kafka bounds it: Fetch within max_bytes (capped by the broker's
fetch.max.bytes) and each partition within partition_max_bytes, except the first batch of the
first non-empty partition (KIP-74); a partition listed many times is answered once; Metadata,
ListOffsets and DescribeConfigs naming one entry many times cannot multiply their responses.
"""

import struct

import kproto
from kproto import array, frame, i8, i16, i32, i64, string
from e2e_helpers import create_topic, unique

BATCH_VALUE = 10_000  # bytes of value per record; one record per batch


def produce_batches(bootstrap, topic, partition, count, value_size=BATCH_VALUE):
    for i in range(count):
        batch = kproto.record_batch([(b"k%d" % i, b"v" * value_size)])
        err, _ = kproto.produce_raw(bootstrap, topic, partition, batch)
        assert err == 0


def fetch_v4(correlation_id, entries, max_bytes, max_wait_ms=0):
    """entries: [(topic, partition, offset, partition_max_bytes)], each its own topic block so
    that a partition can be listed many times."""
    topics = [string(t) + array([i32(p) + i64(o) + i32(pmax)]) for (t, p, o, pmax) in entries]
    body = i32(-1) + i32(max_wait_ms) + i32(1) + i32(max_bytes) + i8(0) + array(topics)
    return frame(kproto.request_header_v1(kproto.FETCH, 4, correlation_id) + body)


def parse_fetch(r):
    """[(topic, partition, error, high_watermark, records)] in response order."""
    r.i32()
    out = []
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            p, err, hw = r.i32(), r.i16(), r.i64()
            r.i64()
            for _ in range(max(r.i32(), 0)):
                r.i64(), r.i64()
            out.append((topic, p, err, hw, r.nbytes() or b""))
    return out


def batch_sizes(records):
    sizes, pos = [], 0
    while pos + 12 <= len(records):
        (length,) = struct.unpack_from(">i", records, pos + 8)
        sizes.append(12 + length)
        pos += 12 + length
    assert pos == len(records), "only whole batches"
    return sizes


def fetch(bootstrap, entries, max_bytes, timeout=60):
    with kproto.connect(bootstrap, timeout=timeout) as s:
        s.sendall(fetch_v4(3, entries, max_bytes))
        corr, r = kproto.recv_response(s)
        assert corr == 3
        return parse_fetch(r)


def test_partition_listed_10000_times_is_answered_once(broker):
    topic = create_topic(broker.bootstrap, unique("dup"), 1)
    produce_batches(broker.bootstrap, topic, 0, 20)
    one_mib = 1 << 20
    parts = fetch(broker.bootstrap, [(topic, 0, 0, one_mib)] * 10_000, max_bytes=one_mib)
    assert len(parts) == 1, len(parts)
    (_, _, err, hw, records) = parts[0]
    assert err == 0 and hw == 20
    assert len(batch_sizes(records)) == 20 and len(records) <= one_mib


def test_max_bytes_bounds_the_whole_response(broker):
    topic = create_topic(broker.bootstrap, unique("budget"), 3)
    for p in range(3):
        produce_batches(broker.bootstrap, topic, p, 10)  # ~100 KB per partition
    budget = 150_000
    parts = fetch(broker.bootstrap, [(topic, p, 0, 1 << 20) for p in range(3)], max_bytes=budget)
    sizes = [len(records) for (*_, records) in parts]
    assert sum(sizes) <= budget, sizes
    assert sizes[0] > 90_000 and sizes[1] > 0, sizes  # filled in request order
    for (*_, records) in parts:
        batch_sizes(records)
    # partition_max_bytes bounds each partition too.
    parts = fetch(broker.bootstrap, [(topic, p, 0, 25_000) for p in range(3)], max_bytes=1 << 20)
    assert all(0 < len(records) <= 25_000 for (*_, records) in parts), [len(x[-1]) for x in parts]


def test_first_batch_of_first_non_empty_partition_is_returned_whole(broker):
    topic = create_topic(broker.bootstrap, unique("big"), 3)
    produce_batches(broker.bootstrap, topic, 0, 5, value_size=1000)
    produce_batches(broker.bootstrap, topic, 1, 1, value_size=300_000)
    # Partition 2 is empty; partition 1's only batch is larger than every limit. Listed after
    # a non-empty partition it gets nothing...
    parts = fetch(broker.bootstrap, [(topic, 0, 0, 50_000), (topic, 1, 0, 50_000)],
                  max_bytes=50_000)
    assert len(batch_sizes(parts[0][-1])) == 5
    assert parts[1][-1] == b"" and parts[1][3] == 1
    # ...first non-empty (after an empty one), it comes whole, and nothing follows it.
    parts = fetch(broker.bootstrap,
                  [(topic, 2, 0, 50_000), (topic, 1, 0, 50_000), (topic, 0, 0, 50_000)],
                  max_bytes=50_000)
    assert parts[0][-1] == b""
    assert len(batch_sizes(parts[1][-1])) == 1 and len(parts[1][-1]) > 300_000
    assert parts[2][-1] == b"" and parts[2][3] == 5  # high watermark still reported


def test_fetch_max_bytes_caps_the_request(start_broker):
    b = start_broker({"fetch.max.bytes": 65536})
    topic = create_topic(b.bootstrap, unique("cap"), 1)
    produce_batches(b.bootstrap, topic, 0, 20)
    parts = fetch(b.bootstrap, [(topic, 0, 0, 100 << 20)], max_bytes=100 << 20)
    assert 0 < len(parts[0][-1]) <= 65536


def test_list_offsets_duplicates_get_invalid_request(broker):
    topic = create_topic(broker.bootstrap, unique("lo"), 2)
    body = i32(-1) + array([string(topic) + array([i32(0) + i64(-1)] * 5000 + [i32(1) + i64(-1)])])
    with kproto.connect(broker.bootstrap) as s:
        r = kproto.roundtrip(s, frame(kproto.request_header_v1(kproto.LIST_OFFSETS, 1, 4) + body), 4)
        answers = []
        for _ in range(r.i32()):
            r.string()
            for _ in range(r.i32()):
                answers.append((r.i32(), r.i16(), r.i64(), r.i64()))
    # Kafka 4.4 answers a repeated partition once, INVALID_REQUEST (42).
    assert [a[:2] for a in answers] == [(0, 42), (1, 0)]


def test_metadata_and_describe_configs_duplicates_answered_once(broker):
    topic = create_topic(broker.bootstrap, unique("md"), 1)
    with kproto.connect(broker.bootstrap) as s:
        r = kproto.roundtrip(s, kproto.metadata_v1(5, [topic] * 20_000), 5)
        _, _, topics = kproto.parse_metadata_v1(r)
        assert list(topics) == [topic]
        # DescribeConfigs v0: [resource_type, name, config_names(null)] x 20,000.
        resources = array([i8(2) + string(topic) + i32(-1)] * 20_000)
        r = kproto.roundtrip(s, frame(kproto.request_header_v1(32, 0, 6) + resources), 6)
        r.i32()
        assert r.i32() == 1
        assert r.i16() == 0

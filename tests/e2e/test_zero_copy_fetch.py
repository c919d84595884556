"""Zero-copy fetch: records go from the segment files to the socket with sendfile (or, with
`fetch.path=copy`, through a buffer as before) and the bytes consumed are the bytes produced;
data evicted from the page cache is read in first and counted cold; a partition owned by the
other shard is sent zero-copy too. The per-shard counters come from the "fetch path" line each
shard logs at shutdown."""

import os
import random
import re

import pytest

from e2e_helpers import (assert_same, by_partition, ck_consume, ck_produce, ck_producer,
                         create_topic, kp_consume, unique)

FETCH_PATH = re.compile(
    r"shard (\d+) fetch path: hot_ranges=(\d+) cold_ranges=(\d+) cold_bytes=(\d+) "
    r"sendfile_bytes=(\d+) copied_bytes=(\d+) remote_range_bytes=(\d+)"
)
FIELDS = ["hot_ranges", "cold_ranges", "cold_bytes", "sendfile_bytes", "copied_bytes",
          "remote_range_bytes"]


def fetch_path_stats(broker):
    """{shard: {field: int}} from the last run's shutdown lines (the broker must be stopped)."""
    out = {}
    for m in FETCH_PATH.finditer(broker.output()):
        out[int(m.group(1))] = dict(zip(FIELDS, map(int, m.groups()[1:])))
    assert out, f"no fetch path stats lines:\n{broker.tail()}"
    return out


def total(stats, field):
    return sum(s[field] for s in stats.values())


def records(n, partitions, seed):
    rng = random.Random(seed)
    return [dict(partition=i % partitions, key=f"k{i}".encode(),
                 value=rng.randbytes(rng.randrange(0, 3000)))
            for i in range(n)]


def produce(broker, topic, msgs):
    log = ck_produce(ck_producer(broker.bootstrap), topic, msgs)
    assert not log.errors, log.errors[:3]
    return by_partition(log.ok)


@pytest.mark.parametrize("path", ["zerocopy", "copy"])
def test_consumed_bytes_match_produced(start_broker, path):
    partitions, n = 4, 3000
    b = start_broker({"num.shards": 2, "fetch.path": path})
    topic = create_topic(b.bootstrap, unique("zc"), partitions)
    produced = produce(b, topic, records(n, partitions, seed=9))
    value_bytes = sum(len(r.value) for recs in produced.values() for r in recs)

    consumed, errors = ck_consume(b.bootstrap, topic, partitions, n)
    assert not errors, errors[:3]
    assert_same(produced, consumed)
    # Small fetches too: many responses, each partition's records cut at batch boundaries.
    consumed, errors = ck_consume(b.bootstrap, topic, partitions, n,
                                  **{"fetch.max.bytes": 20000, "message.max.bytes": 20000,
                                     "max.partition.fetch.bytes": 7000})
    assert not errors, errors[:3]
    assert_same(produced, consumed)
    kp, _ = kp_consume(b.bootstrap, topic, partitions, n)
    assert_same(produced, kp)

    assert b.stop() == 0
    stats = fetch_path_stats(b)
    print("fetch path stats", stats)
    if path == "zerocopy":
        # Three full reads of the records went out by sendfile (plus batch overhead).
        assert total(stats, "sendfile_bytes") >= 3 * value_bytes, stats
        assert total(stats, "hot_ranges") > 0, stats
        # Through user space only while a socket was full (one page per wait).
        assert total(stats, "copied_bytes") <= total(stats, "sendfile_bytes") // 4, stats
    else:
        assert total(stats, "sendfile_bytes") == 0, stats
        assert total(stats, "hot_ranges") + total(stats, "cold_ranges") == 0, stats
        assert total(stats, "remote_range_bytes") == 0, stats


def evict(data_dir, topic):
    """Drops the topic's segment files from the page cache (written back first: only clean
    pages can be dropped). Returns how many files."""
    count = 0
    for d in data_dir.iterdir():
        if not d.name.startswith(topic + "-"):
            continue
        for f in d.iterdir():
            if f.suffix != ".log":
                continue
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            count += 1
    return count


def test_cold_fetch_is_read_in_and_counted(start_broker):
    n = 1500
    b = start_broker({"num.shards": 1})
    topic = create_topic(b.bootstrap, unique("cold"), 1)
    produced = produce(b, topic, records(n, 1, seed=5))
    assert evict(b.data_dir, topic) >= 1

    consumed, errors = ck_consume(b.bootstrap, topic, 1, n)
    assert not errors, errors[:3]
    assert_same(produced, consumed)

    assert b.stop() == 0
    stats = fetch_path_stats(b)
    print("fetch path stats", stats)
    assert total(stats, "cold_ranges") > 0, stats
    assert total(stats, "cold_bytes") > 0, stats


def test_fetch_from_other_shard_is_zero_copy(start_broker):
    partitions, n = 4, 2000
    b = start_broker({"num.shards": 2, "offsets.topic.num.partitions": 2})
    topic = create_topic(b.bootstrap, unique("mesh"), partitions)
    produced = produce(b, topic, records(n, partitions, seed=3))

    consumed, errors = ck_consume(b.bootstrap, topic, partitions, n)
    assert not errors, errors[:3]
    assert_same(produced, consumed)

    assert b.stop() == 0
    stats = fetch_path_stats(b)
    print("fetch path stats", stats)
    # The consumer's fetch connection sits on one shard; the partitions the other shard owns
    # came back from it as file ranges, and went out by sendfile.
    assert total(stats, "remote_range_bytes") > 0, stats
    assert total(stats, "sendfile_bytes") >= total(stats, "remote_range_bytes"), stats

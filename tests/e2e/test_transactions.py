"""Transactions (KIP-98, exactly-once) end to end, with unchanged clients: confluent-kafka
(librdkafka), kafka-python and kafkajs.

What Apache Kafka does and these tests hold the broker to:
- a transaction's records and its COMMIT/ABORT marker take offsets (the marker one);
- read_committed consumers never see aborted records nor records of an open transaction: their
  fetches stop at the last stable offset (LSO), which ListOffsets with read_committed returns;
  read_uncommitted consumers see every data record (never the markers);
- aborted data is filtered however the log is split into segments, and across kill -9;
- an empty transaction leaves no trace; a newer producer with the same transactional.id fences
  the older (fatal for it) and aborts its open transaction;
- consume-transform-produce commits the group's offsets atomically with the output
  (TxnOffsetCommit), and OffsetFetch(require_stable) does not keep a consumer waiting once the
  transaction completed;
- the coordinator aborts transactions older than their timeout and refuses timeouts over
  transaction.max.timeout.ms;
- DescribeTransactions, ListTransactions and DescribeProducers report open transactions.

Run alone (after scripts/test.sh has installed target/venv and kafkajs in target/e2e-js):

    BROKER_BIN=$PWD/target/release/broker E2E_NODE_PATH=$PWD/target/e2e-js/node_modules \
        target/venv/bin/python -m pytest -q tests/e2e/test_transactions.py
"""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from e2e_helpers import admin, create_topic, kp_consume, unique
from txn_helpers import (
    CLIENT_TIMEOUT,
    FENCED_CODES,
    INVALID_TRANSACTION_TIMEOUT,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    CkReader,
    aborted_txn,
    ck_watermark_end,
    committed_txn,
    end_offset,
    kp_end_offset,
    marker_kinds,
    plain_producer,
    raw_fetch,
    read_partition,
    send,
    txn_producer,
    values,
    wait_until,
)

# No test may hang the suite: every blocking client call has its own timeout as well.
pytestmark = pytest.mark.timeout(150)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
NODE_MODULES = Path(os.environ.get("E2E_NODE_PATH") or REPO / "target" / "e2e-js" / "node_modules")


def vals_of(msgs):
    return [m.value for m in msgs]


def offs_of(msgs):
    return [m.offset for m in msgs]


def wait_stable(bootstrap, topic, offset, timeout=15):
    """Waits until the LSO (ListOffsets read_committed) is `offset`; then both ends must be it
    (markers are written after EndTxn is answered, as in Kafka)."""
    wait_until(lambda: end_offset(bootstrap, topic, READ_COMMITTED) == offset, timeout,
               f"last stable offset of {topic} never reached {offset}")
    assert end_offset(bootstrap, topic, READ_UNCOMMITTED) == offset


def group_offset(bootstrap, group, topic, partition=0, require_stable=False):
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, partition)])
    a = admin(bootstrap)  # kept alive until the answer is in
    fs = a.list_consumer_group_offsets([req], require_stable=require_stable,
                                       request_timeout=CLIENT_TIMEOUT)
    res = fs[group].result(timeout=CLIENT_TIMEOUT)
    (tp,) = res.topic_partitions
    assert tp.error is None, tp.error
    return tp.offset


# ---------------------------------------------------------------------------------------------
def test_three_committed_transactions(broker):
    """The seed experiment: three committed transactions of 1,000 records each on one
    partition take 3,003 offsets (each COMMIT marker takes one), and both a read_committed and a
    read_uncommitted consumer read exactly the 3,000 records, in order, at the offsets the
    producer was told."""
    b = broker.bootstrap
    topic = create_topic(b, unique("txn-seed"), 1)
    p = txn_producer(b)
    logs = [committed_txn(p, topic, values(f"seed{k}", 1000)) for k in range(3)]
    for k, log in enumerate(logs):
        assert log.offsets() == list(range(k * 1001, k * 1001 + 1000)), f"transaction {k}"
    wait_stable(b, topic, 3003)
    assert marker_kinds(b, topic) == [(1000, "COMMIT"), (2001, "COMMIT"), (3002, "COMMIT")]

    want_vals = [v for k in range(3) for v in values(f"seed{k}", 1000)]
    want_offs = [o for log in logs for o in log.offsets()]
    for isolation in (READ_COMMITTED, READ_UNCOMMITTED):
        got = read_partition(b, topic, isolation, 3000)
        assert len(got) == 3000, f"{isolation}: {len(got)} records"
        assert vals_of(got) == want_vals, f"{isolation}: values differ or out of order"
        assert offs_of(got) == want_offs, isolation


def test_open_transaction_holds_the_last_stable_offset(broker):
    """An open transaction's records are invisible to read_committed (which stops at the LSO,
    the transaction's first offset; ListOffsets read_committed answers the LSO, read_uncommitted
    the high watermark) but visible to read_uncommitted. After the abort (marker at 10) the LSO
    is 11 and read_committed still sees nothing of it, and it is not stuck: the records of the
    next committed transaction reach it, exactly those."""
    b = broker.bootstrap
    topic = create_topic(b, unique("txn-open"), 1)
    p = txn_producer(b)
    p.begin_transaction()
    log = send(p, topic, values("open", 10))  # flushed, not committed
    assert log.offsets() == list(range(10))

    rc = CkReader(b, topic, READ_COMMITTED)
    try:
        assert rc.poll_for(3) == [], "read_committed saw records of an open transaction"
        got = read_partition(b, topic, READ_UNCOMMITTED, 10)
        assert vals_of(got) == values("open", 10) and offs_of(got) == list(range(10))

        assert end_offset(b, topic, READ_COMMITTED) == 0
        assert end_offset(b, topic, READ_UNCOMMITTED) == 10
        assert kp_end_offset(b, topic, READ_COMMITTED) == 0
        assert kp_end_offset(b, topic, READ_UNCOMMITTED) == 10
        assert ck_watermark_end(b, topic, READ_COMMITTED) == 0
        assert ck_watermark_end(b, topic, READ_UNCOMMITTED) == 10
        f = raw_fetch(b, topic, 0, READ_COMMITTED)
        assert (f.error, f.high_watermark, f.last_stable_offset) == (0, 10, 0)
        assert f.batches == [], "a read_committed fetch returned data above the LSO"

        p.abort_transaction(CLIENT_TIMEOUT)
        wait_stable(b, topic, 11)
        assert kp_end_offset(b, topic, READ_COMMITTED) == 11
        assert ck_watermark_end(b, topic, READ_COMMITTED) == 11
        assert marker_kinds(b, topic) == [(10, "ABORT")]
        f = raw_fetch(b, topic, 0, READ_COMMITTED)
        pids = {x.producer_id for x in f.batches if not x.control}
        assert len(pids) == 1, f.batches
        assert f.aborted == [(pids.pop(), 0)], "aborted transactions of a read_committed fetch"
        assert rc.poll_for(2) == [], "read_committed saw aborted records"
        assert rc.position() == 11, "read_committed did not move past the ABORT marker"

        after = committed_txn(p, topic, values("after", 5))
        assert after.offsets() == list(range(11, 16))
        got = rc.read(5, timeout=15)
        assert not rc.errors, rc.errors[:5]
        assert [(m.offset, m.value) for m in got] == list(zip(range(11, 16), values("after", 5)))
        wait_stable(b, topic, 17)
        assert rc.poll_for(1.5) == []
        assert rc.position() == 17, "read_committed did not move past the COMMIT marker"
    finally:
        rc.close()


def test_aborted_transaction_spanning_segments(broker):
    """An aborted transaction spread over many small segments, then a committed one:
    read_committed reads exactly the committed records, from the beginning and from the middle
    of the aborted transaction (where the fetch must still report the transaction that began in
    an earlier segment); read_uncommitted reads all. The same after a kill -9 (the aborted
    transactions are recovered from the log)."""
    b = broker
    topic = create_topic(b.bootstrap, unique("txn-seg"), 1, {"segment.bytes": "16384"})
    p = txn_producer(b.bootstrap, **{"batch.num.messages": 20})
    pad = b"." * 80
    aborted_vals = [v + pad for v in values("abort", 2000)]
    committed_vals = [v + pad for v in values("commit", 300)]
    assert aborted_txn(p, topic, aborted_vals).offsets() == list(range(2000))
    assert committed_txn(p, topic, committed_vals).offsets() == list(range(2001, 2301))
    wait_stable(b.bootstrap, topic, 2302)
    assert marker_kinds(b.bootstrap, topic) == [(2000, "ABORT"), (2301, "COMMIT")]
    segments = list((b.data_dir / f"{topic}-0").glob("*.log"))
    assert len(segments) >= 5, f"only {len(segments)} segments: the test needs many"

    f = raw_fetch(b.bootstrap, topic, 1000, READ_COMMITTED)
    pid = next(x.producer_id for x in f.batches if not x.control)
    assert f.aborted is not None and (pid, 0) in f.aborted, \
        f"a read_committed fetch at 1000 does not report the transaction aborted at 0: {f.aborted}"

    def check(when):
        for start in (OFFSET_BEGINNING, 1000):
            got = read_partition(b.bootstrap, topic, READ_COMMITTED, 300, start=start)
            assert vals_of(got) == committed_vals, f"{when}: read_committed from {start}"
            assert offs_of(got) == list(range(2001, 2301)), f"{when}: from {start}"
        got = read_partition(b.bootstrap, topic, READ_UNCOMMITTED, 2300)
        assert vals_of(got) == aborted_vals + committed_vals, f"{when}: read_uncommitted"
        got = read_partition(b.bootstrap, topic, READ_UNCOMMITTED, 1300, start=1000)
        assert vals_of(got) == aborted_vals[1000:] + committed_vals, \
            f"{when}: read_uncommitted from 1000"

    check("before restart")
    b.restart(kill=True)
    wait_until(lambda: _end_or_none(b.bootstrap, topic, READ_COMMITTED) == 2302, 30,
               "partition not back after kill -9")
    check("after kill -9")


def _end_or_none(bootstrap, topic, isolation):
    try:
        return end_offset(bootstrap, topic, isolation)
    except KafkaException:
        return None


def test_empty_transactions_leave_no_trace(broker):
    """An empty transaction (begin + commit, begin + abort, no records) writes nothing and does
    not hold the LSO: a following non-transactional record is visible to read_committed at once,
    and so are later records after a real committed transaction."""
    b = broker.bootstrap
    topic = create_topic(b, unique("txn-empty"), 1)
    p = txn_producer(b)
    p.begin_transaction()
    p.commit_transaction(CLIENT_TIMEOUT)
    p.begin_transaction()
    p.abort_transaction(CLIENT_TIMEOUT)
    plain = plain_producer(b)
    assert send(plain, topic, values("plain", 3)).offsets() == [0, 1, 2]
    got = read_partition(b, topic, READ_COMMITTED, 3, timeout=5)
    assert offs_of(got) == [0, 1, 2] and vals_of(got) == values("plain", 3)
    assert end_offset(b, topic, READ_COMMITTED) == 3
    assert end_offset(b, topic, READ_UNCOMMITTED) == 3

    assert committed_txn(p, topic, values("txn", 2)).offsets() == [3, 4]
    p.begin_transaction()
    p.commit_transaction(CLIENT_TIMEOUT)  # empty again
    assert send(plain, topic, values("plain2", 1)).offsets() == [6]
    got = read_partition(b, topic, READ_COMMITTED, 6, timeout=10)
    assert offs_of(got) == [0, 1, 2, 3, 4, 6]
    assert vals_of(got) == values("plain", 3) + values("txn", 2) + values("plain2", 1)
    wait_stable(b, topic, 7)
    assert marker_kinds(b, topic) == [(5, "COMMIT")]


def test_zombie_producer_is_fenced(broker):
    """A second producer with the same transactional.id fences the first: init_transactions of
    the new one aborts the old one's open transaction (ABORT marker), the old one's later
    records are refused and its commit fails with a fatal fencing error; only the new producer's
    committed records are read_committed."""
    b = broker.bootstrap
    topic = create_topic(b, unique("txn-fence"), 1)
    txn_id = unique("txn-fence-id")
    zombie = txn_producer(b, txn_id)
    zombie.begin_transaction()
    assert send(zombie, topic, values("zombie", 5)).offsets() == list(range(5))

    fresh = txn_producer(b, txn_id)  # fences `zombie`, aborts its open transaction
    wait_stable(b, topic, 6)
    assert marker_kinds(b, topic) == [(5, "ABORT")]

    # The broker refuses the zombie's records (old epoch): librdkafka raises the fatal error
    # from produce/flush or, at the latest, from the commit.
    # (Whether they were stored is checked below: read_uncommitted sees none of them.)
    try:
        for v in values("late", 3):
            zombie.produce(topic, value=v, partition=0)
        zombie.flush(CLIENT_TIMEOUT)
    except KafkaException as e:
        err = e.args[0]
        # produce() of a producer already in its fatal state answers _FATAL.
        assert err.code() in FENCED_CODES | {KafkaError._FATAL}, f"not a fencing error: {err}"
    with pytest.raises(KafkaException) as info:
        zombie.commit_transaction(CLIENT_TIMEOUT)
    err = info.value.args[0]
    assert err.fatal(), f"fencing must be fatal for the old producer: {err}"
    assert err.code() in FENCED_CODES, f"not a fencing error: {err}"

    assert committed_txn(fresh, topic, values("fresh", 4)).offsets() == [6, 7, 8, 9]
    wait_stable(b, topic, 11)
    got = read_partition(b, topic, READ_COMMITTED, 4)
    assert vals_of(got) == values("fresh", 4)
    got = read_partition(b, topic, READ_UNCOMMITTED, 9)
    assert vals_of(got) == values("zombie", 5) + values("fresh", 4)
    assert marker_kinds(b, topic) == [(5, "ABORT"), (10, "COMMIT")]


def _group_consumer(bootstrap, group, **conf):
    c = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": READ_COMMITTED,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "fetch.wait.max.ms": 100,
    }
    c.update(conf)
    return Consumer(c)


def test_consume_transform_produce(broker):
    """Consume-transform-produce with send_offsets_to_transaction: each batch read from the
    input is written to the output and the group's input offset is committed in the same
    transaction. One transaction is aborted midway (its output records and its offset commit
    both vanish; the loop rewinds to the committed offset). The output read_committed is exactly
    the input, once, in order; the group's committed offset is 1,000."""
    b = broker.bootstrap
    n = 1000
    src = create_topic(b, unique("ctp-in"), 1)
    dst = create_topic(b, unique("ctp-out"), 1)
    src_vals = values("in", n)
    assert send(plain_producer(b), src, src_vals).offsets() == list(range(n))
    group = unique("ctp-g")
    consumer = _group_consumer(b, group)
    consumer.subscribe([src])
    p = txn_producer(b)
    copied, commits, aborted_records = 0, 0, None
    tp = TopicPartition(src, 0)
    deadline = time.monotonic() + 90
    try:
        while copied < n:
            assert time.monotonic() < deadline, f"copied only {copied} of {n}"
            msgs = [m for m in consumer.consume(num_messages=150, timeout=0.5)]
            errors = [m.error() for m in msgs if m.error()]
            assert not errors, errors[:5]
            if not msgs:
                continue
            assert msgs[0].offset() == copied, "the loop did not resume at the committed offset"
            p.begin_transaction()
            send(p, dst, [b"out-" + m.value() for m in msgs], partition=0)
            positions = consumer.position([tp])
            assert positions[0].offset == copied + len(msgs)
            p.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(),
                                          CLIENT_TIMEOUT)
            if aborted_records is None and copied >= 300:
                p.abort_transaction(CLIENT_TIMEOUT)
                aborted_records = len(msgs)
                # The aborted offset commit is gone: the group still has the previous one.
                committed = consumer.committed([tp], timeout=CLIENT_TIMEOUT)[0].offset
                assert committed == copied, f"after abort the group has {committed}"
                consumer.seek(TopicPartition(src, 0, committed))
                continue
            p.commit_transaction(CLIENT_TIMEOUT)
            commits += 1
            copied += len(msgs)
        assert aborted_records, "the loop never aborted a transaction"
        wait_until(lambda: group_offset(b, group, src) == n, 15,
                   "the group's committed offset never reached 1000")
        assert consumer.committed([tp], timeout=CLIENT_TIMEOUT)[0].offset == n
    finally:
        consumer.close()

    want = [b"out-" + v for v in src_vals]
    got = read_partition(b, dst, READ_COMMITTED, n)
    assert len(got) == n and vals_of(got) == want, \
        f"read_committed output: {len(got)} records, not exactly the input"
    got = read_partition(b, dst, READ_UNCOMMITTED, n + aborted_records)
    assert len(got) == n + aborted_records
    kinds = [k for _, k in marker_kinds(b, dst)]
    assert kinds.count("ABORT") == 1 and kinds.count("COMMIT") == commits, kinds
    assert group_offset(b, group, src, require_stable=True) == n


def test_new_group_member_gets_transactional_offset_promptly(broker):
    """Right after a consume-transform-produce transaction commits, a new read_committed member
    of the same group (librdkafka then asks OffsetFetch with require_stable) starts at the
    committed offset without waiting out UNSTABLE_OFFSET_COMMIT retries forever."""
    b = broker.bootstrap
    src = create_topic(b, unique("stable-in"), 1)
    dst = create_topic(b, unique("stable-out"), 1)
    plain = plain_producer(b)
    send(plain, src, values("first", 100))
    group = unique("stable-g")
    tp = TopicPartition(src, 0)
    c1 = _group_consumer(b, group)
    c1.subscribe([src])
    msgs = []
    deadline = time.monotonic() + 30
    while len(msgs) < 100:
        assert time.monotonic() < deadline, f"first member read only {len(msgs)}"
        msgs += [m for m in c1.consume(num_messages=200, timeout=0.5) if not m.error()]
    assert [m.offset() for m in msgs] == list(range(100))
    p = txn_producer(b)
    p.begin_transaction()
    send(p, dst, [m.value() for m in msgs])
    p.send_offsets_to_transaction(c1.position([tp]), c1.consumer_group_metadata(),
                                  CLIENT_TIMEOUT)
    p.commit_transaction(CLIENT_TIMEOUT)
    c1.close()

    send(plain, src, values("second", 10))  # offsets 100..109
    c2 = _group_consumer(b, group)
    try:
        c2.subscribe([src])
        t0 = time.monotonic()
        got = []
        while len(got) < 10 and time.monotonic() - t0 < 20:
            got += [m for m in c2.consume(num_messages=100, timeout=0.5) if not m.error()]
        took = time.monotonic() - t0
        assert got, "the new member read nothing within 20 s (stuck on the offset fetch?)"
        assert [m.offset() for m in got] == list(range(100, 110)), \
            f"the new member did not start at the committed offset 100: {got[0].offset()}"
        assert [m.value() for m in got] == values("second", 10)
        print(f"new member's first records after {took:.2f}s")
        assert c2.committed([tp], timeout=10)[0].offset == 100
    finally:
        c2.close()
    assert group_offset(b, group, src, require_stable=True) == 100


def test_coordinator_aborts_expired_transaction(start_broker):
    """A transaction left open longer than its transaction.timeout.ms (4 s) is aborted by the
    coordinator (checked every 500 ms here): the ABORT marker is written, the LSO reaches the
    log end, read_committed sees none of it, the producer's epoch is bumped and its late commit
    fails."""
    b = start_broker({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500})
    topic = create_topic(b.bootstrap, unique("txn-expire"), 1)
    txn_id = unique("txn-expire-id")
    p = txn_producer(b.bootstrap, txn_id, **{"transaction.timeout.ms": 4000})
    t0 = time.monotonic()
    p.begin_transaction()
    assert send(p, topic, values("expire", 5)).offsets() == list(range(5))
    lso = end_offset(b.bootstrap, topic, READ_COMMITTED)
    # On a loaded machine the sends alone may outlast the timeout: the open transaction holds
    # the LSO only while it is younger than that.
    if time.monotonic() - t0 < 3.5:
        assert lso == 0, "the open transaction does not hold the last stable offset"
    wait_until(lambda: end_offset(b.bootstrap, topic, READ_COMMITTED) == 6, 20,
               "the coordinator never aborted the expired transaction", interval=0.2)
    took = time.monotonic() - t0
    assert took >= 3.5, f"aborted after {took:.2f}s, before its 4 s timeout"
    assert end_offset(b.bootstrap, topic, READ_UNCOMMITTED) == 6
    assert marker_kinds(b.bootstrap, topic) == [(5, "ABORT")]
    assert read_partition(b.bootstrap, topic, READ_COMMITTED, 1, timeout=3) == []

    kadmin = _kp_admin(b.bootstrap)
    try:
        from kafka.admin import TransactionState

        d = kadmin.describe_transactions([txn_id])[txn_id]
        assert d.state == TransactionState.COMPLETE_ABORT, d
        assert d.producer_epoch > 0, f"the expired producer's epoch was not bumped: {d}"
    finally:
        kadmin.close()

    with pytest.raises(KafkaException) as info:
        p.commit_transaction(CLIENT_TIMEOUT)
    err = info.value.args[0]
    assert err.fatal() or err.txn_requires_abort(), err
    print(f"late commit of the expired transaction: {err}")
    assert end_offset(b.bootstrap, topic, READ_COMMITTED) == 6
    assert read_partition(b.bootstrap, topic, READ_COMMITTED, 1, timeout=2) == []


def test_transaction_timeout_over_the_maximum_is_refused(start_broker):
    """InitProducerId with a transaction timeout above transaction.max.timeout.ms fails with
    INVALID_TRANSACTION_TIMEOUT; one at the maximum works."""
    b = start_broker({"transaction.max.timeout.ms": 5000})
    with pytest.raises(KafkaException) as info:
        txn_producer(b.bootstrap, **{"transaction.timeout.ms": 10000})
    assert info.value.args[0].code() == INVALID_TRANSACTION_TIMEOUT, info.value
    topic = create_topic(b.bootstrap, unique("txn-max"), 1)
    p = txn_producer(b.bootstrap, **{"transaction.timeout.ms": 5000})
    assert committed_txn(p, topic, values("ok", 3)).offsets() == [0, 1, 2]


def test_open_transaction_survives_kill9(broker):
    """kill -9 with a transaction open: after the restart the committed transaction is still
    read_committed, the open one still holds the LSO at its first offset (11); a new producer
    with the same transactional.id aborts it (ABORT marker at 18) and commits its own."""
    b = broker
    topic = create_topic(b.bootstrap, unique("txn-kill"), 1)
    txn_id = unique("txn-kill-id")
    p1 = txn_producer(b.bootstrap, txn_id)
    assert committed_txn(p1, topic, values("before", 10)).offsets() == list(range(10))
    p1.begin_transaction()
    assert send(p1, topic, values("open", 7)).offsets() == list(range(11, 18))
    wait_until(lambda: end_offset(b.bootstrap, topic, READ_COMMITTED) == 11, 15,
               "the first transaction's COMMIT marker")

    b.restart(kill=True)
    wait_until(lambda: _end_or_none(b.bootstrap, topic, READ_UNCOMMITTED) == 18, 30,
               "partition not back after kill -9")
    assert end_offset(b.bootstrap, topic, READ_COMMITTED) == 11, \
        "the open transaction no longer holds the LSO after kill -9"
    got = read_partition(b.bootstrap, topic, READ_COMMITTED, 10)
    assert vals_of(got) == values("before", 10)

    p1.purge()  # the crashed application's producer: never used again
    p2 = txn_producer(b.bootstrap, txn_id)  # aborts the transaction left open
    wait_stable(b.bootstrap, topic, 19)
    assert marker_kinds(b.bootstrap, topic) == [(10, "COMMIT"), (18, "ABORT")]
    assert committed_txn(p2, topic, values("after", 3)).offsets() == [19, 20, 21]
    wait_stable(b.bootstrap, topic, 23)
    got = read_partition(b.bootstrap, topic, READ_COMMITTED, 13)
    assert vals_of(got) == values("before", 10) + values("after", 3)
    got = read_partition(b.bootstrap, topic, READ_UNCOMMITTED, 20)
    assert vals_of(got) == values("before", 10) + values("open", 7) + values("after", 3)


def test_kafka_python_transactions(broker):
    """kafka-python's transactional producer: commit, abort, commit; a read_committed
    KafkaConsumer sees exactly the committed records, read_uncommitted all of them."""
    from kafka import KafkaProducer

    b = broker.bootstrap
    topic = create_topic(b, unique("txn-kp"), 1)
    p = KafkaProducer(bootstrap_servers=b, transactional_id=unique("txn-kp-id"), linger_ms=5,
                      max_block_ms=CLIENT_TIMEOUT * 1000, request_timeout_ms=CLIENT_TIMEOUT * 1000)
    offsets = {}
    try:
        p.init_transactions()
        for name, n, commit in (("c1", 20, True), ("a", 7, False), ("c2", 3, True)):
            p.begin_transaction()
            futures = [p.send(topic, value=v, partition=0) for v in values(f"kp-{name}", n)]
            p.flush(timeout=CLIENT_TIMEOUT)
            offsets[name] = [f.get(timeout=CLIENT_TIMEOUT).offset for f in futures]
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
    finally:
        p.close(timeout=10)
    assert offsets == {"c1": list(range(20)), "a": list(range(21, 28)), "c2": [29, 30, 31]}
    wait_stable(b, topic, 33)
    assert marker_kinds(b, topic) == [(20, "COMMIT"), (28, "ABORT"), (32, "COMMIT")]

    got, _ = kp_consume(b, topic, 1, 23, timeout=30, linger=1.0, isolation_level=READ_COMMITTED)
    assert [r.value for r in got[0]] == values("kp-c1", 20) + values("kp-c2", 3)
    assert [r.offset for r in got[0]] == list(range(20)) + [29, 30, 31]
    got, _ = kp_consume(b, topic, 1, 30, timeout=30, linger=1.0,
                        isolation_level=READ_UNCOMMITTED)
    assert [r.value for r in got[0]] == (values("kp-c1", 20) + values("kp-a", 7)
                                         + values("kp-c2", 3))
    assert kp_end_offset(b, topic, READ_COMMITTED) == 33


def test_kafkajs_transactions(broker):
    """kafkajs's transactional producer: commit 10, abort 5, commit 4; a kafkajs consumer with
    its default isolation (readUncommitted: false) reads exactly the 14 committed records, one
    with readUncommitted: true all 19."""
    if not shutil.which("node"):
        pytest.skip("node is not installed")
    if not (NODE_MODULES / "kafkajs" / "package.json").exists():
        pytest.skip(f"kafkajs is not installed in {NODE_MODULES}: scripts/test.sh installs it "
                    "(npm ci of tests/e2e/js into target/e2e-js), or set E2E_NODE_PATH")
    b = broker.bootstrap
    topic = create_topic(b, unique("txn-js"), 1)
    env = dict(os.environ, NODE_PATH=str(NODE_MODULES))
    argv = ["node", str(HERE / "js" / "transactions.js"), "--bootstrap", b, "--topic", topic,
            "--txn-id", unique("txn-js-id"), "--expect-committed", "14",
            "--expect-uncommitted", "19", "--timeout-ms", "30000"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no result from kafkajs (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    res = json.loads(lines[-1])
    assert "error" not in res and proc.returncode == 0, f"{res}\n{proc.stderr[-3000:]}"
    assert res["produced"] == {"committed1": [0], "aborted": [11], "committed2": [17]}
    c1 = [f"js-c1-{i:06d}" for i in range(10)]
    a = [f"js-a-{i:06d}" for i in range(5)]
    c2 = [f"js-c2-{i:06d}" for i in range(4)]
    assert res["committed"] == [[o, v] for o, v in zip(list(range(10)) + list(range(17, 21)),
                                                        c1 + c2)]
    assert res["uncommitted"] == [[o, v] for o, v in zip(
        list(range(10)) + list(range(11, 16)) + list(range(17, 21)), c1 + a + c2)]
    wait_stable(b, topic, 22)
    assert marker_kinds(b, topic) == [(10, "COMMIT"), (16, "ABORT"), (21, "COMMIT")]


def _kp_admin(bootstrap):
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap,
                            request_timeout_ms=CLIENT_TIMEOUT * 1000)


def test_describe_and_list_transactions_and_producers(broker):
    """DescribeTransactions (through the transaction coordinator found with FindCoordinator
    key_type 1), ListTransactions and DescribeProducers while a transaction is open: Ongoing,
    its partition, timeout and producer id/epoch, and the partition's producer with the
    transaction's first offset (4, after four plain records); after the commit CompleteCommit,
    no partitions, no open transaction on the partition. An unknown id is
    TRANSACTIONAL_ID_NOT_FOUND."""
    from kafka import TopicPartition as KTP
    from kafka.admin import TransactionState
    from kafka.errors import TransactionalIdNotFoundError

    b = broker.bootstrap
    topic = create_topic(b, unique("txn-describe"), 1)
    assert send(plain_producer(b), topic, values("plain", 4)).offsets() == [0, 1, 2, 3]
    txn_id = unique("txn-describe-id")
    p = txn_producer(b, txn_id, **{"transaction.timeout.ms": 45000})
    p.begin_transaction()
    assert send(p, topic, values("open", 6)).offsets() == list(range(4, 10))
    ktp = KTP(topic, 0)
    a = _kp_admin(b)
    try:
        d = a.describe_transactions([txn_id])[txn_id]
        assert d.state == TransactionState.ONGOING, d
        assert d.topic_partitions == {ktp}, d
        assert d.transaction_timeout_ms == 45000, d
        assert d.producer_id >= 0 and d.producer_epoch == 0, d
        age_ms = time.time() * 1000 - d.transaction_start_time_ms
        assert 0 <= age_ms < 60000, f"transaction start time {d.transaction_start_time_ms}"

        listed = [t for ts in a.list_transactions().values() for t in ts]
        mine = [t for t in listed if t.transactional_id == txn_id]
        assert len(mine) == 1, listed
        assert (mine[0].producer_id, mine[0].state) == (d.producer_id, TransactionState.ONGOING)
        ongoing = [t.transactional_id for ts in a.list_transactions(
            state_filters=["Ongoing"]).values() for t in ts]
        assert txn_id in ongoing, "ListTransactions with StateFilters [Ongoing]"
        assert txn_id not in [t.transactional_id for ts in a.list_transactions(
            state_filters=["CompleteCommit"]).values() for t in ts]

        producers = a.describe_producers([ktp])[ktp].active_producers
        assert [(x.producer_id, x.producer_epoch, x.last_sequence,
                 x.current_transaction_start_offset) for x in producers] == \
            [(d.producer_id, 0, 5, 4)], producers

        p.commit_transaction(CLIENT_TIMEOUT)
        wait_until(lambda: a.describe_transactions([txn_id])[txn_id].state
                   == TransactionState.COMPLETE_COMMIT, 15, "state never CompleteCommit")
        d2 = a.describe_transactions([txn_id])[txn_id]
        assert d2.topic_partitions == set() and d2.producer_id == d.producer_id, d2
        producers = a.describe_producers([ktp])[ktp].active_producers
        assert [(x.producer_id, x.current_transaction_start_offset) for x in producers] == \
            [(d.producer_id, -1)], producers
        ongoing = [t.transactional_id for ts in a.list_transactions(
            state_filters=["Ongoing"]).values() for t in ts]
        assert txn_id not in ongoing
        with pytest.raises(TransactionalIdNotFoundError):
            a.describe_transactions([unique("no-such-txn")])
    finally:
        a.close()

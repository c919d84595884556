"""Kafka's transactions system test (kafkatest tests/core/transactions_test.py) on one broker:
a consume-transform-produce copier runs exactly-once from an input topic to an output topic while
the broker is killed with SIGKILL twice; afterwards a read_committed consumer must read the output
as exactly the input: every record once, in order, nothing lost, nothing duplicated.

- the input (INPUT_PARTITIONS partitions) gets TXN_KILL9_RECORDS records (default 100,000),
  produced idempotently with acks=all; a record's key is its partition number and its value its
  sequence number within the partition, so order, gaps and duplicates show in the output;
- the copier (a thread, confluent-kafka) is what a real exactly-once application is: a group
  consumer with isolation.level=read_committed and no auto commit, a transactional producer; per
  iteration it consumes up to TXN_KILL9_BATCH records, begins a transaction, produces each record
  to the same partition of the output, sends the consumer's positions to the transaction
  (send_offsets_to_transaction, i.e. TxnOffsetCommit) and commits. On an abortable error it aborts
  and rewinds the consumer to the group's committed offsets; a commit that fails retriably is
  retried; on a fatal error (fenced) or anything unexpected it re-creates the producer (same
  transactional.id: init_transactions fences the old one and aborts what it left open) and the
  consumer, and continues from the committed offsets;
- the test kills the broker (kill -9, then restart on the same data) at about 1/3 and 2/3 of the
  copy (progress: the records the copier committed) and requires that the kills hit the copier:
  a transaction open at the moment of a kill, or an abort / producer re-creation. (With the
  broker back within ~100 ms, librdkafka retries everything itself: the open transaction
  usually commits across the restart with no error reaching the application, so an abort is
  not required. TXN_KILL9_DOWN_S=4 TXN_KILL9_TXN_TIMEOUT_MS=2000 keeps the broker down past the
  transaction timeout, which drives the copier through its abort / re-create paths.)
- then: the copier finishes within the deadline, each output partition read_committed holds
  exactly 0..count-1 of its input partition in order, the total is the input's, the output has no
  open transaction (last stable offset = high watermark) and the group's committed offsets are the
  input's ends.

Environment: TXN_KILL9_RECORDS (records, default 100000), TXN_KILL9_BATCH (records per
transaction, default 500), TXN_KILL9_DEADLINE (seconds for the copy, default 240),
TXN_KILL9_DOWN_S (seconds the broker stays dead at each kill, default 0),
TXN_KILL9_TXN_TIMEOUT_MS (the copier's transaction.timeout.ms, default 20000),
TXN_KILL9_DEBUG (librdkafka `debug` contexts for the copier's clients, e.g. "eos,cgrp").
Takes ~10-25 s on 2 cores (most of it: 3 s initial group rebalance delay, input, verification).

    BROKER_BIN=$PWD/target/release/broker target/venv/bin/python -m pytest -q \
        tests/e2e/test_transactions_kill9.py
"""

import os
import sys
import threading
import time
import traceback
from collections import namedtuple

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from e2e_helpers import ck_consume, create_topic, unique
from txn_helpers import READ_COMMITTED, READ_UNCOMMITTED, end_offset

RECORDS = int(os.environ.get("TXN_KILL9_RECORDS", "100000"))
BATCH = int(os.environ.get("TXN_KILL9_BATCH", "500"))
DEADLINE = float(os.environ.get("TXN_KILL9_DEADLINE", "240"))
DOWN_S = float(os.environ.get("TXN_KILL9_DOWN_S", "0"))
TXN_TIMEOUT_MS = int(os.environ.get("TXN_KILL9_TXN_TIMEOUT_MS", "20000"))
INPUT_PARTITIONS = 4
DEBUG = os.environ.get("TXN_KILL9_DEBUG")  # librdkafka debug contexts for the copier's clients
CALL_TIMEOUT = 30  # seconds for any single blocking client call
# librdkafka >= 2.10 re-bootstraps when every broker it knows is down (here: the only one, at each
# kill -9) and decommissions the broker handles it had; a group coordinator cached on such a
# handle is never looked up again, so send_offsets_to_transaction() hangs past its timeout
# (librdkafka issue #5511, seen with 2.16.0: AddOffsetsToTxn succeeds after the restart, the
# TxnOffsetCommit is never sent). With one broker there is nothing to re-bootstrap to anyway.
CLIENT_COMMON = {
    "metadata.recovery.strategy": "none",
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 500,
}

pytestmark = pytest.mark.timeout(DEADLINE + 150)


Kill = namedtuple("Kill", "at_s copied phase in_txn transactions")


class Rewind(Exception):
    """The consumer is not where the copier's bookkeeping says (a rebalance moved it, or records
    came out of order): abort the transaction and go back to the committed offsets."""


class Copier(threading.Thread):
    """The consume-transform-produce loop (TransactionalMessageCopier of kafkatest)."""

    def __init__(self, bootstrap, src, dst, counts, batch):
        super().__init__(name="txn-copier", daemon=True)
        self.bootstrap = bootstrap
        self.src, self.dst = src, dst
        self.counts = counts  # {partition: records in the input partition}
        self.total = sum(counts.values())
        self.batch = batch
        self.group = unique("txn-kill9-g")
        self.txn_id = unique("txn-kill9-id")
        self.stop_event = threading.Event()
        self.done = threading.Event()
        self.t0 = time.monotonic()
        # What the copier committed: {partition: next offset} (= the group's committed offsets).
        self.committed = {p: 0 for p in counts}
        self.copied = 0  # records in committed transactions
        self.transactions = 0
        self.aborts = 0
        self.producer_inits = 0
        self.consumer_inits = 0
        self.commit_retries = 0
        self.rewinds = 0
        self.delivery_errors = 0
        self.consumer_errors = 0
        self.events = []  # (seconds since start, what)
        self.crash = None  # traceback of an unexpected exit of the loop
        self.producer = None
        self.consumer = None
        self.pos = {}  # {partition: next offset to copy}, from the group's committed offsets
        self.rebalanced = False
        self.in_txn = False  # begin_transaction done, neither commit nor abort yet
        self.phase = "start"  # what the loop is doing now (consume, produce, send_offsets, ...)

    # -- bookkeeping ------------------------------------------------------------------------
    def note(self, what):
        self.events.append((round(time.monotonic() - self.t0, 2), what))

    def finished(self):
        return all(self.committed[p] >= n for p, n in self.counts.items())

    def summary(self):
        return (f"copied {self.copied}/{self.total} in {self.transactions} transactions; "
                f"aborts={self.aborts} producer_inits={self.producer_inits} "
                f"consumer_inits={self.consumer_inits} commit_retries={self.commit_retries} "
                f"rewinds={self.rewinds} delivery_errors={self.delivery_errors} "
                f"consumer_errors={self.consumer_errors}")

    def event_log(self, last=60):
        lines = [f"  {t:7.2f}s {what}" for t, what in self.events[-last:]]
        skipped = len(self.events) - len(lines)
        text = (f"  ... {skipped} earlier events\n" if skipped > 0 else "") + "\n".join(lines)
        if self.is_alive() and not self.done.is_set():
            frame = sys._current_frames().get(self.ident)
            if frame is not None:
                stack = "".join(traceback.format_stack(frame)[-6:])
                text += f"\n  the copier is now at:\n{stack}"
        return text

    # -- clients ----------------------------------------------------------------------------
    def _on_delivery(self, err, msg):
        if err is not None:
            self.delivery_errors += 1
            if self.delivery_errors <= 20:
                self.note(f"delivery error: {err}")

    def _new_producer(self):
        self._drop_producer()
        p = Producer({
            "bootstrap.servers": self.bootstrap,
            "transactional.id": self.txn_id,
            "linger.ms": 5,
            "transaction.timeout.ms": TXN_TIMEOUT_MS,
            "queue.buffering.max.messages": 500000,
            **CLIENT_COMMON,
            "on_delivery": self._on_delivery,
            **({"debug": DEBUG} if DEBUG else {}),
        })
        self.producer_inits += 1
        self.phase = "init_transactions"
        self.note(f"producer #{self.producer_inits}: init_transactions")
        p.init_transactions(CALL_TIMEOUT)
        self.producer = p
        self.in_txn = False

    def _drop_producer(self):
        p, self.producer = self.producer, None
        if p is not None:
            try:
                p.purge()
                p.flush(0)
            except Exception as e:  # noqa: BLE001 - it is being thrown away
                self.note(f"discarding producer: {e!r}")

    def _on_rebalance(self, consumer, partitions):
        self.rebalanced = True

    def _new_consumer(self):
        self._drop_consumer()
        c = Consumer({
            "bootstrap.servers": self.bootstrap,
            "group.id": self.group,
            "isolation.level": READ_COMMITTED,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 50,
            **CLIENT_COMMON,
            **({"debug": DEBUG} if DEBUG else {}),
        })
        c.subscribe([self.src], on_assign=self._on_rebalance, on_revoke=self._on_rebalance,
                    on_lost=self._on_rebalance)
        self.consumer_inits += 1
        self.note(f"consumer #{self.consumer_inits}: subscribed")
        self.consumer = c
        self.pos = {}

    def _drop_consumer(self):
        c, self.consumer = self.consumer, None
        if c is not None:
            try:
                c.close()
            except Exception as e:  # noqa: BLE001 - it is being thrown away
                self.note(f"closing consumer: {e!r}")

    def _load_positions(self, partitions):
        """The group's committed offsets of `partitions` (0 where none) into self.pos."""
        tps = self.consumer.committed([TopicPartition(self.src, p) for p in partitions],
                                      timeout=CALL_TIMEOUT)
        for tp in tps:
            if tp.error is not None:
                raise KafkaException(tp.error)
            self.pos[tp.partition] = max(tp.offset, 0)

    def _rewind(self, why):
        """Back to the group's committed offsets: seek each assigned partition there."""
        self.rewinds += 1
        self.note(f"rewind ({why})")
        self.pos = {}
        assigned = [tp.partition for tp in self.consumer.assignment()]
        if not assigned:
            return
        self._load_positions(assigned)
        for p in assigned:
            self.consumer.seek(TopicPartition(self.src, p, self.pos[p]))

    # -- the loop ---------------------------------------------------------------------------
    def run(self):
        try:
            self._loop()
        except BaseException:  # noqa: BLE001 - reported by the test
            self.crash = traceback.format_exc()
            self.note("copier crashed")
        finally:
            self._drop_producer()
            self._drop_consumer()
            self.done.set()

    def _loop(self):
        while not self.stop_event.is_set() and not self.finished():
            try:
                if self.producer is None:
                    self._new_producer()
                if self.consumer is None:
                    self._new_consumer()
                self._iteration()
            except Rewind as e:
                self._abort_and_rewind(f"{e}")
            except KafkaException as e:
                err = e.args[0]
                if isinstance(err, KafkaError) and err.txn_requires_abort():
                    self._abort_and_rewind(f"abortable: {err}")
                elif isinstance(err, KafkaError) and err.retriable() and not err.fatal():
                    self._abort_and_rewind(f"retriable: {err}")
                else:
                    self._restart_clients(f"{err}")
            except Exception as e:  # noqa: BLE001 - what an application would do: start over
                self._restart_clients(f"unexpected {e!r}")

    def _restart_clients(self, why):
        self.note(f"re-creating producer and consumer after: {why}")
        self._drop_producer()
        self._drop_consumer()
        time.sleep(0.2)

    def _abort_and_rewind(self, why):
        self.note(why)
        self.phase = "abort"
        try:
            if self.producer is not None and self.in_txn:
                for attempt in range(5):
                    try:
                        self.producer.abort_transaction(CALL_TIMEOUT)
                        break
                    except KafkaException as e:
                        err = e.args[0]
                        if err.retriable() and not err.fatal() and attempt < 4:
                            self.note(f"abort failed retriably, retrying: {err}")
                            continue
                        raise
                self.in_txn = False
                self.aborts += 1
                self.note(f"aborted (#{self.aborts})")
            if self.consumer is not None:
                self._rewind(why)
        except Exception as e:  # noqa: BLE001
            self._restart_clients(f"abort/rewind failed: {e!r}")

    def _iteration(self):
        self.phase = "consume"
        msgs = self.consumer.consume(num_messages=self.batch, timeout=0.5)
        if self.rebalanced:
            self.rebalanced = False
            self.note(f"rebalance: assignment "
                      f"{sorted(tp.partition for tp in self.consumer.assignment())}")
            self.pos = {}
        records = []
        for m in msgs:
            err = m.error()
            if err is not None:
                self.consumer_errors += 1
                if self.consumer_errors <= 30:
                    self.note(f"consumer error: {err}")
                if err.fatal():
                    raise KafkaException(err)
                continue
            records.append(m)
        if not records:
            return
        unknown = sorted({m.partition() for m in records} - set(self.pos))
        if unknown:
            self._load_positions(unknown)
        nxt = dict(self.pos)
        for m in records:
            p, o = m.partition(), m.offset()
            if o != nxt[p]:
                # Not an error in itself (a rebalance or a seek can leave older fetched records
                # behind): start again from the committed offsets.
                raise Rewind(f"partition {p}: got offset {o}, expected {nxt[p]}")
            nxt[p] = o + 1

        self.producer.begin_transaction()
        self.in_txn = True
        self.phase = "produce"
        for m in records:
            self.producer.produce(self.dst, key=m.key(), value=m.value(), partition=m.partition())
        touched = sorted({m.partition() for m in records})
        positions = self.consumer.position([TopicPartition(self.src, p) for p in touched])
        for tp in positions:
            if tp.offset != nxt[tp.partition]:
                raise Rewind(f"partition {tp.partition}: consumer position {tp.offset}, "
                             f"copied up to {nxt[tp.partition]}")
        self.phase = "send_offsets"
        self.producer.send_offsets_to_transaction(positions,
                                                  self.consumer.consumer_group_metadata(),
                                                  CALL_TIMEOUT)
        self.phase = "commit"
        self._commit()
        self.in_txn = False
        self.phase = "committed"
        self.pos = nxt
        for p in touched:
            self.committed[p] = nxt[p]
        self.copied = sum(self.committed.values())
        self.transactions += 1

    def _commit(self):
        for attempt in range(10):
            try:
                self.producer.commit_transaction(CALL_TIMEOUT)
                return
            except KafkaException as e:
                err = e.args[0]
                if err.retriable() and not err.txn_requires_abort() and not err.fatal() \
                        and attempt < 9 and not self.stop_event.is_set():
                    self.commit_retries += 1
                    self.note(f"commit failed retriably, retrying: {err}")
                    continue
                raise


def produce_input(bootstrap, topic, n, partitions):
    """n records round robin over the partitions: key = partition, value = sequence number
    within the partition. Returns {partition: count}."""
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "queue.buffering.max.messages": 500000})
    counts = {q: 0 for q in range(partitions)}
    for i in range(n):
        q = i % partitions
        while True:
            try:
                p.produce(topic, key=b"%d" % q, value=b"%d" % counts[q], partition=q,
                          on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        counts[q] += 1
    left = p.flush(120)
    assert left == 0 and not errors, f"input: {left} undelivered, errors {errors[:5]}"
    return counts


def test_transactions_survive_kill9(start_broker):
    # The coordinator looks for expired transactions every 500 ms (Kafka: 10 s), so that with
    # TXN_KILL9_DOWN_S > TXN_KILL9_TXN_TIMEOUT_MS the one open at a kill is aborted at once.
    b = start_broker({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500})
    src = create_topic(b.bootstrap, unique("txn-kill9-in"), INPUT_PARTITIONS)
    dst = create_topic(b.bootstrap, unique("txn-kill9-out"), INPUT_PARTITIONS)
    t_start = time.monotonic()
    counts = produce_input(b.bootstrap, src, RECORDS, INPUT_PARTITIONS)
    t_input = time.monotonic() - t_start

    copier = Copier(b.bootstrap, src, dst, counts, BATCH)
    deadline = time.monotonic() + DEADLINE
    kills = []
    copier.start()
    try:
        for k, fraction in enumerate((1 / 3, 2 / 3), 1):
            target = int(RECORDS * fraction)
            while copier.copied < target:
                assert not copier.done.is_set(), (
                    f"the copier stopped before kill #{k} ({copier.summary()})\n"
                    f"{copier.crash or ''}\n{copier.event_log()}")
                assert time.monotonic() < deadline, (
                    f"copy not at {target} records for kill #{k} within {DEADLINE}s: "
                    f"{copier.summary()}\n{copier.event_log()}")
                time.sleep(0.01)
            kills.append(Kill(round(time.monotonic() - copier.t0, 2), copier.copied,
                              copier.phase, copier.in_txn, copier.transactions))
            copier.note(f"=== test: kill -9 #{k}: {kills[-1]}")
            if DOWN_S:
                b.kill()
                time.sleep(DOWN_S)
                b.start()
            else:
                b.restart(kill=True)
            copier.note(f"=== test: broker restarted after kill #{k}")
        while not copier.done.is_set():
            assert time.monotonic() < deadline, (
                f"the copy did not finish within {DEADLINE}s: {copier.summary()}\n"
                f"committed offsets {copier.committed} of {counts}\n{copier.event_log()}")
            copier.done.wait(0.2)
    finally:
        copier.stop_event.set()
        copier.join(CALL_TIMEOUT)
    t_copy = time.monotonic() - t_start - t_input
    report = f"{copier.summary()}; kills: {kills}"
    print(f"\ninput {RECORDS} records in {t_input:.1f}s, copy in {t_copy:.1f}s: {report}")
    print(copier.event_log(200))
    assert copier.crash is None, f"the copier crashed: {copier.crash}\n{copier.event_log()}"
    assert copier.finished(), f"copier stopped early: {report}"
    assert len(kills) == 2, kills
    assert all(k.copied < RECORDS for k in kills), \
        f"the copy finished before a kill (smaller TXN_KILL9_BATCH?): {report}"
    # The kills must hit the copier: a transaction open at the moment of a kill (librdkafka
    # retries a short outage itself, and the transaction then commits across the restart), or
    # errors the copier had to handle (an abort, a re-created producer).
    recoveries = copier.aborts + copier.producer_inits - 1
    assert recoveries >= 1 or any(k.in_txn for k in kills), \
        f"no kill found a transaction open and the copier never had to recover: {report}\n" \
        f"{copier.event_log()}"

    # No transaction left open: the LSO of every output partition reaches its high watermark.
    lso_deadline = time.monotonic() + 30
    for q in range(INPUT_PARTITIONS):
        while True:
            hw = end_offset(b.bootstrap, dst, READ_UNCOMMITTED, q)
            lso = end_offset(b.bootstrap, dst, READ_COMMITTED, q)
            if lso == hw:
                break
            assert time.monotonic() < lso_deadline, \
                f"output partition {q}: last stable offset stuck at {lso}, high watermark {hw}"
            time.sleep(0.2)

    got, errors = ck_consume(b.bootstrap, dst, INPUT_PARTITIONS, RECORDS, timeout=60,
                             linger=1.0, **{"isolation.level": READ_COMMITTED})
    assert not errors, errors[:5]
    total = 0
    for q in range(INPUT_PARTITIONS):
        recs = got.get(q, [])
        total += len(recs)
        vals = [int(r.value) for r in recs]
        want = list(range(counts[q]))
        if vals != want:
            seen, dups = set(), []
            for v in vals:
                if v in seen:
                    dups.append(v)
                seen.add(v)
            missing = sorted(set(want) - seen)
            disorder = next((i for i, v in enumerate(vals) if i < len(want) and v != want[i]),
                            None)
            pytest.fail(
                f"output partition {q}: {len(vals)} records read_committed, input has "
                f"{counts[q]}; {len(dups)} duplicates (e.g. {dups[:10]}), {len(missing)} missing "
                f"(e.g. {missing[:10]}), first out of place at index {disorder} "
                f"(offset {recs[disorder].offset if disorder is not None else None}); {report}\n"
                f"{copier.event_log()}")
        assert all(r.key == b"%d" % q for r in recs), f"output partition {q}: wrong keys"
    assert total == RECORDS, f"{total} records in the output, {RECORDS} in the input"

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": copier.group,
                  "isolation.level": READ_COMMITTED})
    try:
        tps = c.committed([TopicPartition(src, q) for q in range(INPUT_PARTITIONS)],
                          timeout=CALL_TIMEOUT)
    finally:
        c.close()
    assert {tp.partition: tp.offset for tp in tps} == counts, \
        f"the group's committed offsets {tps} are not the input's ends {counts}"

"""`broker transactions list|describe|describe-producers|find-hanging|abort`
(kafka-transactions.sh) against our broker.

A confluent-kafka (librdkafka) transactional producer leaves a transaction open: begin,
produce 3 records, flush, no commit. `list` shows its transactional id Ongoing, `describe`
shows it Ongoing with the partition, `describe-producers` shows the open transaction starting
at offset 0, and `find-hanging` finds nothing hanging, since the coordinator still tracks the
partition. `abort --start-offset 0` writes an ABORT marker: a read_committed consumer's end
offset (the last stable offset, ListOffsets read_committed) moves from 0 to 4 and the partition
shows no open transaction. A new producer with the same transactional id then commits normally,
`list` shows CompleteCommit, and read_committed readers see only the committed records. Errors
come back by Kafka's name with a non-zero exit.

Run alone:

    BROKER_BIN=$PWD/target/release/broker target/venv/bin/python -m pytest -q \
        tests/e2e/test_admin_transactions.py
"""

import json
import subprocess

from conftest import BROKER_BIN
from e2e_helpers import create_topic, unique
from txn_helpers import (
    CLIENT_TIMEOUT,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ck_watermark_end,
    marker_kinds,
    read_partition,
    send,
    txn_producer,
    values,
    wait_until,
)

TIMEOUT = 30


def transactions(bootstrap, *args, check=True):
    cmd, rest = args[0], args[1:]
    res = subprocess.run(
        [BROKER_BIN, "transactions", cmd, "--bootstrap-server", bootstrap, *rest],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check:
        assert res.returncode == 0, f"transactions {args}: rc={res.returncode} {res.stderr}"
    return res


def rows(bootstrap, *args):
    """The command's rows, from its --json output."""
    out = transactions(bootstrap, *args, "--json").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def table(stdout):
    """Kafka's table: a header line, then rows; cells end with a tab."""
    lines = [line.rstrip("\n").split("\t") for line in stdout.splitlines()]
    header = [c.strip() for c in lines[0] if c.strip()]
    return [dict(zip(header, (c.strip() for c in line))) for line in lines[1:]]


def listed(bootstrap, txn_id):
    return [r for r in rows(bootstrap, "list") if r["TransactionalId"] == txn_id]


def test_list_describe_and_abort_an_open_transaction(broker):
    b = broker.bootstrap
    topic = create_topic(b, unique("atx"), 1)
    txn_id = unique("atx-id")
    p = txn_producer(b, txn_id)
    p.begin_transaction()
    log = send(p, topic, values("open", 3))
    assert not log.errors and log.offsets() == [0, 1, 2]

    # list: the transactional id, Ongoing, at its coordinator.
    (row,) = wait_until(lambda: [r for r in listed(b, txn_id)
                                 if r["TransactionState"] == "Ongoing"],
                        TIMEOUT, "the transaction listed Ongoing")
    producer_id, coordinator = row["ProducerId"], row["Coordinator"]
    text = table(transactions(b, "list").stdout)
    assert {"TransactionalId": txn_id, "Coordinator": str(coordinator),
            "ProducerId": str(producer_id), "TransactionState": "Ongoing"} in text

    # describe: Ongoing, with the partition and a start time.
    (d,) = rows(b, "describe", "--transactional-id", txn_id)
    assert d["TransactionalId"] == txn_id
    assert d["CoordinatorId"] == coordinator
    assert d["ProducerId"] == producer_id
    assert d["TransactionState"] == "Ongoing"
    assert d["TopicPartitions"] == f"{topic}-0"
    assert d["TransactionTimeoutMs"] > 0
    assert d["CurrentTransactionStartTimeMs"] > 0 and d["TransactionDurationMs"] >= 0
    (dt,) = table(transactions(b, "describe", "--transactional-id", txn_id).stdout)
    assert dt["TransactionState"] == "Ongoing" and dt["TopicPartitions"] == f"{topic}-0"

    # describe-producers: the producer's open transaction starts at offset 0.
    producers = rows(b, "describe-producers", "--topic", topic, "--partition", "0")
    (mine,) = [r for r in producers if r["ProducerId"] == producer_id]
    assert mine["CurrentTransactionStartOffset"] == 0
    assert mine["LastSequence"] == 2
    (pt,) = [r for r in table(transactions(b, "describe-producers", "--topic", topic,
                                           "--partition", "0").stdout)
             if r["ProducerId"] == str(producer_id)]
    assert pt["CurrentTransactionStartOffset"] == "0"

    # find-hanging: with no timeout every open transaction is a candidate, but the
    # coordinator still tracks this one on the partition, so nothing hangs.
    hanging = transactions(b, "find-hanging", "--broker-id", str(coordinator),
                           "--max-transaction-timeout", "0")
    assert hanging.stdout.split() == ["Topic", "Partition", "ProducerId", "ProducerEpoch",
                                      "CoordinatorEpoch", "StartOffset", "LastTimestamp",
                                      "Duration(min)"]

    # Nothing is stable while the transaction is open.
    assert ck_watermark_end(b, topic, READ_COMMITTED) == 0
    assert ck_watermark_end(b, topic, READ_UNCOMMITTED) == 3

    # abort --start-offset 0: an ABORT marker at offset 3; the LSO moves past it.
    transactions(b, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    wait_until(lambda: ck_watermark_end(b, topic, READ_COMMITTED) == 4, TIMEOUT,
               "read_committed end offset 4 after the abort")
    assert marker_kinds(b, topic) == [(3, "ABORT")]
    producers = rows(b, "describe-producers", "--topic", topic, "--partition", "0")
    (mine,) = [r for r in producers if r["ProducerId"] == producer_id]
    assert mine["CurrentTransactionStartOffset"] is None
    assert read_partition(b, topic, READ_COMMITTED, 1, timeout=3, linger=0.5) == []

    # No open transaction starts there any more.
    res = transactions(b, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0",
                       check=False)
    assert res.returncode != 0
    assert "Could not find any open transactions starting at offset 0" in res.stderr

    # A new producer with the same transactional id fences the old one and commits normally.
    p2 = txn_producer(b, txn_id)
    p2.begin_transaction()
    log2 = send(p2, topic, values("committed", 2))
    p2.commit_transaction(CLIENT_TIMEOUT)
    assert not log2.errors and len(log2.ok) == 2
    wait_until(lambda: [r for r in listed(b, txn_id)
                        if r["TransactionState"] == "CompleteCommit"],
               TIMEOUT, "the transaction listed CompleteCommit")
    (d,) = rows(b, "describe", "--transactional-id", txn_id)
    assert d["TransactionState"] == "CompleteCommit"
    high = ck_watermark_end(b, topic, READ_UNCOMMITTED)
    assert ck_watermark_end(b, topic, READ_COMMITTED) == high
    got = read_partition(b, topic, READ_COMMITTED, 2)
    assert [m.value for m in got] == values("committed", 2)
    del p


def test_errors_are_named_and_exit_non_zero(broker):
    b = broker.bootstrap
    res = transactions(b, "describe", "--transactional-id", unique("never"), check=False)
    assert res.returncode != 0
    assert "TRANSACTIONAL_ID_NOT_FOUND" in res.stderr, res.stderr

    res = transactions(b, "describe-producers", "--topic", unique("nope"), "--partition", "0",
                       check=False)
    assert res.returncode != 0
    assert "UNKNOWN_TOPIC_OR_PARTITION" in res.stderr, res.stderr

    topic = create_topic(b, unique("atx"), 1)
    res = transactions(b, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0",
                       check=False)
    assert res.returncode != 0
    assert "Could not find any open transactions" in res.stderr, res.stderr

    # An empty cluster lists no transactions but still prints the header.
    assert transactions(b, "list").stdout.split() == ["TransactionalId", "Coordinator",
                                                      "ProducerId", "TransactionState"]

"""Data survives a clean restart (SIGTERM) and a kill -9 after the producer's flush completed."""

from e2e_helpers import (assert_dense, assert_same, by_partition, ck_consume, ck_produce,
                         ck_producer, ck_watermarks, create_topic, unique)

N = 10_000
PARTITIONS = 3


def messages(start, n):
    for i in range(start, start + n):
        yield dict(key=f"k{i}".encode(), value=f"v{i}-".encode() + b"x" * (i % 100),
                   headers=[("i", str(i).encode())], timestamp=1_720_000_000_000 + i)


def produce(bootstrap, topic, start, n):
    p = ck_producer(bootstrap, acks="all")
    log = ck_produce(p, topic, messages(start, n))
    assert not log.errors, log.errors[:5]
    assert len(log.ok) == n
    return log.ok


def check_all(bootstrap, topic, recs):
    produced = by_partition(recs)
    assert_dense(produced)
    assert ck_watermarks(bootstrap, topic, PARTITIONS) == {
        p: (0, len(produced.get(p, []))) for p in range(PARTITIONS)}
    consumed, errors = ck_consume(bootstrap, topic, PARTITIONS, len(recs))
    assert_same(produced, consumed)


def test_restart_sigterm_then_sigkill(broker):
    topic = create_topic(broker.bootstrap, unique("restart"), PARTITIONS)
    recs = produce(broker.bootstrap, topic, 0, N)
    check_all(broker.bootstrap, topic, recs)

    # clean shutdown: exit code 0, everything still there, topic metadata too
    rc = broker.restart()
    assert rc == 0, f"SIGTERM shutdown exit code {rc}"
    check_all(broker.bootstrap, topic, recs)

    # the log keeps going after a restart: new offsets continue where the old ones ended
    recs += produce(broker.bootstrap, topic, N, N)
    check_all(broker.bootstrap, topic, recs)

    # kill -9 after every record was acknowledged (acks=all, flush() returned)
    rc = broker.restart(kill=True)
    assert rc == -9
    check_all(broker.bootstrap, topic, recs)

    # and once more after an unclean restart
    recs += produce(broker.bootstrap, topic, 2 * N, 1000)
    check_all(broker.bootstrap, topic, recs)

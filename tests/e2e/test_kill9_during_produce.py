"""kill -9 in the middle of a continuous acks=all produce: after restart every acknowledged record
is at its acknowledged offset with its value; unacknowledged ones may or may not be there; the
log still takes produces."""

import threading
import time

from e2e_helpers import (DeliveryLog, by_partition, ck_consume, ck_produce, ck_producer,
                         ck_watermarks, create_topic, unique)

PARTITIONS = 3


def test_kill9_during_produce(broker):
    topic = create_topic(broker.bootstrap, unique("kill9"), PARTITIONS)
    log = DeliveryLog()
    stop = threading.Event()
    sent = [0]
    p = ck_producer(broker.bootstrap, acks="all", **{
        "linger.ms": 2,
        "message.timeout.ms": 120000,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
    })

    def run():
        i = 0
        while not stop.is_set():
            try:
                p.produce(topic, key=f"k{i}".encode(), value=f"value-{i}".encode(),
                          on_delivery=log)
                i += 1
            except BufferError:
                p.poll(0.01)
            if i % 100 == 0:
                p.poll(0)
                time.sleep(0.001)  # keep a steady stream rather than one huge burst
        sent[0] = i

    t = threading.Thread(target=run, daemon=True)
    t.start()
    time.sleep(2.0)
    acked_before_kill = len(log.ok)
    broker.kill()
    stop.set()
    t.join(10)
    assert acked_before_kill > 0, "nothing was acknowledged in 2 s of producing"

    broker.start()
    # let the producer finish: what was in flight is retried against the restarted broker;
    # late acknowledgements must hold just as well
    left = p.flush(120)
    assert left == 0, f"{left} records never resolved"
    acked = log.ok
    assert len(acked) >= acked_before_kill
    print(f"sent {sent[0]}, acknowledged {acked_before_kill} before kill -9, "
          f"{len(acked)} in all, {len(log.errors)} failed")

    # no two acknowledgements for the same (partition, offset)
    seen = {}
    for r in acked:
        assert (r.partition, r.offset) not in seen, (
            f"offset acknowledged twice: {seen[(r.partition, r.offset)]} and {r}")
        seen[(r.partition, r.offset)] = r

    wm = ck_watermarks(broker.bootstrap, topic, PARTITIONS)
    total = sum(hi for lo, hi in wm.values())
    consumed, errors = ck_consume(broker.bootstrap, topic, PARTITIONS, total)
    assert sum(map(len, consumed.values())) == total, (wm, errors)
    at = {(r.partition, r.offset): r for lst in consumed.values() for r in lst}
    for q, lst in consumed.items():
        assert [r.offset for r in lst] == list(range(wm[q][1])), f"partition {q} offsets not dense"
    missing = [r for r in acked if (r.partition, r.offset) not in at]
    assert not missing, f"{len(missing)} acknowledged records missing, e.g. {missing[:3]}"
    wrong = [(r, at[(r.partition, r.offset)]) for r in acked
             if (at[(r.partition, r.offset)].key, at[(r.partition, r.offset)].value)
             != (r.key, r.value)]
    assert not wrong, f"{len(wrong)} acknowledged offsets hold other records, e.g. {wrong[:3]}"

    # the log continues to accept produces, appended after what is there
    p2 = ck_producer(broker.bootstrap, acks="all")
    more = ck_produce(p2, topic, (dict(key=f"after{i}".encode(), value=f"after-{i}".encode())
                                  for i in range(300)))
    assert not more.errors and len(more.ok) == 300
    for q, lst in by_partition(more.ok).items():
        assert [r.offset for r in lst] == list(range(wm[q][1], wm[q][1] + len(lst)))
    consumed2, _ = ck_consume(broker.bootstrap, topic, PARTITIONS, 300,
                              start={q: wm[q][1] for q in range(PARTITIONS)})
    assert by_partition(more.ok) == {q: lst for q, lst in consumed2.items() if lst}

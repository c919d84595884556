"""One consumer-group member in its own process, for tests/e2e/test_consumer_groups.py.

    python group_member.py --client ck|kp --bootstrap HOST:PORT --group G --topic T
                           [--commit] [--conf key=value ...]

`ck` is confluent-kafka (librdkafka), `kp` kafka-python. The member subscribes to the topic and
reports, one JSON object per line on stdout:

    {"ev": "assign", "parts": [..], "now": [..], "protocol": "EAGER"|"COOPERATIVE"}
                                             (COOPERATIVE: callbacks hand over increments)
    {"ev": "revoke", "parts": [..], "now": [..]}   ("lost" likewise)
    {"ev": "recs", "recs": [[partition, offset, key], ..]}
    {"ev": "committed", "offsets": {partition: next_offset}}
    {"ev": "error", "msg": ..}
    {"ev": "closed"}

`parts` is what the callback was handed (the whole assignment for eager protocols, the added or
removed partitions for cooperative ones); `now` is the member's assignment after it. With
--commit, every polled batch is committed synchronously after it was reported, so a member that
is closed (the line `close` on stdin, or stdin closing) has committed everything it reported.
The json lines go to stdout only; client logs go to stderr.
"""

import argparse
import json
import sys
import threading

_out_lock = threading.Lock()


def emit(**obj):
    line = json.dumps(obj, separators=(",", ":"))
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def conf_value(v):
    """--conf values as the client wants them: ints and booleans typed, the rest strings."""
    if v in ("true", "false"):
        return v == "true"
    try:
        return int(v)
    except ValueError:
        return v


def watch_stdin(stop):
    """Sets `stop` on the line `close` or when stdin closes (the test went away)."""
    for line in sys.stdin:
        if line.strip() == "close":
            break
    stop.set()


def key_str(k):
    return k.decode("utf-8", "replace") if isinstance(k, (bytes, bytearray)) else k


# ---------------------------------------------------------------------------------------------
def run_confluent(args, conf, stop):
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    c = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
        "enable.partition.eof": False,
    }
    c.update(conf)
    consumer = Consumer(c)
    now = set()
    # The Python binding does not expose rd_kafka_rebalance_protocol(): incremental callbacks
    # come with cooperative-sticky and with the consumer protocol (KIP-848).
    proto = ("COOPERATIVE"
             if c.get("partition.assignment.strategy") == "cooperative-sticky"
             or c.get("group.protocol") == "consumer" else "EAGER")

    def on_assign(cons, parts):
        ps = sorted(p.partition for p in parts)
        if proto == "COOPERATIVE":
            now.update(ps)
        else:
            now.clear()
            now.update(ps)
        emit(ev="assign", parts=ps, now=sorted(now), protocol=proto)

    def on_revoke(cons, parts, ev="revoke"):
        ps = sorted(p.partition for p in parts)
        if proto == "COOPERATIVE":
            now.difference_update(ps)
        else:
            now.clear()
        emit(ev=ev, parts=ps, now=sorted(now))

    def on_lost(cons, parts):
        on_revoke(cons, parts, ev="lost")

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    try:
        while not stop.is_set():
            msgs = consumer.consume(num_messages=1000, timeout=0.2)
            recs = []
            for m in msgs:
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        emit(ev="error", msg=str(m.error()))
                    continue
                recs.append([m.partition(), m.offset(), key_str(m.key())])
            if not recs:
                continue
            emit(ev="recs", recs=recs)
            if args.commit:
                nxt = {}
                for p, o, _ in recs:
                    nxt[p] = max(nxt.get(p, 0), o + 1)
                try:
                    consumer.commit(
                        offsets=[TopicPartition(args.topic, p, o) for p, o in nxt.items()],
                        asynchronous=False,
                    )
                    emit(ev="committed", offsets=nxt)
                except KafkaException as e:
                    emit(ev="error", msg=f"commit failed: {e}")
    finally:
        consumer.close()
        emit(ev="closed")


# ---------------------------------------------------------------------------------------------
def run_kafka_python(args, conf, stop):
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.errors import KafkaError

    now = set()

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            ps = sorted(tp.partition for tp in revoked)
            now.difference_update(ps)
            emit(ev="revoke", parts=ps, now=sorted(now))

        def on_partitions_assigned(self, assigned):
            ps = sorted(tp.partition for tp in assigned)
            now.update(ps)
            emit(ev="assign", parts=ps, now=sorted(now), protocol="EAGER")

    c = dict(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        fetch_max_bytes=16 * 1024 * 1024,
        receive_message_max_bytes=64 * 1024 * 1024,
    )
    c.update(conf)
    consumer = KafkaConsumer(**c)
    consumer.subscribe([args.topic], listener=Listener())
    try:
        while not stop.is_set():
            batch = consumer.poll(timeout_ms=200, max_records=1000)
            recs = [[m.partition, m.offset, key_str(m.key)]
                    for msgs in batch.values() for m in msgs]
            if not recs:
                continue
            emit(ev="recs", recs=recs)
            if args.commit:
                nxt = {}
                for p, o, _ in recs:
                    nxt[p] = max(nxt.get(p, 0), o + 1)
                try:
                    # The positions poll() has returned up to: exactly the records reported.
                    consumer.commit()
                    emit(ev="committed", offsets=nxt)
                except KafkaError as e:
                    emit(ev="error", msg=f"commit failed: {e!r}")
    finally:
        consumer.close(autocommit=False)
        emit(ev="closed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", choices=["ck", "kp"], required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--commit", action="store_true")
    ap.add_argument("--conf", action="append", default=[], help="key=value, repeatable")
    args = ap.parse_args()
    conf = {}
    for kv in args.conf:
        k, _, v = kv.partition("=")
        conf[k] = conf_value(v)
    stop = threading.Event()
    threading.Thread(target=watch_stdin, args=(stop,), daemon=True).start()
    try:
        (run_confluent if args.client == "ck" else run_kafka_python)(args, conf, stop)
    except Exception as e:  # noqa: BLE001 - reported to the test, which fails on it
        emit(ev="error", msg=f"member died: {e!r}")
        raise


if __name__ == "__main__":
    main()

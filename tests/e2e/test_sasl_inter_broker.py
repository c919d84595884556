"""SASL between brokers (Kafka's `inter.broker.listener.name` on a SASL_PLAINTEXT listener,
`sasl.mechanism.inter.broker.protocol`, the login from that listener's JAAS entry): in a
3-node cluster whose brokers reach each other only on a SASL listener, followers log in there
to fetch, so a topic of replication factor 3 takes acks=all writes and every ISR fills. With
PLAIN; with SCRAM-SHA-256 (the brokers' credential created in the metadata log first, as
`kafka-storage format --add-scram` would); and a node whose password is wrong is refused,
stays out of every ISR, and says why in its log.

Run alone:

    BROKER_BIN=$PWD/target/release/broker target/venv/bin/python -m pytest -q \\
        tests/e2e/test_sasl_inter_broker.py
"""

import subprocess

import pytest
from confluent_kafka import Consumer, Producer

from cluster_harness import Cluster, wait_until
from conftest import BROKER_BIN
from e2e_helpers import unique

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
RECORDS = 500


def plain_jaas(password, users_password="broker-secret"):
    return (f'{PLAIN_MODULE} required username="broker" password="{password}" '
            f'user_broker="{users_password}";')


def started(request, tmp_path, mechanism, jaas, node_overrides=None):
    overrides = {
        # A replica that cannot fetch leaves the ISR after this long.
        "replica.lag.time.max.ms": 3000,
        "inter.broker.listener.name": "BROKER",
        "sasl.enabled.mechanisms": mechanism,
        "sasl.mechanism.inter.broker.protocol": mechanism,
        f"listener.name.broker.{mechanism.lower()}.sasl.jaas.config": jaas,
        "broker.session.timeout.ms": 3000,
    }
    request.node._e2e_brokers = []
    c = Cluster(tmp_path / "cluster", overrides=overrides,
                extra_listener=("BROKER", "SASL_PLAINTEXT"), node_overrides=node_overrides)
    request.node._e2e_brokers.extend(c.nodes.values())
    c.start()
    request.addfinalizer(lambda: c.close(kill=True))  # see cluster_harness.running_cluster
    return c


def produce_and_read_back(c, topic):
    """RECORDS acks=all records through the PLAINTEXT listener, all read back."""
    p = Producer({"bootstrap.servers": c.bootstrap(), "acks": "all", "linger.ms": 5})
    failed = []
    for n in range(RECORDS):
        p.produce(topic, str(n).encode(), callback=lambda e, m: e and failed.append(e))
        p.poll(0)
    assert p.flush(60) == 0 and not failed, failed
    consumer = Consumer({"bootstrap.servers": c.bootstrap(), "group.id": unique("g"),
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    deadline = 60
    wait_until(lambda: got.extend(m.value() for m in consumer.consume(100, 0.5)
                                  if m.error() is None) or len(got) >= RECORDS,
               deadline, f"{RECORDS} records read back")
    consumer.close()
    assert sorted(int(v) for v in got) == list(range(RECORDS))


def test_followers_log_in_with_plain(request, tmp_path):
    c = started(request, tmp_path, "PLAIN", plain_jaas("broker-secret"))
    c.wait_formed()
    topic = unique("sasl-ib")
    assert c.create_topic(c.ids[0], topic, 2, 3)[0] == 0
    c.wait_isr_full(topic, 2)
    produce_and_read_back(c, topic)
    c.wait_isr_full(topic, 2)


def test_followers_log_in_with_scram(request, tmp_path):
    jaas = f'{SCRAM_MODULE} required username="broker" password="scram-secret";'
    c = started(request, tmp_path, "SCRAM-SHA-256", jaas)
    c.wait_formed()
    res = subprocess.run([BROKER_BIN, "scram", "add", "--bootstrap-server", c.bootstrap(1),
                          "--user", "broker", "--mechanism", "SCRAM-SHA-256",
                          "--password", "scram-secret"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    topic = unique("sasl-ib")
    assert c.create_topic(c.ids[0], topic, 2, 3)[0] == 0
    c.wait_isr_full(topic, 2)
    produce_and_read_back(c, topic)


def test_a_broker_with_a_wrong_password_is_refused(request, tmp_path):
    """Node 3 logs in with a wrong password (and expects it from the others): every fetch
    between it and the others is refused, so it stays out of every ISR while nodes 1 and 2
    replicate between themselves."""
    c = started(request, tmp_path, "PLAIN", plain_jaas("broker-secret"),
                node_overrides={3: {"listener.name.broker.plain.sasl.jaas.config":
                                    plain_jaas("wrong", users_password="wrong")}})
    c.wait_formed()
    topic = unique("sasl-ib")
    assert c.create_topic(c.ids[0], topic, 2, 3)[0] == 0

    def isrs():
        parts = c.partition_states(1, topic)
        return parts and {p: sorted(v["isr"]) for p, v in parts.items()}

    # Every partition has an ISR without node 3 (a partition led by node 3 has nobody
    # fetching from it; one led by 1 or 2 has the other).
    wait_until(lambda: isrs() and all(3 not in isr or isr == [3] for isr in isrs().values()),
               30, "node 3 out of the ISRs", lambda: str(isrs()))
    wait_until(lambda: "SASL login as broker with PLAIN refused" in
               c.nodes[3].log_path.read_text(), 30, "node 3 logs the refusal",
               lambda: c.nodes[3].log_path.read_text()[-2000:])


@pytest.mark.parametrize("listener_protocol", ["SSL", "SASL_SSL"])
def test_tls_between_brokers_is_refused_at_start_up(tmp_path, listener_protocol):
    res = subprocess.run(
        [BROKER_BIN, "start", "--override", f"log.dirs={tmp_path / 'data'}",
         "--override", "listeners=PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:0",
         "--override", f"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,"
                       f"BROKER:{listener_protocol}",
         "--override", "inter.broker.listener.name=BROKER",
         "--override", "sasl.enabled.mechanisms=PLAIN",
         "--override", "listener.name.broker.plain.sasl.jaas.config=" + plain_jaas("x")],
        capture_output=True, text=True, timeout=60)
    assert res.returncode != 0
    assert "TLS between brokers is not served" in res.stderr, res.stderr[-3000:]

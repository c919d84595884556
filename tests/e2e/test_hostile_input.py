"""Malformed input on one connection closes that connection only: a healthy producer/consumer
and a healthy raw connection keep working, and the broker process stays up."""

import random
import socket
import struct
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

import kproto
from e2e_helpers import (Rec, ck_consumer, ck_produce, ck_producer, create_topic, norm_headers,
                         unique)

CLOSE_TIMEOUT = 5.0


def send_ignoring_reset(sock, data):
    try:
        sock.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the broker may close before reading everything: that is the point


def random_mib(sock):
    send_ignoring_reset(sock, random.Random(1234).randbytes(1 << 20))
    return True


def truncated_frame(sock):
    send_ignoring_reset(sock, struct.pack(">i", 100) + b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
    sock.close()  # we hang up mid-frame; nothing to observe on this socket
    return False


def huge_frame(sock):
    send_ignoring_reset(sock, struct.pack(">i", 0x7FFFFFFF) + b"\x00\x03\x00\x01" + b"\x00" * 60)
    return True


def negative_frame(sock):
    send_ignoring_reset(sock, struct.pack(">i", -5) + b"\x00" * 16)
    return True


def metadata_huge_array(sock):
    body = kproto.request_header_v1(kproto.METADATA, 1, 77) + struct.pack(">i", 0x7FFFFF00)
    send_ignoring_reset(sock, kproto.frame(body))
    return True


def produce_huge_array(sock):
    # a valid Produce v3 header, then a topics array claiming 2^31-1 entries
    body = (kproto.request_header_v1(kproto.PRODUCE, 3, 78) + kproto.string(None) + kproto.i16(-1)
            + kproto.i32(1000) + struct.pack(">i", 0x7FFFFFFF))
    send_ignoring_reset(sock, kproto.frame(body))
    return True


def garbage_after_valid_request(sock):
    # first a valid ApiVersions (answered), then a frame whose header is garbage
    sock.sendall(kproto.api_versions(5))
    corr, _ = kproto.recv_response(sock)
    assert corr == 5
    send_ignoring_reset(sock, kproto.frame(b"\xff\xff\xff" + b"\x01" * 40))
    return True


ATTACKS = [random_mib, truncated_frame, huge_frame, negative_frame, metadata_huge_array,
           produce_huge_array, garbage_after_valid_request]


class Healthy:
    """An open producer, consumer and raw connection that must keep working throughout."""

    def __init__(self, bootstrap):
        self.bootstrap = bootstrap
        self.topic = create_topic(bootstrap, unique("healthy"), 1)
        self.producer = ck_producer(bootstrap, **{"linger.ms": 0})
        self.consumer = ck_consumer(bootstrap)
        self.consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        self.raw = kproto.connect(bootstrap)
        self.corr = 1000
        self.expected = []

    def check(self, tag):
        self.corr += 1
        r = kproto.roundtrip(self.raw, kproto.api_versions(self.corr), self.corr)
        assert kproto.parse_api_versions_v0(r)[0] == 0
        start = len(self.expected)
        log = ck_produce(self.producer, self.topic,
                         [dict(key=tag.encode(), value=f"{tag}-{i}".encode()) for i in range(10)],
                         flush_timeout=30)
        assert not log.errors, log.errors
        assert [r.offset for r in sorted(log.ok, key=lambda r: r.offset)] == list(
            range(start, start + 10))
        self.expected += [(tag.encode(), f"{tag}-{i}".encode()) for i in range(10)]
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            for m in self.consumer.consume(100, timeout=0.2):
                if not m.error():
                    got.append((m.offset(), m.key(), m.value()))
        assert got == [(start + i, k, v) for i, (k, v) in enumerate(self.expected[start:])], got

    def close(self):
        self.consumer.close()
        self.raw.close()


@pytest.fixture
def healthy(broker):
    h = Healthy(broker.bootstrap)
    h.check("before")
    yield h
    h.close()


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda f: f.__name__)
def test_hostile_connection_is_closed_others_unaffected(broker, healthy, attack):
    s = kproto.connect(broker.bootstrap)
    observe = attack(s)
    if observe:
        assert kproto.wait_closed(s, CLOSE_TIMEOUT), (
            f"{attack.__name__}: broker did not close the connection within {CLOSE_TIMEOUT}s")
    s.close()
    assert broker.alive(), f"broker died after {attack.__name__}"
    healthy.check(attack.__name__)
    assert broker.alive()


def test_all_attacks_at_once_then_healthy(broker, healthy):
    socks = []
    for _ in range(3):
        for attack in ATTACKS:
            s = kproto.connect(broker.bootstrap)
            if attack(s):
                socks.append((attack.__name__, s))
    for name, s in socks:
        assert kproto.wait_closed(s, CLOSE_TIMEOUT), f"{name}: not closed"
        s.close()
    assert broker.alive()
    healthy.check("after-all")
    # many idle connections that never send a byte do not block anyone either
    idle = [kproto.connect(broker.bootstrap) for _ in range(50)]
    healthy.check("with-idle")
    for s in idle:
        s.close()
    assert broker.alive()

"""librdkafka compresses for this broker: batches produced with `compression.type=X` by
confluent-kafka and by kcat are stored with codec X (read back raw with Fetch v4 and checked in
the batch attributes), as against Apache Kafka. librdkafka decides which codecs a broker
supports from the advertised Produce range, so the broker advertises Produce from v0 (as Kafka
4.0 does) and answers v0-2 with UNSUPPORTED_VERSION.
"""

import shutil
import struct
import subprocess

import pytest

import kproto
from e2e_helpers import ck_produce, ck_producer, create_topic, unique

CODEC_BITS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def stored_codecs(bootstrap, topic):
    """The codec bits of every batch stored in partition 0 of `topic`."""
    with kproto.connect(bootstrap) as s:
        r = kproto.roundtrip(s, kproto.fetch_v4(5, topic, 0, 0, max_bytes=16 << 20), 5)
        parts = kproto.parse_fetch_v4(r)
    err, _, records = parts[(topic, 0)]
    assert err == 0
    codecs, pos = [], 0
    while pos + 23 <= len(records):
        (length,) = struct.unpack_from(">i", records, pos + 8)
        (attributes,) = struct.unpack_from(">h", records, pos + 21)
        codecs.append(attributes & 7)
        pos += 12 + length
    return codecs


def messages(n=50):
    for i in range(n):
        yield dict(key=f"k{i}".encode(), value=(f"compressible value {i} " * 20).encode())


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_codec_is_stored(broker, codec):
    topic = create_topic(broker.bootstrap, unique(f"codec-{codec}"), 1)
    producer = ck_producer(broker.bootstrap, **{"compression.type": codec, "linger.ms": 20})
    log = ck_produce(producer, topic, messages())
    assert not log.errors, log.errors[:3]
    codecs = stored_codecs(broker.bootstrap, topic)
    assert codecs and set(codecs) == {CODEC_BITS[codec]}, codecs


def test_kcat_lz4_is_stored(broker):
    exe = shutil.which("kcat") or shutil.which("kafkacat")
    assert exe, "kcat is not installed (scripts/test.sh installs it: apt-get install -y kcat)"
    topic = create_topic(broker.bootstrap, unique("codec-kcat"), 1)
    lines = b"\n".join(b"kcat line %d " % i * 10 for i in range(100)) + b"\n"
    done = subprocess.run([exe, "-P", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-z", "lz4"],
                          input=lines, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    codecs = stored_codecs(broker.bootstrap, topic)
    assert codecs and set(codecs) == {CODEC_BITS["lz4"]}, codecs


def test_produce_advertised_from_v0_and_v2_refused(broker):
    topic = create_topic(broker.bootstrap, unique("codec-v2"), 1)
    with kproto.connect(broker.bootstrap) as s:
        err, keys, _ = kproto.parse_api_versions_v0(kproto.roundtrip(s, kproto.api_versions(1), 1))
        assert err == 0
        assert keys[kproto.PRODUCE][0] == 0, keys[kproto.PRODUCE]
        # A Produce v2 request (message format v1 payload; its content does not matter) gets
        # UNSUPPORTED_VERSION for its partition, not a closed connection.
        body = (kproto.i16(-1) + kproto.i32(10000)
                + kproto.array([kproto.string(topic)
                                + kproto.array([kproto.i32(0) + kproto.i32(4) + b"\0\0\0\0"])]))
        s.sendall(kproto.frame(kproto.request_header_v1(kproto.PRODUCE, 2, 9) + body))
        corr, r = kproto.recv_response(s)
        assert corr == 9
        assert r.i32() == 1 and r.string() == topic and r.i32() == 1
        assert r.i32() == 0 and r.i16() == 35  # UNSUPPORTED_VERSION

"""Hand-built Kafka protocol frames for raw-socket tests (no client library).

Only what the e2e tests need: request headers (v1 and flexible v2), RecordBatch v2 encoding with
our own CRC-32C, and decoders for a few response shapes (ApiVersions v0, Produce v3, Fetch v4,
Metadata v1). Everything is big-endian as on the wire.
"""

import socket
import struct
import time

# ---------------------------------------------------------------------------------------------
# CRC-32C (Castagnoli). Prefer the `crc32c` package; fall back to a table implementation so the
# module stays importable without it.
try:  # pragma: no cover - depends on the environment
    from crc32c import crc32c as _crc32c_fast
except Exception:  # noqa: BLE001
    _crc32c_fast = None


def _make_table():
    poly = 0x82F63B78
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()


def crc32c_py(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc32c(data: bytes) -> int:
    if _crc32c_fast is not None:
        return _crc32c_fast(data)
    return crc32c_py(data)


assert crc32c_py(b"123456789") == 0xE3069283  # the standard check value
assert crc32c(b"123456789") == 0xE3069283

# ---------------------------------------------------------------------------------------------
# API keys and error codes used by the tests (Kafka's numbering).
PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
API_VERSIONS = 18
CREATE_TOPICS = 19

NONE = 0
OFFSET_OUT_OF_RANGE = 1
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
TOPIC_ALREADY_EXISTS = 36
INVALID_RECORD = 87


# ---------------------------------------------------------------------------------------------
# Primitive encoders.
def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def string(s):
    if s is None:
        return i16(-1)
    b = s.encode() if isinstance(s, str) else s
    return i16(len(b)) + b


def uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(n):
    """Zig-zag signed varint (varint and varlong share the encoding)."""
    return uvarint((n << 1) ^ (n >> 63))


def compact_string(s):
    if s is None:
        return uvarint(0)
    b = s.encode() if isinstance(s, str) else s
    return uvarint(len(b) + 1) + b


def array(items):
    return i32(len(items)) + b"".join(items)


# ---------------------------------------------------------------------------------------------
# Request framing.
def request_header_v1(api_key, api_version, correlation_id, client_id="e2e-raw"):
    return i16(api_key) + i16(api_version) + i32(correlation_id) + string(client_id)


def request_header_v2(api_key, api_version, correlation_id, client_id="e2e-raw"):
    # Flexible header: v1 fields (client_id stays a non-compact nullable string) + tagged fields.
    return request_header_v1(api_key, api_version, correlation_id, client_id) + uvarint(0)


def frame(payload: bytes) -> bytes:
    return i32(len(payload)) + payload


# ---------------------------------------------------------------------------------------------
# RecordBatch v2.
def encode_record(offset_delta, timestamp_delta, key, value, headers=()):
    body = bytearray()
    body += i8(0)  # attributes
    body += varint(timestamp_delta)
    body += varint(offset_delta)
    if key is None:
        body += varint(-1)
    else:
        body += varint(len(key)) + key
    if value is None:
        body += varint(-1)
    else:
        body += varint(len(value)) + value
    body += varint(len(headers))
    for hk, hv in headers:
        hk = hk.encode() if isinstance(hk, str) else hk
        body += varint(len(hk)) + hk
        if hv is None:
            body += varint(-1)
        else:
            body += varint(len(hv)) + hv
    return varint(len(body)) + bytes(body)


def record_batch(records, base_offset=0, base_timestamp=None, attributes=0, producer_id=-1,
                 producer_epoch=-1, base_sequence=-1, corrupt_crc=False):
    """records: list of (key, value) or (key, value, headers). Returns the encoded batch."""
    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000)
    recs = b""
    for i, r in enumerate(records):
        key, value = r[0], r[1]
        headers = r[2] if len(r) > 2 else ()
        recs += encode_record(i, 0, key, value, headers)
    after_crc = (
        i16(attributes)
        + i32(len(records) - 1)  # lastOffsetDelta
        + i64(base_timestamp)
        + i64(base_timestamp)  # maxTimestamp (all records have delta 0)
        + i64(producer_id)
        + i16(producer_epoch)
        + i32(base_sequence)
        + i32(len(records))
        + recs
    )
    crc = crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0x1
    after_length = i32(0) + i8(2) + struct.pack(">I", crc) + after_crc  # leaderEpoch, magic, crc
    return i64(base_offset) + i32(len(after_length)) + after_length


# ---------------------------------------------------------------------------------------------
# Requests.
def produce_v3(correlation_id, topic, partition, batch, acks=-1, timeout_ms=10000):
    body = (
        string(None)  # transactional_id
        + i16(acks)
        + i32(timeout_ms)
        + array([string(topic) + array([i32(partition) + i32(len(batch)) + batch])])
    )
    return frame(request_header_v1(PRODUCE, 3, correlation_id) + body)


def fetch_v4(correlation_id, topic, partition, offset, max_wait_ms=100, max_bytes=1 << 20):
    body = (
        i32(-1)  # replica_id
        + i32(max_wait_ms)
        + i32(1)  # min_bytes
        + i32(max_bytes)
        + i8(0)  # isolation_level READ_UNCOMMITTED
        + array([string(topic) + array([i32(partition) + i64(offset) + i32(max_bytes)])])
    )
    return frame(request_header_v1(FETCH, 4, correlation_id) + body)


def api_versions(correlation_id, version=0):
    if version >= 3:
        return frame(request_header_v2(API_VERSIONS, version, correlation_id))
    return frame(request_header_v1(API_VERSIONS, version, correlation_id))


def metadata_v1(correlation_id, topics=None):
    body = i32(-1) if topics is None else array([string(t) for t in topics])
    return frame(request_header_v1(METADATA, 1, correlation_id) + body)


# ---------------------------------------------------------------------------------------------
# Socket helpers and decoders.
class Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError(f"short read: need {n} at {self.pos}, have {len(self.data)}")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def i8(self):
        return struct.unpack(">b", self.take(1))[0]

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def i64(self):
        return struct.unpack(">q", self.take(8))[0]

    def string(self):
        n = self.i16()
        return None if n < 0 else self.take(n).decode()

    def nbytes(self):
        n = self.i32()
        return None if n < 0 else self.take(n)

    def remaining(self):
        return len(self.data) - self.pos


def connect(bootstrap, timeout=10.0):
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def recv_response(sock):
    """Reads one response frame; returns (correlation_id, body_reader) for header v0."""
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    payload = recv_exact(sock, size)
    r = Reader(payload)
    corr = r.i32()
    return corr, r


def roundtrip(sock, request_frame, expected_correlation_id):
    sock.sendall(request_frame)
    corr, r = recv_response(sock)
    assert corr == expected_correlation_id, (corr, expected_correlation_id)
    return r


def wait_closed(sock, timeout=5.0):
    """True if the peer closes (EOF or reset) within timeout; any bytes received are drained."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        if not chunk:
            return True


def parse_api_versions_v0(r: Reader):
    """ApiVersions v0 body: error_code, [api_key, min, max]. Returns (error, {key: (min, max)})."""
    err = r.i16()
    n = r.i32()
    keys = {}
    for _ in range(n):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        keys[k] = (lo, hi)
    return err, keys, n


def parse_produce_v3(r: Reader):
    """Returns {(topic, partition): (error_code, base_offset, log_append_time)}."""
    out = {}
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            p = r.i32()
            err = r.i16()
            base = r.i64()
            lat = r.i64()
            out[(topic, p)] = (err, base, lat)
    r.i32()  # throttle_time_ms
    return out


def parse_fetch_v4(r: Reader):
    """Returns {(topic, partition): (error_code, high_watermark, records_bytes)}."""
    r.i32()  # throttle_time_ms
    out = {}
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            p = r.i32()
            err = r.i16()
            hw = r.i64()
            r.i64()  # last_stable_offset
            n_aborted = r.i32()
            for _ in range(max(n_aborted, 0)):
                r.i64()
                r.i64()
            records = r.nbytes()
            out[(topic, p)] = (err, hw, records)
    return out


def parse_metadata_v1(r: Reader):
    """Returns (brokers, controller_id, {topic: (error_code, {partition: error_code})})."""
    brokers = []
    for _ in range(r.i32()):
        node = r.i32()
        host = r.string()
        port = r.i32()
        r.string()  # rack
        brokers.append((node, host, port))
    controller = r.i32()
    topics = {}
    for _ in range(r.i32()):
        err = r.i16()
        name = r.string()
        r.i8()  # is_internal
        parts = {}
        for _ in range(r.i32()):
            perr = r.i16()
            pidx = r.i32()
            r.i32()  # leader
            for _ in range(r.i32()):
                r.i32()  # replicas
            for _ in range(r.i32()):
                r.i32()  # isr
            parts[pidx] = perr
        topics[name] = (err, parts)
    return brokers, controller, topics


def produce_raw(bootstrap, topic, partition, batch, acks=-1, correlation_id=7):
    """One Produce v3 on a fresh connection; returns (error_code, base_offset)."""
    with connect(bootstrap) as s:
        r = roundtrip(s, produce_v3(correlation_id, topic, partition, batch, acks=acks), correlation_id)
        res = parse_produce_v3(r)
    assert list(res.keys()) == [(topic, partition)], res
    err, base, _ = res[(topic, partition)]
    return err, base


def create_topics_v2(correlation_id, name, partitions=1, replication_factor=1, timeout_ms=10000):
    body = (
        array([string(name) + i32(partitions) + i16(replication_factor) + array([]) + array([])])
        + i32(timeout_ms)
        + i8(0)  # validate_only
    )
    return frame(request_header_v1(CREATE_TOPICS, 2, correlation_id) + body)


def parse_create_topics_v2(r: Reader):
    """Returns {name: (error_code, error_message)}."""
    r.i32()  # throttle_time_ms
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        err = r.i16()
        msg = r.string()
        out[name] = (err, msg)
    return out


# --- Produce v10 (flexible; KIP-951's CurrentLeader and NodeEndpoints in the response) ----
def _compact_array(items):
    return uvarint(len(items) + 1) + b"".join(items)


def produce_v10(correlation_id, topic, partition, batch, acks=-1, timeout_ms=10000):
    body = (
        compact_string(None)  # transactional_id
        + i16(acks)
        + i32(timeout_ms)
        + _compact_array([
            compact_string(topic)
            + _compact_array([i32(partition) + uvarint(len(batch) + 1) + batch + uvarint(0)])
            + uvarint(0)
        ])
        + uvarint(0)
    )
    return frame(request_header_v2(PRODUCE, 10, correlation_id) + body)


def _uvarint(r):
    shift = value = 0
    while True:
        b = r.i8() & 0xFF
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value
        shift += 7


def _compact_str(r):
    n = _uvarint(r) - 1
    return None if n < 0 else r.take(n).decode()


def _tagged(r, handlers):
    for _ in range(_uvarint(r)):
        tag, size = _uvarint(r), _uvarint(r)
        data = r.take(size)
        if tag in handlers:
            handlers[tag](Reader(data))


def parse_produce_v10(r: Reader):
    """{(topic, partition): (error, base_offset, (leader_id, leader_epoch) or None)} and the
    node endpoints {node_id: (host, port)}; `r` starts after the correlation id."""
    _tagged(r, {})  # response header v1
    out, endpoints = {}, {}
    for _ in range(_uvarint(r) - 1):
        topic = _compact_str(r)
        for _ in range(_uvarint(r) - 1):
            index, error, base = r.i32(), r.i16(), r.i64()
            r.i64(), r.i64()  # log_append_time_ms, log_start_offset
            for _ in range(_uvarint(r) - 1):  # record_errors
                r.i32(), _compact_str(r), _tagged(r, {})
            _compact_str(r)  # error_message
            leader = []
            _tagged(r, {0: lambda t: leader.append((t.i32(), t.i32()))})
            out[(topic, index)] = (error, base, leader[0] if leader else None)
        _tagged(r, {})
    r.i32()  # throttle_time_ms

    def node_endpoints(t):
        for _ in range(_uvarint(t) - 1):
            node, host, port = t.i32(), _compact_str(t), t.i32()
            _compact_str(t), _tagged(t, {})
            endpoints[node] = (host, port)

    _tagged(r, {0: node_endpoints})
    return out, endpoints


def fetch_v12(correlation_id, topic, partition, offset, max_wait_ms=0, max_bytes=1 << 20):
    body = (
        i32(-1) + i32(max_wait_ms) + i32(1) + i32(max_bytes) + i8(0)  # replica, waits, bytes
        + i32(0) + i32(-1)  # no session
        + _compact_array([
            compact_string(topic)
            + _compact_array([i32(partition) + i32(-1) + i64(offset) + i32(-1) + i64(-1)
                              + i32(max_bytes) + uvarint(0)])
            + uvarint(0)
        ])
        + _compact_array([])  # forgotten topics
        + compact_string("")  # rack
        + uvarint(0)
    )
    return frame(request_header_v2(FETCH, 12, correlation_id) + body)


def parse_fetch_v12(r: Reader):
    """{(topic, partition): (error, (leader_id, leader_epoch) or None)}; `r` starts after the
    correlation id."""
    _tagged(r, {})
    r.i32(), r.i16(), r.i32()  # throttle, error, session
    out = {}
    for _ in range(_uvarint(r) - 1):
        topic = _compact_str(r)
        for _ in range(_uvarint(r) - 1):
            index, error = r.i32(), r.i16()
            r.i64(), r.i64(), r.i64()
            for _ in range(_uvarint(r) - 1):  # aborted transactions
                r.i64(), r.i64(), _tagged(r, {})
            r.i32()  # preferred read replica
            n = _uvarint(r) - 1
            if n > 0:
                r.take(n)
            leader = []
            _tagged(r, {1: lambda t: leader.append((t.i32(), t.i32()))})
            out[(topic, index)] = (error, leader[0] if leader else None)
        _tagged(r, {})
    _tagged(r, {})
    return out

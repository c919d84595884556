//! Random-frame fuzz test against a running release broker, over real sockets.
//!
//! Frames are built from the generated codecs (`wire::generated`, with the random-message
//! generator the differential tests use): an API key and version the broker advertises in
//! ApiVersions (mostly), or one it does not serve, or no API at all; a random valid request
//! of that API and version behind a random request header; then, for most frames, one to
//! three mutations: flipped bits, length and count fields overwritten with huge, negative
//! or off-by-one values (i32, i16 and varints, found by looking for values that could be a
//! length of what follows), truncation, junk appended, a slice duplicated; and, for a few,
//! a size prefix that lies. Produce frames sometimes carry real record batches (possibly
//! corrupted, CRC recomputed or not) for an existing topic.
//!
//! `SENDERS` threads each open a connection, pipeline up to `MAX_FRAMES_PER_SESSION` frames
//! while reading whatever comes back, then half-close and read until the broker closes. The
//! sender predicts, with the same codecs, which frames the broker answers and which make it
//! close the connection (Kafka's rule: unknown API or version, undecodable header or body),
//! ends the session after such a frame, and checks that every decodable request before it
//! was answered in order (correlation ids) and that the broker closes each connection
//! within `CLOSE_TIMEOUT` once it has everything (no hang).
//!
//! Meanwhile a healthy client does ApiVersions, Metadata, Produce and Fetch round trips
//! every `HEALTHY_PERIOD` on its own connection and checks every answer. At the end the
//! broker must still run, its fd count must return to the count before fuzzing, its RSS
//! must be within `RSS_SLACK_BYTES` of the RSS after a warm-up run, and SIGTERM must stop
//! it with exit status 0 and no panic in its log.
//!
//! Not sent: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords and FindCoordinator
//! frames that would decode (a random CreateTopics or CreatePartitions can ask for two billion
//! partitions, a DeleteTopics or DeleteRecords could empty the healthy client's topic, a FindCoordinator creates `__consumer_offsets`, whose 50 partitions hold
//! fds and whose groups are state a client may legitimately create without bound, as in
//! Kafka); undecodable ones are sent, so their decoders are fuzzed. Without
//! `__consumer_offsets` every group API answers COORDINATOR_NOT_AVAILABLE at once. Auto-creation is off,
//! so Metadata and Produce for random names create nothing.
//!
//! Sizing: `FUZZ_SECONDS` (default `DEFAULT_SECONDS`, the CI time box) and `FUZZ_FRAMES`
//! (default 1,000,000); the run stops at whichever comes first. With only `FUZZ_FRAMES`
//! set there is no time box: `FUZZ_FRAMES=10000000 cargo test --release -p broker --test
//! fuzz_frames -- --nocapture`. `FUZZ_SEED` repeats a run's frames (modulo thread timing),
//! `FUZZ_SENDERS` sets the number of sender threads, `BROKER_BIN` the broker binary.
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

#[path = "../../wire/tests/random/mod.rs"]
mod random;

use std::collections::VecDeque;
use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use random::Random;
use wire::generated::api::{self, ApiKey};
use wire::generated::{
    api_versions_request, create_topics_request, fetch_request, metadata_request, produce_request,
    ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    FetchRequest, FetchResponse, MetadataRequest, MetadataResponse, ProduceRequest,
    ProduceResponse, RequestHeader, ResponseHeader,
};
use wire::primitives::{Decodable, Encodable, Message};

/// CI time box of the fuzzing itself (the whole test, with start-up, warm-up and the end
/// checks, stays under a minute: the whole test command has 40 minutes on two cores).
/// `FUZZ_SECONDS` or `FUZZ_FRAMES` run it longer.
const DEFAULT_SECONDS: u64 = 30;
/// Frames to send when `FUZZ_FRAMES` is not set.
const DEFAULT_FRAMES: u64 = 1_000_000;
/// Sender threads (connections open at once) when `FUZZ_SENDERS` is not set.
const DEFAULT_SENDERS: usize = 16;
/// Length of the warm-up run after which the RSS baseline is taken.
const WARMUP: Duration = Duration::from_secs(4);
/// Most frames pipelined on one connection before it is half-closed.
const MAX_FRAMES_PER_SESSION: usize = 200;
/// Unsent bytes a sender keeps queued for its connection.
const OUT_QUEUE_BYTES: usize = 64 * 1024;
/// How long the broker may take to answer and close a connection once it has every frame.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest response frame a fuzz frame can legitimately get (they are all small).
const MAX_RESPONSE_BYTES: usize = 16 << 20;
/// Period of the healthy client's round trips.
const HEALTHY_PERIOD: Duration = Duration::from_millis(100);
/// How long the healthy client waits for any one answer before failing the test.
const HEALTHY_TIMEOUT: Duration = Duration::from_secs(10);
/// RSS growth allowed between the end of the warm-up and the end of the run. Not zero
/// because glibc keeps freed memory in its arenas (the broker raises M_TRIM_THRESHOLD to
/// 256 MiB, so it does not hand it back) and fragmentation differs from run to run; a
/// per-connection or per-request leak shows far above it: a million frames over several
/// hundred thousand connections leak 64 MiB at ~100 bytes each.
const RSS_SLACK_BYTES: u64 = 64 << 20;
/// How long the fd count may take to come back once every fuzz connection is closed.
const FD_SETTLE: Duration = Duration::from_secs(10);
/// Kafka's default `socket.request.max.bytes`, the broker's default frame limit.
const MAX_FRAME_BYTES: i32 = 104_857_600;
/// Topic the healthy client produces to and fetches from.
const HEALTHY_TOPIC: &str = "fuzz-healthy";
/// Topic the fuzzer's real record batches go to.
const TARGET_TOPIC: &str = "fuzz-target";

// ----------------------------------------------------------------------------------------
// Generators

/// One request type of the schemas: its key, versions, and type-erased generator/decoder.
struct ApiGen {
    key: i16,
    name: &'static str,
    min: i16,
    max: i16,
    /// A random valid body at a version of the type's range, `None` if it will not encode.
    generate: fn(&mut StdRng, i16) -> Option<BytesMut>,
    /// Whether a body decodes at a version, as the broker decodes it (trailing bytes allowed).
    decodes: fn(Bytes, i16) -> bool,
}

fn generate<T: Random + Encodable>(rng: &mut StdRng, version: i16) -> Option<BytesMut> {
    let message = T::random(rng, version);
    let mut buf = BytesMut::with_capacity(message.encoded_len(version));
    message.encode(&mut buf, version).ok()?;
    Some(buf)
}

fn decodes<T: Decodable>(mut body: Bytes, version: i16) -> bool {
    T::decode(&mut body, version).is_ok()
}

fn request_generators() -> Vec<ApiGen> {
    let mut table = Vec::new();
    macro_rules! add {
        ($module:ident :: $ty:ident) => {
            type T = wire::generated::$module::$ty;
            let name = stringify!($ty);
            if name.ends_with("Request") && <T as Message>::API_KEY >= 0 {
                table.push(ApiGen {
                    key: <T as Message>::API_KEY,
                    name,
                    min: <T as Message>::MIN_VERSION,
                    max: <T as Message>::MAX_VERSION,
                    generate: generate::<T>,
                    decodes: decodes::<T>,
                });
            }
        };
    }
    macro_rules! each {
        ($module:ident :: $ty:ident) => {{
            add!($module::$ty);
        }};
    }
    for_each_message!(each);
    table.sort_by_key(|gen| gen.key);
    table
}

/// What the broker is predicted to do with a frame.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fate {
    /// Decodes: a response with the frame's correlation id comes back, in order.
    Answered,
    /// Produce with acks=0: decodes and gets no response, and the connection closes when a partition fails
    /// (as Kafka: the only signal an acks=0 client gets); which, the fuzzer cannot tell, so
    /// the session ends after it.
    SilentOrCloses,
    /// Does not decode: the broker closes the connection after answering what came before.
    Closes,
    /// The size prefix lies: the rest of the stream is unpredictable.
    Desync,
}

/// One frame to send, with what should happen to it.
struct Frame {
    bytes: Vec<u8>,
    fate: Fate,
    correlation_id: i32,
    description: String,
}

/// The API ranges the broker advertised.
struct Served {
    ranges: Vec<(i16, i16, i16)>,
}

impl Served {
    fn range(&self, key: i16) -> Option<(i16, i16)> {
        self.ranges
            .iter()
            .find(|(k, _, _)| *k == key)
            .map(|&(_, lo, hi)| (lo, hi))
    }
}

/// The broker's dispatch rules (ARCHITECTURE.md, "Errors and hostile input") applied to a
/// frame body with the same codecs: unknown API key or version, a header or body that does
/// not decode, close; a known but unserved version of ApiVersions, Produce, Fetch or
/// ListOffsets is answered (UNSUPPORTED_VERSION); acks=0 Produce is not answered (and closes
/// the connection when it fails).
fn predict(body: &[u8], table: &[ApiGen], served: &Served) -> Fate {
    if body.len() < 8 {
        return Fate::Closes;
    }
    let key = i16::from_be_bytes([body[0], body[1]]);
    let version = i16::from_be_bytes([body[2], body[3]]);
    let Some((lo, hi)) = served.range(key) else {
        return Fate::Closes;
    };
    let Some(gen) = table.iter().find(|gen| gen.key == key) else {
        return Fate::Closes;
    };
    if version < lo || version > hi {
        if key == ApiKey::ApiVersions as i16 {
            return Fate::Answered;
        }
        let known = version >= gen.min && version <= gen.max;
        let old_format = [ApiKey::Produce, ApiKey::Fetch, ApiKey::ListOffsets]
            .iter()
            .any(|k| *k as i16 == key);
        if !known || !old_format {
            return Fate::Closes;
        }
    }
    let mut rest = Bytes::copy_from_slice(body);
    if RequestHeader::decode(&mut rest, api::request_header_version(key, version)).is_err() {
        return Fate::Closes;
    }
    if key == ApiKey::Produce as i16 {
        return match ProduceRequest::decode(&mut rest, version) {
            Ok(request) if request.acks == 0 => Fate::SilentOrCloses,
            Ok(_) => Fate::Answered,
            Err(_) => Fate::Closes,
        };
    }
    if (gen.decodes)(rest, version) {
        Fate::Answered
    } else {
        Fate::Closes
    }
}

/// Values that break length and count checks.
const I32_SPECIAL: [i32; 8] = [
    -1,
    -2,
    i32::MIN,
    i32::MAX,
    0x7fff_ff00,
    0x0001_0000,
    MAX_FRAME_BYTES,
    0,
];
const I16_SPECIAL: [i16; 5] = [-1, -2, i16::MIN, i16::MAX, 0];
/// Varints: zero (null), huge, the u32 maximum, and an over-long (invalid) encoding.
const VARINT_SPECIAL: [&[u8]; 5] = [
    &[0x00],
    &[0xff, 0xff, 0xff, 0xff, 0x07],
    &[0xff, 0xff, 0xff, 0xff, 0x0f],
    &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
    &[0xff, 0x7f],
];

/// Positions of values that could be the length or count of what follows them.
fn length_candidates(bytes: &[u8], rng: &mut StdRng) -> Option<(usize, usize)> {
    let mut found: Vec<(usize, usize)> = Vec::new();
    for at in 0..bytes.len() {
        let left = bytes.len() - at;
        if left >= 4 {
            let v = i32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
            if v > 0 && (v as usize) <= left - 4 {
                found.push((at, 4));
            }
        }
        if left >= 2 {
            let v = i16::from_be_bytes([bytes[at], bytes[at + 1]]);
            if v > 0 && (v as usize) <= left - 2 {
                found.push((at, 2));
            }
        }
        if bytes[at] > 1 && bytes[at] < 0x80 && usize::from(bytes[at]) <= left {
            found.push((at, 1));
        }
    }
    if found.is_empty() {
        None
    } else {
        Some(found[rng.gen_range(0..found.len())])
    }
}

/// Applies one random mutation; returns its name for the failure report.
fn mutate(bytes: &mut Vec<u8>, rng: &mut StdRng) -> &'static str {
    if bytes.is_empty() {
        bytes.extend_from_slice(&[0xff; 4]);
        return "extend-empty";
    }
    match rng.gen_range(0..8) {
        0 => {
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..bytes.len());
                bytes[at] ^= 1 << rng.gen_range(0..8);
            }
            "flip"
        }
        1..=3 => {
            let Some((at, width)) = length_candidates(bytes, rng) else {
                return "none";
            };
            match width {
                4 => {
                    let old = i32::from_be_bytes([
                        bytes[at],
                        bytes[at + 1],
                        bytes[at + 2],
                        bytes[at + 3],
                    ]);
                    let new = match rng.gen_range(0..3) {
                        0 => I32_SPECIAL[rng.gen_range(0..I32_SPECIAL.len())],
                        1 => old.wrapping_add(1),
                        _ => old.wrapping_sub(1),
                    };
                    bytes[at..at + 4].copy_from_slice(&new.to_be_bytes());
                    "length-i32"
                }
                2 => {
                    let old = i16::from_be_bytes([bytes[at], bytes[at + 1]]);
                    let new = match rng.gen_range(0..3) {
                        0 => I16_SPECIAL[rng.gen_range(0..I16_SPECIAL.len())],
                        1 => old.wrapping_add(1),
                        _ => old.wrapping_sub(1),
                    };
                    bytes[at..at + 2].copy_from_slice(&new.to_be_bytes());
                    "length-i16"
                }
                _ => {
                    match rng.gen_range(0..3) {
                        0 => {
                            let special = VARINT_SPECIAL[rng.gen_range(0..VARINT_SPECIAL.len())];
                            bytes.splice(at..at + 1, special.iter().copied());
                        }
                        1 => bytes[at] = bytes[at].wrapping_add(1),
                        _ => bytes[at] = bytes[at].wrapping_sub(1),
                    }
                    "length-varint"
                }
            }
        }
        4 => {
            bytes.truncate(rng.gen_range(0..bytes.len()));
            "truncate"
        }
        5 => {
            let extra = rng.gen_range(1..64);
            bytes.extend((0..extra).map(|_| rng.gen::<u8>()));
            "extend"
        }
        6 => {
            // Duplicates a slice in place, which often duplicates an array entry.
            let start = rng.gen_range(0..bytes.len());
            let end = rng.gen_range(start..=bytes.len().min(start + 64));
            let copy = bytes[start..end].to_vec();
            bytes.splice(end..end, copy);
            "duplicate"
        }
        _ => {
            let at = rng.gen_range(0..bytes.len());
            bytes[at] = [0x00, 0x7f, 0x80, 0xff][rng.gen_range(0..4)];
            "byte"
        }
    }
}

/// A record batch v2 of `count` uncompressed records with the given values.
fn record_batch(values: &[&[u8]]) -> Vec<u8> {
    let mut records = BytesMut::new();
    for (delta, value) in values.iter().enumerate() {
        let mut record = BytesMut::new();
        record.put_i8(0);
        wire::varint::write_varlong(&mut record, 0);
        wire::varint::write_varint(&mut record, delta as i32);
        wire::varint::write_varint(&mut record, -1);
        wire::varint::write_varint(&mut record, value.len() as i32);
        record.put_slice(value);
        wire::varint::write_unsigned_varint(&mut record, 0);
        wire::varint::write_varint(&mut records, record.len() as i32);
        records.put_slice(&record);
    }
    let mut batch = BytesMut::new();
    batch.put_i64(0);
    batch.put_i32(0); // batch length, patched below
    batch.put_i32(-1);
    batch.put_i8(2);
    batch.put_u32(0); // CRC, patched below
    batch.put_i16(0);
    batch.put_i32(values.len() as i32 - 1);
    batch.put_i64(1_700_000_000_000);
    batch.put_i64(1_700_000_000_000);
    batch.put_i64(-1);
    batch.put_i16(-1);
    batch.put_i32(-1);
    batch.put_i32(values.len() as i32);
    batch.put_slice(&records);
    let mut batch = batch.to_vec();
    let length = (batch.len() - 12) as i32;
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    fix_crc(&mut batch);
    batch
}

fn fix_crc(batch: &mut [u8]) {
    if let Some(crc) = wire::record_batch::compute_crc(batch) {
        batch[17..21].copy_from_slice(&crc.to_be_bytes());
    }
}

/// A Produce body for the existing target topic, with a real (possibly corrupted) batch.
fn target_produce(rng: &mut StdRng, version: i16) -> Option<BytesMut> {
    let values: Vec<Vec<u8>> = (0..rng.gen_range(1..4))
        .map(|_| (0..rng.gen_range(0..32)).map(|_| rng.gen()).collect())
        .collect();
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    let mut batch = record_batch(&refs);
    if rng.gen_ratio(1, 2) {
        for _ in 0..rng.gen_range(1..3) {
            mutate(&mut batch, rng);
        }
        if rng.gen_ratio(1, 2) && batch.len() >= wire::record_batch::BATCH_HEADER_BYTES {
            // A correct CRC over bad contents reaches the checks behind the CRC.
            fix_crc(&mut batch);
        }
    }
    let batch = Bytes::from(batch);
    let partitions = (0..rng.gen_range(1..4))
        .map(|_| produce_request::PartitionProduceData {
            index: rng.gen_range(-1..3),
            records: Some(batch.clone()),
            ..Default::default()
        })
        .collect();
    let request = ProduceRequest {
        transactional_id: None,
        acks: [-1, 1, 0, 2][rng.gen_range(0..4)],
        timeout_ms: 5000,
        topic_data: vec![produce_request::TopicProduceData {
            name: TARGET_TOPIC.into(),
            partition_data: partitions,
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut buf = BytesMut::new();
    request.encode(&mut buf, version).ok()?;
    Some(buf)
}

/// Builds one fuzz frame (with its 4-byte size prefix) and its predicted fate.
fn fuzz_frame(rng: &mut StdRng, table: &[ApiGen], served: &Served, correlation_id: i32) -> Frame {
    loop {
        let served_gens: Vec<&ApiGen> = table
            .iter()
            .filter(|gen| served.range(gen.key).is_some())
            .collect();
        let choice = rng.gen_range(0..100);
        let (gen, key, version) = if choice < 80 {
            let gen = served_gens[rng.gen_range(0..served_gens.len())];
            let (lo, hi) = served.range(gen.key).unwrap();
            (gen, gen.key, rng.gen_range(lo..=hi))
        } else if choice < 88 {
            // A served API at a version the broker does not serve (Kafka's or nobody's).
            let gen = served_gens[rng.gen_range(0..served_gens.len())];
            let (lo, hi) = served.range(gen.key).unwrap();
            let version = match rng.gen_range(0..3) {
                0 if gen.min < lo => rng.gen_range(gen.min..lo),
                1 => hi + rng.gen_range(1..4),
                _ => [-1, i16::MAX, i16::MIN][rng.gen_range(0..3)],
            };
            (gen, gen.key, version)
        } else if choice < 96 {
            let gen = &table[rng.gen_range(0..table.len())];
            (gen, gen.key, rng.gen_range(gen.min..=gen.max))
        } else {
            let gen = &table[rng.gen_range(0..table.len())];
            let key = [-1, i16::MIN, i16::MAX, rng.gen_range(100..1000)][rng.gen_range(0..4)];
            (gen, key, rng.gen_range(-1..20))
        };
        let body_version = version.clamp(gen.min, gen.max);
        let targeted = key == ApiKey::Produce as i16 && rng.gen_ratio(1, 3);
        let body = if targeted {
            target_produce(rng, body_version)
        } else {
            (gen.generate)(rng, body_version)
        };
        let Some(body) = body else { continue };
        let header_version = api::request_header_version(key, version);
        let mut header = RequestHeader::random(rng, header_version);
        header.request_api_key = key;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        let mut bytes = BytesMut::new();
        if header.encode(&mut bytes, header_version).is_err() {
            continue;
        }
        bytes.extend_from_slice(&body);
        let mut bytes = bytes.to_vec();
        let mut mutations = Vec::new();
        if rng.gen_ratio(6, 10) {
            for _ in 0..rng.gen_range(1..4) {
                mutations.push(mutate(&mut bytes, rng));
            }
        }
        let mut fate = predict(&bytes, table, served);
        let final_key = bytes.get(..2).map(|k| i16::from_be_bytes([k[0], k[1]]));
        let topic_admin = [
            ApiKey::CreateTopics as i16,
            ApiKey::DeleteTopics as i16,
            ApiKey::FindCoordinator as i16,
            ApiKey::CreatePartitions as i16,
            ApiKey::DeleteRecords as i16,
        ];
        if fate != Fate::Closes && final_key.is_some_and(|k| topic_admin.contains(&k)) {
            continue; // never create or delete topics (see the module comment)
        }
        let mut size = bytes.len() as i32;
        if rng.gen_ratio(1, 25) {
            let (lie, closes) = match rng.gen_range(0..5) {
                0 => (-rng.gen_range(1..=i32::MAX), true),
                1 => (MAX_FRAME_BYTES + rng.gen_range(1..1000), true),
                2 => (size + rng.gen_range(1..100), false),
                3 => (rng.gen_range(0..=size), false),
                _ => (rng.gen_range(size..=MAX_FRAME_BYTES), false),
            };
            size = lie;
            fate = if closes { Fate::Closes } else { Fate::Desync };
            mutations.push("size-prefix");
        }
        let mut frame = Vec::with_capacity(4 + bytes.len());
        frame.extend_from_slice(&size.to_be_bytes());
        frame.extend_from_slice(&bytes);
        let description = format!(
            "{}{} key {key} v{version} (size {size}, {} bytes, mutations {mutations:?}, predicted {fate:?}): {:02x?}",
            gen.name,
            if targeted { " [target batch]" } else { "" },
            bytes.len(),
            &bytes[..bytes.len().min(48)]
        );
        let correlation_id = bytes
            .get(4..8)
            .map_or(0, |c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]));
        return Frame {
            bytes: frame,
            fate,
            correlation_id,
            description,
        };
    }
}

// ----------------------------------------------------------------------------------------
// Sender threads

#[derive(Default)]
struct Counters {
    frames: AtomicU64,
    bytes: AtomicU64,
    responses: AtomicU64,
    sessions: AtomicU64,
    predicted_closes: AtomicU64,
    resets: AtomicU64,
    connect_errors: AtomicU64,
}

struct Shared {
    addr: String,
    table: Vec<ApiGen>,
    served: Served,
    stop: AtomicBool,
    counters: Counters,
    failures: Mutex<Vec<String>>,
}

impl Shared {
    fn fail(&self, message: String) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() < 20 {
            failures.push(message);
        }
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn sender(shared: Arc<Shared>, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    while !shared.stop.load(Ordering::Relaxed) {
        if let Err(message) = session(&shared, &mut rng) {
            shared.fail(message);
        }
    }
}

/// Parses whole response frames in `input`; checks each against the expected queue.
fn take_responses(
    input: &mut Vec<u8>,
    expected: &mut VecDeque<(i32, String)>,
    predictable: bool,
    counters: &Counters,
) -> Result<(), String> {
    let mut at = 0;
    while input.len() - at >= 4 {
        let size = i32::from_be_bytes([input[at], input[at + 1], input[at + 2], input[at + 3]]);
        if size < 4 || size as usize > MAX_RESPONSE_BYTES {
            return Err(format!("response frame of size {size}"));
        }
        let end = at + 4 + size as usize;
        if input.len() < end {
            break;
        }
        let id = i32::from_be_bytes([input[at + 4], input[at + 5], input[at + 6], input[at + 7]]);
        counters.responses.fetch_add(1, Ordering::Relaxed);
        if predictable {
            match expected.pop_front() {
                Some((want, _)) if want == id => {}
                Some((want, description)) => {
                    return Err(format!(
                        "response with correlation id {id} where {want} was due, for {description}"
                    ))
                }
                None => return Err(format!("unexpected response with correlation id {id}")),
            }
        }
        at = end;
    }
    input.drain(..at);
    Ok(())
}

/// One connection: pipeline frames, half-close, read until the broker closes.
fn session(shared: &Shared, rng: &mut StdRng) -> Result<(), String> {
    let counters = &shared.counters;
    let mut stream = match TcpStream::connect(&shared.addr) {
        Ok(stream) => stream,
        Err(_) => {
            // The main thread notices a dead broker; a refused connect is retried.
            counters.connect_errors.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(10));
            return Ok(());
        }
    };
    counters.sessions.fetch_add(1, Ordering::Relaxed);
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    stream.set_nonblocking(true).map_err(|e| e.to_string())?;
    let planned = rng.gen_range(1..=MAX_FRAMES_PER_SESSION);
    let mut generated = 0;
    let mut out: Vec<u8> = Vec::with_capacity(OUT_QUEUE_BYTES * 2);
    let mut out_pos = 0usize;
    // Absolute stream offsets where queued frames end, to count frames fully written.
    let mut frame_ends: VecDeque<u64> = VecDeque::new();
    let mut written: u64 = 0;
    let mut queued: u64 = 0;
    let mut expected: VecDeque<(i32, String)> = VecDeque::new();
    let mut recent: VecDeque<String> = VecDeque::new();
    let mut predictable = true;
    let mut ending = false;
    let mut half_closed: Option<Instant> = None;
    let mut input: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let recent_frames =
        |recent: &VecDeque<String>| recent.iter().cloned().collect::<Vec<_>>().join("\n    ");
    loop {
        while !ending && out.len() - out_pos < OUT_QUEUE_BYTES {
            if generated >= planned || shared.stop.load(Ordering::Relaxed) {
                ending = true;
                break;
            }
            let frame = fuzz_frame(rng, &shared.table, &shared.served, generated as i32);
            generated += 1;
            match frame.fate {
                Fate::Answered => {
                    expected.push_back((frame.correlation_id, frame.description.clone()))
                }
                Fate::SilentOrCloses => ending = true,
                Fate::Closes => {
                    counters.predicted_closes.fetch_add(1, Ordering::Relaxed);
                    ending = true;
                }
                Fate::Desync => {
                    predictable = false;
                    ending = true;
                }
            }
            if recent.len() == 4 {
                recent.pop_front();
            }
            recent.push_back(frame.description);
            out.extend_from_slice(&frame.bytes);
            queued += frame.bytes.len() as u64;
            frame_ends.push_back(queued);
        }
        if ending && out_pos == out.len() && half_closed.is_none() {
            let _ = stream.shutdown(Shutdown::Write);
            half_closed = Some(Instant::now());
        }
        let mut events = libc::POLLIN;
        if out_pos < out.len() {
            events |= libc::POLLOUT;
        }
        let mut pollfd = libc::pollfd {
            fd: stream.as_raw_fd(),
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd for a socket this function owns.
        unsafe { libc::poll(&mut pollfd, 1, 100) };

        let mut closed = false;
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => {
                    input.extend_from_slice(&chunk[..n]);
                    take_responses(&mut input, &mut expected, predictable, counters).map_err(
                        |e| format!("{e}; last frames sent:\n    {}", recent_frames(&recent)),
                    )?;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    // Reset: the broker closed with our bytes unread (a refused frame's body).
                    counters.resets.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
            }
        }
        if closed {
            if predictable {
                if let Some((id, description)) = expected.front() {
                    return Err(format!(
                        "the broker closed the connection without answering correlation id {id}: {description}; \
                         last frames sent:\n    {}",
                        recent_frames(&recent)
                    ));
                }
            }
            return Ok(());
        }
        if out_pos < out.len() {
            match stream.write(&out[out_pos..]) {
                Ok(n) => {
                    out_pos += n;
                    written += n as u64;
                    while frame_ends.front().is_some_and(|&end| end <= written) {
                        frame_ends.pop_front();
                        counters.frames.fetch_add(1, Ordering::Relaxed);
                    }
                    counters.bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(_) => {
                    counters.resets.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
            }
            if out_pos >= OUT_QUEUE_BYTES {
                out.drain(..out_pos);
                out_pos = 0;
            }
        }
        if let Some(since) = half_closed {
            if since.elapsed() > CLOSE_TIMEOUT {
                return Err(format!(
                    "hang: the broker neither answered nor closed the connection {CLOSE_TIMEOUT:?} after its last \
                     frame ({} answers outstanding); last frames sent:\n    {}",
                    expected.len(),
                    recent_frames(&recent)
                ));
            }
        }
    }
}

// ----------------------------------------------------------------------------------------
// A plain client for set-up and for the healthy client

struct Client {
    stream: TcpStream,
    correlation_id: i32,
}

impl Client {
    fn connect(addr: &str) -> Result<Client, String> {
        let stream = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
        stream
            .set_read_timeout(Some(HEALTHY_TIMEOUT))
            .map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Client {
            stream,
            correlation_id: 0,
        })
    }

    fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, String> {
        self.correlation_id += 1;
        let header = RequestHeader {
            request_api_key: key as i16,
            request_api_version: version,
            correlation_id: self.correlation_id,
            client_id: Some("fuzz-healthy".into()),
            unknown_tagged_fields: Vec::new(),
        };
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header
            .encode(&mut buf, api::request_header_version(key as i16, version))
            .map_err(|e| e.to_string())?;
        request
            .encode(&mut buf, version)
            .map_err(|e| e.to_string())?;
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        let what = format!("{key:?} v{version}");
        self.stream
            .write_all(&buf)
            .map_err(|e| format!("{what}: write: {e}"))?;
        let mut prefix = [0u8; 4];
        self.stream
            .read_exact(&mut prefix)
            .map_err(|e| format!("{what}: no response: {e}"))?;
        let size = i32::from_be_bytes(prefix);
        if !(4..=MAX_RESPONSE_BYTES as i32).contains(&size) {
            return Err(format!("{what}: response size {size}"));
        }
        let mut body = vec![0u8; size as usize];
        self.stream
            .read_exact(&mut body)
            .map_err(|e| format!("{what}: truncated response: {e}"))?;
        let mut body = Bytes::from(body);
        let header =
            ResponseHeader::decode(&mut body, api::response_header_version(key as i16, version))
                .map_err(|e| format!("{what}: response header: {e}"))?;
        if header.correlation_id != self.correlation_id {
            return Err(format!(
                "{what}: correlation id {} for {}",
                header.correlation_id, self.correlation_id
            ));
        }
        Resp::decode(&mut body, version).map_err(|e| format!("{what}: response body: {e}"))
    }
}

fn served_ranges(client: &mut Client) -> Result<Served, String> {
    let response: ApiVersionsResponse =
        client.call(ApiKey::ApiVersions, 3, &api_versions_request_v3())?;
    if response.error_code != 0 {
        return Err(format!("ApiVersions error {}", response.error_code));
    }
    Ok(Served {
        ranges: response
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect(),
    })
}

fn api_versions_request_v3() -> ApiVersionsRequest {
    ApiVersionsRequest {
        client_software_name: "fuzz-frames".into(),
        client_software_version: "1".into(),
        ..api_versions_request::ApiVersionsRequest::default()
    }
}

fn create_topic(client: &mut Client, name: &str, partitions: i32) -> Result<(), String> {
    let request = CreateTopicsRequest {
        topics: vec![create_topics_request::CreatableTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: 1,
            ..Default::default()
        }],
        timeout_ms: 10_000,
        validate_only: false,
        ..Default::default()
    };
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &request)?;
    match response.topics.first() {
        Some(topic) if topic.error_code == 0 => Ok(()),
        other => Err(format!("CreateTopics {name}: {other:?}")),
    }
}

/// One healthy round: ApiVersions, Metadata, Produce one record, Fetch it back.
fn healthy_round(
    client: &mut Client,
    round: u64,
    next_offset: &mut [i64; 2],
) -> Result<(), String> {
    let versions: ApiVersionsResponse =
        client.call(ApiKey::ApiVersions, 3, &api_versions_request_v3())?;
    if versions.error_code != 0
        || !versions
            .api_keys
            .iter()
            .any(|k| k.api_key == ApiKey::Produce as i16)
    {
        return Err(format!("ApiVersions answered {versions:?}"));
    }
    let metadata_request = MetadataRequest {
        topics: Some(vec![metadata_request::MetadataRequestTopic {
            name: Some(HEALTHY_TOPIC.into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let metadata: MetadataResponse = client.call(ApiKey::Metadata, 12, &metadata_request)?;
    match metadata.topics.first() {
        Some(topic) if topic.error_code == 0 && topic.partitions.len() == 2 => {}
        other => return Err(format!("Metadata answered {other:?}")),
    }
    let partition = (round % 2) as usize;
    let value = format!("healthy-{round}");
    let produce = ProduceRequest {
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![produce_request::TopicProduceData {
            name: HEALTHY_TOPIC.into(),
            partition_data: vec![produce_request::PartitionProduceData {
                index: partition as i32,
                records: Some(Bytes::from(record_batch(&[value.as_bytes()]))),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let produced: ProduceResponse = client.call(ApiKey::Produce, 9, &produce)?;
    let result = produced
        .responses
        .first()
        .and_then(|t| t.partition_responses.first());
    match result {
        Some(p) if p.error_code == 0 && p.base_offset == next_offset[partition] => {}
        other => {
            return Err(format!(
                "Produce to partition {partition} (offset {} due) answered {other:?}",
                next_offset[partition]
            ))
        }
    }
    let offset = next_offset[partition];
    next_offset[partition] += 1;
    let fetch = FetchRequest {
        replica_id: -1,
        max_wait_ms: 500,
        min_bytes: 1,
        max_bytes: 1 << 20,
        topics: vec![fetch_request::FetchTopic {
            topic: HEALTHY_TOPIC.into(),
            partitions: vec![fetch_request::FetchPartition {
                partition: partition as i32,
                current_leader_epoch: -1,
                fetch_offset: offset,
                last_fetched_epoch: -1,
                log_start_offset: -1,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let fetched: FetchResponse = client.call(ApiKey::Fetch, 12, &fetch)?;
    let data = fetched.responses.first().and_then(|t| t.partitions.first());
    let Some(data) = data.filter(|d| d.error_code == 0) else {
        return Err(format!(
            "Fetch of partition {partition} offset {offset} answered {data:?}"
        ));
    };
    let records = data.records.clone().unwrap_or_default();
    let batch = wire::record_batch::records(&records)
        .map_err(|e| format!("Fetch returned a bad batch: {e}"))?;
    let found = batch
        .iter()
        .filter_map(Result::ok)
        .any(|r| r.offset == offset && r.value == Some(value.as_bytes()));
    if !found {
        return Err(format!(
            "Fetch of partition {partition} offset {offset} did not return {value:?}"
        ));
    }
    Ok(())
}

/// Runs healthy rounds until told to stop; returns (rounds, slowest round).
fn healthy_client(shared: Arc<Shared>, done: Arc<AtomicBool>) -> (u64, Duration) {
    let mut slowest = Duration::ZERO;
    let mut client = match Client::connect(&shared.addr) {
        Ok(client) => client,
        Err(e) => {
            shared.fail(format!("healthy client: {e}"));
            return (0, slowest);
        }
    };
    let mut next_offset = [0i64; 2];
    let mut round = 0;
    while !done.load(Ordering::SeqCst) {
        let start = Instant::now();
        if let Err(e) = healthy_round(&mut client, round, &mut next_offset) {
            shared.fail(format!("healthy client, round {round}: {e}"));
            break;
        }
        round += 1;
        let took = start.elapsed();
        slowest = slowest.max(took);
        std::thread::sleep(HEALTHY_PERIOD.saturating_sub(took));
    }
    (round, slowest)
}

// ----------------------------------------------------------------------------------------
// The broker process

struct Broker {
    child: Child,
    log: PathBuf,
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Broker {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn rss_bytes(&self) -> u64 {
        self.status_kib("VmRSS:") * 1024
    }

    /// A `/proc/<pid>/status` line in KiB (RSS figures are given in kB there).
    fn status_kib(&self, key: &str) -> u64 {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        status
            .lines()
            .find_map(|line| line.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    }

    fn fds(&self) -> usize {
        fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, |dir| dir.count())
    }

    fn log_tail(&self, lines: usize) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        // Errors and panics anywhere in the log first: the tail is mostly refused frames.
        let errors: Vec<&str> = all
            .iter()
            .copied()
            .filter(|line| line.contains("ERROR") || line.contains("panicked"))
            .take(20)
            .collect();
        format!(
            "{}\n--- tail ---\n{}",
            errors.join("\n"),
            all[all.len().saturating_sub(lines)..].join("\n")
        )
    }
}

fn broker_binary() -> PathBuf {
    std::env::var_os("BROKER_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_broker")),
        PathBuf::from,
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_broker(dir: &Path, port: u16) -> Broker {
    let log = dir.join("broker.log");
    let data = dir.join("data");
    let child = Command::new(broker_binary())
        .arg("start")
        .args([
            "--override",
            &format!("listeners=PLAINTEXT://127.0.0.1:{port}"),
        ])
        .args(["--override", &format!("log.dirs={}", data.display())])
        .args(["--override", "num.shards=2"])
        .args(["--override", "auto.create.topics.enable=false"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(&log).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", broker_binary().display()));
    let mut broker = Broker { child, log };
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = broker.child.try_wait() {
            panic!(
                "broker exited at start-up ({status}):\n{}",
                broker.log_tail(30)
            );
        }
        assert!(
            Instant::now() < deadline,
            "broker did not listen within 30 s:\n{}",
            broker.log_tail(30)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    broker
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number"))
    })
}

/// Runs `senders` fuzz threads until `frames` more frames are sent, `limit` passes, or a
/// failure; returns the frames sent.
fn fuzz_phase(
    shared: &Arc<Shared>,
    broker: &mut Broker,
    senders: usize,
    seed: u64,
    frames: u64,
    limit: Duration,
) -> u64 {
    shared.stop.store(false, Ordering::SeqCst);
    let start_frames = shared.counters.frames.load(Ordering::SeqCst);
    let start = Instant::now();
    let threads: Vec<_> = (0..senders)
        .map(|i| {
            let shared = shared.clone();
            std::thread::spawn(move || sender(shared, seed.wrapping_add(i as u64)))
        })
        .collect();
    let mut last_report = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let sent = shared.counters.frames.load(Ordering::Relaxed) - start_frames;
        if let Ok(Some(status)) = broker.child.try_wait() {
            shared.fail(format!(
                "the broker process exited during fuzzing: {status}"
            ));
        }
        if shared.stop.load(Ordering::SeqCst) || sent >= frames || start.elapsed() >= limit {
            break;
        }
        if last_report.elapsed() >= Duration::from_secs(10) {
            last_report = Instant::now();
            println!(
                "  {:>5.1} s: {sent} frames ({:.0}/s), RSS {} MiB (anon {} MiB, file {} MiB), {} fds",
                start.elapsed().as_secs_f64(),
                sent as f64 / start.elapsed().as_secs_f64(),
                broker.rss_bytes() >> 20,
                broker.status_kib("RssAnon:") >> 10,
                broker.status_kib("RssFile:") >> 10,
                broker.fds()
            );
        }
    }
    shared.stop.store(true, Ordering::SeqCst);
    for thread in threads {
        thread.join().expect("sender thread panicked");
    }
    shared.counters.frames.load(Ordering::SeqCst) - start_frames
}

/// Polls until the broker's fd count is at most `baseline`; returns the last count.
fn settle_fds(broker: &Broker, baseline: usize) -> usize {
    let deadline = Instant::now() + FD_SETTLE;
    loop {
        let fds = broker.fds();
        if fds <= baseline || Instant::now() >= deadline {
            return fds;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn fuzz_frames() {
    let seconds = env_u64("FUZZ_SECONDS");
    let frames = env_u64("FUZZ_FRAMES");
    let limit = match (seconds, frames) {
        (Some(s), _) => Duration::from_secs(s),
        (None, Some(_)) => Duration::MAX,
        (None, None) => Duration::from_secs(DEFAULT_SECONDS),
    };
    let frames = frames.unwrap_or(DEFAULT_FRAMES);
    let senders = env_u64("FUZZ_SENDERS").map_or(DEFAULT_SENDERS, |n| n as usize);
    let seed = env_u64("FUZZ_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    println!("fuzz_frames: seed {seed} (FUZZ_SEED), {senders} senders, up to {frames} frames in {limit:?}");

    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut broker = start_broker(dir.path(), port);
    let addr = format!("127.0.0.1:{port}");

    let mut admin = Client::connect(&addr).unwrap();
    let served = served_ranges(&mut admin).unwrap();
    create_topic(&mut admin, HEALTHY_TOPIC, 2).unwrap();
    create_topic(&mut admin, TARGET_TOPIC, 2).unwrap();
    drop(admin);
    let table = request_generators();
    assert!(
        table.len() > 70,
        "generators for {} request types",
        table.len()
    );

    let shared = Arc::new(Shared {
        addr,
        table,
        served,
        stop: AtomicBool::new(false),
        counters: Counters::default(),
        failures: Mutex::new(Vec::new()),
    });
    let healthy_done = Arc::new(AtomicBool::new(false));
    let healthy = {
        let (shared, done) = (shared.clone(), healthy_done.clone());
        std::thread::spawn(move || healthy_client(shared, done))
    };
    std::thread::sleep(Duration::from_millis(500));
    let fds_before = settle_fds(&broker, 0);

    let check = |broker: &Broker, shared: &Shared, stage: &str| {
        let failures = shared
            .failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        assert!(
            failures.is_empty(),
            "{stage}: {} failure(s):\n{}\n--- broker log (tail) ---\n{}",
            failures.len(),
            failures.join("\n\n"),
            broker.log_tail(40)
        );
    };

    let warmup_frames = fuzz_phase(&shared, &mut broker, senders, seed, u64::MAX, WARMUP);
    check(&broker, &shared, "warm-up");
    let fds_after_warmup = settle_fds(&broker, fds_before);
    let rss_baseline = broker.rss_bytes();
    println!(
        "warm-up: {warmup_frames} frames; fds {fds_before} before, {fds_after_warmup} after; RSS baseline {} MiB",
        rss_baseline >> 20
    );

    let start = Instant::now();
    let sent = fuzz_phase(
        &shared,
        &mut broker,
        senders,
        seed ^ 0x5eed,
        frames.saturating_sub(warmup_frames),
        limit,
    );
    let elapsed = start.elapsed();
    check(&broker, &shared, "fuzzing");
    let fds_end = settle_fds(&broker, fds_before);
    let rss_end = broker.rss_bytes();
    let peak = fs::read_to_string(format!("/proc/{}/status", broker.pid()))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .map(|l| l.trim_start_matches("VmHWM:").trim().to_string())
        .unwrap_or_default();

    healthy_done.store(true, Ordering::SeqCst);
    let (rounds, slowest) = healthy.join().expect("healthy client panicked");
    check(&broker, &shared, "healthy client");

    let c = &shared.counters;
    let total = warmup_frames + sent;
    println!(
        "fuzz_frames: {total} frames ({sent} after warm-up in {:.1} s, {:.0} frames/s), {} MiB, {} connections, \
         {} responses, {} predicted closes, {} resets, {} refused connects",
        elapsed.as_secs_f64(),
        sent as f64 / elapsed.as_secs_f64(),
        c.bytes.load(Ordering::SeqCst) >> 20,
        c.sessions.load(Ordering::SeqCst),
        c.responses.load(Ordering::SeqCst),
        c.predicted_closes.load(Ordering::SeqCst),
        c.resets.load(Ordering::SeqCst),
        c.connect_errors.load(Ordering::SeqCst),
    );
    println!(
        "fuzz_frames: RSS {} MiB after warm-up, {} MiB at the end (peak {peak}); fds {fds_before} before, \
         {fds_end} at the end; healthy client: {rounds} rounds, slowest {slowest:?}",
        rss_baseline >> 20,
        rss_end >> 20
    );

    assert!(
        matches!(broker.child.try_wait(), Ok(None)),
        "the broker exited:\n{}",
        broker.log_tail(40)
    );
    assert!(rounds > 0, "the healthy client completed no round");
    assert!(
        fds_end <= fds_before,
        "fd leak: {fds_end} fds {FD_SETTLE:?} after the last fuzz connection closed, {fds_before} before fuzzing"
    );
    assert!(
        rss_end <= rss_baseline + RSS_SLACK_BYTES,
        "RSS grew from {} MiB after warm-up to {} MiB (slack {} MiB)",
        rss_baseline >> 20,
        rss_end >> 20,
        RSS_SLACK_BYTES >> 20
    );

    // SAFETY: sends SIGTERM to the child this test started and still owns.
    unsafe { libc::kill(broker.pid() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = broker.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the broker did not stop within 30 s of SIGTERM:\n{}",
            broker.log_tail(40)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = fs::read_to_string(&broker.log).unwrap_or_default();
    assert!(
        status.success(),
        "the broker exited with {status} after SIGTERM:\n{}",
        broker.log_tail(40)
    );
    assert!(
        !log.contains("panicked"),
        "the broker panicked:\n{}",
        broker.log_tail(40)
    );
    let read_by_broker: u64 = log
        .lines()
        .filter_map(|line| line.split("requests=").nth(1))
        .filter_map(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    println!(
        "fuzz_frames: the broker read {read_by_broker} frames (all connections, healthy client included); exit {status}"
    );
}

//! The fuzz targets on the stable toolchain, bounded so the workspace's test command runs
//! them: every corpus file (`../fuzz/corpus/*/*`, from real clients) through every target,
//! a valid encoding of every request and response type at every version (from the random
//! message generator `wire` tests with), then seeded mutations of those per target.
//!
//! `FUZZ_INPUTS=10000000` runs that many mutations per target instead of the default
//! (which keeps the whole test near ten seconds on two busy cores); `FUZZ_SEED` changes the
//! seed. A failing input is written to `target/fuzz-failures/` and named in the panic, to be
//! replayed with `cargo +nightly fuzz run <target> <file>` or added to the corpus.
#![allow(clippy::unwrap_used)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use bytes::BytesMut;
use fuzzing::mutate::{mutate, Rng};
use rand::SeedableRng;
use wire::generated::api::{self, ApiKey};
use wire::generated::*;
use wire::primitives::{Encodable, Message};

#[path = "../../wire/tests/random/mod.rs"]
mod random;
use random::Random;

#[global_allocator]
static ALLOC: fuzzing::alloc::Counting = fuzzing::alloc::Counting;

/// Mutations per target by default: sized by each target's cost (about a second each, and
/// four for record_batch's codecs, on one core) so that the five take about ten seconds
/// together in release on two cores shared with other work.
fn default_inputs(target: &str) -> u64 {
    match target {
        "record_batch" => 200_000,
        "request_header" | "sasl" => 500_000,
        _ => 1_000_000,
    }
}

/// Largest mutated input: the corpus's largest frames are a few KiB; room to grow.
const MAX_LEN: usize = 64 << 10;

fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

/// The files of one target's corpus directory, sorted for a stable order.
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let Ok(dir) = std::fs::read_dir(corpus_root().join(target)) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = dir.map(|entry| entry.unwrap().path()).collect();
    paths.sort();
    paths
        .iter()
        .filter(|path| path.is_file())
        .map(|path| std::fs::read(path).unwrap())
        .collect()
}

fn target(name: &str) -> fn(&[u8]) {
    fuzzing::TARGETS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
        .unwrap()
}

fn encode<T: Encodable>(message: &T, version: i16) -> Vec<u8> {
    let mut out = BytesMut::new();
    message.encode(&mut out, version).unwrap();
    out.to_vec()
}

/// Seeds of `T` at every version: `request_body` inputs (key and version prefix, body) and,
/// for requests, whole frames (size prefix, header, body).
fn seeds_of<T: Random + Encodable + Message>(
    rng: &mut rand::rngs::StdRng,
    response: bool,
    bodies: &mut Vec<Vec<u8>>,
    frames: &mut Vec<Vec<u8>>,
) {
    for version in T::MIN_VERSION..=T::MAX_VERSION {
        let body = encode(&T::random(rng, version), version);
        let key = if response {
            T::API_KEY | i16::MIN
        } else {
            T::API_KEY
        };
        let mut prefixed = key.to_be_bytes().to_vec();
        prefixed.extend_from_slice(&version.to_be_bytes());
        prefixed.extend_from_slice(&body);
        bodies.push(prefixed);
        if !response {
            let header = RequestHeader {
                request_api_key: T::API_KEY,
                request_api_version: version,
                correlation_id: 7,
                client_id: Some("fuzz".to_owned()),
                ..Default::default()
            };
            let mut request = encode(&header, api::request_header_version(T::API_KEY, version));
            request.extend_from_slice(&body);
            let mut frame = u32::try_from(request.len()).unwrap().to_be_bytes().to_vec();
            frame.extend_from_slice(&request);
            frames.push(frame);
        }
    }
}

/// Generated seeds: (request_body inputs, frame inputs).
fn generated() -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    macro_rules! apis {
        ($($key:ident => $request:ident, $response:ident;)*) => {{
            let mut rng = rand::rngs::StdRng::seed_from_u64(23);
            let (mut bodies, mut frames) = (Vec::new(), Vec::new());
            $(
                seeds_of::<$request>(&mut rng, false, &mut bodies, &mut frames);
                seeds_of::<$response>(&mut rng, true, &mut bodies, &mut frames);
            )*
            (bodies, frames)
        }};
    }
    include!("../src/api_list.in")
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let mut seeds = corpus(target);
    let (bodies, frames) = generated();
    match target {
        "request_body" => seeds.extend(bodies),
        "frame" => seeds.extend(frames),
        "request_header" => seeds.extend(frames.iter().map(|frame| frame[4..].to_vec())),
        _ => {}
    }
    if seeds.is_empty() {
        seeds.push(Vec::new());
    }
    seeds
}

/// Runs `input` through `name`; on a panic saves the input and fails with its path.
fn run_one(name: &str, f: fn(&[u8]), input: &[u8]) {
    if catch_unwind(AssertUnwindSafe(|| f(input))).is_ok() {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-failures");
    std::fs::create_dir_all(&dir).unwrap();
    let hash = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    });
    let path = dir.join(format!("{name}-{hash:016x}"));
    std::fs::write(&path, input).unwrap();
    panic!(
        "fuzz target {name} failed on {} bytes, saved to {}",
        input.len(),
        path.display()
    );
}

fn fuzz(name: &str) {
    assert!(
        fuzzing::alloc::installed(),
        "the counting allocator is not installed: allocation bounds would pass vacuously"
    );
    let f = target(name);
    // Every corpus file through this target, whichever target it was captured for.
    for (other, _) in fuzzing::TARGETS {
        for input in corpus(other) {
            run_one(name, f, &input);
        }
    }
    let seeds = seeds(name);
    for seed in &seeds {
        run_one(name, f, seed);
    }
    let inputs = std::env::var("FUZZ_INPUTS")
        .ok()
        .map_or_else(|| default_inputs(name), |n| n.parse().unwrap());
    let seed = std::env::var("FUZZ_SEED")
        .ok()
        .map_or(23, |s| s.parse::<u64>().unwrap());
    let mut rng = Rng::new(seed ^ name.len() as u64 ^ u64::from(name.as_bytes()[0]) << 8);
    let mut input = Vec::new();
    let started = std::time::Instant::now();
    for i in 0..inputs {
        // Walks of up to eight mutation rounds from a seed, so mutations compound.
        if i % 8 == 0 || rng.below(4) == 0 {
            input.clone_from(&seeds[rng.below(seeds.len())]);
        }
        let other = &seeds[rng.below(seeds.len())];
        mutate(&mut rng, &mut input, other, MAX_LEN);
        run_one(name, f, &input);
    }
    eprintln!(
        "{name}: {} seeds, {inputs} mutations in {:.1} s",
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn frame() {
    fuzz("frame");
}

#[test]
fn request_header() {
    fuzz("request_header");
}

#[test]
fn request_body() {
    fuzz("request_body");
}

#[test]
fn record_batch() {
    fuzz("record_batch");
}

#[test]
fn sasl() {
    fuzz("sasl");
}

#[test]
fn every_api_has_a_decoder_in_the_table() {
    assert!(fuzzing::all_apis_covered());
    assert!(ApiKey::ALL.len() >= 88);
}

#[test]
fn genuine_sasl_exchanges_complete_unedited() {
    // Mechanism in bits 0-1, genuine mode in bit 2, no edits: each must authenticate (the
    // target asserts it), so the genuine client cannot silently rot into one that fails early.
    for mechanism in 0u8..4 {
        fuzzing::sasl(&[4 | mechanism]);
    }
}

#[test]
fn a_panicking_or_oversized_input_is_caught() {
    // The allocation bound is live: an allocation far above `decode_bound` inside a
    // measurement shows up in its peak.
    let (_, peak) = fuzzing::alloc::measure(|| std::hint::black_box(vec![1u8; 10 << 20]));
    assert!(peak > fuzzing::decode_bound(16));
    // A panic inside a target fails `run_one`.
    let caught = catch_unwind(|| run_one("always_panics", |_| panic!("injected"), b"x"));
    assert!(caught.is_err());
}

#[test]
fn lz4_frames_of_the_largest_block_size_fit_the_record_batch_bound() {
    use std::io::Write as _;
    use wire::record_batch::{BatchBuilder, Compression};
    // A batch whose LZ4 frame declares 4 MiB blocks (the Java client writes 64 KiB ones):
    // the decoder sizes its buffers by the declaration, which `LZ4_DECODER_BYTES` covers.
    let batch = BatchBuilder::new(Compression::Lz4)
        .push(Some(b"k"), Some(&[7u8; 3000][..]), &[], 0)
        .build();
    let header = wire::record_batch::BatchHeader::parse(&batch).unwrap();
    let records = wire::record_batch::records(&batch).unwrap().raw().to_vec();
    let info = lz4_flex::frame::FrameInfo::new()
        .block_size(lz4_flex::frame::BlockSize::Max4MB)
        .block_mode(lz4_flex::frame::BlockMode::Linked);
    let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
    encoder.write_all(&records).unwrap();
    let frame = encoder.finish().unwrap();
    let mut big = batch[..wire::record_batch::BATCH_HEADER_BYTES].to_vec();
    big.extend_from_slice(&frame);
    let length = i32::try_from(big.len() - 12).unwrap();
    big[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = wire::record_batch::compute_crc(&big).unwrap();
    big[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(
        wire::record_batch::records(&big).unwrap().iter().count(),
        usize::try_from(header.records_count).unwrap()
    );
    let ((), peak) = fuzzing::alloc::measure(|| fuzzing::record_batch(&big));
    eprintln!("lz4 4 MiB-block batch of {} bytes: peak {peak}", big.len());
    assert!(
        peak > 4 << 20,
        "the 4 MiB block buffers were not seen: {peak}"
    );
}

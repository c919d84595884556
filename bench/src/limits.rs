//! `bench limits`: this machine's floors and ceilings, measured in one run, so that a
//! broker's figures can be read as a share of what the machine allows:
//!
//! - loopback TCP: one sender and one receiver thread moving 1 MiB writes over 127.0.0.1
//!   (MiB/s; CPU s/GiB of each side: the receiver's is the floor of a broker's produce
//!   ingest, the sender's of a copying fetch path);
//! - produce floor: receiving N bytes over loopback TCP into a buffer (receiver CPU) plus
//!   writing the same bytes to a file in the page cache (pwrite, no fsync; writer CPU),
//!   reported apart and summed: the least CPU per GiB a broker can spend taking records in,
//!   to compare with its produce CPU per GiB;
//! - fdatasync: 4 KiB appends each followed by fdatasync (p50/p99/p99.9, the floor of
//!   acks=all with a flush before the answer), and large buffered writes + one fdatasync
//!   (MiB/s);
//! - AES-128-GCM, three figures: (1) ring's AES_128_GCM sealing 16 KiB records in place (the
//!   crypto of the broker's TLS path: rustls 0.23 with the ring provider, AES-NI + PCLMULQDQ;
//!   a TLS record is at most 16 KiB of plaintext), encryption and nothing else: CPU s/GiB and
//!   MiB/s of one core, the "cipher cost" of `bench fetch-cost`'s TLS target; (2) `openssl
//!   speed -evp aes-128-gcm -bytes 16384` for comparison when the openssl CLI is present;
//!   (3) the RustCrypto `aes-gcm` crate on 64 KiB buffers (not what TLS uses; kept for
//!   continuity with earlier reports);
//! - sendfile: a file in the page cache to a loopback socket, receiver discarding (CPU s/GiB
//!   of the sending thread: the floor of a zero-copy fetch path);
//! - null broker: the native client (or librdkafka) producing to an in-process
//!   [`crate::null_broker`] that stores nothing: max-rate 100 B records (records/s, MiB/s,
//!   latency), 100 B at a fixed 50,000 records/s (p50/p99/p99.9), and consuming 1 KiB records
//!   (MiB/s): the client's and protocol's ceilings, with no broker work behind them.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Nonce};
use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::cpu::{self, thread_cpu_seconds, CpuSampler, GIB};
use crate::engine::ClientKind;
use crate::null_broker::{NullBroker, NullBrokerArgs};
use crate::perf;

const MIB: f64 = 1024.0 * 1024.0;

/// `bench limits` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitsArgs {
    /// Directory for the disk measurements (put it on the broker's log filesystem).
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Also write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Tiny budgets (a second or two in all): for smoke tests, figures are rough.
    #[arg(long)]
    pub quick: bool,
    /// Client engine of the null-broker runs (native falls back to librdkafka if unavailable).
    #[arg(long, value_enum, default_value_t = ClientKind::Native)]
    pub client: ClientKind,
    /// Skip the null-broker runs.
    #[arg(long)]
    pub no_null_broker: bool,
    /// Client engine of the fixed-rate null-broker run (default: --client).
    #[arg(long, value_enum)]
    pub latency_client: Option<ClientKind>,
    /// Fixed rate of the null-broker latency run (records/s).
    #[arg(long, default_value_t = 50_000.0)]
    pub fixed_rate: f64,
}

impl Default for LimitsArgs {
    fn default() -> Self {
        LimitsArgs {
            dir: ".".into(),
            json: None,
            quick: false,
            client: ClientKind::Native,
            no_null_broker: false,
            latency_client: None,
            fixed_rate: 50_000.0,
        }
    }
}

/// Every figure of `bench limits`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Limits {
    pub quick: bool,
    pub dir: String,
    pub tcp_loopback_mib_s: f64,
    pub tcp_send_cpu_s_per_gib: f64,
    pub tcp_recv_cpu_s_per_gib: f64,
    /// Produce floor: loopback receive into a buffer (receiver CPU s/GiB).
    #[serde(default)]
    pub produce_floor_recv_cpu_s_per_gib: f64,
    /// Produce floor: pwrite of the same bytes into the page cache (CPU s/GiB).
    #[serde(default)]
    pub produce_floor_pwrite_cpu_s_per_gib: f64,
    /// Produce floor: the sum.
    #[serde(default)]
    pub produce_floor_cpu_s_per_gib: f64,
    pub fdatasync_4k_p50_ms: f64,
    pub fdatasync_4k_p99_ms: f64,
    pub fdatasync_4k_p99_9_ms: f64,
    pub fdatasync_4k_per_s: f64,
    pub disk_write_mib_s: f64,
    pub aes128gcm_cpu_s_per_gib: f64,
    pub aes128gcm_mib_s: f64,
    /// ring AES_128_GCM, 16 KiB records sealed in place (the TLS path's crypto).
    #[serde(default)]
    pub ring_aes128gcm_cpu_s_per_gib: f64,
    #[serde(default)]
    pub ring_aes128gcm_mib_s: f64,
    /// `openssl speed -evp aes-128-gcm -bytes 16384` (None: no openssl CLI or unparsable).
    #[serde(default)]
    pub openssl_aes128gcm_mib_s: Option<f64>,
    pub sendfile_mib_s: f64,
    pub sendfile_cpu_s_per_gib: f64,
    pub null: Option<NullFigures>,
}

/// The null-broker runs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NullFigures {
    pub client: ClientKind,
    pub produce_100b_records_s: f64,
    pub produce_100b_mib_s: f64,
    pub produce_100b_p50_ms: f64,
    pub produce_100b_p99_ms: f64,
    pub produce_100b_broker_cpu_us_per_record: f64,
    pub produce_100b_client_cpu_s_per_gib: f64,
    pub produce_100b_records_per_request: f64,
    /// Client of the fixed-rate run.
    pub latency_client: ClientKind,
    pub fixed_rate: f64,
    pub fixed_rate_p50_ms: f64,
    pub fixed_rate_p99_ms: f64,
    pub fixed_rate_p99_9_ms: f64,
    pub fixed_rate_broker_cpu_us_per_request: f64,
    pub fixed_rate_records_per_request: f64,
    pub consume_1kb_mib_s: f64,
    pub consume_1kb_client_cpu_s_per_gib: f64,
}

struct Budget {
    seconds: f64,
    bytes: u64,
}

impl Budget {
    fn of(quick: bool) -> Budget {
        if quick {
            Budget {
                seconds: 0.3,
                bytes: 64 << 20,
            }
        } else {
            Budget {
                seconds: 3.0,
                bytes: 1 << 30,
            }
        }
    }
}

/// Loopback TCP: (MiB/s, sender CPU s/GiB, receiver CPU s/GiB).
pub fn tcp_loopback(budget_bytes: u64, budget_s: f64) -> Result<(f64, f64, f64)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let receiver = std::thread::spawn(move || -> Result<(u64, f64)> {
        let (mut stream, _) = listener.accept()?;
        let cpu0 = thread_cpu_seconds();
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            let n = stream.read(&mut buf)?;
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        Ok((total, thread_cpu_seconds() - cpu0))
    });
    let mut stream = TcpStream::connect(addr)?;
    let buf = vec![7u8; 1 << 20];
    let start = Instant::now();
    let cpu0 = thread_cpu_seconds();
    let mut sent = 0u64;
    while sent < budget_bytes && start.elapsed().as_secs_f64() < budget_s {
        stream.write_all(&buf)?;
        sent += buf.len() as u64;
    }
    let send_cpu = thread_cpu_seconds() - cpu0;
    drop(stream);
    let (received, recv_cpu) = receiver.join().expect("receiver panicked")?;
    let elapsed = start.elapsed().as_secs_f64();
    let gib = received as f64 / GIB;
    Ok((
        received as f64 / MIB / elapsed,
        send_cpu / gib,
        recv_cpu / gib,
    ))
}

/// Bytes of each socket read and file write of the produce floor (a broker's read size
/// under load is of this order).
const FLOOR_CHUNK: usize = 1 << 20;
/// File bytes the produce floor writes before wrapping to offset 0 (page-cache pages then
/// get overwritten rather than the page cache growing by the whole budget).
const FLOOR_FILE_BYTES: u64 = 256 << 20;

/// The produce floor: (receive CPU s/GiB, pwrite CPU s/GiB), both of the receiving thread,
/// timed apart (`CLOCK_THREAD_CPUTIME_ID` around each call). A sender thread writes
/// `budget_bytes` (or `budget_s` worth) over loopback TCP; the receiver reads 1 MiB chunks
/// into a buffer and pwrites each chunk to a file under `dir` (page cache, no fsync; the
/// file wraps at [`FLOOR_FILE_BYTES`] and is truncated first so the first pass allocates
/// pages as a new log segment would).
pub fn produce_floor(dir: &Path, budget_bytes: u64, budget_s: f64) -> Result<(f64, f64)> {
    let path = dir.join(format!("bench-limits-floor-{}", std::process::id()));
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let sender = std::thread::spawn(move || -> Result<()> {
        let mut stream = TcpStream::connect(addr)?;
        let buf = vec![0x6bu8; FLOOR_CHUNK];
        let start = Instant::now();
        let mut sent = 0u64;
        while sent < budget_bytes && start.elapsed().as_secs_f64() < budget_s {
            stream.write_all(&buf)?;
            sent += buf.len() as u64;
        }
        Ok(())
    });
    let (mut stream, _) = listener.accept()?;
    let mut buf = vec![0u8; FLOOR_CHUNK];
    let (mut recv_cpu, mut write_cpu) = (0.0, 0.0);
    let mut total = 0u64;
    let mut offset = 0u64;
    loop {
        let c0 = thread_cpu_seconds();
        // Fill the chunk (the socket hands out what has arrived, often less).
        let mut filled = 0;
        while filled < buf.len() {
            let n = stream.read(&mut buf[filled..])?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        let c1 = thread_cpu_seconds();
        recv_cpu += c1 - c0;
        if filled == 0 {
            break;
        }
        let mut done = 0;
        while done < filled {
            // SAFETY: pwrite from a live buffer of at least `filled` bytes on an open file.
            let n = unsafe {
                libc::pwrite(
                    file.as_raw_fd(),
                    buf[done..filled].as_ptr().cast(),
                    filled - done,
                    (offset + done as u64) as libc::off_t,
                )
            };
            if n < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(error).context("pwrite");
            }
            done += n as usize;
        }
        write_cpu += thread_cpu_seconds() - c1;
        total += filled as u64;
        offset = (offset + filled as u64) % FLOOR_FILE_BYTES;
    }
    sender.join().expect("sender panicked")?;
    drop(file);
    let _ = std::fs::remove_file(&path);
    anyhow::ensure!(total > 0, "produce floor: nothing received");
    let gib = total as f64 / GIB;
    Ok((recv_cpu / gib, write_cpu / gib))
}

/// 4 KiB appends each followed by fdatasync: (p50, p99, p99.9 in ms, syncs/s).
pub fn fdatasync_latency(
    dir: &Path,
    max_count: u64,
    budget_s: f64,
) -> Result<(f64, f64, f64, f64)> {
    let path = dir.join(format!("bench-limits-fdatasync-{}", std::process::id()));
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)?;
    let block = vec![0x5au8; 4096];
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let start = Instant::now();
    let mut count = 0;
    while count < max_count && (count < 10 || start.elapsed().as_secs_f64() < budget_s) {
        let t = Instant::now();
        file.write_all(&block)?;
        // SAFETY: fdatasync on an open descriptor.
        let rc = unsafe { libc::fdatasync(file.as_raw_fd()) };
        anyhow::ensure!(rc == 0, "fdatasync: {}", std::io::Error::last_os_error());
        hist.saturating_record(t.elapsed().as_micros().max(1) as u64);
        count += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    drop(file);
    let _ = std::fs::remove_file(&path);
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    Ok((ms(0.5), ms(0.99), ms(0.999), count as f64 / elapsed))
}

/// Buffered 1 MiB writes of `bytes` then one fdatasync: MiB/s over the whole.
pub fn disk_bandwidth(dir: &Path, bytes: u64) -> Result<f64> {
    let path = dir.join(format!("bench-limits-bandwidth-{}", std::process::id()));
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&path)?;
    let buf = vec![0xa5u8; 1 << 20];
    let start = Instant::now();
    let mut written = 0u64;
    while written < bytes {
        file.write_all(&buf)?;
        written += buf.len() as u64;
    }
    // SAFETY: fdatasync on an open descriptor.
    let rc = unsafe { libc::fdatasync(file.as_raw_fd()) };
    anyhow::ensure!(rc == 0, "fdatasync: {}", std::io::Error::last_os_error());
    let elapsed = start.elapsed().as_secs_f64();
    drop(file);
    let _ = std::fs::remove_file(&path);
    Ok(written as f64 / MIB / elapsed)
}

/// AES-128-GCM sealing of 64 KiB buffers: (CPU s/GiB, MiB/s).
pub fn aes_gcm_cost(bytes: u64, budget_s: f64) -> Result<(f64, f64)> {
    let cipher = Aes128Gcm::new_from_slice(&[0x42; 16]).expect("16-byte key");
    let mut buf = vec![0x11u8; 64 * 1024];
    let start = Instant::now();
    let cpu0 = thread_cpu_seconds();
    let mut done = 0u64;
    let mut counter = 0u64;
    while done < bytes && (done == 0 || start.elapsed().as_secs_f64() < budget_s) {
        let mut nonce = [0u8; 12];
        nonce[..8].copy_from_slice(&counter.to_be_bytes());
        counter += 1;
        let tag = cipher
            .encrypt_in_place_detached(Nonce::from_slice(&nonce), b"", &mut buf)
            .map_err(|_| anyhow::anyhow!("AES-GCM failed"))?;
        std::hint::black_box(&tag);
        done += buf.len() as u64;
    }
    let cpu = thread_cpu_seconds() - cpu0;
    let elapsed = start.elapsed().as_secs_f64();
    Ok((cpu / (done as f64 / GIB), done as f64 / MIB / elapsed))
}

/// Plaintext bytes of one TLS record at most (RFC 8446 5.1): the unit the TLS path seals.
pub const TLS_RECORD_BYTES: usize = 16 * 1024;

/// ring's AES_128_GCM sealing [`TLS_RECORD_BYTES`] records in place, one core, encryption
/// and nothing else (no copy into or out of the record buffer): (CPU s/GiB, MiB/s). This
/// is the crypto rustls' ring provider runs for TLS 1.3 `TLS_AES_128_GCM_SHA256` and TLS 1.2
/// `ECDHE_*_WITH_AES_128_GCM_SHA256`.
pub fn ring_aes_gcm_cost(bytes: u64, budget_s: f64) -> Result<(f64, f64)> {
    use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM};
    let key = LessSafeKey::new(
        UnboundKey::new(&AES_128_GCM, &[0x42; 16]).map_err(|_| anyhow::anyhow!("ring key"))?,
    );
    let mut record = vec![0x11u8; TLS_RECORD_BYTES];
    // The TLS 1.3 additional data: the 5-byte record header.
    let aad = [23u8, 3, 3, 0x40, 0x11];
    let start = Instant::now();
    let cpu0 = thread_cpu_seconds();
    let mut done = 0u64;
    let mut seq = 0u64;
    while done < bytes && (done == 0 || start.elapsed().as_secs_f64() < budget_s) {
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&seq.to_be_bytes());
        seq += 1;
        let tag = key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut record,
            )
            .map_err(|_| anyhow::anyhow!("ring AES-128-GCM seal failed"))?;
        std::hint::black_box(&tag);
        done += record.len() as u64;
    }
    let cpu = thread_cpu_seconds() - cpu0;
    let elapsed = start.elapsed().as_secs_f64();
    Ok((cpu / (done as f64 / GIB), done as f64 / MIB / elapsed))
}

/// `openssl speed -evp aes-128-gcm -bytes 16384 -seconds S`: MiB/s of one core, None when
/// the CLI is missing or its output cannot be read.
pub fn openssl_speed_aes128gcm(seconds: u32) -> Option<f64> {
    let output = std::process::Command::new("openssl")
        .args(["speed", "-evp", "aes-128-gcm", "-bytes"])
        .arg(TLS_RECORD_BYTES.to_string())
        .arg("-seconds")
        .arg(seconds.max(1).to_string())
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    parse_openssl_speed(&String::from_utf8_lossy(&output.stdout))
}

/// The MiB/s of the `AES-128-GCM  3573536.20k` line of `openssl speed` (the figure is in
/// 1000s of bytes per second).
pub fn parse_openssl_speed(text: &str) -> Option<f64> {
    let line = text.lines().rev().find(|l| {
        l.trim_start()
            .to_ascii_lowercase()
            .starts_with("aes-128-gcm")
    })?;
    let figure = line.split_whitespace().last()?;
    let kilo: f64 = figure.strip_suffix('k').unwrap_or(figure).parse().ok()?;
    Some(kilo * 1000.0 / MIB)
}

/// sendfile from a page-cached file to a loopback socket: (MiB/s, sender CPU s/GiB).
pub fn sendfile_cost(
    dir: &Path,
    file_bytes: u64,
    budget_bytes: u64,
    budget_s: f64,
) -> Result<(f64, f64)> {
    let path = dir.join(format!("bench-limits-sendfile-{}", std::process::id()));
    {
        let mut file = File::create(&path)?;
        let buf = vec![0x3cu8; 1 << 20];
        let mut written = 0;
        while written < file_bytes {
            file.write_all(&buf)?;
            written += buf.len() as u64;
        }
    }
    // Read it once so that it is in the page cache.
    {
        let mut file = File::open(&path)?;
        let mut buf = vec![0u8; 1 << 20];
        while file.read(&mut buf)? > 0 {}
    }
    let file = File::open(&path)?;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let receiver = std::thread::spawn(move || -> Result<u64> {
        let (mut stream, _) = listener.accept()?;
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            let n = stream.read(&mut buf)?;
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        Ok(total)
    });
    let stream = TcpStream::connect(addr)?;
    let start = Instant::now();
    let cpu0 = thread_cpu_seconds();
    let mut sent = 0u64;
    'outer: while sent < budget_bytes && start.elapsed().as_secs_f64() < budget_s {
        let mut offset: libc::off_t = 0;
        while (offset as u64) < file_bytes {
            let left = (file_bytes - offset as u64).min(1 << 20) as usize;
            // SAFETY: both descriptors are open; offset is a valid pointer.
            let n =
                unsafe { libc::sendfile(stream.as_raw_fd(), file.as_raw_fd(), &mut offset, left) };
            if n < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(error).context("sendfile");
            }
            if n == 0 {
                break 'outer;
            }
            sent += n as u64;
        }
    }
    let cpu = thread_cpu_seconds() - cpu0;
    drop(stream);
    let received = receiver.join().expect("receiver panicked")?;
    let elapsed = start.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&path);
    Ok((received as f64 / MIB / elapsed, cpu / (sent as f64 / GIB)))
}

/// Runs `f` on its own thread and waits at most `deadline` for it. A run that does not
/// finish is left behind (it cannot be cancelled) and None is returned, so that one stuck
/// client does not hang the whole measurement.
fn with_deadline<T: Send + 'static>(
    deadline: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(deadline).ok()
}

/// A produce run against the null broker: the report, the CPU used and the Produce
/// requests the null broker received; None when it did not finish within `deadline`.
fn null_producer(
    broker: &NullBroker,
    client: ClientKind,
    topic: &str,
    records: u64,
    size: usize,
    rate: f64,
    deadline: Duration,
) -> Result<Option<(perf::ProducerReport, cpu::CpuUsage, u64)>> {
    let bootstrap = broker.addr().to_string();
    let mut opts = perf::ProducerOpts::new(&bootstrap, topic, records, size);
    opts.client = client;
    opts.throughput = if rate > 0.0 { rate } else { -1.0 };
    opts.props = vec![
        ("acks".into(), "1".into()),
        (
            "linger.ms".into(),
            if rate > 0.0 { "0" } else { "1" }.into(),
        ),
    ];
    if rate <= 0.0 {
        opts.props.push(("batch.size".into(), "131072".into()));
    }
    opts.create_topic_partitions = Some(1);
    opts.quiet = true;
    let requests0 = broker.counters().produce_requests.load(Ordering::Relaxed);
    let sampler = CpuSampler::start(broker.cpu_source());
    let Some(report) = with_deadline(deadline, move || perf::run_producer(&opts)) else {
        eprintln!("limits: the {client} producer ({topic}) did not finish within {deadline:?}; its figures are n/a");
        return Ok(None);
    };
    let report = report?;
    let usage = sampler.stop();
    let requests = broker.counters().produce_requests.load(Ordering::Relaxed) - requests0;
    Ok(Some((report, usage, requests)))
}

/// The null-broker runs: max rate and consume with `client`, fixed rate with
/// `latency_client`.
pub fn null_figures(
    client: ClientKind,
    latency_client: ClientKind,
    quick: bool,
    fixed_rate: f64,
) -> Result<NullFigures> {
    let mut broker = NullBroker::start(&NullBrokerArgs {
        record_size: 1024,
        ..Default::default()
    })?;
    let nan = f64::NAN;
    let mut f = NullFigures {
        client,
        latency_client,
        fixed_rate,
        ..Default::default()
    };
    let max_records = if quick { 20_000 } else { 1_000_000 };
    let deadline = Duration::from_secs(if quick { 30 } else { 120 });
    match null_producer(
        &broker,
        client,
        "limits-max",
        max_records,
        100,
        0.0,
        deadline,
    )? {
        Some((report, usage, requests)) => {
            f.produce_100b_records_s = report.records_per_sec;
            f.produce_100b_mib_s = report.mb_per_sec;
            f.produce_100b_p50_ms = report.latency_ms.p50;
            f.produce_100b_p99_ms = report.latency_ms.p99;
            f.produce_100b_broker_cpu_us_per_record = usage
                .broker_cpu_us_per_request(report.records_sent)
                .unwrap_or(nan);
            f.produce_100b_client_cpu_s_per_gib =
                usage.client_cpu_s_per_gib(report.bytes).unwrap_or(nan);
            f.produce_100b_records_per_request =
                report.records_sent as f64 / requests.max(1) as f64;
        }
        None => {
            f.produce_100b_records_s = nan;
            f.produce_100b_mib_s = nan;
            f.produce_100b_p50_ms = nan;
            f.produce_100b_p99_ms = nan;
            f.produce_100b_broker_cpu_us_per_record = nan;
            f.produce_100b_client_cpu_s_per_gib = nan;
            f.produce_100b_records_per_request = nan;
        }
    }

    let fixed_s = if quick { 0.5 } else { 5.0 };
    let fixed_records = ((fixed_rate * fixed_s) as u64).max(100);
    let deadline = Duration::from_secs_f64(fixed_s * 3.0 + 20.0);
    match null_producer(
        &broker,
        latency_client,
        "limits-fixed",
        fixed_records,
        100,
        fixed_rate,
        deadline,
    )? {
        Some((report, usage, requests)) => {
            f.fixed_rate_p50_ms = report.latency_ms.p50;
            f.fixed_rate_p99_ms = report.latency_ms.p99;
            f.fixed_rate_p99_9_ms = report.latency_ms.p99_9;
            f.fixed_rate_broker_cpu_us_per_request = usage
                .broker_cpu_s
                .map_or(nan, |s| s * 1e6 / requests.max(1) as f64);
            f.fixed_rate_records_per_request = report.records_sent as f64 / requests.max(1) as f64;
        }
        None => {
            f.fixed_rate_p50_ms = nan;
            f.fixed_rate_p99_ms = nan;
            f.fixed_rate_p99_9_ms = nan;
            f.fixed_rate_broker_cpu_us_per_request = nan;
            f.fixed_rate_records_per_request = nan;
        }
    }

    let consume_records = if quick { 20_000 } else { 500_000 };
    let mut opts = perf::ConsumerOpts::new(
        &broker.addr().to_string(),
        "limits-consume",
        consume_records,
    );
    opts.client = client;
    opts.quiet = true;
    opts.hide_header = true;
    let sampler = CpuSampler::start(broker.cpu_source());
    // The null broker's partitions never end, so a consumer that drains whatever has
    // arrived before returning could loop for ever: the deadline keeps that from hanging
    // the whole run.
    let deadline = Duration::from_secs(if quick { 20 } else { 60 });
    match with_deadline(deadline, move || perf::run_consumer(&opts)) {
        Some(report) => {
            let report = report?;
            let usage = sampler.stop();
            f.consume_1kb_mib_s = report.mb_per_sec;
            f.consume_1kb_client_cpu_s_per_gib =
                usage.client_cpu_s_per_gib(report.bytes).unwrap_or(nan);
        }
        None => {
            eprintln!("limits: the {client} consumer did not finish within {deadline:?}; consume figures n/a");
            f.consume_1kb_mib_s = nan;
            f.consume_1kb_client_cpu_s_per_gib = nan;
        }
    }
    broker.stop();
    Ok(f)
}

/// Measures everything.
pub fn measure(args: &LimitsArgs) -> Result<Limits> {
    let budget = Budget::of(args.quick);
    let dir = args
        .dir
        .join(format!("bench-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let result = (|| -> Result<Limits> {
        let mut l = Limits {
            quick: args.quick,
            dir: args.dir.display().to_string(),
            ..Default::default()
        };
        eprintln!("limits: loopback TCP ...");
        (
            l.tcp_loopback_mib_s,
            l.tcp_send_cpu_s_per_gib,
            l.tcp_recv_cpu_s_per_gib,
        ) = tcp_loopback(budget.bytes, budget.seconds)?;
        eprintln!("limits: produce floor (loopback receive + page-cache pwrite) ...");
        (
            l.produce_floor_recv_cpu_s_per_gib,
            l.produce_floor_pwrite_cpu_s_per_gib,
        ) = produce_floor(&dir, budget.bytes, budget.seconds)?;
        l.produce_floor_cpu_s_per_gib =
            l.produce_floor_recv_cpu_s_per_gib + l.produce_floor_pwrite_cpu_s_per_gib;
        eprintln!("limits: fdatasync ...");
        let max_syncs = if args.quick { 200 } else { 5000 };
        (
            l.fdatasync_4k_p50_ms,
            l.fdatasync_4k_p99_ms,
            l.fdatasync_4k_p99_9_ms,
            l.fdatasync_4k_per_s,
        ) = fdatasync_latency(&dir, max_syncs, budget.seconds)?;
        l.disk_write_mib_s = disk_bandwidth(&dir, if args.quick { 16 << 20 } else { 512 << 20 })?;
        eprintln!("limits: AES-128-GCM ...");
        (l.aes128gcm_cpu_s_per_gib, l.aes128gcm_mib_s) =
            aes_gcm_cost(budget.bytes, budget.seconds)?;
        (l.ring_aes128gcm_cpu_s_per_gib, l.ring_aes128gcm_mib_s) =
            ring_aes_gcm_cost(budget.bytes, budget.seconds)?;
        l.openssl_aes128gcm_mib_s = openssl_speed_aes128gcm(if args.quick { 1 } else { 3 });
        eprintln!("limits: sendfile ...");
        let file_bytes = if args.quick { 8 << 20 } else { 256 << 20 };
        (l.sendfile_mib_s, l.sendfile_cpu_s_per_gib) =
            sendfile_cost(&dir, file_bytes, budget.bytes, budget.seconds)?;
        if !args.no_null_broker {
            eprintln!("limits: null broker ({}) ...", args.client);
            let latency_client = args.latency_client.unwrap_or(args.client);
            l.null = Some(
                match null_figures(args.client, latency_client, args.quick, args.fixed_rate) {
                    Ok(f) => f,
                    Err(error) if args.client == ClientKind::Native => {
                        eprintln!("limits: native client failed ({error:#}); using librdkafka");
                        null_figures(
                            ClientKind::Librdkafka,
                            ClientKind::Librdkafka,
                            args.quick,
                            args.fixed_rate,
                        )?
                    }
                    Err(error) => return Err(error),
                },
            );
        }
        Ok(l)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// One row of the limits table.
pub struct Row {
    pub key: &'static str,
    pub label: String,
    pub value: f64,
    pub unit: &'static str,
}

/// The table's rows, in order.
pub fn rows(l: &Limits) -> Vec<Row> {
    let row = |key, label: &str, value, unit| Row {
        key,
        label: label.to_string(),
        value,
        unit,
    };
    let mut rows = vec![
        row(
            "tcp_loopback_mib_s",
            "loopback TCP throughput (1 stream)",
            l.tcp_loopback_mib_s,
            "MiB/s",
        ),
        row(
            "tcp_send_cpu_s_per_gib",
            "loopback TCP sender CPU",
            l.tcp_send_cpu_s_per_gib,
            "s/GiB",
        ),
        row(
            "tcp_recv_cpu_s_per_gib",
            "loopback TCP receiver CPU",
            l.tcp_recv_cpu_s_per_gib,
            "s/GiB",
        ),
        row(
            "produce_floor_recv_cpu_s_per_gib",
            "produce floor: loopback receive into a buffer, receiver CPU",
            l.produce_floor_recv_cpu_s_per_gib,
            "s/GiB",
        ),
        row(
            "produce_floor_pwrite_cpu_s_per_gib",
            "produce floor: pwrite of the same bytes to the page cache (no fsync)",
            l.produce_floor_pwrite_cpu_s_per_gib,
            "s/GiB",
        ),
        row(
            "produce_floor_cpu_s_per_gib",
            "produce floor: receive + page-cache write (compare with produce CPU/GiB)",
            l.produce_floor_cpu_s_per_gib,
            "s/GiB",
        ),
        row(
            "fdatasync_4k_p50_ms",
            "4 KiB write + fdatasync p50",
            l.fdatasync_4k_p50_ms,
            "ms",
        ),
        row(
            "fdatasync_4k_p99_ms",
            "4 KiB write + fdatasync p99 (the acks=all target's base)",
            l.fdatasync_4k_p99_ms,
            "ms",
        ),
        row(
            "fdatasync_4k_p99_9_ms",
            "4 KiB write + fdatasync p99.9",
            l.fdatasync_4k_p99_9_ms,
            "ms",
        ),
        row(
            "fdatasync_4k_per_s",
            "4 KiB write + fdatasync rate",
            l.fdatasync_4k_per_s,
            "syncs/s",
        ),
        row(
            "disk_write_mib_s",
            "buffered writes + 1 fdatasync",
            l.disk_write_mib_s,
            "MiB/s",
        ),
        row(
            "ring_aes128gcm_cpu_s_per_gib",
            "AES-128-GCM seal CPU (ring, 16 KiB records: the TLS path's crypto)",
            l.ring_aes128gcm_cpu_s_per_gib,
            "s/GiB",
        ),
        row(
            "ring_aes128gcm_mib_s",
            "AES-128-GCM seal throughput (ring, 16 KiB records, 1 core)",
            l.ring_aes128gcm_mib_s,
            "MiB/s",
        ),
        row(
            "openssl_aes128gcm_mib_s",
            "AES-128-GCM `openssl speed -evp`, 16 KiB blocks (1 core)",
            l.openssl_aes128gcm_mib_s.unwrap_or(f64::NAN),
            "MiB/s",
        ),
        row(
            "aes128gcm_cpu_s_per_gib",
            "AES-128-GCM seal CPU (RustCrypto aes-gcm, 64 KiB; not the TLS path's)",
            l.aes128gcm_cpu_s_per_gib,
            "s/GiB",
        ),
        row(
            "aes128gcm_mib_s",
            "AES-128-GCM seal throughput (RustCrypto aes-gcm, 64 KiB, 1 core)",
            l.aes128gcm_mib_s,
            "MiB/s",
        ),
        row(
            "sendfile_mib_s",
            "sendfile page cache -> loopback",
            l.sendfile_mib_s,
            "MiB/s",
        ),
        row(
            "sendfile_cpu_s_per_gib",
            "sendfile sender CPU",
            l.sendfile_cpu_s_per_gib,
            "s/GiB",
        ),
    ];
    if let Some(n) = &l.null {
        let c = n.client.name();
        rows.extend([
            row(
                "null_produce_100b_records_s",
                &format!("null broker produce 100 B, max rate ({c})"),
                n.produce_100b_records_s,
                "records/s",
            ),
            row(
                "null_produce_100b_mib_s",
                &format!("null broker produce 100 B, max rate ({c})"),
                n.produce_100b_mib_s,
                "MiB/s",
            ),
            row(
                "null_produce_100b_p50_ms",
                "null broker produce 100 B, max rate, p50",
                n.produce_100b_p50_ms,
                "ms",
            ),
            row(
                "null_produce_100b_p99_ms",
                "null broker produce 100 B, max rate, p99",
                n.produce_100b_p99_ms,
                "ms",
            ),
            row(
                "null_produce_100b_broker_cpu_us_per_record",
                "null broker CPU per record (max rate)",
                n.produce_100b_broker_cpu_us_per_record,
                "µs/record",
            ),
            row(
                "null_produce_100b_client_cpu_s_per_gib",
                &format!("{c} producer CPU (max rate)"),
                n.produce_100b_client_cpu_s_per_gib,
                "s/GiB",
            ),
            row(
                "null_produce_100b_records_per_request",
                "records per Produce request (max rate)",
                n.produce_100b_records_per_request,
                "records",
            ),
            row(
                "null_fixed_rate_p50_ms",
                &format!(
                    "null broker produce 100 B at {} records/s, p50 ({})",
                    n.fixed_rate, n.latency_client
                ),
                n.fixed_rate_p50_ms,
                "ms",
            ),
            row(
                "null_fixed_rate_p99_ms",
                &format!(
                    "null broker produce 100 B at {} records/s, p99 ({})",
                    n.fixed_rate, n.latency_client
                ),
                n.fixed_rate_p99_ms,
                "ms",
            ),
            row(
                "null_fixed_rate_p99_9_ms",
                &format!(
                    "null broker produce 100 B at {} records/s, p99.9 ({})",
                    n.fixed_rate, n.latency_client
                ),
                n.fixed_rate_p99_9_ms,
                "ms",
            ),
            row(
                "null_fixed_rate_broker_cpu_us_per_request",
                "null broker CPU per Produce request (fixed rate)",
                n.fixed_rate_broker_cpu_us_per_request,
                "µs/request",
            ),
            row(
                "null_fixed_rate_records_per_request",
                "records per Produce request (fixed rate)",
                n.fixed_rate_records_per_request,
                "records",
            ),
            row(
                "null_consume_1kb_mib_s",
                &format!("null broker consume 1 KiB ({c})"),
                n.consume_1kb_mib_s,
                "MiB/s",
            ),
            row(
                "null_consume_1kb_client_cpu_s_per_gib",
                &format!("{c} consumer CPU"),
                n.consume_1kb_client_cpu_s_per_gib,
                "s/GiB",
            ),
        ]);
    }
    rows
}

/// The Markdown table: `| key | measure | value | unit |`.
pub fn markdown_table(l: &Limits) -> String {
    let mut out = String::from("| key | measure | value | unit |\n|---|---|---:|---|\n");
    for r in rows(l) {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.key,
            r.label,
            crate::compare::fmt_num(Some(r.value)),
            r.unit
        ));
    }
    out
}

/// `bench limits`.
pub fn run(args: &LimitsArgs) -> Result<Limits> {
    let limits = measure(args)?;
    if args.quick {
        println!("(--quick: tiny budgets, rough figures)\n");
    }
    println!("{}", markdown_table(&limits));
    if let Some(path) = &args.json {
        perf::output::write_json(path, &limits)?;
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openssl_speed_output_parses() {
        let text = "The 'numbers' are in 1000s of bytes per second processed.\ntype          16384 bytes\nAES-128-GCM    3573536.20k\n";
        let mib = parse_openssl_speed(text).unwrap();
        assert!((mib - 3_573_536.20 * 1000.0 / MIB).abs() < 1e-6);
        assert_eq!(parse_openssl_speed("no figures here"), None);
    }

    #[test]
    fn micro_measurements_run() {
        let (mib, send, recv) = tcp_loopback(8 << 20, 0.2).unwrap();
        assert!(mib > 0.0 && send >= 0.0 && recv >= 0.0);
        let dir = std::env::temp_dir();
        let (recv, write) = produce_floor(&dir, 8 << 20, 0.2).unwrap();
        assert!(recv > 0.0 && write > 0.0, "{recv} {write}");
        let (p50, p99, p999, rate) = fdatasync_latency(&dir, 20, 0.2).unwrap();
        assert!(p50 > 0.0 && p99 >= p50 && p999 >= p99 && rate > 0.0);
        assert!(disk_bandwidth(&dir, 2 << 20).unwrap() > 0.0);
        let (cpu, mib) = aes_gcm_cost(4 << 20, 0.2).unwrap();
        assert!(cpu > 0.0 && mib > 0.0);
        let (cpu, mib) = ring_aes_gcm_cost(4 << 20, 0.2).unwrap();
        assert!(cpu > 0.0 && mib > 0.0);
        let (mib, cpu) = sendfile_cost(&dir, 2 << 20, 8 << 20, 0.2).unwrap();
        assert!(mib > 0.0 && cpu >= 0.0);
    }
}

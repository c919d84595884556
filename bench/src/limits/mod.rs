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

mod args;
mod cipher;
mod disk;
mod network;
mod null;
mod table;
#[cfg(test)]
mod tests;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub use self::args::LimitsArgs;
pub use self::cipher::{
    aes_gcm_cost, openssl_speed_aes128gcm, parse_openssl_speed, ring_aes_gcm_cost, TLS_RECORD_BYTES,
};
pub use self::disk::{disk_bandwidth, fdatasync_latency, produce_floor};
pub use self::network::{sendfile_cost, tcp_loopback};
pub use self::null::null_figures;
pub use self::table::{markdown_table, rows, Row};
use crate::engine::ClientKind;
use crate::perf;

const MIB: f64 = 1024.0 * 1024.0;

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

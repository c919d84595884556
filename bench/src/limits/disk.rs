//! The disk floors: the produce floor (socket receive plus page-cache write), fdatasync
//! latency of small appends, and buffered write bandwidth.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;

use super::MIB;
use crate::cpu::{thread_cpu_seconds, GIB};

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

//! The network floors: loopback TCP between two threads, and sendfile from the page cache to
//! a loopback socket.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};

use super::MIB;
use crate::cpu::{thread_cpu_seconds, GIB};

/// Loopback TCP: (MiB/s, sender CPU s/GiB, receiver CPU s/GiB).
pub fn tcp_loopback(budget_bytes: u64, budget_s: f64) -> Result<(f64, f64, f64)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let receiver = std::thread::spawn(move || -> Result<(u64, f64)> {
        let (mut stream, _) = listener.accept()?;
        let cpu0 = thread_cpu_seconds();
        let total = drain(&mut stream)?;
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
        Ok(drain(&mut stream)?)
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

/// Reads `stream` to its end in 1 MiB reads, discarding: the receiving side of both floors.
fn drain(stream: &mut TcpStream) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        total += n as u64;
    }
}

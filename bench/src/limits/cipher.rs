//! The cost of AES-128-GCM: ring's sealing of TLS-sized records (what the broker's TLS path
//! runs), `openssl speed` beside it, and the RustCrypto crate.

use std::time::Instant;

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes128Gcm, Nonce};
use anyhow::Result;

use super::MIB;
use crate::cpu::{thread_cpu_seconds, GIB};

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

//! TLS for `bench fetch-cost`: a throwaway CA and broker keystore, whether the kernel has TLS,
//! how many sockets it has encrypted for, and what a TLS connection negotiated.

use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};

/// `setsockopt(SOL_TCP, TCP_ULP, "tls")` (linux/tcp.h).
const TCP_ULP: libc::c_int = 31;

/// A CA and a broker keystore made by [`make_certs`].
pub struct Certs {
    /// PEM of the CA certificate (the client's truststore).
    pub ca: PathBuf,
    /// PEM of the broker's private key and certificate chain (Kafka's PEM keystore).
    pub keystore: PathBuf,
}

/// Makes a CA and a broker certificate for 127.0.0.1/localhost with the openssl CLI, in
/// `dir`.
pub fn make_certs(dir: &Path) -> Result<Certs, String> {
    let run = |args: &[&str]| -> Result<(), String> {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("no openssl CLI to make a certificate ({e})"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "openssl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=bench-fetch-cost-ca",
    ]);
    run(&ca)?;
    let mut csr = vec!["req"];
    csr.extend(ec);
    csr.extend([
        "-keyout",
        "broker.key",
        "-out",
        "broker.csr",
        "-subj",
        "/CN=localhost",
    ]);
    run(&csr)?;
    std::fs::write(
        dir.join("broker.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .map_err(|e| e.to_string())?;
    run(&[
        "x509",
        "-req",
        "-in",
        "broker.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "broker.crt",
        "-days",
        "2",
        "-extfile",
        "broker.ext",
    ])?;
    // Kafka's PEM keystore: the private key and the certificate chain in one file.
    let mut keystore = std::fs::read(dir.join("broker.key")).map_err(|e| e.to_string())?;
    keystore.extend(std::fs::read(dir.join("broker.crt")).map_err(|e| e.to_string())?);
    keystore.extend(std::fs::read(dir.join("ca.pem")).map_err(|e| e.to_string())?);
    std::fs::write(dir.join("broker-keystore.pem"), keystore).map_err(|e| e.to_string())?;
    Ok(Certs {
        ca: dir.join("ca.pem"),
        keystore: dir.join("broker-keystore.pem"),
    })
}

/// Why kernel TLS is unavailable here (None: the kernel accepts the TLS ULP).
pub fn ktls_unavailable() -> Option<String> {
    let probe = || -> std::io::Result<Option<String>> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let client = TcpStream::connect(listener.local_addr()?)?;
        let _server = listener.accept()?;
        let name = b"tls";
        // SAFETY: setsockopt on an open socket with a valid buffer and its length.
        let rc = unsafe {
            libc::setsockopt(
                client.as_raw_fd(),
                libc::SOL_TCP,
                TCP_ULP,
                name.as_ptr().cast(),
                name.len() as libc::socklen_t,
            )
        };
        Ok((rc != 0).then(|| {
            format!(
                "the kernel has no TLS upper-layer protocol (setsockopt(TCP_ULP, \"tls\"): {})",
                std::io::Error::last_os_error()
            )
        }))
    };
    probe().unwrap_or_else(|e| Some(format!("kTLS probe failed: {e}")))
}

/// `TlsTxSw + TlsTxDevice` of `/proc/net/tls_stat`: sockets the kernel has encrypted for.
pub(super) fn ktls_tx_sockets() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/tls_stat").ok()?;
    let mut total = 0;
    for line in text.lines() {
        let mut it = line.split_whitespace();
        if let (Some(k), Some(v)) = (it.next(), it.next()) {
            if k == "TlsTxSw" || k == "TlsTxDevice" {
                total += v.parse::<u64>().ok()?;
            }
        }
    }
    Some(total)
}

/// The negotiated TLS version and suite of a connection to `addr`.
pub(super) fn probe_tls(addr: &str, props: &[(String, String)]) -> Result<String> {
    let config = crate::native::tls::client_config(props)?.context("TLS properties")?;
    let conn = crate::native::connect(
        addr,
        "bench-fetch-cost",
        Duration::from_secs(10),
        Some(&config),
    )
    .with_context(|| format!("TLS connection to {addr}"))?;
    Ok(conn.tls_description().unwrap_or_default())
}

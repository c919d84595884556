//! TLS for the SSL listeners: rustls (ring provider) for the handshake, then the session
//! either in the kernel (kernel TLS: the socket carries plaintext for us, fetches keep
//! sendfile) or in user space (rustls seals and opens every record).
//!
//! Modules: `config` (the rustls `ServerConfig` from the `ssl.*` keys and their PEM files),
//! `principal` (the client certificate's subject as Kafka's principal), `ktls` (the kernel
//! hand-off: probe, key layout, control records), `stream` (the handshake and the user-space
//! halves).
//!
//! One [`Acceptor`] serves every SSL listener; [`Acceptor::accept`] runs the handshake on a
//! fresh connection and picks the path: kernel TLS when `ssl.ktls.enable` is on, the start-up
//! probe found the kernel able, the negotiated cipher is one it takes, and `TCP_ULP` succeeds
//! on this socket; user-space TLS otherwise.

pub mod config;
pub mod ktls;
pub mod principal;
pub mod stream;

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use glommio::net::TcpStream;
use rustls::ServerConfig;

pub use config::TlsConfigError;
pub use ktls::KtlsSupport;
pub use stream::{HandshakeError, TlsReader, TlsWriter};

use ::config::SslConfig;

/// How long a client may take to complete the handshake before its connection is closed (a
/// connection that never speaks must not hold its slot under `max.connections` forever).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The TLS settings shared by every SSL listener (built once, before the shards start).
pub struct Acceptor {
    config: Arc<ServerConfig>,
    ktls: KtlsSupport,
    /// `ssl.principal.mapping.rules`, applied to each client certificate's subject.
    mapper: acl::PrincipalMapper,
}

impl Acceptor {
    /// Reads the keystore and truststore and probes kernel TLS (when `ssl.ktls.enable`).
    /// `mapper`: the parsed `ssl.principal.mapping.rules`.
    pub fn new(ssl: &SslConfig, mapper: acl::PrincipalMapper) -> Result<Acceptor, TlsConfigError> {
        let ktls = if ssl.ktls_enable {
            ktls::probe()
        } else {
            KtlsSupport::Unsupported("ssl.ktls.enable=false".into())
        };
        let config = config::server_config(ssl, matches!(ktls, KtlsSupport::Supported { .. }))?;
        Ok(Acceptor {
            config,
            ktls,
            mapper,
        })
    }

    pub fn ktls(&self) -> &KtlsSupport {
        &self.ktls
    }

    /// The path this acceptor's connections take, in words (start-up log).
    pub fn path_description(&self) -> String {
        match &self.ktls {
            KtlsSupport::Supported { ciphers } => format!(
                "kernel TLS (ciphers {ciphers:?}; user-space TLS for a connection the kernel \
                 refuses)"
            ),
            KtlsSupport::Unsupported(reason) => format!("user-space TLS (kernel TLS: {reason})"),
        }
    }

    /// Handshakes on `stream` and hands the session to the kernel or keeps it in rustls.
    pub async fn accept(&self, mut stream: TcpStream) -> Result<Accepted, HandshakeError> {
        let conn = stream::handshake(&mut stream, self.config.clone()).await?;
        let principal = match conn.peer_certificates().and_then(|certs| certs.first()) {
            Some(cert) => principal::mapped_principal_of(cert.as_ref(), &self.mapper)
                .map_err(|error| HandshakeError::Principal(error.to_string()))?,
            None => None,
        }
        .unwrap_or_else(|| principal::ANONYMOUS.to_string());
        let version = conn.protocol_version();
        let suite = conn.negotiated_cipher_suite();
        let fd = stream.as_raw_fd();
        let cipher = suite.and_then(|suite| kernel_cipher(suite.suite().as_str()?));
        let kernel = match (&self.ktls, cipher, version) {
            (KtlsSupport::Supported { .. }, Some(cipher), Some(version))
                if self.ktls.supports(cipher) =>
            {
                match ktls::attach_ulp(fd) {
                    Ok(()) => Some(version),
                    Err(error) => {
                        tracing::info!(
                            reason = %ktls::describe_ulp_error(&error),
                            "kernel TLS refused for this connection; user-space TLS"
                        );
                        None
                    }
                }
            }
            _ => None,
        };
        let Some(version) = kernel else {
            let (reader, writer) = stream::user_space(stream, fd, conn);
            return Ok(Accepted::UserSpace {
                reader,
                writer,
                principal,
                fd,
            });
        };
        // The ULP is attached: from here the keys must reach the kernel, or the connection
        // cannot go on (extracting them consumed the rustls session).
        let secrets = conn.dangerous_extract_secrets()?;
        let tx = ktls::CryptoInfo::new(version, secrets.tx.0, &secrets.tx.1);
        let rx = ktls::CryptoInfo::new(version, secrets.rx.0, &secrets.rx.1);
        let (Some(tx), Some(rx)) = (tx, rx) else {
            return Err(HandshakeError::Io(std::io::Error::other(
                "kernel TLS: no kernel layout for the negotiated cipher",
            )));
        };
        ktls::set_tx(fd, &tx)?;
        ktls::set_rx(fd, &rx)?;
        Ok(Accepted::Kernel { stream, principal })
    }
}

/// A connection after its handshake.
pub enum Accepted {
    /// Keys in the kernel: the socket reads and writes plaintext (and sends files).
    Kernel {
        stream: TcpStream,
        principal: String,
    },
    /// Keys in rustls.
    UserSpace {
        reader: TlsReader,
        writer: TlsWriter,
        principal: String,
        fd: std::os::fd::RawFd,
    },
}

/// The kernel cipher of a rustls suite name (`TLS13_AES_128_GCM_SHA256`,
/// `TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384`, ...).
fn kernel_cipher(suite: &str) -> Option<ktls::KernelCipher> {
    if suite.contains("AES_128_GCM") {
        Some(ktls::KernelCipher::AesGcm128)
    } else if suite.contains("AES_256_GCM") {
        Some(ktls::KernelCipher::AesGcm256)
    } else if suite.contains("CHACHA20_POLY1305") {
        Some(ktls::KernelCipher::Chacha20Poly1305)
    } else {
        None
    }
}

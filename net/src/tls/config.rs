//! The SSL listeners' rustls `ServerConfig`, built once at start-up from the `ssl.*` keys: the
//! keystore (one PEM file: private key and certificate chain), the truststore (PEM CA
//! certificates) for client certificates, `ssl.client.auth`, `ssl.enabled.protocols` and
//! `ssl.cipher.suites`. Every error names the key and the file at fault, so the broker fails
//! at start-up with something an operator can act on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use config::{ClientAuth, SslConfig, TlsVersion};

/// Why the SSL listeners cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    #[error("{key} is required for SSL listeners")]
    Missing { key: &'static str },
    #[error("{key}: cannot read {path}: {source}")]
    Unreadable {
        key: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{key}: {path}: {reason}")]
    BadFile {
        key: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error(
        "ssl.key.password is set: encrypted private keys are not supported; decrypt the key \
         (openssl pkey -in key.pem -out plain.pem) and unset ssl.key.password"
    )]
    KeyPasswordUnsupported,
    #[error("ssl.cipher.suites: {0}")]
    CipherSuites(String),
    #[error("ssl.enabled.protocols: {0}")]
    Protocols(String),
}

/// The crypto the TLS path uses: rustls' ring provider (AES-GCM with AES-NI and PCLMULQDQ,
/// ChaCha20-Poly1305), restricted to `ssl.cipher.suites` when it is set.
pub fn provider(suites: &[String]) -> Result<CryptoProvider, TlsConfigError> {
    let mut provider = rustls::crypto::ring::default_provider();
    if suites.is_empty() {
        return Ok(provider);
    }
    let mut chosen: Vec<SupportedCipherSuite> = Vec::new();
    for wanted in suites {
        let found = provider
            .cipher_suites
            .iter()
            .find(|suite| iana_name(**suite).eq_ignore_ascii_case(wanted))
            .ok_or_else(|| {
                TlsConfigError::CipherSuites(format!(
                    "{wanted} is not supported; supported: {}",
                    provider
                        .cipher_suites
                        .iter()
                        .map(|s| iana_name(*s))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        if !chosen.contains(found) {
            chosen.push(*found);
        }
    }
    provider.cipher_suites = chosen;
    Ok(provider)
}

/// A suite's IANA name (rustls spells TLS 1.3 suites `TLS13_...`; IANA and Java `TLS_...`).
pub fn iana_name(suite: SupportedCipherSuite) -> String {
    let name = suite.suite().as_str().unwrap_or("unknown");
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name.to_string(),
    }
}

/// Builds the server configuration of every SSL listener. `ktls`: allow the session keys to
/// be extracted after the handshake (kernel TLS hand-off).
pub fn server_config(ssl: &SslConfig, ktls: bool) -> Result<Arc<ServerConfig>, TlsConfigError> {
    if ssl.key_password_set {
        return Err(TlsConfigError::KeyPasswordUnsupported);
    }
    let keystore = ssl
        .keystore_location
        .as_deref()
        .ok_or(TlsConfigError::Missing {
            key: "ssl.keystore.location",
        })?;
    let (chain, key) = load_keystore(keystore)?;
    let provider = Arc::new(provider(&ssl.cipher_suites)?);
    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    for version in &ssl.enabled_protocols {
        versions.push(match version {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        });
    }
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|error| TlsConfigError::Protocols(format!("{error} (with ssl.cipher.suites)")))?;
    let builder = match ssl.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let truststore = ssl
                .truststore_location
                .as_deref()
                .ok_or(TlsConfigError::Missing {
                    key: "ssl.truststore.location",
                })?;
            let roots = load_truststore(truststore)?;
            let mut verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
            if auth == ClientAuth::Requested {
                verifier = verifier.allow_unauthenticated();
            }
            let verifier = verifier.build().map_err(|error| TlsConfigError::BadFile {
                key: "ssl.truststore.location",
                path: truststore.to_path_buf(),
                reason: error.to_string(),
            })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config =
        builder
            .with_single_cert(chain, key)
            .map_err(|error| TlsConfigError::BadFile {
                key: "ssl.keystore.location",
                path: keystore.to_path_buf(),
                reason: format!("the private key and certificate are not usable: {error}"),
            })?;
    config.enable_secret_extraction = ktls;
    // No session tickets: no handshake message follows the handshake, so the keys can move
    // to the kernel at once, and there is nothing to resume from anyway (no ticketer).
    config.send_tls13_tickets = 0;
    // Kafka's own responses carry the order; the client's preference order is as good.
    config.ignore_client_order = false;
    Ok(Arc::new(config))
}

fn read_pem(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsConfigError> {
    std::fs::read(path).map_err(|source| TlsConfigError::Unreadable {
        key,
        path: path.to_path_buf(),
        source,
    })
}

/// Reads `ssl.keystore.location`: exactly one private key and a certificate chain (leaf first).
pub fn load_keystore(
    path: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsConfigError> {
    const KEY: &str = "ssl.keystore.location";
    let text = read_pem(KEY, path)?;
    let bad = |reason: String| TlsConfigError::BadFile {
        key: KEY,
        path: path.to_path_buf(),
        reason,
    };
    if contains(&text, b"ENCRYPTED PRIVATE KEY") || contains(&text, b"Proc-Type: 4,ENCRYPTED") {
        return Err(bad(
            "the private key is encrypted, which is not supported (ssl.key.password); \
             decrypt it with openssl pkey"
                .into(),
        ));
    }
    let mut chain = Vec::new();
    let mut key: Option<PrivateKeyDer<'static>> = None;
    for item in rustls_pemfile::read_all(&mut text.as_slice()) {
        let item = item.map_err(|error| bad(format!("not valid PEM: {error}")))?;
        let found = match item {
            rustls_pemfile::Item::X509Certificate(cert) => {
                chain.push(cert);
                continue;
            }
            rustls_pemfile::Item::Pkcs1Key(k) => PrivateKeyDer::from(k),
            rustls_pemfile::Item::Pkcs8Key(k) => PrivateKeyDer::from(k),
            rustls_pemfile::Item::Sec1Key(k) => PrivateKeyDer::from(k),
            _ => continue,
        };
        if key.replace(found).is_some() {
            return Err(bad("more than one private key".into()));
        }
    }
    let key = key.ok_or_else(|| bad("no private key (PRIVATE KEY block)".into()))?;
    if chain.is_empty() {
        return Err(bad("no certificate (CERTIFICATE block)".into()));
    }
    // The key must be one rustls can sign with (RSA, ECDSA P-256/P-384, Ed25519).
    let provider = rustls::crypto::ring::default_provider();
    provider
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|error| bad(format!("unusable private key: {error}")))?;
    Ok((chain, key))
}

/// Reads `ssl.truststore.location`: one or more CA certificates.
pub fn load_truststore(path: &Path) -> Result<RootCertStore, TlsConfigError> {
    const KEY: &str = "ssl.truststore.location";
    let text = read_pem(KEY, path)?;
    let bad = |reason: String| TlsConfigError::BadFile {
        key: KEY,
        path: path.to_path_buf(),
        reason,
    };
    let mut roots = RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut text.as_slice()) {
        let cert = cert.map_err(|error| bad(format!("not valid PEM: {error}")))?;
        roots
            .add(cert)
            .map_err(|error| bad(format!("unusable CA certificate: {error}")))?;
    }
    if roots.is_empty() {
        return Err(bad("no certificate (CERTIFICATE block)".into()));
    }
    Ok(roots)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssl(keystore: &Path) -> SslConfig {
        SslConfig {
            keystore_location: Some(keystore.to_path_buf()),
            key_password_set: false,
            truststore_location: None,
            client_auth: ClientAuth::None,
            enabled_protocols: vec![TlsVersion::Tls12, TlsVersion::Tls13],
            cipher_suites: Vec::new(),
            ktls_enable: false,
        }
    }

    fn message(result: Result<Arc<ServerConfig>, TlsConfigError>) -> String {
        match result {
            Ok(_) => panic!("accepted a bad configuration"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn keystore_errors_name_the_key_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let e = message(server_config(&ssl(&missing), false));
        assert!(
            e.contains("ssl.keystore.location") && e.contains("missing.pem"),
            "{e}"
        );

        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not pem at all\n").unwrap();
        let e = message(server_config(&ssl(&garbage), false));
        assert!(
            e.contains("ssl.keystore.location") && e.contains("garbage.pem"),
            "{e}"
        );
        assert!(e.contains("no private key"), "{e}");

        let encrypted = dir.path().join("encrypted.pem");
        std::fs::write(
            &encrypted,
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
        )
        .unwrap();
        let e = message(server_config(&ssl(&encrypted), false));
        assert!(
            e.contains("encrypted") && e.contains("encrypted.pem"),
            "{e}"
        );

        let mut with_password = ssl(&garbage);
        with_password.key_password_set = true;
        let e = message(server_config(&with_password, false));
        assert!(e.contains("ssl.key.password"), "{e}");

        let e = message(server_config(
            &SslConfig {
                keystore_location: None,
                ..ssl(&garbage)
            },
            false,
        ));
        assert!(e.contains("ssl.keystore.location is required"), "{e}");
    }

    #[test]
    fn truststore_errors_name_the_key_and_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("ca.pem");
        std::fs::write(&empty, "").unwrap();
        let e = load_truststore(&empty).unwrap_err().to_string();
        assert!(
            e.contains("ssl.truststore.location") && e.contains("ca.pem"),
            "{e}"
        );
        let e = load_truststore(&dir.path().join("none.pem"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("ssl.truststore.location") && e.contains("none.pem"),
            "{e}"
        );
    }

    #[test]
    fn cipher_suites_by_iana_name() {
        let p = provider(&["TLS_AES_128_GCM_SHA256".into()]).unwrap();
        assert_eq!(p.cipher_suites.len(), 1);
        assert_eq!(iana_name(p.cipher_suites[0]), "TLS_AES_128_GCM_SHA256");
        let p = provider(&["tls_ecdhe_rsa_with_aes_256_gcm_sha384".into()]).unwrap();
        assert_eq!(
            iana_name(p.cipher_suites[0]),
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"
        );
        let e = provider(&["TLS_RSA_WITH_RC4_128_MD5".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ssl.cipher.suites") && e.contains("RC4"), "{e}");
        assert!(
            e.contains("TLS_AES_128_GCM_SHA256"),
            "lists what is supported: {e}"
        );
    }
}

//! TLS for the native client: rustls 0.23 with the ring provider, the same crypto as the
//! broker's TLS listener, so that a TLS fetch costs the client what it costs the broker.
//!
//! Configured with Kafka's client keys (librdkafka aliases accepted):
//! - `security.protocol`: `PLAINTEXT` (default) or `SSL`;
//! - `ssl.truststore.location` / `ssl.ca.location`: PEM file of the CA certificates
//!   (`ssl.truststore.type` must be `PEM` when given);
//! - `ssl.keystore.location` / `ssl.certificate.location` + `ssl.key.location`: a PEM file
//!   with the client's private key and certificate chain, for brokers that ask for one;
//! - `ssl.cipher.suites`: comma list of suites to offer (Java/IANA names such as
//!   `TLS_AES_128_GCM_SHA256`, `TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256`); default: rustls'.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use rustls::crypto::CryptoProvider;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::PropView;

/// The client TLS configuration the properties ask for; None for PLAINTEXT.
pub fn client_config(props: &[(String, String)]) -> Result<Option<Arc<rustls::ClientConfig>>> {
    let p = PropView(props);
    let protocol = p
        .string(&["security.protocol"], "PLAINTEXT")
        .to_ascii_uppercase();
    match protocol.as_str() {
        "PLAINTEXT" => return Ok(None),
        "SSL" => {}
        other => bail!("security.protocol={other}: the native client speaks PLAINTEXT and SSL"),
    }
    if let Some(kind) = p.get(&["ssl.truststore.type"]) {
        if !kind.eq_ignore_ascii_case("PEM") {
            bail!("ssl.truststore.type={kind}: the native client reads PEM files only");
        }
    }
    let ca = p
        .get(&["ssl.truststore.location", "ssl.ca.location"])
        .context("security.protocol=SSL: set ssl.truststore.location (PEM CA certificates)")?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).with_context(|| format!("reading {ca}"))? {
        roots
            .add(cert.with_context(|| format!("a certificate of {ca}"))?)
            .with_context(|| format!("a CA certificate of {ca}"))?;
    }
    if roots.is_empty() {
        bail!("{ca}: no certificate");
    }
    let provider = provider(p.get(&["ssl.cipher.suites"]))?;
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_root_certificates(roots);
    let keystore = p.get(&["ssl.keystore.location", "ssl.certificate.location"]);
    let config = match keystore {
        None => builder.with_no_client_auth(),
        Some(chain_file) => {
            let key_file = p.get(&["ssl.key.location"]).unwrap_or(chain_file);
            let (chain, key) = key_and_chain(Path::new(chain_file), Path::new(key_file))?;
            builder
                .with_client_auth_cert(chain, key)
                .context("client certificate")?
        }
    };
    Ok(Some(Arc::new(config)))
}

/// The ring provider, its suites limited to `suites` (a comma list) when given.
fn provider(suites: Option<&str>) -> Result<CryptoProvider> {
    let mut provider = rustls::crypto::ring::default_provider();
    let Some(list) = suites.filter(|s| !s.trim().is_empty()) else {
        return Ok(provider);
    };
    let wanted: Vec<String> = list
        .split(',')
        .map(|s| suite_key(s.trim()))
        .filter(|s| !s.is_empty())
        .collect();
    provider
        .cipher_suites
        .retain(|s| wanted.contains(&suite_key(s.suite().as_str().unwrap_or(""))));
    if provider.cipher_suites.is_empty() {
        bail!("ssl.cipher.suites={list}: none of these is a suite rustls (ring) offers");
    }
    Ok(provider)
}

/// A suite name as compared: upper case, rustls' `TLS13_` prefix read as IANA's `TLS_`.
fn suite_key(name: &str) -> String {
    let upper = name.to_ascii_uppercase();
    match upper.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => upper,
    }
}

fn key_and_chain(
    chain_file: &Path,
    key_file: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let chain = CertificateDer::pem_file_iter(chain_file)
        .with_context(|| format!("reading {}", chain_file.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("certificates of {}", chain_file.display()))?;
    let key = PrivateKeyDer::from_pem_file(key_file)
        .with_context(|| format!("private key of {}", key_file.display()))?;
    Ok((chain, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_needs_no_config() {
        assert!(client_config(&[]).unwrap().is_none());
        let props = [("security.protocol".to_string(), "SASL_SSL".to_string())];
        assert!(client_config(&props).is_err());
        let props = [("security.protocol".to_string(), "SSL".to_string())];
        let e = client_config(&props).unwrap_err().to_string();
        assert!(e.contains("ssl.truststore.location"), "{e}");
    }

    #[test]
    fn suites_are_matched_by_iana_name() {
        let p = provider(Some("TLS_AES_128_GCM_SHA256")).unwrap();
        assert_eq!(p.cipher_suites.len(), 1);
        let p = provider(Some(
            "TLS_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        ))
        .unwrap();
        assert_eq!(p.cipher_suites.len(), 2);
        assert!(provider(Some("TLS_NOPE")).is_err());
        assert!(provider(None).unwrap().cipher_suites.len() > 2);
    }
}

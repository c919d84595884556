//! The typed `ssl.*` settings of the SSL listeners (Kafka's key names). The files they name
//! are read and checked at start-up by `crate::tls::config`, which names the key and the file
//! in every error.

use std::path::PathBuf;

use super::properties::list_items;
use super::ConfigError;

/// `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// A TLS version of `ssl.enabled.protocols`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// The SSL listeners' settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SslConfig {
    /// `ssl.keystore.location`: private key and certificate chain, PEM.
    pub keystore_location: Option<PathBuf>,
    /// Whether `ssl.key.password` is set (encrypted keys are refused at start-up).
    pub key_password_set: bool,
    /// `ssl.truststore.location`: CA certificates, PEM.
    pub truststore_location: Option<PathBuf>,
    pub client_auth: ClientAuth,
    pub enabled_protocols: Vec<TlsVersion>,
    /// `ssl.cipher.suites`, IANA names as given; empty = the provider's defaults.
    pub cipher_suites: Vec<String>,
    /// `ssl.ktls.enable` (ours).
    pub ktls_enable: bool,
}

impl SslConfig {
    /// Builds the settings from already validated raw values (`get` = value or default).
    pub(super) fn from_values<'a>(
        get: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<SslConfig, ConfigError> {
        let path = |k: &str| {
            get(k)
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let client_auth = match get("ssl.client.auth")
            .unwrap_or("none")
            .trim()
            .to_ascii_lowercase()
            .as_str()
        {
            "none" => ClientAuth::None,
            "requested" => ClientAuth::Requested,
            "required" => ClientAuth::Required,
            other => {
                return Err(ConfigError::InvalidValue {
                    key: "ssl.client.auth".into(),
                    value: other.into(),
                    expected: "none, requested or required".into(),
                })
            }
        };
        let mut enabled_protocols = Vec::new();
        for item in list_items(get("ssl.enabled.protocols").unwrap_or("TLSv1.2,TLSv1.3")) {
            let version = if item.eq_ignore_ascii_case("TLSv1.2") {
                TlsVersion::Tls12
            } else if item.eq_ignore_ascii_case("TLSv1.3") {
                TlsVersion::Tls13
            } else {
                return Err(ConfigError::InvalidValue {
                    key: "ssl.enabled.protocols".into(),
                    value: item.into(),
                    expected: "TLSv1.2 and/or TLSv1.3".into(),
                });
            };
            if !enabled_protocols.contains(&version) {
                enabled_protocols.push(version);
            }
        }
        Ok(SslConfig {
            keystore_location: path("ssl.keystore.location"),
            key_password_set: get("ssl.key.password").is_some_and(|v| !v.is_empty()),
            truststore_location: path("ssl.truststore.location"),
            client_auth,
            enabled_protocols,
            cipher_suites: list_items(get("ssl.cipher.suites").unwrap_or(""))
                .into_iter()
                .map(str::to_string)
                .collect(),
            ktls_enable: !matches!(get("ssl.ktls.enable"), Some(v) if v.eq_ignore_ascii_case("false")),
        })
    }
}

//! SASL on the SASL_PLAINTEXT and SASL_SSL listeners: what each listener accepts (built once
//! at start-up from `sasl.enabled.mechanisms` and the listener's JAAS configuration, every
//! error naming its key), and the exchange a connection goes through before its first other
//! request (`exchange`). The mechanisms themselves are the `sasl` crate's.
//!
//! Kafka's rules kept: before authentication only ApiVersions, SaslHandshake and
//! SaslAuthenticate are read (anything else closes the connection), frames are capped by
//! `sasl.server.max.receive.size`, a failed authentication is answered with its error and the
//! connection closed. The principal of an authenticated connection is `User:<name>`, what
//! Kafka's default principal builder gives. Once authenticated, the connection's `Session`
//! bounds its lifetime and serves its re-authentications (KIP-368, `session`).

mod exchange;
mod session;

use std::collections::HashMap;
use std::sync::Arc;

use config::BrokerConfig;
use sasl::jaas::JaasEntry;
use sasl::{Mechanism, OAuthConfig, PlainUsers};

pub use exchange::{authenticate, Authenticated};
pub use session::{session_lifetime_ms, Admission, Session, MIN_REAUTH_INTERVAL};

/// The most requests a connection may send before it is authenticated: ApiVersions (maybe
/// retried at a lower version), SaslHandshake, and the mechanism's round trips (SCRAM: 2,
/// OAUTHBEARER's failure path: 2).
pub const MAX_REQUESTS_BEFORE_AUTHENTICATION: usize = 16;

/// The longest the whole exchange may take before the connection is closed (Kafka leaves it
/// to `connections.max.idle.ms`; a slot held by a silent client is a slot under
/// `max.connections`, so it gets its own bound).
pub const AUTHENTICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A SASL setting the broker cannot start with.
#[derive(Debug, thiserror::Error)]
pub enum SaslSetupError {
    #[error("sasl.enabled.mechanisms: {mechanism} is not served (served: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER){hint}")]
    Unserved {
        mechanism: String,
        hint: &'static str,
    },
    #[error("sasl.enabled.mechanisms: no mechanism enabled for SASL listener {listener}")]
    NoMechanism { listener: String },
    #[error("{key}: {reason}")]
    Jaas { key: String, reason: String },
    #[error("{key} is required: mechanism PLAIN on listener {listener} takes its users from `user_<name>=\"<password>\"` options of PlainLoginModule")]
    MissingPlainUsers { key: String, listener: String },
    #[error("sasl.oauthbearer.jwks.endpoint.url: {0}")]
    Jwks(String),
}

/// What one SASL listener accepts.
pub struct ListenerSasl {
    pub mechanisms: Vec<Mechanism>,
    pub plain_users: PlainUsers,
    /// Each mechanism's session bound (`connections.max.reauth.ms`, the listener's own key
    /// first); 0 = none.
    pub max_reauth_ms: HashMap<Mechanism, i64>,
}

/// Every SASL listener's settings; shared by all shards.
pub struct SaslServer {
    listeners: HashMap<String, ListenerSasl>,
    pub oauth: OAuthConfig,
    /// `sasl.server.max.receive.size`.
    pub max_receive_size: usize,
}

impl SaslServer {
    /// `None` when no listener is a SASL one.
    pub fn from_config(config: &BrokerConfig) -> Result<Option<Arc<SaslServer>>, SaslSetupError> {
        let sasl_listeners: Vec<&str> = config
            .listeners
            .iter()
            .filter(|l| l.protocol.is_sasl())
            .map(|l| l.name.as_str())
            .collect();
        if sasl_listeners.is_empty() {
            return Ok(None);
        }
        let mut mechanisms = Vec::new();
        for name in &config.sasl.enabled_mechanisms {
            let hint = if name.eq_ignore_ascii_case("GSSAPI") {
                " (GSSAPI, Kerberos, is Kafka's default: set sasl.enabled.mechanisms)"
            } else {
                ""
            };
            let mechanism = Mechanism::parse(name).ok_or_else(|| SaslSetupError::Unserved {
                mechanism: name.clone(),
                hint,
            })?;
            if !mechanisms.contains(&mechanism) {
                mechanisms.push(mechanism);
            }
        }
        let mut listeners = HashMap::new();
        for listener in sasl_listeners {
            if mechanisms.is_empty() {
                return Err(SaslSetupError::NoMechanism {
                    listener: listener.to_string(),
                });
            }
            let mut entries: Vec<JaasEntry> = Vec::new();
            for mechanism in &mechanisms {
                let key = jaas_key_name(listener, mechanism.name());
                let Some(text) = config.sasl.jaas_for(listener, mechanism.name()) else {
                    if *mechanism == Mechanism::Plain {
                        return Err(SaslSetupError::MissingPlainUsers {
                            key,
                            listener: listener.to_string(),
                        });
                    }
                    continue;
                };
                let parsed = sasl::jaas::parse(text).map_err(|error| SaslSetupError::Jaas {
                    key: key.clone(),
                    reason: error.to_string(),
                })?;
                if *mechanism == Mechanism::Plain {
                    entries.extend(parsed);
                }
            }
            let plain_users = PlainUsers::from_jaas(&entries);
            let max_reauth_ms = mechanisms
                .iter()
                .map(|m| (*m, config.sasl.max_reauth_ms(listener, m.name())))
                .collect();
            listeners.insert(
                listener.to_string(),
                ListenerSasl {
                    mechanisms: mechanisms.clone(),
                    plain_users,
                    max_reauth_ms,
                },
            );
        }
        let oauth = oauth_config(&config.sasl.oauthbearer)?;
        Ok(Some(Arc::new(SaslServer {
            listeners,
            oauth,
            max_receive_size: config.sasl.server_max_receive_size,
        })))
    }

    /// The listener's settings; `None` for a listener that is not a SASL one.
    pub fn listener(&self, name: &str) -> Option<&ListenerSasl> {
        self.listeners.get(name)
    }

    /// The session bound of `mechanism` on `listener` (ms; 0 = none).
    pub fn max_reauth_ms(&self, listener: &str, mechanism: Mechanism) -> i64 {
        self.listener(listener)
            .and_then(|l| l.max_reauth_ms.get(&mechanism))
            .copied()
            .unwrap_or(0)
    }
}

/// Kafka's spelling of the key (listener name in lower case).
fn jaas_key_name(listener: &str, mechanism: &str) -> String {
    format!(
        "{}{}.{}{}",
        config::SASL_LISTENER_PREFIX,
        listener.to_ascii_lowercase(),
        mechanism.to_ascii_lowercase(),
        config::SASL_JAAS_SUFFIX
    )
}

fn oauth_config(settings: &config::OAuthBearerConfig) -> Result<OAuthConfig, SaslSetupError> {
    let mut oauth = match &settings.jwks_endpoint_url {
        None => OAuthConfig::unsecured(),
        Some(url) => {
            let path = url.strip_prefix("file://").ok_or_else(|| {
                SaslSetupError::Jwks(format!(
                    "`{url}`: only file:// URLs are read (the broker fetches nothing at start-up)"
                ))
            })?;
            let json = std::fs::read_to_string(path)
                .map_err(|error| SaslSetupError::Jwks(format!("{path}: {error}")))?;
            OAuthConfig::with_jwks_json(&json)
                .map_err(|error| SaslSetupError::Jwks(format!("{path}: {error}")))?
        }
    };
    oauth.sub_claim_name = settings.sub_claim_name.clone();
    oauth.scope_claim_name = settings.scope_claim_name.clone();
    oauth.expected_audience = settings.expected_audience.clone();
    oauth.expected_issuer = settings.expected_issuer.clone();
    oauth.clock_skew_seconds = settings.clock_skew_seconds;
    Ok(oauth)
}

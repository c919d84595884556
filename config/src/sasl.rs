//! The typed `sasl.*` settings of the SASL listeners (Kafka's key names), and the per listener
//! and mechanism JAAS configuration
//! (`listener.name.<listener>.<mechanism>.sasl.jaas.config`). The JAAS text is kept raw here:
//! the broker parses it at start-up (the `sasl` crate) and names the key in every error.

use std::collections::BTreeMap;

use super::properties::list_items;
use super::ConfigError;

/// Prefix of the per-listener keys.
pub const LISTENER_PREFIX: &str = "listener.name.";

/// What a per-listener key must end with: `listener.name.<listener>.<mechanism>` + this.
pub const JAAS_SUFFIX: &str = ".sasl.jaas.config";

/// The mechanisms this broker can serve (Kafka's names, case-sensitive as Kafka).
pub const SERVED_MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

/// `sasl.oauthbearer.*`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct OAuthBearerConfig {
    /// `sasl.oauthbearer.jwks.endpoint.url`: a `file://` URL; `None` = unsecured tokens.
    pub jwks_endpoint_url: Option<String>,
    pub expected_audience: Vec<String>,
    pub expected_issuer: Option<String>,
    pub sub_claim_name: String,
    pub scope_claim_name: String,
    pub clock_skew_seconds: i64,
}

/// The SASL listeners' settings.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SaslConfig {
    /// `sasl.enabled.mechanisms`, as written (checked against [`SERVED_MECHANISMS`] at
    /// start-up, only when a SASL listener exists, as Kafka does).
    pub enabled_mechanisms: Vec<String>,
    /// `sasl.mechanism.inter.broker.protocol`.
    pub inter_broker_mechanism: String,
    /// `sasl.server.max.receive.size`: the largest frame before authentication completes.
    pub server_max_receive_size: usize,
    /// `connections.max.reauth.ms`; 0 = sessions never expire.
    pub connections_max_reauth_ms: i64,
    /// `listener.name.<listener>.<mechanism>.sasl.jaas.config`, keyed by (listener name upper
    /// case, mechanism upper case).
    pub jaas: BTreeMap<(String, String), String>,
    pub oauthbearer: OAuthBearerConfig,
}

impl SaslConfig {
    /// The JAAS text for `mechanism` on `listener` (Kafka reads no unprefixed
    /// `sasl.jaas.config` on a broker).
    pub fn jaas_for(&self, listener: &str, mechanism: &str) -> Option<&str> {
        self.jaas
            .get(&(
                listener.to_ascii_uppercase(),
                mechanism.to_ascii_uppercase(),
            ))
            .map(String::as_str)
    }

    pub(super) fn from_values<'a>(
        get: impl Fn(&str) -> Option<&'a str>,
        explicit: &BTreeMap<String, String>,
    ) -> Result<SaslConfig, ConfigError> {
        let int = |k: &str| -> Result<i64, ConfigError> {
            let v = get(k).unwrap_or("0").trim();
            v.parse().map_err(|_| ConfigError::InvalidValue {
                key: k.into(),
                value: v.into(),
                expected: "a number".into(),
            })
        };
        let text = |k: &str| get(k).map(str::trim).filter(|v| !v.is_empty());
        let list = |k: &str| {
            text(k)
                .map(|v| list_items(v).into_iter().map(str::to_string).collect())
                .unwrap_or_default()
        };
        let mut jaas = BTreeMap::new();
        for (key, value) in explicit {
            if let Some((listener, mechanism)) = jaas_key(key) {
                jaas.insert((listener, mechanism), value.clone());
            }
        }
        Ok(SaslConfig {
            enabled_mechanisms: list("sasl.enabled.mechanisms"),
            inter_broker_mechanism: text("sasl.mechanism.inter.broker.protocol")
                .unwrap_or("GSSAPI")
                .to_string(),
            server_max_receive_size: int("sasl.server.max.receive.size")?.max(1) as usize,
            connections_max_reauth_ms: int("connections.max.reauth.ms")?.max(0),
            jaas,
            oauthbearer: OAuthBearerConfig {
                jwks_endpoint_url: text("sasl.oauthbearer.jwks.endpoint.url").map(str::to_string),
                expected_audience: list("sasl.oauthbearer.expected.audience"),
                expected_issuer: text("sasl.oauthbearer.expected.issuer").map(str::to_string),
                sub_claim_name: text("sasl.oauthbearer.sub.claim.name")
                    .unwrap_or("sub")
                    .to_string(),
                scope_claim_name: text("sasl.oauthbearer.scope.claim.name")
                    .unwrap_or("scope")
                    .to_string(),
                clock_skew_seconds: int("sasl.oauthbearer.clock.skew.seconds")?.max(0),
            },
        })
    }
}

/// `listener.name.<listener>.<mechanism>.sasl.jaas.config` -> (LISTENER, MECHANISM); `None`
/// for any other key. Kafka writes the listener name in lower case here; either case is
/// taken.
pub fn jaas_key(key: &str) -> Option<(String, String)> {
    let rest = key
        .strip_prefix(LISTENER_PREFIX)?
        .strip_suffix(JAAS_SUFFIX)?;
    let (listener, mechanism) = rest.split_once('.')?;
    if listener.is_empty() || mechanism.is_empty() || mechanism.contains('.') {
        return None;
    }
    Some((
        listener.to_ascii_uppercase(),
        mechanism.to_ascii_uppercase(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaas_keys_name_a_listener_and_a_mechanism() {
        assert_eq!(
            jaas_key("listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config"),
            Some(("SASL_SSL".into(), "SCRAM-SHA-256".into()))
        );
        assert_eq!(
            jaas_key("listener.name.CLIENT.plain.sasl.jaas.config"),
            Some(("CLIENT".into(), "PLAIN".into()))
        );
        assert_eq!(jaas_key("listener.name.client.sasl.jaas.config"), None);
        assert_eq!(jaas_key("listener.name.a.b.c.sasl.jaas.config"), None);
        assert_eq!(jaas_key("sasl.jaas.config"), None);
    }
}

//! The typed `sasl.*` settings of the SASL listeners (Kafka's key names), and the per listener
//! and mechanism JAAS configuration
//! (`listener.name.<listener>.<mechanism>.sasl.jaas.config`) and session lifetime
//! (`listener.name.<listener>.<mechanism>.connections.max.reauth.ms`). The JAAS text is kept
//! raw here: the broker parses it at start-up (the `sasl` crate) and names the key in every
//! error.

use std::collections::BTreeMap;

use super::properties::list_items;
use super::ConfigError;

/// Prefix of the per-listener keys.
pub const LISTENER_PREFIX: &str = "listener.name.";

/// What a per-listener key must end with: `listener.name.<listener>.<mechanism>` + this.
pub const JAAS_SUFFIX: &str = ".sasl.jaas.config";

/// What a per-listener session lifetime key ends with (KIP-368; Kafka's
/// `ListenerName.saslMechanismConfigPrefix` + `connections.max.reauth.ms`).
pub const REAUTH_SUFFIX: &str = ".connections.max.reauth.ms";

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
    /// `connections.max.reauth.ms`: the longest a SASL session lasts before the client must
    /// re-authenticate (KIP-368); 0 = no bound (an OAUTHBEARER token's expiry still is one).
    pub connections_max_reauth_ms: i64,
    /// `listener.name.<listener>.<mechanism>.connections.max.reauth.ms`, keyed as `jaas`;
    /// each overrides `connections_max_reauth_ms` for its listener and mechanism.
    pub max_reauth_ms_by_listener: BTreeMap<(String, String), i64>,
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

    /// The session bound for `mechanism` on `listener`, as Kafka looks it up: the listener's
    /// own key first, then `connections.max.reauth.ms`.
    pub fn max_reauth_ms(&self, listener: &str, mechanism: &str) -> i64 {
        self.max_reauth_ms_by_listener
            .get(&(
                listener.to_ascii_uppercase(),
                mechanism.to_ascii_uppercase(),
            ))
            .copied()
            .unwrap_or(self.connections_max_reauth_ms)
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
        let mut max_reauth_ms_by_listener = BTreeMap::new();
        for (key, value) in explicit {
            if let Some((listener, mechanism)) = jaas_key(key) {
                jaas.insert((listener, mechanism), value.clone());
            } else if let Some((listener, mechanism)) = reauth_key(key) {
                let ms = value
                    .trim()
                    .parse::<i64>()
                    .ok()
                    .filter(|ms| *ms >= 0)
                    .ok_or_else(|| ConfigError::InvalidValue {
                        key: key.clone(),
                        value: value.clone(),
                        expected: "a number of milliseconds, at least 0".into(),
                    })?;
                max_reauth_ms_by_listener.insert((listener, mechanism), ms);
            }
        }
        Ok(SaslConfig {
            enabled_mechanisms: list("sasl.enabled.mechanisms"),
            inter_broker_mechanism: text("sasl.mechanism.inter.broker.protocol")
                .unwrap_or("GSSAPI")
                .to_string(),
            server_max_receive_size: int("sasl.server.max.receive.size")?.max(1) as usize,
            connections_max_reauth_ms: int("connections.max.reauth.ms")?.max(0),
            max_reauth_ms_by_listener,
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
    listener_mechanism_key(key, JAAS_SUFFIX)
}

/// `listener.name.<listener>.<mechanism>.connections.max.reauth.ms` -> (LISTENER, MECHANISM);
/// `None` for any other key (the unprefixed `connections.max.reauth.ms` included).
pub fn reauth_key(key: &str) -> Option<(String, String)> {
    listener_mechanism_key(key, REAUTH_SUFFIX)
}

fn listener_mechanism_key(key: &str, suffix: &str) -> Option<(String, String)> {
    let rest = key.strip_prefix(LISTENER_PREFIX)?.strip_suffix(suffix)?;
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

    #[test]
    fn reauth_keys_name_a_listener_and_a_mechanism() {
        assert_eq!(
            reauth_key("listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms"),
            Some(("SASL_SSL".into(), "OAUTHBEARER".into()))
        );
        assert_eq!(reauth_key("connections.max.reauth.ms"), None);
        assert_eq!(
            reauth_key("listener.name.client.connections.max.reauth.ms"),
            None
        );
        assert_eq!(
            jaas_key("listener.name.client.plain.connections.max.reauth.ms"),
            None
        );
    }

    fn parse(pairs: &[(&str, &str)]) -> Result<SaslConfig, ConfigError> {
        let explicit: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SaslConfig::from_values(|k| explicit.get(k).map(String::as_str), &explicit)
    }

    #[test]
    fn a_listener_key_overrides_the_broker_wide_session_bound() {
        let config = parse(&[
            ("connections.max.reauth.ms", "60000"),
            (
                "listener.name.client.scram-sha-256.connections.max.reauth.ms",
                "3000",
            ),
        ])
        .expect("valid");
        assert_eq!(config.max_reauth_ms("CLIENT", "SCRAM-SHA-256"), 3000);
        assert_eq!(config.max_reauth_ms("client", "scram-sha-256"), 3000);
        assert_eq!(config.max_reauth_ms("CLIENT", "PLAIN"), 60000);
        assert_eq!(config.max_reauth_ms("OTHER", "SCRAM-SHA-256"), 60000);
    }

    #[test]
    fn a_bad_listener_session_bound_names_its_key() {
        for bad in ["-1", "soon", ""] {
            let key = "listener.name.client.plain.connections.max.reauth.ms";
            match parse(&[(key, bad)]) {
                Err(ConfigError::InvalidValue { key: named, .. }) => assert_eq!(named, key),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }
}

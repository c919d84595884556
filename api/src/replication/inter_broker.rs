//! How this broker reaches the others (replica fetchers, transaction markers): the
//! inter-broker listener (Kafka's `inter.broker.listener.name`, else a PLAINTEXT listener)
//! and, when that is a SASL_PLAINTEXT listener, the login used on it: the mechanism of
//! `sasl.mechanism.inter.broker.protocol` (default PLAIN), with the `username` and `password`
//! options of that listener's JAAS entry for the mechanism, as Kafka reads its own login from
//! `listener.name.<l>.<mechanism>.sasl.jaas.config`.
//!
//! TLS between brokers is not served: an SSL or SASL_SSL inter-broker listener, and an
//! OAUTHBEARER inter-broker mechanism (which needs a token source), are refused at start-up.

use std::rc::Rc;

use sasl::ClientSession;
use sasl::Mechanism;

use crate::config::{BrokerConfig, SecurityProtocol};
use crate::shard::Shard;

/// Why the inter-broker settings cannot be used (start-up refuses them).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InterBrokerError {
    #[error("inter.broker.listener.name: no listener is named {0}")]
    NoSuchListener(String),
    #[error("inter.broker.listener.name: {0} is a {1} listener; TLS between brokers is not served (use PLAINTEXT or SASL_PLAINTEXT between brokers)")]
    Tls(String, &'static str),
    #[error("sasl.mechanism.inter.broker.protocol: {0} is not a mechanism brokers can log in with (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")]
    Mechanism(String),
    #[error("sasl.mechanism.inter.broker.protocol is {mechanism}, which {listener} does not enable (sasl.enabled.mechanisms)")]
    NotEnabled { mechanism: String, listener: String },
    #[error("{key}: the inter-broker login needs username=\"...\" and password=\"...\" options")]
    NoLogin { key: String },
    #[error("{key}: {reason}")]
    Jaas { key: String, reason: String },
}

/// The listener brokers reach each other on, and the login on it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterBroker {
    /// The listener's name, as registrations name their endpoints; `None`: the first
    /// PLAINTEXT endpoint (no listener named, none configured as such).
    pub listener: Option<String>,
    pub login: Option<Login>,
}

/// A SASL login.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    pub mechanism: Mechanism,
    pub username: String,
    pub password: String,
}

/// The password stays out of logs.
impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl Login {
    /// A fresh client side of the exchange.
    pub fn session(&self) -> ClientSession {
        match self.mechanism.scram() {
            Some(scram) => ClientSession::scram_random(scram, &self.username, &self.password),
            None => ClientSession::plain(&self.username, &self.password),
        }
    }
}

impl InterBroker {
    pub fn from_config(config: &BrokerConfig) -> Result<InterBroker, InterBrokerError> {
        let Some(name) = config.raw("inter.broker.listener.name") else {
            return Ok(InterBroker::default());
        };
        let listener = config
            .listeners
            .iter()
            .find(|l| l.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| InterBrokerError::NoSuchListener(name.to_string()))?;
        let listener_name = listener.name.clone();
        let login = match listener.protocol {
            SecurityProtocol::Plaintext => None,
            SecurityProtocol::Ssl => return Err(InterBrokerError::Tls(listener_name, "SSL")),
            SecurityProtocol::SaslSsl => {
                return Err(InterBrokerError::Tls(listener_name, "SASL_SSL"))
            }
            SecurityProtocol::SaslPlaintext => Some(login(config, &listener_name)?),
        };
        Ok(InterBroker {
            listener: Some(listener_name),
            login,
        })
    }
}

/// The shard's inter-broker settings, read once from a configuration start-up accepted (a
/// refused one, never here, is logged and read as the default).
pub fn of(shard: &Shard) -> Rc<InterBroker> {
    shard
        .replication
        .inter_broker
        .get_or_init(|| {
            let settings = InterBroker::from_config(&shard.config).unwrap_or_else(|error| {
                tracing::error!(%error, "inter-broker settings");
                InterBroker::default()
            });
            Rc::new(settings)
        })
        .clone()
}

fn login(config: &BrokerConfig, listener: &str) -> Result<Login, InterBrokerError> {
    let wanted = config.sasl.inter_broker_mechanism.as_str();
    let mechanism = Mechanism::parse(wanted)
        .filter(|m| *m != Mechanism::OAuthBearer)
        .ok_or_else(|| InterBrokerError::Mechanism(wanted.to_string()))?;
    if !config.sasl.enabled_mechanisms.iter().any(|m| m == wanted) {
        return Err(InterBrokerError::NotEnabled {
            mechanism: wanted.to_string(),
            listener: listener.to_string(),
        });
    }
    let key = format!(
        "{}{}.{}{}",
        crate::config::SASL_LISTENER_PREFIX,
        listener.to_ascii_lowercase(),
        wanted.to_ascii_lowercase(),
        crate::config::SASL_JAAS_SUFFIX
    );
    let text = config
        .sasl
        .jaas_for(listener, wanted)
        .ok_or_else(|| InterBrokerError::NoLogin { key: key.clone() })?;
    let entries = sasl::jaas::parse(text).map_err(|error| InterBrokerError::Jaas {
        key: key.clone(),
        reason: error.to_string(),
    })?;
    entries
        .iter()
        .find_map(|entry| {
            Some(Login {
                mechanism,
                username: entry.option("username")?.to_string(),
                password: entry.option("password")?.to_string(),
            })
        })
        .ok_or(InterBrokerError::NoLogin { key })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BrokerConfig {
        let pairs = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        crate::config::from_pairs(pairs).expect("a valid configuration")
    }

    const LISTENERS: (&str, &str) = (
        "listeners",
        "PLAINTEXT://127.0.0.1:9092,BROKER://127.0.0.1:9094,SECURE://127.0.0.1:9095",
    );
    const MAP: (&str, &str) = (
        "listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,BROKER:SASL_PLAINTEXT,SECURE:SASL_SSL",
    );

    #[test]
    fn a_sasl_listener_logs_in_with_its_jaas_entry() {
        let c = config(&[
            LISTENERS,
            MAP,
            ("inter.broker.listener.name", "broker"),
            ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512"),
            ("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512"),
            (
                "listener.name.broker.scram-sha-512.sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required \
                 username=\"admin\" password=\"s3cret\";",
            ),
        ]);
        let inter = InterBroker::from_config(&c).expect("usable");
        assert_eq!(inter.listener.as_deref(), Some("BROKER"));
        let login = inter.login.expect("a login");
        assert_eq!(login.mechanism, Mechanism::ScramSha512);
        assert_eq!(
            (login.username.as_str(), login.password.as_str()),
            ("admin", "s3cret")
        );
        assert!(!format!("{login:?}").contains("s3cret"));
    }

    #[test]
    fn what_cannot_be_used_is_refused() {
        let plain_jaas = (
            "listener.name.broker.plain.sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             user_admin=\"x\";",
        );
        let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
            (
                vec![LISTENERS, MAP, ("inter.broker.listener.name", "SECURE")],
                "TLS between brokers",
            ),
            (
                vec![LISTENERS, MAP, ("inter.broker.listener.name", "NOPE")],
                "no listener is named NOPE",
            ),
            (
                vec![
                    LISTENERS,
                    MAP,
                    ("inter.broker.listener.name", "BROKER"),
                    ("sasl.enabled.mechanisms", "PLAIN"),
                    ("sasl.mechanism.inter.broker.protocol", "PLAIN"),
                    plain_jaas,
                ],
                "needs username",
            ),
            (
                vec![
                    LISTENERS,
                    MAP,
                    ("inter.broker.listener.name", "BROKER"),
                    ("sasl.enabled.mechanisms", "SCRAM-SHA-256"),
                    ("sasl.mechanism.inter.broker.protocol", "PLAIN"),
                    plain_jaas,
                ],
                "which BROKER does not enable",
            ),
            (
                // Kafka's default mechanism between brokers.
                vec![
                    LISTENERS,
                    MAP,
                    ("inter.broker.listener.name", "BROKER"),
                    ("sasl.enabled.mechanisms", "PLAIN"),
                    plain_jaas,
                ],
                "GSSAPI is not a mechanism",
            ),
        ];
        for (pairs, expected) in cases {
            let error = InterBroker::from_config(&config(&pairs)).expect_err("refused");
            assert!(error.to_string().contains(expected), "{error}");
        }
        assert_eq!(
            InterBroker::from_config(&config(&[LISTENERS, MAP])),
            Ok(InterBroker::default())
        );
    }
}

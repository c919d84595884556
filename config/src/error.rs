//! Configuration errors; each names the offending key.

use std::path::PathBuf;

/// Errors loading or validating configuration. Every variant names the offending key so the
/// operator (or a CreateTopics/AlterConfigs client) sees exactly what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Syntax {
        path: String,
        line: usize,
        message: String,
    },
    #[error("override `{0}` is not of the form key=value")]
    BadOverride(String),
    #[error("unknown configuration key `{key}`")]
    UnknownKey { key: String },
    #[error("invalid value `{value}` for configuration `{key}`: expected {expected}")]
    InvalidValue {
        key: String,
        value: String,
        expected: String,
    },
    /// A KRaft role or quorum rule (Kafka's message; see `quorum`).
    #[error(transparent)]
    Quorum(#[from] crate::QuorumError),
}

impl ConfigError {
    /// The configuration key involved, if any (handlers put it in error messages).
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::UnknownKey { key } | ConfigError::InvalidValue { key, .. } => Some(key),
            ConfigError::Quorum(e) => Some(e.key()),
            _ => None,
        }
    }
}

//! The one error a session returns, mapped to exactly one Kafka error code each.
//!
//! The message is what Kafka puts in SaslAuthenticateResponse's `error_message`, word for
//! word. Like Kafka, failures that could reveal whether a user exists (unknown user, bad
//! proof, malformed message) all carry the same generic text; only the failures Kafka
//! raises as `SaslAuthenticationException` carry their own.

use crate::Mechanism;

/// Kafka's SASL_AUTHENTICATION_FAILED.
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
/// Kafka's ILLEGAL_SASL_STATE.
pub const ILLEGAL_SASL_STATE: i16 = 34;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SaslError {
    /// The credentials were refused or a message was malformed (SASL_AUTHENTICATION_FAILED).
    #[error("{0}")]
    AuthenticationFailed(String),
    /// A token arrived when the exchange expected none: after it completed or failed
    /// (ILLEGAL_SASL_STATE).
    #[error("{0}")]
    IllegalState(String),
}

impl SaslError {
    /// The Kafka error code for a SaslAuthenticate response.
    pub fn error_code(&self) -> i16 {
        match self {
            SaslError::AuthenticationFailed(_) => SASL_AUTHENTICATION_FAILED,
            SaslError::IllegalState(_) => ILLEGAL_SASL_STATE,
        }
    }

    /// The text for the response's `error_message`.
    pub fn message(&self) -> &str {
        match self {
            SaslError::AuthenticationFailed(m) | SaslError::IllegalState(m) => m,
        }
    }

    /// Kafka's answer to a `SaslException`: one text whatever went wrong, so that a client
    /// cannot tell an unknown user from a wrong password. Kafka says "re-authentication"
    /// instead of "authentication" on a KIP-368 re-authentication; the broker rewrites the
    /// text there if it wants that word.
    pub(crate) fn invalid_credentials(mechanism: Mechanism) -> SaslError {
        SaslError::AuthenticationFailed(format!(
            "Authentication failed during authentication due to invalid credentials with SASL \
             mechanism {}",
            mechanism.name()
        ))
    }

    /// What every mechanism answers to a token after the exchange ended, as Kafka's
    /// `ScramSaslServer` does ("Unexpected challenge in Sasl server state COMPLETE").
    pub(crate) fn unexpected_token(state: &str) -> SaslError {
        SaslError::IllegalState(format!("Unexpected challenge in Sasl server state {state}"))
    }
}

//! OAUTHBEARER (RFC 7628) as Kafka serves it: the client's initial response carrying a JWT,
//! checked either as an unsecured token (`alg: none`, Kafka's
//! `OAuthBearerUnsecuredValidatorCallbackHandler`) or as an RS256/ES256 token signed by a key
//! in a JWKS (Kafka's `OAuthBearerValidatorCallbackHandler` with a JWKS file).
//!
//! Modules: `config` (what an operator sets), `jwks` (keys and signature checks), `json`
//! (reading only the claims we need), `token` (the claim rules of each validator), `server`
//! (the message syntax and the exchange).

mod config;
mod json;
mod jwks;
pub(crate) mod server;
mod token;

pub use config::{OAuthConfig, OAuthConfigError, OAUTHBEARER_LOGIN_MODULE};
pub use jwks::{Jwk, JwkKey};

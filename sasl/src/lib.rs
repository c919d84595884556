//! SASL as Apache Kafka speaks it, with no I/O: the server state machines the broker's
//! connection code drives one SaslAuthenticate token at a time, the matching clients (for
//! tests and our own tools), and the `sasl.jaas.config` parser.
//!
//! Mechanisms: PLAIN (RFC 4616), SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) and
//! OAUTHBEARER (RFC 7628) with unsecured (`alg: none`) tokens and RS256/ES256 tokens checked
//! against a JWKS. The rules, checks and client-visible error texts follow Kafka's
//! `ScramSaslServer`, `PlainSaslServer`, `OAuthBearerSaslServer` and its validators; where
//! this crate is stricter than Kafka the module that decides says so.
//!
//! Nothing here blocks, spawns or logs: each call runs on the caller's core and returns.
//! Bounds: a session never allocates more than a small constant times the bytes of the token
//! it is handed (the caller bounds the token, as Kafka's `sasl.server.max.receive.size`
//! does); the only CPU-heavy step, PBKDF2, runs in clients and credential creation, never
//! while a server answers a token, and clients refuse iteration counts above
//! [`scram::ScramMechanism::max_iterations`].

mod b64;
mod client;
mod credentials;
mod error;
pub mod jaas;
mod mechanism;
pub mod oauth;
mod plain;
pub mod scram;
mod server;

pub use client::ClientSession;
pub use credentials::{Credentials, StaticCredentials};
pub use error::SaslError;
pub use mechanism::Mechanism;
pub use oauth::{Jwk, JwkKey, OAuthConfig, OAuthConfigError};
pub use plain::PlainUsers;
pub use server::{ServerSession, Step};

//! The client side of one exchange, for tests and our own tools: PLAIN, SCRAM (with a given
//! or random nonce) and OAUTHBEARER (with a token obtained elsewhere).
//!
//! `first` gives the initial token; `step` takes each server answer and gives the next token,
//! or `None` once the exchange is complete. SCRAM's completion includes checking the
//! server's signature, so a client that reached `None` knows it spoke to a server holding its
//! credential.

use crate::oauth::server::{client_initial_response, CLIENT_ABORT};
use crate::scram::client::ScramClient;
use crate::scram::{Nonce, ScramMechanism};
use crate::{plain, Mechanism, SaslError};

pub struct ClientSession {
    inner: Inner,
}

enum Inner {
    Plain {
        message: Vec<u8>,
        state: State,
    },
    Scram(ScramClient),
    OAuth {
        message: Vec<u8>,
        state: State,
        error_challenge: Option<String>,
    },
}

/// The progress of the one-token mechanisms.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Initial,
    Sent,
    /// OAUTHBEARER only: the server sent an error challenge and we answered 0x01.
    Aborted,
    Complete,
}

impl std::fmt::Debug for ClientSession {
    /// The mechanism and progress only: the state holds the password or token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSession")
            .field("mechanism", &self.mechanism())
            .field("complete", &self.is_complete())
            .finish_non_exhaustive()
    }
}

impl ClientSession {
    pub fn plain(user: &str, password: &str) -> ClientSession {
        ClientSession::plain_with_authzid("", user, password)
    }

    /// PLAIN asking to act as `authzid` (Kafka only allows the user itself).
    pub fn plain_with_authzid(authzid: &str, user: &str, password: &str) -> ClientSession {
        let message = plain::client_message(authzid, user, password);
        ClientSession {
            inner: Inner::Plain {
                message,
                state: State::Initial,
            },
        }
    }

    /// SCRAM with this client nonce (18 random bytes, or a [`Nonce`] for test vectors).
    pub fn scram(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
        nonce: impl Into<Nonce>,
    ) -> ClientSession {
        let scram = ScramClient::new(mechanism, user, password, nonce.into());
        ClientSession {
            inner: Inner::Scram(scram),
        }
    }

    /// SCRAM with a nonce from the system CSPRNG.
    pub fn scram_random(mechanism: ScramMechanism, user: &str, password: &str) -> ClientSession {
        ClientSession::scram(mechanism, user, password, Nonce::random())
    }

    /// OAUTHBEARER presenting `token` (a compact JWS).
    pub fn oauth_bearer(token: &str) -> ClientSession {
        let message = client_initial_response(token);
        ClientSession {
            inner: Inner::OAuth {
                message,
                state: State::Initial,
                error_challenge: None,
            },
        }
    }

    pub fn mechanism(&self) -> Mechanism {
        match &self.inner {
            Inner::Plain { .. } => Mechanism::Plain,
            Inner::Scram(scram) => scram.mechanism().mechanism(),
            Inner::OAuth { .. } => Mechanism::OAuthBearer,
        }
    }

    /// Whether the server accepted us (and, for SCRAM, proved it holds our credential).
    pub fn is_complete(&self) -> bool {
        match &self.inner {
            Inner::Plain { state, .. } | Inner::OAuth { state, .. } => *state == State::Complete,
            Inner::Scram(scram) => scram.is_complete(),
        }
    }

    /// The OAUTHBEARER error challenge the server sent, if it refused our token.
    pub fn error_challenge(&self) -> Option<&str> {
        match &self.inner {
            Inner::OAuth {
                error_challenge, ..
            } => error_challenge.as_deref(),
            Inner::Plain { .. } | Inner::Scram(_) => None,
        }
    }

    /// The first token to send; calling it again starts the exchange over.
    pub fn first(&mut self) -> Vec<u8> {
        match &mut self.inner {
            Inner::Plain { message, state } => {
                *state = State::Sent;
                message.clone()
            }
            Inner::Scram(scram) => scram.first(),
            Inner::OAuth {
                message,
                state,
                error_challenge,
            } => {
                *state = State::Sent;
                *error_challenge = None;
                message.clone()
            }
        }
    }

    /// The server's answer in; the next token out, or `None` when the exchange is complete.
    pub fn step(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, SaslError> {
        match &mut self.inner {
            Inner::Scram(scram) => scram.step(challenge),
            Inner::Plain { state, .. } => match *state {
                // PLAIN's server answers success with an empty token and says nothing else.
                State::Sent if challenge.is_empty() => {
                    *state = State::Complete;
                    Ok(None)
                }
                State::Sent => Err(SaslError::AuthenticationFailed(
                    "unexpected PLAIN server challenge".into(),
                )),
                _ => Err(unexpected_challenge(*state)),
            },
            Inner::OAuth {
                state,
                error_challenge,
                ..
            } => match *state {
                State::Sent if challenge.is_empty() => {
                    *state = State::Complete;
                    Ok(None)
                }
                // RFC 7628 §3.2.3: answer an error challenge with 0x01 so the server can
                // end the exchange with its error.
                State::Sent => {
                    *state = State::Aborted;
                    *error_challenge = Some(String::from_utf8_lossy(challenge).into_owned());
                    Ok(Some(vec![CLIENT_ABORT]))
                }
                _ => Err(unexpected_challenge(*state)),
            },
        }
    }
}

fn unexpected_challenge(state: State) -> SaslError {
    let state = match state {
        State::Initial => "before the first message",
        State::Sent => "while waiting",
        State::Aborted => "after the server's error challenge",
        State::Complete => "after completion",
    };
    SaslError::IllegalState(format!("unexpected server challenge {state}"))
}

//! The server side of one SASL exchange: one [`ServerSession`] per connection (and per
//! KIP-368 re-authentication), fed each SaslAuthenticate token in turn.

use crate::oauth::server::OAuthServer;
use crate::scram::server::ScramServer;
use crate::scram::Nonce;
use crate::{plain, Credentials, Mechanism, OAuthConfig, SaslError};

/// What the server answers a token with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Send these bytes back; the exchange goes on.
    Continue(Vec<u8>),
    /// Send `response` back; `user` is authenticated. `expires_at_ms` is when the credential
    /// stops being valid (an OAUTHBEARER token's `exp`), for KIP-368's session lifetime.
    Done {
        response: Vec<u8>,
        user: String,
        expires_at_ms: Option<i64>,
    },
}

pub struct ServerSession {
    mechanism: Mechanism,
    inner: Inner,
}

enum Inner {
    Plain(PlainState),
    Scram(ScramServer),
    OAuth(OAuthServer),
}

/// PLAIN takes one token, so its state is just whether that token came and how it went.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PlainState {
    Receive,
    Complete,
    Failed,
}

impl std::fmt::Debug for ServerSession {
    /// The mechanism and progress only: the state holds credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSession")
            .field("mechanism", &self.mechanism)
            .field("complete", &self.is_complete())
            .finish_non_exhaustive()
    }
}

impl ServerSession {
    /// A session for `mechanism`. `server_nonce` is SCRAM's server nonce (18 bytes of
    /// randomness, or a [`Nonce`] for test vectors); other mechanisms ignore it.
    pub fn new(mechanism: Mechanism, server_nonce: impl Into<Nonce>) -> ServerSession {
        let inner = match mechanism {
            Mechanism::Plain => Inner::Plain(PlainState::Receive),
            Mechanism::ScramSha256 | Mechanism::ScramSha512 => {
                let scram = mechanism
                    .scram()
                    .expect("a SCRAM mechanism has a SCRAM hash");
                Inner::Scram(ScramServer::new(scram, server_nonce.into()))
            }
            Mechanism::OAuthBearer => Inner::OAuth(OAuthServer::new()),
        };
        ServerSession { mechanism, inner }
    }

    /// A session whose SCRAM nonce comes from the system CSPRNG.
    pub fn new_random(mechanism: Mechanism) -> ServerSession {
        ServerSession::new(mechanism, Nonce::random())
    }

    pub fn mechanism(&self) -> Mechanism {
        self.mechanism
    }

    /// Whether the exchange has completed successfully.
    pub fn is_complete(&self) -> bool {
        match &self.inner {
            Inner::Plain(state) => *state == PlainState::Complete,
            Inner::Scram(scram) => scram.is_complete(),
            Inner::OAuth(oauth) => oauth.is_complete(),
        }
    }

    /// One SaslAuthenticate token in, the answer out. An error ends the exchange: every
    /// later token is refused with ILLEGAL_SASL_STATE, as is any token after `Done`.
    /// `now_ms` is wall-clock time (Unix epoch), for token expiry.
    pub fn step(
        &mut self,
        token: &[u8],
        credentials: &dyn Credentials,
        oauth: &OAuthConfig,
        now_ms: i64,
    ) -> Result<Step, SaslError> {
        match &mut self.inner {
            Inner::Plain(PlainState::Complete) => Err(SaslError::unexpected_token("COMPLETE")),
            Inner::Plain(PlainState::Failed) => Err(SaslError::unexpected_token("FAILED")),
            Inner::Plain(state) => match plain::authenticate(token, credentials) {
                Ok(user) => {
                    *state = PlainState::Complete;
                    Ok(Step::Done {
                        response: Vec::new(),
                        user,
                        expires_at_ms: None,
                    })
                }
                Err(e) => {
                    *state = PlainState::Failed;
                    Err(e)
                }
            },
            Inner::Scram(scram) => scram.step(token, credentials),
            Inner::OAuth(oauth_server) => oauth_server.step(token, oauth, now_ms),
        }
    }
}

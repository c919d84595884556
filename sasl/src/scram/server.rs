//! The SCRAM server: Kafka's `ScramSaslServer` with RFC 5802's checks made explicit.
//!
//! Two tokens: client-first, answered with server-first; client-final, answered with
//! server-final. The checks, in the order they run:
//! - client-first parses (gs2 header `n,,` or `y,,`; `p=` fails, we offer no channel binding);
//! - no `tokenauth` extension (delegation tokens are not served; other extensions are
//!   ignored, as Kafka ignores them);
//! - the user has a credential for this mechanism;
//! - an `a=` authorization id names the user itself;
//! - the credential has at least `min_iterations`;
//! - client-final's `c=` is the Base64 of the gs2 header the client sent, and its `r=` is
//!   exactly client nonce + server nonce, so a client-final replayed from another exchange
//!   fails (Kafka only checks that `r=` ends with the server nonce);
//! - `H(ClientSignature XOR ClientProof) == StoredKey`, compared in constant time.
//!
//! Every failure but the authorization id mismatch answers Kafka's one generic text, so that
//! nothing tells a client which user names exist. After a failure or completion the session
//! refuses every token with ILLEGAL_SASL_STATE.
//!
//! The AuthMessage is built from the client's messages exactly as sent (RFC 5802 §3); Kafka
//! rebuilds it from parsed fields, which agrees for every message its client writes.

use subtle::ConstantTimeEq;

use super::messages::{ClientFinal, ClientFirst};
use super::{xor, Nonce, ScramCredential, ScramMechanism};
use crate::{b64, Credentials, SaslError, Step};

/// The one extension Kafka acts on: the client authenticates with a delegation token.
const TOKEN_AUTH_EXTENSION: &str = "tokenauth";

pub(crate) struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
}

enum State {
    ReceiveClientFirst { server_nonce: Nonce },
    ReceiveClientFinal(Box<Exchange>),
    Complete,
    Failed,
}

/// What the server-first answer fixed, for checking client-final.
struct Exchange {
    user: String,
    credential: ScramCredential,
    /// `c=` must equal this: the Base64 of the client's gs2 header.
    channel_binding: String,
    /// Client nonce followed by server nonce.
    nonce: String,
    /// `client-first-message-bare "," server-first-message ","`: the AuthMessage up to the
    /// client-final part.
    auth_message_prefix: String,
}

impl ScramServer {
    pub(crate) fn new(mechanism: ScramMechanism, server_nonce: Nonce) -> ScramServer {
        ScramServer {
            mechanism,
            state: State::ReceiveClientFirst { server_nonce },
        }
    }

    pub(crate) fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete)
    }

    pub(crate) fn step(
        &mut self,
        token: &[u8],
        credentials: &dyn Credentials,
    ) -> Result<Step, SaslError> {
        let state = std::mem::replace(&mut self.state, State::Failed);
        let (next, result) = match state {
            State::ReceiveClientFirst { server_nonce } => {
                match self.client_first(token, credentials, &server_nonce) {
                    Ok((exchange, answer)) => (
                        State::ReceiveClientFinal(Box::new(exchange)),
                        Ok(Step::Continue(answer)),
                    ),
                    Err(e) => (State::Failed, Err(e)),
                }
            }
            State::ReceiveClientFinal(exchange) => match self.client_final(token, &exchange) {
                Ok(answer) => (
                    State::Complete,
                    Ok(Step::Done {
                        response: answer,
                        user: exchange.user,
                        expires_at_ms: None,
                    }),
                ),
                Err(e) => (State::Failed, Err(e)),
            },
            State::Complete => (
                State::Complete,
                Err(SaslError::unexpected_token("COMPLETE")),
            ),
            State::Failed => (State::Failed, Err(SaslError::unexpected_token("FAILED"))),
        };
        self.state = next;
        result
    }

    fn client_first(
        &self,
        token: &[u8],
        credentials: &dyn Credentials,
        server_nonce: &Nonce,
    ) -> Result<(Exchange, Vec<u8>), SaslError> {
        let refused = || SaslError::invalid_credentials(self.mechanism.mechanism());
        let first = ClientFirst::parse(token).map_err(|_| refused())?;
        if first
            .extensions
            .iter()
            .any(|(key, _)| *key == TOKEN_AUTH_EXTENSION)
        {
            return Err(refused());
        }
        // A credential of another hash or with keys of the wrong length cannot verify a
        // proof; treat it as no credential rather than trust the lookup blindly.
        let credential = credentials
            .scram(self.mechanism, &first.user)
            .filter(|c| {
                c.mechanism == self.mechanism && c.stored_key.len() == self.mechanism.digest_bytes()
            })
            .ok_or_else(refused)?;
        // Kafka's order: the authorization id is checked before the iteration count.
        if first
            .authzid
            .as_ref()
            .is_some_and(|authzid| *authzid != first.user)
        {
            return Err(SaslError::AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different \
                 from username"
                    .to_owned(),
            ));
        }
        if credential.iterations < self.mechanism.min_iterations() {
            return Err(refused());
        }

        let nonce = format!("{}{}", first.nonce, server_nonce.as_str());
        let server_first = format!(
            "r={nonce},s={},i={}",
            b64::encode(&credential.salt),
            credential.iterations
        );
        let exchange = Exchange {
            user: first.user,
            channel_binding: b64::encode(first.gs2_header.as_bytes()),
            nonce,
            auth_message_prefix: format!("{},{server_first},", first.bare),
            credential,
        };
        Ok((exchange, server_first.into_bytes()))
    }

    fn client_final(&self, token: &[u8], exchange: &Exchange) -> Result<Vec<u8>, SaslError> {
        let refused = || SaslError::invalid_credentials(self.mechanism.mechanism());
        let last = ClientFinal::parse(token).map_err(|_| refused())?;
        if last.channel_binding != exchange.channel_binding || last.nonce != exchange.nonce {
            return Err(refused());
        }
        if last.proof.len() != self.mechanism.digest_bytes() {
            return Err(refused());
        }
        let mut auth_message = exchange.auth_message_prefix.clone();
        auth_message.push_str(last.without_proof);

        let credential = &exchange.credential;
        let client_signature = self
            .mechanism
            .hmac(&credential.stored_key, auth_message.as_bytes());
        let client_key = xor(&client_signature, &last.proof);
        let stored_key = self.mechanism.hash(&client_key);
        if !bool::from(stored_key.ct_eq(&credential.stored_key)) {
            return Err(refused());
        }
        let server_signature = self
            .mechanism
            .hmac(&credential.server_key, auth_message.as_bytes());
        Ok(format!("v={}", b64::encode(&server_signature)).into_bytes())
    }
}

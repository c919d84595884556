//! The SCRAM client (Kafka's `ScramSaslClient`): client-first, then client-final computed
//! from the server's salt and iterations, then the server's signature checked in constant
//! time. It refuses a server nonce that does not extend its own, and iteration counts outside
//! the mechanism's bounds (the upper bound keeps a hostile server from making it spin).

use subtle::ConstantTimeEq;

use super::messages::{encode_saslname, ServerFinal, ServerFirst};
use super::{salted_password, xor, Nonce, ScramMechanism};
use crate::{b64, SaslError};

pub(crate) struct ScramClient {
    mechanism: ScramMechanism,
    user: String,
    password: String,
    nonce: Nonce,
    state: State,
}

enum State {
    Initial,
    ReceiveServerFirst { client_first_bare: String },
    ReceiveServerFinal { server_signature: Vec<u8> },
    Complete,
    Failed,
}

impl ScramClient {
    pub(crate) fn new(mechanism: ScramMechanism, user: &str, password: &str, nonce: Nonce) -> Self {
        ScramClient {
            mechanism,
            user: user.to_owned(),
            password: password.to_owned(),
            nonce,
            state: State::Initial,
        }
    }

    pub(crate) fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    pub(crate) fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete)
    }

    /// client-first; calling it again starts the exchange over.
    pub(crate) fn first(&mut self) -> Vec<u8> {
        let client_first_bare = format!(
            "n={},r={}",
            encode_saslname(&self.user),
            self.nonce.as_str()
        );
        let message = format!("n,,{client_first_bare}").into_bytes();
        self.state = State::ReceiveServerFirst { client_first_bare };
        message
    }

    pub(crate) fn step(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, SaslError> {
        let state = std::mem::replace(&mut self.state, State::Failed);
        match state {
            State::ReceiveServerFirst { client_first_bare } => {
                let (answer, server_signature) =
                    self.server_first(challenge, &client_first_bare)?;
                self.state = State::ReceiveServerFinal { server_signature };
                Ok(Some(answer))
            }
            State::ReceiveServerFinal { server_signature } => {
                Self::server_final(challenge, &server_signature)?;
                self.state = State::Complete;
                Ok(None)
            }
            State::Initial => {
                self.state = State::Initial;
                Err(SaslError::IllegalState(
                    "SCRAM client has not sent its first message".into(),
                ))
            }
            State::Complete => {
                self.state = State::Complete;
                Err(SaslError::IllegalState(
                    "SCRAM exchange already complete".into(),
                ))
            }
            State::Failed => Err(SaslError::IllegalState(
                "SCRAM exchange already failed".into(),
            )),
        }
    }

    /// client-final for this server-first, and the ServerSignature the server must answer.
    fn server_first(
        &self,
        challenge: &[u8],
        client_first_bare: &str,
    ) -> Result<(Vec<u8>, Vec<u8>), SaslError> {
        let failed = |why: String| SaslError::AuthenticationFailed(why);
        let first = ServerFirst::parse(challenge)
            .map_err(|e| failed(format!("Invalid SCRAM server first message format: {e}")))?;
        let own = self.nonce.as_str();
        if !first.nonce.starts_with(own) || first.nonce.len() == own.len() {
            return Err(failed(
                "Invalid server nonce: does not start with client nonce".into(),
            ));
        }
        let m = self.mechanism;
        if first.iterations < m.min_iterations() {
            return Err(failed(format!(
                "Requested iterations {} is less than the minimum {} for {}",
                first.iterations,
                m.min_iterations(),
                m.name()
            )));
        }
        if first.iterations > m.max_iterations() {
            return Err(failed(format!(
                "Requested iterations {} is more than the maximum {} for {}",
                first.iterations,
                m.max_iterations(),
                m.name()
            )));
        }
        let salted = salted_password(m, &self.password, &first.salt, first.iterations);
        // The server-first text is UTF-8 without NUL: ServerFirst::parse checked it.
        let server_first = std::str::from_utf8(challenge).unwrap_or_default();
        let without_proof = format!("c=biws,r={}", first.nonce);
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");

        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let client_signature = m.hmac(&stored_key, auth_message.as_bytes());
        let proof = xor(&client_key, &client_signature);
        let server_key = m.hmac(&salted, b"Server Key");
        let server_signature = m.hmac(&server_key, auth_message.as_bytes());
        let answer = format!("{without_proof},p={}", b64::encode(&proof)).into_bytes();
        Ok((answer, server_signature))
    }

    fn server_final(challenge: &[u8], expected: &[u8]) -> Result<(), SaslError> {
        let failed = |why: String| SaslError::AuthenticationFailed(why);
        match ServerFinal::parse(challenge) {
            Err(e) => Err(failed(format!(
                "Invalid SCRAM server final message format: {e}"
            ))),
            Ok(ServerFinal::Error(error)) => Err(failed(format!(
                "Sasl authentication using SCRAM failed with error: {error}"
            ))),
            Ok(ServerFinal::Verifier(signature)) => {
                if bool::from(signature.ct_eq(expected)) {
                    Ok(())
                } else {
                    Err(failed(
                        "Invalid server signature in server final message".into(),
                    ))
                }
            }
        }
    }
}

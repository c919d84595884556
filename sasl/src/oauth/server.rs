//! The OAUTHBEARER exchange (Kafka's `OAuthBearerSaslServer`) and its message syntax
//! (`OAuthBearerClientInitialResponse`).
//!
//! The client's initial response is `n,[a=authzid],^Aauth=Bearer <token>^A[key=value^A]*^A`
//! (^A is 0x01). A good token completes the exchange with an empty answer. A bad one is
//! answered, as RFC 7628 §3.2.2 says, with a JSON error challenge; the client then sends the
//! single byte 0x01 and the server fails with that JSON as the message, as Kafka does. A
//! client may instead send a fresh initial response, which Kafka also allows. A malformed
//! message fails at once with the generic text. Extensions are accepted and ignored, as both
//! of Kafka's validators accept every extension.

use super::config::OAuthConfig;
use super::token;
use crate::{Mechanism, SaslError, Step};

const SEPARATOR: char = '\u{1}';

/// What the client sends after an error challenge (RFC 7628 §3.2.3).
pub(crate) const CLIENT_ABORT: u8 = 0x01;

pub(crate) struct OAuthServer {
    state: State,
}

enum State {
    /// Waiting for an initial response; after an error challenge, holding that challenge.
    Receive {
        error_challenge: Option<String>,
    },
    Complete,
    Failed,
}

/// The fields of a client initial response this server uses.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct InitialResponse<'a> {
    pub authzid: &'a str,
    pub token: &'a str,
}

impl OAuthServer {
    pub(crate) fn new() -> OAuthServer {
        OAuthServer {
            state: State::Receive {
                error_challenge: None,
            },
        }
    }

    pub(crate) fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete)
    }

    pub(crate) fn step(
        &mut self,
        message: &[u8],
        config: &OAuthConfig,
        now_ms: i64,
    ) -> Result<Step, SaslError> {
        let error_challenge = match &mut self.state {
            State::Receive { error_challenge } => error_challenge.take(),
            State::Complete => return Err(SaslError::unexpected_token("COMPLETE")),
            State::Failed => return Err(SaslError::unexpected_token("FAILED")),
        };
        self.state = State::Failed;
        if let (Some(challenge), [CLIENT_ABORT]) = (error_challenge, message) {
            return Err(SaslError::AuthenticationFailed(challenge));
        }
        let Some(initial) = parse_initial_response(message) else {
            return Err(SaslError::invalid_credentials(Mechanism::OAuthBearer));
        };
        match token::validate(initial.token, config, now_ms) {
            Err(rejection) => {
                let challenge = rejection.challenge();
                let answer = challenge.clone().into_bytes();
                self.state = State::Receive {
                    error_challenge: Some(challenge),
                };
                Ok(Step::Continue(answer))
            }
            Ok(valid) if !initial.authzid.is_empty() && initial.authzid != valid.principal => {
                Err(SaslError::AuthenticationFailed(format!(
                    "Authentication failed: Client requested an authorization id ({}) that is \
                     different from the token's principal name ({})",
                    initial.authzid, valid.principal
                )))
            }
            Ok(valid) => {
                self.state = State::Complete;
                Ok(Step::Done {
                    response: Vec::new(),
                    user: valid.principal,
                    expires_at_ms: Some(valid.expires_at_ms),
                })
            }
        }
    }
}

/// The client's initial response for `token`, with no authzid and no extensions.
pub(crate) fn client_initial_response(token: &str) -> Vec<u8> {
    format!("n,,{SEPARATOR}auth=Bearer {token}{SEPARATOR}{SEPARATOR}").into_bytes()
}

/// Parses a client initial response; `None` when Kafka's pattern would not match it.
pub(crate) fn parse_initial_response(message: &[u8]) -> Option<InitialResponse<'_>> {
    let message = std::str::from_utf8(message).ok()?;
    let rest = message.strip_prefix("n,")?;
    let (authzid_field, rest) = rest.split_once(',')?;
    let authzid = match authzid_field {
        "" => "",
        field => {
            let authzid = field.strip_prefix("a=")?;
            is_saslname(authzid).then_some(authzid)?
        }
    };
    let pairs = rest.strip_prefix(SEPARATOR)?.strip_suffix(SEPARATOR)?;
    let mut auth = None;
    if !pairs.is_empty() {
        // Each pair ends with the separator, which no key or value may contain.
        for pair in pairs.strip_suffix(SEPARATOR)?.split(SEPARATOR) {
            let (key, value) = pair.split_once('=')?;
            if !is_extension_key(key) || !is_extension_value(value) {
                return None;
            }
            if key == "auth" {
                auth = Some(value);
            }
        }
    }
    let (scheme, token) = auth?.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    let scheme_ok = !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !scheme_ok || !scheme.eq_ignore_ascii_case("bearer") || !is_token(token) {
        return None;
    }
    Some(InitialResponse { authzid, token })
}

/// Kafka's SASLNAME: ASCII without NUL, ',' or '=', except the escapes "=2C" and "=3D".
fn is_saslname(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| (0x01..=0x7f).contains(&b) && b != b',')
        && text
            .split('=')
            .skip(1)
            .all(|after| after.starts_with("2C") || after.starts_with("3D"))
}

fn is_extension_key(key: &str) -> bool {
    !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic())
}

/// RFC 7628 `value`: printable ASCII, space, tab, CR, LF.
fn is_extension_value(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) || b" \t\r\n".contains(&b))
}

/// RFC 6750 `b64token`: `[-_~+/.a-zA-Z0-9]+` then any number of '='.
fn is_token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_response_syntax() {
        fn parse(m: &str) -> Option<InitialResponse<'_>> {
            parse_initial_response(m.as_bytes())
        }
        let ok = parse("n,,\u{1}auth=Bearer abc.def.\u{1}\u{1}").expect("valid");
        assert_eq!(
            ok,
            InitialResponse {
                authzid: "",
                token: "abc.def."
            }
        );
        let ok = parse("n,a=bob,\u{1}x=1 2\u{1}auth=bearer  tok==\u{1}\u{1}").expect("valid");
        assert_eq!(
            ok,
            InitialResponse {
                authzid: "bob",
                token: "tok=="
            }
        );
        assert_eq!(
            parse_initial_response(&client_initial_response("t")).map(|r| r.token),
            Some("t")
        );
        for bad in [
            "n,,\u{1}\u{1}",
            "y,,\u{1}auth=Bearer t\u{1}\u{1}",
            "n,,\u{1}auth=Basic t\u{1}\u{1}",
            "n,,\u{1}auth=Bearer t\u{1}",
            "n,,\u{1}auth=Bearer t\u{1}\u{1}\u{1}",
            "n,,\u{1}auth=Bearer t=x\u{1}\u{1}",
            "n,,\u{1}auth=Bearert\u{1}\u{1}",
            "n,a=b=c,\u{1}auth=Bearer t\u{1}\u{1}",
            "n,,\u{1}k1=v\u{1}auth=Bearer t\u{1}\u{1}",
            "n,,\u{1}k=\u{1}auth=Bearer t\u{1}\u{1}",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn error_challenge_text_matches_kafka() {
        let r = token::validate("x", &OAuthConfig::unsecured(), 0).expect_err("refused");
        assert_eq!(r.challenge(), r#"{"status":"invalid_token"}"#);
    }
}

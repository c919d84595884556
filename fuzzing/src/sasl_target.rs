//! The server side of each SASL mechanism, fed client tokens.
//!
//! Input: byte 0 picks the mechanism (bits 0-1, in `Mechanism::ALL` order) and the mode
//! (bit 2); the rest is a list of tokens, each a big-endian u16 length and that many bytes
//! (the last may be short: it takes what is left).
//! - Raw mode: the tokens are the client's messages, as captured from real clients.
//! - Genuine mode: a correct client for user `alice` writes each message and the token
//!   edits it first (`[at, remove, insert...]`: remove `remove` bytes at `at`, insert the
//!   rest there). For SCRAM the edit applies before the proof is computed, so an edited
//!   message still carries a valid proof and reaches the checks behind it; for OAUTHBEARER
//!   the first edit applies to the unsecured token's JSON claims, the second to the message.
//!
//! Properties: no panic; after an error or completion every token is refused; PLAIN and
//! SCRAM complete only as `alice`, the one user with credentials; an unedited genuine
//! exchange completes.

use std::sync::OnceLock;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use ring::{digest, hmac};
use sasl::scram::{self, Nonce, ScramCredential, ScramMechanism};
use sasl::{ClientSession, Mechanism, OAuthConfig, ServerSession, StaticCredentials, Step};

const USER: &str = "alice";
const PASSWORD: &str = "alice-secret";
const SALT: &[u8] = b"fuzzing-salt";
const ITERATIONS: u32 = 4096;
const SERVER_NONCE: &str = "fuzzservernonce";
const CLIENT_NONCE: &str = "fuzzclientnonce";
const NOW_MS: i64 = 1_700_000_000_000;
/// One EC P-256 key (an all-zero point, which never verifies), so signed tokens get as far
/// as key selection and signature checking.
const JWKS: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"e","x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","y":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}"#;

pub(crate) struct Fixtures {
    credentials: StaticCredentials,
    oauth: OAuthConfig,
    /// SaltedPassword per SCRAM mechanism, so the genuine client skips PBKDF2.
    salted: [(ScramMechanism, Vec<u8>); 2],
}

/// Built once, outside any measurement (PBKDF2 runs here).
pub(crate) fn fixtures() -> &'static Fixtures {
    static FIXTURES: OnceLock<Fixtures> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let mut credentials = StaticCredentials::new();
        credentials.insert_plain(USER, PASSWORD);
        let salted = ScramMechanism::ALL.map(|m| {
            let salted = scram::salted_password(m, PASSWORD, SALT, ITERATIONS);
            credentials.insert_scram(
                USER,
                ScramCredential::from_salted_password(m, SALT, &salted, ITERATIONS),
            );
            (m, salted)
        });
        let mut oauth = OAuthConfig::with_jwks_json(JWKS).expect("the fixture JWKS parses");
        oauth.allow_unsecured = true;
        Fixtures {
            credentials,
            oauth,
            salted,
        }
    })
}

fn tokens(mut rest: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let Some((len, tail)) = rest.split_first_chunk::<2>() {
        let len = usize::from(u16::from_be_bytes(*len)).min(tail.len());
        out.push(&tail[..len]);
        rest = &tail[len..];
    }
    out
}

/// `message` with `edit` applied (see the module doc); an empty edit changes nothing.
fn edited(message: &[u8], edit: Option<&[u8]>) -> Vec<u8> {
    let Some(&[at, remove, ref insert @ ..]) = edit else {
        return message.to_vec();
    };
    let at = usize::from(at).min(message.len());
    let end = at.saturating_add(usize::from(remove)).min(message.len());
    let mut out = Vec::with_capacity(message.len() + insert.len());
    out.extend_from_slice(&message[..at]);
    out.extend_from_slice(insert);
    out.extend_from_slice(&message[end..]);
    out
}

pub(crate) fn exchange(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let mechanism = Mechanism::ALL[usize::from(selector & 3)];
    let tokens = tokens(rest);
    let mut run = Run::new(mechanism);
    if selector & 4 == 0 {
        for token in &tokens {
            run.step(token);
        }
    } else {
        genuine(&mut run, &tokens);
    }
}

/// One server session and what it has answered so far.
struct Run {
    server: ServerSession,
    fixtures: &'static Fixtures,
    /// Completed or failed: every later token must be refused.
    ended: bool,
    done: bool,
}

impl Run {
    fn new(mechanism: Mechanism) -> Run {
        let nonce = Nonce::from_printable(SERVER_NONCE).expect("a printable nonce");
        Run {
            server: ServerSession::new(mechanism, nonce),
            fixtures: fixtures(),
            ended: false,
            done: false,
        }
    }

    fn step(&mut self, token: &[u8]) -> Option<Vec<u8>> {
        let result = self.server.step(
            token,
            &self.fixtures.credentials,
            &self.fixtures.oauth,
            NOW_MS,
        );
        if self.ended {
            assert!(result.is_err(), "a token after the end was accepted");
            return None;
        }
        match result {
            Ok(Step::Continue(answer)) => Some(answer),
            Ok(Step::Done { user, .. }) => {
                if self.server.mechanism() != Mechanism::OAuthBearer {
                    // Unsecured OAUTHBEARER tokens name anyone; the others need a secret.
                    assert_eq!(user, USER, "authenticated as a user with no credential");
                }
                assert!(self.server.is_complete());
                self.ended = true;
                self.done = true;
                None
            }
            Err(error) => {
                assert!(!self.server.is_complete());
                let _ = (error.error_code(), error.message());
                self.ended = true;
                None
            }
        }
    }
}

fn genuine(run: &mut Run, edits: &[&[u8]]) {
    let edit = |i: usize| edits.get(i).copied().filter(|e| !e.is_empty());
    let unedited = (0..3).all(|i| edit(i).is_none());
    match run.server.mechanism() {
        Mechanism::Plain => {
            let mut client = ClientSession::plain(USER, PASSWORD);
            run.step(&edited(&client.first(), edit(0)));
        }
        Mechanism::ScramSha256 | Mechanism::ScramSha512 => scram_client(run, edit(0), edit(1)),
        Mechanism::OAuthBearer => {
            let claims = format!(
                r#"{{"sub":"{USER}","iat":{},"exp":{},"scope":"a b"}}"#,
                NOW_MS / 1000 - 10,
                NOW_MS / 1000 + 3600
            );
            let claims = edited(claims.as_bytes(), edit(0));
            let token = format!(
                "{}.{}.",
                URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
                URL_SAFE_NO_PAD.encode(claims)
            );
            let mut client = ClientSession::oauth_bearer(&token);
            if let Some(challenge) = run.step(&edited(&client.first(), edit(1))) {
                // An error challenge: the client aborts with its one byte.
                if let Ok(Some(abort)) = client.step(&challenge) {
                    run.step(&abort);
                }
            }
        }
    }
    if unedited {
        assert!(run.done, "an unedited genuine exchange did not complete");
    }
    // Whatever came before, one more token is refused.
    run.step(b"n,,n=alice,r=again");
}

/// A SCRAM client computing the proof from the precomputed SaltedPassword (RFC 5802 §3).
fn scram_client(run: &mut Run, first_edit: Option<&[u8]>, final_edit: Option<&[u8]>) {
    let mechanism = run
        .server
        .mechanism()
        .scram()
        .expect("a SCRAM mechanism has a SCRAM hash");
    let (digest_alg, hmac_alg) = match mechanism {
        ScramMechanism::Sha256 => (&digest::SHA256, hmac::HMAC_SHA256),
        ScramMechanism::Sha512 => (&digest::SHA512, hmac::HMAC_SHA512),
    };
    let salted = &run
        .fixtures
        .salted
        .iter()
        .find(|(m, _)| *m == mechanism)
        .expect("every SCRAM mechanism has a fixture")
        .1;

    let first = edited(
        format!("n,,n={USER},r={CLIENT_NONCE}").as_bytes(),
        first_edit,
    );
    let Some(server_first) = run.step(&first) else {
        return;
    };
    // The bare message follows the gs2 header's two commas.
    let bare = first
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b',')
        .nth(1)
        .map_or(&first[..0], |(i, _)| &first[i + 1..]);
    let nonce = server_first
        .split(|b| *b == b',')
        .find_map(|field| field.strip_prefix(b"r="))
        .unwrap_or_default();
    let mut without_proof = b"c=biws,r=".to_vec();
    without_proof.extend_from_slice(nonce);
    let without_proof = edited(&without_proof, final_edit);

    let mut auth_message = bare.to_vec();
    auth_message.push(b',');
    auth_message.extend_from_slice(&server_first);
    auth_message.push(b',');
    auth_message.extend_from_slice(&without_proof);
    let client_key = hmac::sign(&hmac::Key::new(hmac_alg, salted), b"Client Key");
    let stored_key = digest::digest(digest_alg, client_key.as_ref());
    let signature = hmac::sign(
        &hmac::Key::new(hmac_alg, stored_key.as_ref()),
        &auth_message,
    );
    let proof: Vec<u8> = client_key
        .as_ref()
        .iter()
        .zip(signature.as_ref())
        .map(|(k, s)| k ^ s)
        .collect();
    let mut client_final = without_proof;
    client_final.extend_from_slice(b",p=");
    client_final.extend_from_slice(STANDARD.encode(proof).as_bytes());
    run.step(&client_final);
}

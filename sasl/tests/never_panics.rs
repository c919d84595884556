//! Whatever bytes arrive, in whatever state, `step` answers (or refuses) and never panics;
//! once an exchange has ended, it refuses with ILLEGAL_SASL_STATE.
//!
//! Each case drives a session into one state with valid tokens, then feeds it arbitrary
//! tokens: random bytes, or a valid token with one byte changed, cut short or extended, so
//! that the parsers' deeper paths are reached too.

use std::sync::OnceLock;

use proptest::prelude::*;
use sasl::scram::{Nonce, ScramCredential, ScramMechanism};
use sasl::{
    ClientSession, Mechanism, OAuthConfig, SaslError, ServerSession, StaticCredentials, Step,
};

const NOW_MS: i64 = 1_700_000_000_000;

fn credentials() -> &'static StaticCredentials {
    static CREDENTIALS: OnceLock<StaticCredentials> = OnceLock::new();
    CREDENTIALS.get_or_init(|| {
        let mut credentials = StaticCredentials::new();
        credentials.insert_plain("alice", "secret");
        for mechanism in ScramMechanism::ALL {
            let credential = ScramCredential::from_password(mechanism, "secret", b"salt", 4096);
            credentials.insert_scram("alice", credential);
        }
        credentials
    })
}

fn config() -> OAuthConfig {
    OAuthConfig {
        required_scope: vec!["s".into()],
        ..OAuthConfig::unsecured()
    }
}

/// eyJhbGciOiJub25lIn0 is {"alg":"none"}; the payload is {"sub":"alice","exp":1800000000,"scope":"s"}.
const GOOD_TOKEN: &str =
    "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSIsImV4cCI6MTgwMDAwMDAwMCwic2NvcGUiOiJzIn0.";

/// The valid tokens of one whole exchange per mechanism, fixed nonces throughout.
fn script(mechanism: Mechanism) -> &'static [Vec<u8>] {
    static SCRIPTS: OnceLock<Vec<Vec<Vec<u8>>>> = OnceLock::new();
    let scripts = SCRIPTS.get_or_init(|| {
        Mechanism::ALL
            .into_iter()
            .map(|mechanism| match mechanism.scram() {
                Some(scram) => {
                    let mut server = ServerSession::new(mechanism, [7u8; 18]);
                    let mut client = ClientSession::scram(scram, "alice", "secret", [9u8; 18]);
                    let first = client.first();
                    let Ok(Step::Continue(server_first)) =
                        server.step(&first, credentials(), &config(), NOW_MS)
                    else {
                        panic!("client-first refused");
                    };
                    let last = client
                        .step(&server_first)
                        .expect("ok")
                        .expect("client-final");
                    vec![first, last]
                }
                None if mechanism == Mechanism::Plain => vec![b"\0alice\0secret".to_vec()],
                None => vec![ClientSession::oauth_bearer(GOOD_TOKEN).first()],
            })
            .collect()
    });
    let index = Mechanism::ALL
        .iter()
        .position(|m| *m == mechanism)
        .expect("listed");
    &scripts[index]
}

/// How a case prepares its session before the arbitrary tokens.
#[derive(Clone, Copy, Debug)]
enum Setup {
    /// The first `n` valid tokens of the script.
    Valid(usize),
    /// A garbage token first, so the session has failed (or, for OAUTHBEARER, sent a
    /// challenge).
    Failed,
}

fn setup() -> impl Strategy<Value = Setup> {
    prop_oneof![(0usize..3).prop_map(Setup::Valid), Just(Setup::Failed)]
}

/// An arbitrary token, often close to a valid one.
fn token(mechanism: Mechanism) -> impl Strategy<Value = Vec<u8>> {
    let valid = prop::sample::select(script(mechanism).to_vec());
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        (valid.clone(), any::<prop::sample::Index>(), any::<u8>()).prop_map(|(mut t, at, b)| {
            let at = at.index(t.len().max(1));
            if let Some(byte) = t.get_mut(at) {
                *byte = b;
            }
            t
        }),
        (valid.clone(), any::<prop::sample::Index>()).prop_map(|(mut t, at)| {
            t.truncate(at.index(t.len() + 1));
            t
        }),
        (valid, prop::collection::vec(any::<u8>(), 1..20)).prop_map(|(mut t, tail)| {
            t.extend(tail);
            t
        }),
        Just(vec![0x01]),
    ]
}

fn mechanism_and_tokens() -> impl Strategy<Value = (Mechanism, Setup, Vec<Vec<u8>>)> {
    prop::sample::select(Mechanism::ALL.to_vec()).prop_flat_map(|mechanism| {
        (
            Just(mechanism),
            setup(),
            prop::collection::vec(token(mechanism), 1..4),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn server_step_never_panics((mechanism, setup, tokens) in mechanism_and_tokens()) {
        let mut server = ServerSession::new(mechanism, Nonce::from([7u8; 18]));
        let config = config();
        let mut ended = false;
        let prefix: Vec<Vec<u8>> = match setup {
            Setup::Valid(n) => script(mechanism).iter().take(n).cloned().collect(),
            Setup::Failed => vec![b"\xff garbage".to_vec()],
        };
        for token in prefix.iter().chain(&tokens) {
            let result = server.step(token, credentials(), &config, NOW_MS);
            if ended {
                prop_assert_eq!(result.as_ref().map_err(SaslError::error_code), Err(34));
            }
            match result {
                Ok(Step::Continue(_)) => {}
                Ok(Step::Done { user, .. }) => {
                    // Unsecured tokens carry no signature, so a changed byte may name someone
                    // else; passwords and SCRAM proofs admit only alice.
                    if mechanism != Mechanism::OAuthBearer {
                        prop_assert_eq!(user, "alice");
                    }
                    ended = true;
                }
                Err(e) => {
                    prop_assert!(e.error_code() == 58 || e.error_code() == 34);
                    ended = true;
                }
            }
        }
    }

    #[test]
    fn client_step_never_panics(
        mechanism in prop::sample::select(Mechanism::ALL.to_vec()),
        challenges in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..120), 1..4),
    ) {
        let mut client = match mechanism.scram() {
            Some(scram) => ClientSession::scram(scram, "alice", "secret", [9u8; 18]),
            None if mechanism == Mechanism::Plain => ClientSession::plain("alice", "secret"),
            None => ClientSession::oauth_bearer(GOOD_TOKEN),
        };
        client.first();
        for challenge in &challenges {
            let _ = client.step(challenge);
        }
    }
}

/// The scripts the property starts from must be valid, or `Setup::Valid` tests nothing.
#[test]
fn scripts_complete_their_exchanges() {
    for mechanism in Mechanism::ALL {
        let mut server = ServerSession::new(mechanism, Nonce::from([7u8; 18]));
        let steps: Vec<_> = script(mechanism)
            .iter()
            .map(|token| server.step(token, credentials(), &config(), NOW_MS))
            .collect();
        assert!(
            matches!(steps.last(), Some(Ok(Step::Done { .. }))),
            "{mechanism}: {steps:?}"
        );
    }
}

#[test]
fn scram_client_survives_a_hostile_but_well_formed_server_first() {
    // Parses, passes the nonce check, and then stresses the rest: huge salt, max iterations.
    let mut client = ClientSession::scram(ScramMechanism::Sha512, "alice", "secret", [9u8; 18]);
    client.first();
    let nonce = Nonce::from([9u8; 18]);
    let salt = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, vec![0u8; 4096]);
    let server_first = format!("r={}x,s={salt},i=16384,ext=1", nonce.as_str());
    let client_final = client
        .step(server_first.as_bytes())
        .expect("ok")
        .expect("final");
    assert!(client.step(b"v=AAAA").is_err());
    assert!(client_final.starts_with(b"c=biws,r="));
    assert!(
        client.step(&client_final).is_err(),
        "after failure, refuses"
    );
}

//! OAUTHBEARER: unsecured tokens under Kafka's rules, RS256 and ES256 tokens against a JWKS,
//! and RFC 7628's error challenge followed by the client's 0x01.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair, RsaPublicKeyComponents};
use sasl::{
    ClientSession, Mechanism, OAuthConfig, SaslError, ServerSession, StaticCredentials, Step,
};
use serde_json::{json, Value};

/// A 2048-bit RSA key made once with `openssl genpkey -algorithm RSA` and `openssl pkcs8
/// -topk8 -nocrypt -outform DER`; it signs
/// test tokens and nothing else.
const RSA_PKCS8: &[u8] = include_bytes!("fixtures/rsa2048_pkcs8.der");

const NOW_MS: i64 = 1_700_000_000_000;
const NOW_S: i64 = NOW_MS / 1000;
const INVALID_TOKEN: &str = r#"{"status":"invalid_token"}"#;

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn unsecured(claims: &Value) -> String {
    format!(
        "{}.{}.",
        b64(br#"{"alg":"none"}"#),
        b64(claims.to_string().as_bytes())
    )
}

fn rs256(key: &RsaKeyPair, kid: &str, claims: &Value) -> String {
    let header = json!({"alg": "RS256", "typ": "JWT", "kid": kid});
    let signed = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    let mut signature = vec![0u8; key.public().modulus_len()];
    key.sign(
        &signature::RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        signed.as_bytes(),
        &mut signature,
    )
    .expect("signs");
    format!("{signed}.{}", b64(&signature))
}

fn rsa_key() -> RsaKeyPair {
    RsaKeyPair::from_pkcs8(RSA_PKCS8).expect("fixture key")
}

fn rsa_jwks(key: &RsaKeyPair) -> String {
    let public: RsaPublicKeyComponents<Vec<u8>> = key.public().into();
    json!({"keys": [
        {"kty": "oct", "kid": "k1", "k": "c2VjcmV0"},
        {"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig", "n": b64(&public.n), "e": b64(&public.e)}
    ]})
    .to_string()
}

fn authenticate(
    token_message: &[u8],
    config: &OAuthConfig,
) -> (ServerSession, Result<Step, SaslError>) {
    let mut server = ServerSession::new_random(Mechanism::OAuthBearer);
    let result = server.step(token_message, &StaticCredentials::new(), config, NOW_MS);
    (server, result)
}

fn accept(token: &str, config: &OAuthConfig) -> (String, Option<i64>) {
    let mut client = ClientSession::oauth_bearer(token);
    let (server, result) = authenticate(&client.first(), config);
    let Ok(Step::Done {
        response,
        user,
        expires_at_ms,
    }) = result
    else {
        panic!("refused: {result:?}");
    };
    assert!(server.is_complete());
    assert_eq!(client.step(&response), Ok(None));
    assert!(client.is_complete());
    (user, expires_at_ms)
}

/// The server answers with this error challenge, the client answers 0x01, and the server
/// fails with the challenge as Kafka's message.
fn refuse(token: &str, config: &OAuthConfig, challenge: &str) {
    let mut client = ClientSession::oauth_bearer(token);
    let (mut server, result) = authenticate(&client.first(), config);
    assert_eq!(
        result,
        Ok(Step::Continue(challenge.as_bytes().to_vec())),
        "{token}"
    );
    let abort = client
        .step(challenge.as_bytes())
        .expect("answers")
        .expect("0x01");
    assert_eq!(abort, vec![0x01]);
    assert_eq!(client.error_challenge(), Some(challenge));
    let error = server
        .step(&abort, &StaticCredentials::new(), config, NOW_MS)
        .expect_err("fails");
    assert_eq!(error, SaslError::AuthenticationFailed(challenge.into()));
    assert_eq!(error.error_code(), 58);
    assert!(!server.is_complete());
}

#[test]
fn unsecured_token_authenticates_and_reports_expiry() {
    let claims =
        json!({"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 3600, "scope": ["a", "b"]});
    let (user, expiry) = accept(&unsecured(&claims), &OAuthConfig::unsecured());
    assert_eq!(user, "alice");
    assert_eq!(expiry, Some((NOW_S + 3600) * 1000));
}

#[test]
fn unsecured_expired_token_gets_the_error_challenge() {
    let config = OAuthConfig::unsecured();
    refuse(
        &unsecured(&json!({"sub": "alice", "exp": NOW_S - 1})),
        &config,
        INVALID_TOKEN,
    );
    // Expiry at exactly now is already expired (Kafka: now >= exp fails).
    refuse(
        &unsecured(&json!({"sub": "alice", "exp": NOW_S})),
        &config,
        INVALID_TOKEN,
    );
    // Allowable clock skew lets a just-expired token through.
    let skewed = OAuthConfig {
        unsecured_clock_skew_ms: 2000,
        ..OAuthConfig::unsecured()
    };
    accept(
        &unsecured(&json!({"sub": "alice", "exp": NOW_S - 1})),
        &skewed,
    );
}

#[test]
fn unsecured_claim_rules() {
    let config = OAuthConfig::unsecured();
    for claims in [
        json!({"sub": "alice"}),
        json!({"sub": "alice", "exp": "later"}),
        json!({"sub": " ", "exp": NOW_S + 60}),
        json!({"exp": NOW_S + 60}),
        json!({"sub": "alice", "exp": NOW_S + 60, "iat": NOW_S + 30}),
        json!({"sub": "alice", "exp": NOW_S + 60, "scope": 5}),
    ] {
        refuse(&unsecured(&claims), &config, INVALID_TOKEN);
    }
    let signed_unsecured = format!("{}sig", unsecured(&json!({"sub": "a", "exp": NOW_S + 60})));
    refuse(&signed_unsecured, &config, INVALID_TOKEN);
    let principal = OAuthConfig {
        sub_claim_name: "client_id".into(),
        ..OAuthConfig::unsecured()
    };
    let (user, _) = accept(
        &unsecured(&json!({"client_id": "svc", "exp": NOW_S + 60})),
        &principal,
    );
    assert_eq!(user, "svc");
}

#[test]
fn unsecured_missing_scope_is_insufficient_scope() {
    let config = OAuthConfig {
        required_scope: vec!["LOGIN_TO_KAFKA".into(), "WRITE".into()],
        ..OAuthConfig::unsecured()
    };
    let challenge = r#"{"status":"insufficient_scope", "scope":"[LOGIN_TO_KAFKA, WRITE]"}"#;
    let token = unsecured(&json!({"sub": "alice", "exp": NOW_S + 60, "scope": ["LOGIN_TO_KAFKA"]}));
    refuse(&token, &config, challenge);
    // A string scope is one item, as Kafka's unsecured validator reads it.
    let token =
        unsecured(&json!({"sub": "alice", "exp": NOW_S + 60, "scope": "LOGIN_TO_KAFKA WRITE"}));
    refuse(&token, &config, challenge);
    let token = unsecured(
        &json!({"sub": "alice", "exp": NOW_S + 60, "scope": ["WRITE", " LOGIN_TO_KAFKA "]}),
    );
    accept(&token, &config);
}

#[test]
fn bad_json_and_bad_structure_are_invalid_tokens() {
    let config = OAuthConfig::unsecured();
    let header = b64(br#"{"alg":"none"}"#);
    for token in [
        format!("{header}.{}.", b64(b"{\"sub\":\"alice\",")),
        format!("{header}.{}.", b64(b"[1,2]")),
        format!("{}.{}.", b64(b"{\"alg\":"), b64(b"{}")),
        format!("{header}.{}", b64(b"{}")),
        format!("{header}..{}", b64(b"{}")),
        format!("{header}.a."),
        "a.b.c.d".into(),
    ] {
        refuse(&token, &config, INVALID_TOKEN);
    }
}

#[test]
fn malformed_initial_response_fails_at_once() {
    let config = OAuthConfig::unsecured();
    for message in [
        &b"n,,\x01auth=Basic abc\x01\x01"[..],
        b"garbage",
        b"",
        b"\x01",
    ] {
        let (mut server, result) = authenticate(message, &config);
        assert_eq!(
            result,
            Err(SaslError::AuthenticationFailed(
                "Authentication failed during authentication due to invalid credentials with SASL \
                 mechanism OAUTHBEARER"
                    .into()
            ))
        );
        let after = server.step(b"\x01", &StaticCredentials::new(), &config, NOW_MS);
        assert_eq!(after.expect_err("failed").error_code(), 34);
    }
}

#[test]
fn a_fresh_initial_response_after_an_error_challenge_is_evaluated() {
    let config = OAuthConfig::unsecured();
    let (mut server, result) = authenticate(&ClientSession::oauth_bearer("x.y.").first(), &config);
    assert_eq!(
        result,
        Ok(Step::Continue(INVALID_TOKEN.as_bytes().to_vec()))
    );
    let good = unsecured(&json!({"sub": "alice", "exp": NOW_S + 60}));
    let step = server.step(
        &ClientSession::oauth_bearer(&good).first(),
        &StaticCredentials::new(),
        &config,
        NOW_MS,
    );
    assert!(matches!(step, Ok(Step::Done { .. })));
}

#[test]
fn authzid_must_match_the_principal() {
    let token = unsecured(&json!({"sub": "alice", "exp": NOW_S + 60}));
    let message = format!("n,a=bob,\x01auth=Bearer {token}\x01\x01");
    let (_, result) = authenticate(message.as_bytes(), &OAuthConfig::unsecured());
    assert_eq!(
        result,
        Err(SaslError::AuthenticationFailed(
            "Authentication failed: Client requested an authorization id (bob) that is different \
             from the token's principal name (alice)"
                .into()
        ))
    );
    let message = format!("n,a=alice,\x01auth=Bearer {token}\x01\x01");
    assert!(matches!(
        authenticate(message.as_bytes(), &OAuthConfig::unsecured()).1,
        Ok(Step::Done { .. })
    ));
}

fn signed_claims() -> Value {
    json!({"sub": "svc-1", "iat": NOW_S - 5, "exp": NOW_S + 600, "iss": "https://idp", "scope": "kafka"})
}

#[test]
fn rs256_token_verifies_against_the_jwks() {
    let key = rsa_key();
    let config = OAuthConfig::with_jwks_json(&rsa_jwks(&key)).expect("jwks");
    assert!(!config.allow_unsecured);
    let (user, expiry) = accept(&rs256(&key, "k1", &signed_claims()), &config);
    assert_eq!(user, "svc-1");
    assert_eq!(expiry, Some((NOW_S + 600) * 1000));
    // Unsecured tokens are not accepted by a JWKS-only config.
    refuse(
        &unsecured(&json!({"sub": "svc-1", "exp": NOW_S + 60})),
        &config,
        INVALID_TOKEN,
    );
}

#[test]
fn rs256_token_with_tampered_payload_is_refused() {
    let key = rsa_key();
    let config = OAuthConfig::with_jwks_json(&rsa_jwks(&key)).expect("jwks");
    let token = rs256(&key, "k1", &signed_claims());
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims = signed_claims();
    claims["sub"] = json!("admin");
    let tampered = format!(
        "{}.{}.{}",
        parts[0],
        b64(claims.to_string().as_bytes()),
        parts[2]
    );
    refuse(&tampered, &config, INVALID_TOKEN);
    let unknown_kid = rs256(&key, "k2", &signed_claims());
    refuse(&unknown_kid, &config, INVALID_TOKEN);
}

#[test]
fn signed_claim_rules() {
    let key = rsa_key();
    let jwks = rsa_jwks(&key);
    let config = OAuthConfig::with_jwks_json(&jwks).expect("jwks");
    let with = |change: &dyn Fn(&mut Value)| {
        let mut claims = signed_claims();
        change(&mut claims);
        rs256(&key, "k1", &claims)
    };
    // Expired beyond the 30 s default skew; within it.
    refuse(
        &with(&|c| c["exp"] = json!(NOW_S - 31)),
        &config,
        INVALID_TOKEN,
    );
    accept(&with(&|c| c["exp"] = json!(NOW_S - 29)), &config);
    refuse(
        &with(&|c| c["nbf"] = json!(NOW_S + 31)),
        &config,
        INVALID_TOKEN,
    );
    refuse(
        &with(&|c| drop(c.as_object_mut().map(|o| o.remove("iat")))),
        &config,
        INVALID_TOKEN,
    );
    refuse(&with(&|c| c["sub"] = json!("  ")), &config, INVALID_TOKEN);
    refuse(
        &with(&|c| c["scope"] = json!(["a", "a"])),
        &config,
        INVALID_TOKEN,
    );
    // jose4j's default: an audience in the token needs an expected audience.
    let with_aud = with(&|c| c["aud"] = json!(["kafka", "other"]));
    refuse(&with_aud, &config, INVALID_TOKEN);
    let expecting = |aud: &str| OAuthConfig {
        expected_audience: vec![aud.into()],
        ..config.clone()
    };
    accept(&with_aud, &expecting("kafka"));
    refuse(&with_aud, &expecting("billing"), INVALID_TOKEN);
    refuse(&with(&|_| {}), &expecting("kafka"), INVALID_TOKEN);
    let issuer = |iss: &str| OAuthConfig {
        expected_issuer: Some(iss.into()),
        ..config.clone()
    };
    accept(&with(&|_| {}), &issuer("https://idp"));
    refuse(&with(&|_| {}), &issuer("https://other"), INVALID_TOKEN);
    let scoped = OAuthConfig {
        required_scope: vec!["admin".into()],
        ..config.clone()
    };
    refuse(
        &with(&|_| {}),
        &scoped,
        r#"{"status":"insufficient_scope", "scope":"[admin]"}"#,
    );
}

#[test]
fn es256_token_verifies_and_a_bad_signature_does_not() {
    let rng = SystemRandom::new();
    let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).expect("key");
    let key = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).expect("key");
    let point = key.public_key().as_ref();
    let jwks = json!({"keys": [{"kty": "EC", "crv": "P-256", "x": b64(&point[1..33]), "y": b64(&point[33..])}]});
    let config = OAuthConfig::with_jwks_json(&jwks.to_string()).expect("jwks");

    let header = b64(br#"{"alg":"ES256"}"#);
    let signed = format!("{header}.{}", b64(signed_claims().to_string().as_bytes()));
    let mut sig = key
        .sign(&rng, signed.as_bytes())
        .expect("signs")
        .as_ref()
        .to_vec();
    accept(&format!("{signed}.{}", b64(&sig)), &config);
    sig[10] ^= 1;
    refuse(&format!("{signed}.{}", b64(&sig)), &config, INVALID_TOKEN);
    // An RS256 header cannot borrow the EC key.
    let rs_header = b64(br#"{"alg":"RS256"}"#);
    let confused = format!(
        "{rs_header}.{}.{}",
        b64(signed_claims().to_string().as_bytes()),
        b64(&sig)
    );
    refuse(&confused, &config, INVALID_TOKEN);
}

#[test]
fn default_config_accepts_nothing() {
    let token = unsecured(&json!({"sub": "alice", "exp": NOW_S + 60}));
    refuse(&token, &OAuthConfig::default(), INVALID_TOKEN);
}

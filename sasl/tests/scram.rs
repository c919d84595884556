//! SCRAM-SHA-256/512: RFC 7677's test vector end to end, round trips, and every refusal the
//! server owes (each must also leave the session refusing further tokens).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use sasl::scram::{salted_password, Nonce, ScramCredential, ScramMechanism};
use sasl::{
    ClientSession, Mechanism, OAuthConfig, SaslError, ServerSession, StaticCredentials, Step,
};

const GENERIC_256: &str = "Authentication failed during authentication due to invalid credentials \
                           with SASL mechanism SCRAM-SHA-256";

fn nonce(text: &str) -> Nonce {
    Nonce::from_printable(text).expect("printable nonce")
}

fn credentials(mechanism: ScramMechanism, user: &str, password: &str) -> StaticCredentials {
    let mut credentials = StaticCredentials::new();
    let salt = b"0123456789abcdef";
    credentials.insert_scram(
        user,
        ScramCredential::from_password(mechanism, password, salt, 4096),
    );
    credentials
}

fn step(
    server: &mut ServerSession,
    token: &[u8],
    creds: &StaticCredentials,
) -> Result<Step, SaslError> {
    server.step(token, creds, &OAuthConfig::default(), 0)
}

fn continued(step: Result<Step, SaslError>) -> Vec<u8> {
    match step {
        Ok(Step::Continue(bytes)) => bytes,
        other => panic!("expected Continue, got {other:?}"),
    }
}

/// Asserts the generic refusal, then that the session now refuses everything.
fn assert_refused(
    server: &mut ServerSession,
    result: Result<Step, SaslError>,
    creds: &StaticCredentials,
) {
    let error = result.expect_err("refused");
    assert_eq!(error, SaslError::AuthenticationFailed(GENERIC_256.into()));
    assert_eq!(error.error_code(), 58);
    let after = step(server, b"n,,n=user,r=abc", creds).expect_err("failed sessions stay failed");
    assert_eq!(after.error_code(), 34);
    assert_eq!(
        after.message(),
        "Unexpected challenge in Sasl server state FAILED"
    );
}

#[test]
fn rfc7677_sha256_vector() {
    let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").expect("base64");
    let mut creds = StaticCredentials::new();
    let credential = ScramCredential::from_password(ScramMechanism::Sha256, "pencil", &salt, 4096);
    creds.insert_scram("user", credential);
    let mut server = ServerSession::new(
        Mechanism::ScramSha256,
        nonce("%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"),
    );
    let mut client = ClientSession::scram(
        ScramMechanism::Sha256,
        "user",
        "pencil",
        nonce("rOprNGfwEbeRWgbNEkqO"),
    );

    let client_first = client.first();
    assert_eq!(client_first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    let server_first = continued(step(&mut server, &client_first, &creds));
    assert_eq!(
        server_first,
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    );
    let client_final = client
        .step(&server_first)
        .expect("accepted")
        .expect("a final message");
    assert_eq!(
        String::from_utf8(client_final.clone()).expect("text"),
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
         p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    );
    let done = step(&mut server, &client_final, &creds).expect("authenticated");
    let server_final = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec();
    assert_eq!(
        done,
        Step::Done {
            response: server_final.clone(),
            user: "user".into(),
            expires_at_ms: None
        }
    );
    assert!(server.is_complete());
    assert_eq!(client.step(&server_final), Ok(None));
    assert!(client.is_complete());

    let again = step(&mut server, &client_final, &creds).expect_err("no token after Done");
    assert_eq!(again.error_code(), 34);
    assert_eq!(
        again.message(),
        "Unexpected challenge in Sasl server state COMPLETE"
    );
}

#[test]
fn credential_from_salted_password_matches_from_password() {
    for mechanism in ScramMechanism::ALL {
        let salted = salted_password(mechanism, "secret", b"salt", 4096);
        assert_eq!(salted.len(), mechanism.digest_bytes());
        assert_eq!(
            ScramCredential::from_salted_password(mechanism, b"salt", &salted, 4096),
            ScramCredential::from_password(mechanism, "secret", b"salt", 4096)
        );
    }
}

fn round_trip(mechanism: ScramMechanism, user: &str) {
    let creds = credentials(mechanism, user, "secret");
    let mut server = ServerSession::new_random(mechanism.mechanism());
    let mut client = ClientSession::scram_random(mechanism, user, "secret");
    let server_first = continued(step(&mut server, &client.first(), &creds));
    let client_final = client.step(&server_first).expect("ok").expect("final");
    let Ok(Step::Done {
        response,
        user: who,
        expires_at_ms: None,
    }) = step(&mut server, &client_final, &creds)
    else {
        panic!("not authenticated");
    };
    assert_eq!(who, user);
    assert_eq!(client.step(&response), Ok(None));
    assert!(client.is_complete() && server.is_complete());
}

#[test]
fn sha512_round_trip() {
    round_trip(ScramMechanism::Sha512, "alice");
}

#[test]
fn user_names_with_escaped_characters_round_trip() {
    round_trip(ScramMechanism::Sha256, "a,b=c");
}

#[test]
fn wrong_password_is_refused() {
    let creds = credentials(ScramMechanism::Sha256, "alice", "secret");
    let mut server = ServerSession::new_random(Mechanism::ScramSha256);
    let mut client = ClientSession::scram_random(ScramMechanism::Sha256, "alice", "wrong");
    let server_first = continued(step(&mut server, &client.first(), &creds));
    let client_final = client.step(&server_first).expect("ok").expect("final");
    let result = step(&mut server, &client_final, &creds);
    assert_refused(&mut server, result, &creds);
}

/// A valid exchange up to client-final: (server, client-final).
fn until_client_final(creds: &StaticCredentials, client_nonce: &str) -> (ServerSession, Vec<u8>) {
    let mut server = ServerSession::new_random(Mechanism::ScramSha256);
    let mut client = ClientSession::scram(
        ScramMechanism::Sha256,
        "alice",
        "secret",
        nonce(client_nonce),
    );
    let server_first = continued(step(&mut server, &client.first(), creds));
    (
        server,
        client.step(&server_first).expect("ok").expect("final"),
    )
}

#[test]
fn tampered_proof_is_refused() {
    let creds = credentials(ScramMechanism::Sha256, "alice", "secret");
    let (mut server, client_final) = until_client_final(&creds, "fixednonce");
    let text = String::from_utf8(client_final).expect("text");
    let (head, proof) = text.rsplit_once(",p=").expect("proof");
    let mut proof = STANDARD.decode(proof).expect("base64");
    proof[7] ^= 0x10;
    let tampered = format!("{head},p={}", STANDARD.encode(&proof));
    let result = step(&mut server, tampered.as_bytes(), &creds);
    assert_refused(&mut server, result, &creds);
}

#[test]
fn replayed_client_final_is_refused_by_a_fresh_session() {
    let creds = credentials(ScramMechanism::Sha256, "alice", "secret");
    let (mut first_server, recorded) = until_client_final(&creds, "samenonce");
    assert!(matches!(
        step(&mut first_server, &recorded, &creds),
        Ok(Step::Done { .. })
    ));
    // The attacker replays client-first (same client nonce) and the recorded client-final;
    // the fresh server nonce makes the recorded r= wrong.
    let mut server = ServerSession::new_random(Mechanism::ScramSha256);
    continued(step(&mut server, b"n,,n=alice,r=samenonce", &creds));
    let result = step(&mut server, &recorded, &creds);
    assert_refused(&mut server, result, &creds);
}

/// A client-final with a correct proof over whatever `without_proof` says, as a client that
/// knows the password but lies about its channel binding would send.
fn signed_client_final(
    client_first_bare: &str,
    server_first: &[u8],
    without_proof: &str,
) -> Vec<u8> {
    use ring::{digest, hmac};
    let server_first = std::str::from_utf8(server_first).expect("text");
    let salt = b"0123456789abcdef";
    let salted = salted_password(ScramMechanism::Sha256, "secret", salt, 4096);
    let salted_key = hmac::Key::new(hmac::HMAC_SHA256, &salted);
    let client_key = hmac::sign(&salted_key, b"Client Key");
    let stored_key = digest::digest(&digest::SHA256, client_key.as_ref());
    let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
    let stored_key = hmac::Key::new(hmac::HMAC_SHA256, stored_key.as_ref());
    let signature = hmac::sign(&stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key
        .as_ref()
        .iter()
        .zip(signature.as_ref())
        .map(|(k, s)| k ^ s)
        .collect();
    format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes()
}

#[test]
fn wrong_channel_binding_is_refused_even_with_a_valid_proof() {
    let creds = credentials(ScramMechanism::Sha256, "alice", "secret");
    let honest = |cbind: &str| {
        let mut server = ServerSession::new(Mechanism::ScramSha256, nonce("sn"));
        let server_first = continued(step(&mut server, b"n,,n=alice,r=cn", &creds));
        let client_final =
            signed_client_final("n=alice,r=cn", &server_first, &format!("c={cbind},r=cnsn"));
        (server, client_final)
    };
    // The helper's proofs are right: with the true binding the server accepts.
    let (mut server, good) = honest("biws");
    assert!(matches!(
        step(&mut server, &good, &creds),
        Ok(Step::Done { .. })
    ));
    // "eSws" is Base64 of "y,,", not the "n,," this client sent.
    let (mut server, lying) = honest("eSws");
    let result = step(&mut server, &lying, &creds);
    assert_refused(&mut server, result, &creds);
}

#[test]
fn client_final_nonce_must_be_exactly_the_combined_nonce() {
    let creds = credentials(ScramMechanism::Sha256, "alice", "secret");
    let mut server = ServerSession::new(Mechanism::ScramSha256, nonce("sn"));
    let server_first = continued(step(&mut server, b"n,,n=alice,r=cn", &creds));
    // Kafka only checks that r= ends with the server nonce; "Xcnsn" does, with a valid proof.
    let client_final = signed_client_final("n=alice,r=cn", &server_first, "c=biws,r=Xcnsn");
    let result = step(&mut server, &client_final, &creds);
    assert_refused(&mut server, result, &creds);
}

#[test]
fn unknown_user_is_refused_at_client_first() {
    let creds = credentials(ScramMechanism::Sha256, "alice", "secret");
    let mut server = ServerSession::new_random(Mechanism::ScramSha256);
    let result = step(&mut server, b"n,,n=mallory,r=abc", &creds);
    assert_refused(&mut server, result, &creds);
    // A SHA-512 credential does not serve SCRAM-SHA-256.
    let creds = credentials(ScramMechanism::Sha512, "alice", "secret");
    let mut server = ServerSession::new_random(Mechanism::ScramSha256);
    let result = step(&mut server, b"n,,n=alice,r=abc", &creds);
    assert_refused(&mut server, result, &creds);
}

#[test]
fn authzid_must_name_the_user() {
    let creds = credentials(ScramMechanism::Sha256, "alice", "secret");
    let mut server = ServerSession::new_random(Mechanism::ScramSha256);
    let error = step(&mut server, b"n,a=admin,n=alice,r=abc", &creds).expect_err("refused");
    assert_eq!(
        error,
        SaslError::AuthenticationFailed(
            "Authentication failed: Client requested an authorization id that is different from \
             username"
                .into()
        )
    );
    let mut server = ServerSession::new_random(Mechanism::ScramSha256);
    continued(step(&mut server, b"n,a=alice,n=alice,r=abc", &creds));
}

#[test]
fn channel_binding_requests_and_tokenauth_are_refused() {
    let creds = credentials(ScramMechanism::Sha256, "alice", "secret");
    for message in [
        &b"p=tls-server-end-point,,n=alice,r=abc"[..],
        b"n,,n=alice,r=abc,tokenauth=true",
        b"n,,m=x,n=alice,r=abc",
        b"n,,n=al=ice,r=abc",
        b"",
    ] {
        let mut server = ServerSession::new_random(Mechanism::ScramSha256);
        let result = step(&mut server, message, &creds);
        assert_refused(&mut server, result, &creds);
    }
}

#[test]
fn y_flag_and_other_extensions_are_accepted() {
    let creds = credentials(ScramMechanism::Sha256, "alice", "secret");
    let mut server = ServerSession::new_random(Mechanism::ScramSha256);
    let server_first = continued(step(&mut server, b"y,,n=alice,r=abc,foo=bar", &creds));
    assert!(server_first.starts_with(b"r=abc"));
}

#[test]
fn credentials_below_the_minimum_iterations_are_refused() {
    let mut creds = StaticCredentials::new();
    let weak = ScramCredential::from_password(ScramMechanism::Sha256, "secret", b"salt", 4095);
    creds.insert_scram("alice", weak);
    let mut server = ServerSession::new_random(Mechanism::ScramSha256);
    let result = step(&mut server, b"n,,n=alice,r=abc", &creds);
    assert_refused(&mut server, result, &creds);
}

#[test]
fn client_checks_the_server() {
    let mut client = ClientSession::scram(ScramMechanism::Sha256, "u", "p", nonce("cn"));
    client.first();
    let nonce_not_ours = client
        .step(b"r=xxsn,s=c2FsdA==,i=4096")
        .expect_err("refused");
    assert_eq!(
        nonce_not_ours.message(),
        "Invalid server nonce: does not start with client nonce"
    );

    for (server_first, why) in [
        (&b"r=cnsn,s=c2FsdA==,i=4095"[..], "less than the minimum"),
        (b"r=cnsn,s=c2FsdA==,i=16385", "more than the maximum"),
        (
            b"r=cn,s=c2FsdA==,i=4096",
            "does not start with client nonce",
        ),
    ] {
        let mut client = ClientSession::scram(ScramMechanism::Sha256, "u", "p", nonce("cn"));
        client.first();
        let error = client.step(server_first).expect_err("refused");
        assert!(error.message().contains(why), "{error}");
    }

    let mut client = ClientSession::scram(ScramMechanism::Sha256, "u", "p", nonce("cn"));
    client.first();
    client.step(b"r=cnsn,s=c2FsdA==,i=4096").expect("ok");
    let forged = format!("v={}", STANDARD.encode([0u8; 32]));
    let error = client
        .step(forged.as_bytes())
        .expect_err("forged signature");
    assert_eq!(
        error.message(),
        "Invalid server signature in server final message"
    );

    let mut client = ClientSession::scram(ScramMechanism::Sha256, "u", "p", nonce("cn"));
    client.first();
    client.step(b"r=cnsn,s=c2FsdA==,i=4096").expect("ok");
    let error = client.step(b"e=invalid-proof").expect_err("server error");
    assert_eq!(
        error.message(),
        "Sasl authentication using SCRAM failed with error: invalid-proof"
    );
}

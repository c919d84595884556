//! PLAIN: Kafka's texts for each refusal, the authorization id rule, and the JAAS users.

use sasl::{
    jaas, ClientSession, Mechanism, OAuthConfig, PlainUsers, SaslError, ServerSession, Step,
};

fn users() -> PlainUsers {
    let entries = jaas::parse(
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required
           username="admin" password="admin-secret"
           user_admin="admin-secret" user_alice="alice-secret";"#,
    )
    .expect("parses");
    PlainUsers::from_jaas(&entries)
}

fn authenticate(token: &[u8]) -> Result<Step, SaslError> {
    let mut server = ServerSession::new_random(Mechanism::Plain);
    server.step(token, &users(), &OAuthConfig::default(), 0)
}

fn refused_with(token: &[u8], message: &str) {
    let error = authenticate(token).expect_err("refused");
    assert_eq!(
        error,
        SaslError::AuthenticationFailed(message.into()),
        "{token:?}"
    );
    assert_eq!(error.error_code(), 58);
}

#[test]
fn good_password_authenticates_through_the_client() {
    let mut client = ClientSession::plain("alice", "alice-secret");
    let mut server = ServerSession::new_random(Mechanism::Plain);
    let step = server.step(&client.first(), &users(), &OAuthConfig::default(), 0);
    let expected = Step::Done {
        response: Vec::new(),
        user: "alice".into(),
        expires_at_ms: None,
    };
    assert_eq!(step, Ok(expected));
    assert!(server.is_complete());
    assert_eq!(client.step(b""), Ok(None));
    assert!(client.is_complete());
    let again = server.step(
        b"\0alice\0alice-secret",
        &users(),
        &OAuthConfig::default(),
        0,
    );
    assert_eq!(again.expect_err("after Done").error_code(), 34);
}

#[test]
fn bad_credentials_are_refused_with_one_text() {
    let invalid = "Authentication failed: Invalid username or password";
    refused_with(b"\0alice\0wrong", invalid);
    refused_with(b"\0alice\0alice-secre", invalid);
    refused_with(b"\0mallory\0alice-secret", invalid);
    refused_with(b"\0Alice\0alice-secret", invalid);
}

#[test]
fn malformed_tokens_get_kafkas_texts() {
    refused_with(b"\0\0pw", "Authentication failed: username not specified");
    refused_with(
        b"\0alice\0",
        "Authentication failed: password not specified",
    );
    refused_with(
        b"alice",
        "Invalid SASL/PLAIN response: expected 3 tokens, got 1",
    );
    refused_with(
        b"a\0b\0c\0d\0e",
        "Invalid SASL/PLAIN response: expected 3 tokens, got 4",
    );
}

#[test]
fn authzid_must_be_empty_or_the_user() {
    let mut client = ClientSession::plain_with_authzid("alice", "alice", "alice-secret");
    assert!(
        matches!(authenticate(&client.first()), Ok(Step::Done { user, .. }) if user == "alice")
    );
    refused_with(
        b"admin\0alice\0alice-secret",
        "Authentication failed: Client requested an authorization id that is different from \
         username",
    );
}

#[test]
fn a_failed_session_refuses_further_tokens() {
    let mut server = ServerSession::new_random(Mechanism::Plain);
    let config = OAuthConfig::default();
    assert!(server
        .step(b"\0alice\0wrong", &users(), &config, 0)
        .is_err());
    let after = server
        .step(b"\0alice\0alice-secret", &users(), &config, 0)
        .expect_err("failed");
    assert_eq!(after.error_code(), 34);
    assert!(!server.is_complete());
}

#[test]
fn jaas_users_come_from_plain_login_modules_only() {
    let entries = jaas::parse(
        r#"org.apache.kafka.common.security.scram.ScramLoginModule required user_bob="scram";
           org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="first";
           org.apache.kafka.common.security.plain.PlainLoginModule optional user_bob="second"
             user_carol="c";"#,
    )
    .expect("parses");
    let users = PlainUsers::from_jaas(&entries);
    assert_eq!(users.password("bob"), Some("first"));
    assert_eq!(users.password("carol"), Some("c"));
    assert_eq!(users.len(), 2);
    assert_eq!(
        format!("{users:?}"),
        r#"{"bob", "carol"}"#,
        "Debug shows no passwords"
    );
}

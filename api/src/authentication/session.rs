//! A SASL connection's session once authenticated, and its re-authentication (KIP-368), as
//! Kafka's SocketServer, KafkaChannel and SaslServerAuthenticator serve them:
//!
//! - The session lasts `connections.max.reauth.ms` (the listener's and mechanism's own key
//!   first), shortened to the credential's expiry when it has one (an OAUTHBEARER token's
//!   `exp`; with no bound set, the token's expiry alone). SaslAuthenticate v1+ answers that
//!   lifetime; a session with neither lasts as long as the connection (lifetime 0).
//! - A SaslHandshake on a connection whose session can end begins a re-authentication, at
//!   most once per [`MIN_REAUTH_INTERVAL`]; SaslAuthenticate requests follow with the tokens.
//!   The mechanism and the principal must stay the same (otherwise SASL_AUTHENTICATION_FAILED
//!   with Kafka's message, and the connection closes); on success the session gets a new
//!   lifetime. Requests read before the handshake go on; any other request between the
//!   handshake and the last token closes the connection (Kafka refuses it too).
//! - Past the session's end, any request but the SaslHandshake that begins a re-authentication
//!   closes the connection unanswered, ApiVersions included: Kafka's
//!   `serverAuthenticationSessionExpired` check comes before any request is handled.
//! - Clients that cannot re-authenticate (SaslAuthenticate v0, or raw tokens after
//!   SaslHandshake v0) are held to the same lifetime, as Kafka holds them: their connection is
//!   closed at the first request after it and they connect again. A re-authentication that
//!   asks for raw tokens (SaslHandshake v0) is refused (Kafka would take them).
//!
//! Time is passed in (`now`), so the rules are tested without waiting.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sasl::{Credentials, Mechanism, ServerSession, Step};
use wire::generated::api::ApiKey;
use wire::generated::{SaslAuthenticateResponse, SaslHandshakeResponse};
use wire::ErrorCode;

use super::exchange::{now_ms, ShardCredentials};
use super::SaslServer;
use crate::shard::Shard;

/// Kafka's `KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS`: a SaslHandshake sooner than
/// this after the last re-authentication began is not taken as a new one (it is answered
/// ILLEGAL_SASL_STATE, as on a session that cannot end), so a client cannot keep its
/// connection alive past the session's end by re-authenticating without pause.
pub const MIN_REAUTH_INTERVAL: Duration = Duration::from_secs(1);

/// The lifetime (ms) granted to a session that authenticated at `now_ms` (wall clock, as a
/// token's `exp`): Kafka's `calcCompletionTimesAndReturnSessionLifetimeMs`. `None`: the
/// session never ends (no positive bound and no credential expiry). A credential already
/// expired gives 0: the session ends at once.
pub fn session_lifetime_ms(
    max_reauth_ms: i64,
    credential_expires_at_ms: Option<i64>,
    now_ms: i64,
) -> Option<i64> {
    let bound = (max_reauth_ms > 0).then_some(max_reauth_ms);
    let remaining = credential_expires_at_ms.map(|at| at.saturating_sub(now_ms));
    let lifetime = match (bound, remaining) {
        (None, None) => return None,
        (Some(bound), None) => bound,
        (None, Some(remaining)) => remaining,
        (Some(bound), Some(remaining)) => bound.min(remaining),
    };
    Some(lifetime.max(0))
}

/// What becomes of a request read on an authenticated connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// Handle it (a SaslHandshake or SaslAuthenticate goes to this session's exchange).
    Serve,
    /// The session has ended: close the connection without answering, dropping the
    /// responses not yet written (Kafka: "Disconnecting expired channel").
    Expired,
    /// Not allowed now (a request in the middle of a re-authentication): close.
    Refuse(String),
}

/// Where a re-authentication stands.
enum Exchange {
    /// Authenticated, no re-authentication under way.
    Settled,
    /// A SaslHandshake was just admitted as the start of one; its mechanism is looked at next.
    Begun,
    /// The handshake named another enabled mechanism; Kafka fails at the next token, with
    /// this message.
    BadMechanism(String),
    /// Tokens are being exchanged.
    Authenticating(ServerSession),
    /// Failed (answered already): the connection closes, for this reason.
    Failed(String),
}

/// The part of a session that changes: its end and its re-authentication.
struct State {
    /// `None`: the session never ends (and is never re-authenticated).
    expires_at: Option<Instant>,
    /// When the last re-authentication began ([`MIN_REAUTH_INTERVAL`]).
    last_reauth_start: Option<Instant>,
    exchange: Exchange,
}

/// One authenticated SASL connection's session; lives with the connection on its shard.
pub struct Session {
    server: Arc<SaslServer>,
    listener: String,
    mechanism: Mechanism,
    /// `User:<name>`.
    principal: String,
    /// Whether the session can end; decided at authentication, since re-authentication is
    /// only served to sessions that can end.
    can_end: bool,
    state: RefCell<State>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("listener", &self.listener)
            .field("mechanism", &self.mechanism)
            .field("principal", &self.principal)
            .field("can_end", &self.can_end)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session that authenticated at `now`, for `lifetime_ms` (`None`: no end).
    pub(super) fn new(
        server: Arc<SaslServer>,
        listener: &str,
        mechanism: Mechanism,
        principal: String,
        lifetime_ms: Option<i64>,
        now: Instant,
    ) -> Session {
        Session {
            server,
            listener: listener.to_string(),
            mechanism,
            principal,
            can_end: lifetime_ms.is_some(),
            state: RefCell::new(State {
                expires_at: lifetime_ms.map(|ms| deadline(now, ms)),
                last_reauth_start: None,
                exchange: Exchange::Settled,
            }),
        }
    }

    /// `User:<name>`.
    pub fn principal(&self) -> &str {
        &self.principal
    }

    /// Whether the session can end (then its connection stays on its shard: the session's
    /// state does not travel with a handed-over connection).
    pub fn can_end(&self) -> bool {
        self.can_end
    }

    /// Decides about a request (its API key, `None` when too short to have one) read at
    /// `now`. Admitting a SaslHandshake that begins a re-authentication starts it: the
    /// request must then be handled before the next one is admitted.
    pub fn admit(&self, api_key: Option<i16>, now: Instant) -> Admission {
        let mut state = self.state.borrow_mut();
        let key = api_key.and_then(ApiKey::from_i16);
        match &state.exchange {
            Exchange::Failed(reason) => return Admission::Refuse(reason.clone()),
            Exchange::Begun | Exchange::BadMechanism(_) | Exchange::Authenticating(_) => {
                return match key {
                    Some(ApiKey::SaslAuthenticate | ApiKey::SaslHandshake) => Admission::Serve,
                    _ => {
                        let reason = format!(
                            "request (API key {}) during SASL re-authentication",
                            api_key.map_or_else(|| "?".to_string(), |k| k.to_string())
                        );
                        state.exchange = Exchange::Failed(reason.clone());
                        Admission::Refuse(reason)
                    }
                };
            }
            Exchange::Settled => {}
        }
        let Some(expires_at) = state.expires_at else {
            return Admission::Serve;
        };
        if key == Some(ApiKey::SaslHandshake)
            && state
                .last_reauth_start
                .is_none_or(|start| now.saturating_duration_since(start) >= MIN_REAUTH_INTERVAL)
        {
            state.last_reauth_start = Some(now);
            state.exchange = Exchange::Begun;
            return Admission::Serve;
        }
        if now > expires_at {
            return Admission::Expired;
        }
        Admission::Serve
    }

    /// Why the connection must close after the answer just handled (a failed
    /// re-authentication), if it must.
    pub fn failure(&self) -> Option<String> {
        match &self.state.borrow().exchange {
            Exchange::Failed(reason) => Some(reason.clone()),
            _ => None,
        }
    }

    /// A SaslHandshake (`version`) on the authenticated connection.
    pub fn handshake(&self, mechanism: &str, version: i16) -> SaslHandshakeResponse {
        let mut state = self.state.borrow_mut();
        let enabled = self.enabled_mechanisms();
        let refused = |code: ErrorCode| SaslHandshakeResponse {
            error_code: code.code(),
            mechanisms: enabled.clone(),
            ..Default::default()
        };
        match &state.exchange {
            Exchange::Begun => {}
            Exchange::Settled => {
                // Not a re-authentication (the session cannot end, or the last one began
                // less than MIN_REAUTH_INTERVAL ago): KafkaApis answers it.
                return SaslHandshakeResponse {
                    error_code: ErrorCode::IllegalSaslState.code(),
                    ..Default::default()
                };
            }
            _ => {
                state.exchange =
                    Exchange::Failed("a second SaslHandshake during SASL re-authentication".into());
                return refused(ErrorCode::IllegalSaslState);
            }
        }
        if version == 0 {
            state.exchange = Exchange::Failed(
                "SASL re-authentication with SaslHandshake v0 (raw tokens) is not served".into(),
            );
            return refused(ErrorCode::IllegalSaslState);
        }
        let chosen = Mechanism::parse(mechanism).filter(|m| self.enabled().contains(m));
        state.exchange = match chosen {
            None => {
                state.exchange = Exchange::Failed(format!(
                    "SASL mechanism {mechanism:?} is not enabled on this listener"
                ));
                return refused(ErrorCode::UnsupportedSaslMechanism);
            }
            Some(chosen) if chosen != self.mechanism => Exchange::BadMechanism(format!(
                "SASL mechanism '{mechanism}' requested by client is not supported for \
                 re-authentication of mechanism '{}'",
                self.mechanism.name()
            )),
            Some(chosen) => Exchange::Authenticating(ServerSession::new_random(chosen)),
        };
        SaslHandshakeResponse {
            error_code: 0,
            mechanisms: enabled,
            ..Default::default()
        }
    }

    /// [`Session::authenticate`] now, against the shard's credentials (SCRAM ones from the
    /// metadata, PLAIN ones from the listener's JAAS configuration), as the first exchange.
    pub fn authenticate_on(
        &self,
        shard: &Rc<Shard>,
        token: &[u8],
    ) -> Result<SaslAuthenticateResponse, String> {
        let listener = self
            .server
            .listener(&self.listener)
            .ok_or_else(|| format!("listener {} has no SASL settings", self.listener))?;
        let credentials = ShardCredentials {
            shard,
            plain: &listener.plain_users,
        };
        self.authenticate(&credentials, token, Instant::now(), now_ms())
    }

    /// A SaslAuthenticate on the authenticated connection, read at `now` (`now_ms`: the wall
    /// clock, for a token's expiry). `Err`: close without answering (a token above
    /// `sasl.server.max.receive.size`).
    pub fn authenticate(
        &self,
        credentials: &dyn Credentials,
        token: &[u8],
        now: Instant,
        now_ms: i64,
    ) -> Result<SaslAuthenticateResponse, String> {
        let mut state = self.state.borrow_mut();
        let failed = |state: &mut State, message: String| {
            state.exchange = Exchange::Failed(format!("SASL re-authentication failed: {message}"));
            answer(
                ErrorCode::SaslAuthenticationFailed.code(),
                Some(message),
                Vec::new(),
                0,
            )
        };
        let session = match &mut state.exchange {
            Exchange::Authenticating(session) => session,
            Exchange::BadMechanism(message) => {
                let message = message.clone();
                return Ok(failed(&mut state, message));
            }
            Exchange::Settled => {
                // As KafkaApis answers it; the connection goes on.
                return Ok(answer(
                    ErrorCode::IllegalSaslState.code(),
                    Some(
                        "SaslAuthenticate request received after successful authentication".into(),
                    ),
                    Vec::new(),
                    0,
                ));
            }
            Exchange::Begun | Exchange::Failed(_) => {
                state.exchange =
                    Exchange::Failed("SaslAuthenticate before a SaslHandshake v1".into());
                return Ok(answer(
                    ErrorCode::IllegalSaslState.code(),
                    Some("SaslAuthenticate before a SaslHandshake v1".into()),
                    Vec::new(),
                    0,
                ));
            }
        };
        if token.len() > self.server.max_receive_size {
            let reason = format!(
                "SaslAuthenticate token of {} bytes during SASL re-authentication is above \
                 sasl.server.max.receive.size ({})",
                token.len(),
                self.server.max_receive_size
            );
            state.exchange = Exchange::Failed(reason.clone());
            return Err(reason);
        }
        match session.step(token, credentials, &self.server.oauth, now_ms) {
            Ok(Step::Continue(challenge)) => Ok(answer(0, None, challenge, 0)),
            Ok(Step::Done {
                response,
                user,
                expires_at_ms,
            }) => {
                let principal = format!("User:{user}");
                if principal != self.principal {
                    let message = format!(
                        "Cannot change principals during re-authentication from {}: {}",
                        kafka_principal_text(&self.principal),
                        kafka_principal_text(&principal)
                    );
                    return Ok(failed(&mut state, message));
                }
                let max_reauth_ms = self.server.max_reauth_ms(&self.listener, self.mechanism);
                let lifetime_ms = session_lifetime_ms(max_reauth_ms, expires_at_ms, now_ms);
                state.expires_at = lifetime_ms.map(|ms| deadline(now, ms));
                state.exchange = Exchange::Settled;
                tracing::debug!(
                    principal = %self.principal,
                    mechanism = self.mechanism.name(),
                    session_lifetime_ms = lifetime_ms.unwrap_or(0),
                    "SASL re-authentication succeeded"
                );
                Ok(answer(0, None, response, lifetime_ms.unwrap_or(0)))
            }
            Err(error) => {
                let code = error.error_code();
                // Kafka's text names the re-authentication (see `SaslError::invalid_credentials`).
                let message = error.to_string().replacen(
                    "during authentication",
                    "during re-authentication",
                    1,
                );
                state.exchange =
                    Exchange::Failed(format!("SASL re-authentication failed: {message}"));
                Ok(answer(code, Some(message), Vec::new(), 0))
            }
        }
    }

    fn enabled(&self) -> &[Mechanism] {
        self.server
            .listener(&self.listener)
            .map_or(&[][..], |l| l.mechanisms.as_slice())
    }

    fn enabled_mechanisms(&self) -> Vec<String> {
        self.enabled()
            .iter()
            .map(|m| m.name().to_string())
            .collect()
    }
}

/// `now` + `ms`, or far in the future where an `Instant` cannot hold that (a token with an
/// absurd `exp`).
fn deadline(now: Instant, ms: i64) -> Instant {
    /// About 30 years: further than any connection lives.
    const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 3600);
    let ms = Duration::from_millis(u64::try_from(ms).unwrap_or(0)).min(FAR);
    now.checked_add(ms).unwrap_or(now + FAR)
}

/// Kafka's text of a principal in its messages: `User.alice` for `User:alice`.
fn kafka_principal_text(principal: &str) -> String {
    principal.replacen(':', ".", 1)
}

pub(super) fn answer(
    error_code: i16,
    error_message: Option<String>,
    auth_bytes: Vec<u8>,
    session_lifetime_ms: i64,
) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse {
        error_code,
        error_message,
        auth_bytes: Bytes::from(auth_bytes),
        session_lifetime_ms,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use sasl::{OAuthConfig, PlainUsers, StaticCredentials};

    use super::super::ListenerSasl;
    use super::*;

    const LISTENER: &str = "SASL_PLAINTEXT";
    const HANDSHAKE: Option<i16> = Some(ApiKey::SaslHandshake as i16);
    const AUTHENTICATE: Option<i16> = Some(ApiKey::SaslAuthenticate as i16);
    const METADATA: Option<i16> = Some(ApiKey::Metadata as i16);
    const API_VERSIONS: Option<i16> = Some(ApiKey::ApiVersions as i16);
    const SASL_AUTHENTICATION_FAILED: i16 = 58;
    const ILLEGAL_SASL_STATE: i16 = 34;

    fn server(max_reauth_ms: i64) -> Arc<SaslServer> {
        let mechanisms = vec![Mechanism::Plain, Mechanism::ScramSha256];
        let listener = ListenerSasl {
            max_reauth_ms: mechanisms.iter().map(|m| (*m, max_reauth_ms)).collect(),
            mechanisms,
            plain_users: PlainUsers::new(),
        };
        Arc::new(SaslServer {
            listeners: HashMap::from([(LISTENER.to_string(), listener)]),
            oauth: OAuthConfig::unsecured(),
            max_receive_size: 1024,
        })
    }

    fn credentials() -> StaticCredentials {
        let mut credentials = StaticCredentials::new();
        credentials.insert_plain("alice", "alice-secret");
        credentials.insert_plain("bob", "bob-secret");
        credentials
    }

    fn plain_token(user: &str, password: &str) -> Vec<u8> {
        format!("\0{user}\0{password}").into_bytes()
    }

    /// A session of alice's, authenticated with PLAIN at `now` for `lifetime_ms`.
    fn session(max_reauth_ms: i64, now: Instant) -> Session {
        let lifetime = session_lifetime_ms(max_reauth_ms, None, 0);
        Session::new(
            server(max_reauth_ms),
            LISTENER,
            Mechanism::Plain,
            "User:alice".into(),
            lifetime,
            now,
        )
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Handshake then one PLAIN token, as the connection would dispatch them.
    fn reauthenticate(
        session: &Session,
        mechanism: &str,
        user: &str,
        now: Instant,
    ) -> (
        Admission,
        SaslHandshakeResponse,
        Option<SaslAuthenticateResponse>,
    ) {
        let admitted = session.admit(HANDSHAKE, now);
        if admitted != Admission::Serve {
            return (admitted, SaslHandshakeResponse::default(), None);
        }
        let handshake = session.handshake(mechanism, 1);
        if handshake.error_code != 0 || session.failure().is_some() {
            return (admitted, handshake, None);
        }
        assert_eq!(session.admit(AUTHENTICATE, now), Admission::Serve);
        let password = format!("{user}-secret");
        let response = session
            .authenticate(&credentials(), &plain_token(user, &password), now, 0)
            .expect("token within bounds");
        (admitted, handshake, Some(response))
    }

    #[test]
    fn lifetime_is_the_bound_or_the_credential_whichever_ends_first() {
        assert_eq!(session_lifetime_ms(0, None, 1_000), None);
        assert_eq!(session_lifetime_ms(3_000, None, 1_000), Some(3_000));
        // Kafka: a token's expiry ends the session even with no bound set.
        assert_eq!(session_lifetime_ms(0, Some(61_000), 1_000), Some(60_000));
        assert_eq!(session_lifetime_ms(3_000, Some(61_000), 1_000), Some(3_000));
        assert_eq!(
            session_lifetime_ms(90_000, Some(61_000), 1_000),
            Some(60_000)
        );
        // Expired already: the session ends at once.
        assert_eq!(session_lifetime_ms(3_000, Some(500), 1_000), Some(0));
        assert_eq!(session_lifetime_ms(0, Some(i64::MIN), i64::MAX), Some(0));
    }

    #[test]
    fn a_session_without_an_end_serves_everything_forever() {
        let t0 = Instant::now();
        let session = session(0, t0);
        assert!(!session.can_end());
        let later = t0 + Duration::from_secs(365 * 24 * 3600);
        assert_eq!(session.admit(METADATA, later), Admission::Serve);
        // No re-authentication: KafkaApis' answer, and the connection goes on.
        assert_eq!(session.admit(HANDSHAKE, later), Admission::Serve);
        assert_eq!(session.handshake("PLAIN", 1).error_code, ILLEGAL_SASL_STATE);
        assert_eq!(session.failure(), None);
        assert_eq!(session.admit(METADATA, later), Admission::Serve);
    }

    #[test]
    fn past_its_end_only_a_reauthentication_is_admitted() {
        let t0 = Instant::now();
        let session = session(3_000, t0);
        assert!(session.can_end());
        assert_eq!(session.admit(METADATA, t0 + ms(3_000)), Admission::Serve);
        let after = t0 + ms(3_001);
        assert_eq!(session.admit(METADATA, after), Admission::Expired);
        assert_eq!(session.admit(API_VERSIONS, after), Admission::Expired);
        assert_eq!(session.admit(AUTHENTICATE, after), Admission::Expired);
        assert_eq!(session.admit(None, after), Admission::Expired);
        // A re-authentication may begin after the end, and renews the session from then.
        let (admitted, handshake, response) = reauthenticate(&session, "PLAIN", "alice", after);
        assert_eq!(admitted, Admission::Serve);
        assert_eq!(handshake.error_code, 0);
        let response = response.expect("authenticated");
        assert_eq!(response.error_code, 0);
        assert_eq!(response.session_lifetime_ms, 3_000);
        assert_eq!(session.failure(), None);
        assert_eq!(session.admit(METADATA, after + ms(3_000)), Admission::Serve);
        assert_eq!(
            session.admit(METADATA, after + ms(3_001)),
            Admission::Expired
        );
    }

    #[test]
    fn reauthentication_renews_the_session_at_most_once_a_second() {
        let t0 = Instant::now();
        let session = session(3_000, t0);
        let (_, _, response) = reauthenticate(&session, "PLAIN", "alice", t0 + ms(2_500));
        assert_eq!(response.expect("authenticated").error_code, 0);
        // Too soon after the last start: answered as KafkaApis answers it, not a new one.
        assert_eq!(session.admit(HANDSHAKE, t0 + ms(3_400)), Admission::Serve);
        assert_eq!(session.handshake("PLAIN", 1).error_code, ILLEGAL_SASL_STATE);
        assert_eq!(session.failure(), None);
        let (_, _, response) = reauthenticate(&session, "PLAIN", "alice", t0 + ms(3_500));
        assert_eq!(response.expect("authenticated").session_lifetime_ms, 3_000);

        // With a session shorter than the interval, such a handshake past the end closes like
        // any other request.
        let session = super::tests::session(500, t0);
        let (_, _, response) = reauthenticate(&session, "PLAIN", "alice", t0 + ms(400));
        assert_eq!(response.expect("authenticated").session_lifetime_ms, 500);
        assert_eq!(session.admit(HANDSHAKE, t0 + ms(1_000)), Admission::Expired);
        assert_eq!(session.admit(HANDSHAKE, t0 + ms(1_400)), Admission::Serve);
    }

    #[test]
    fn requests_already_read_go_on_but_none_may_come_between_handshake_and_token() {
        let t0 = Instant::now();
        let session = session(3_000, t0);
        assert_eq!(session.admit(HANDSHAKE, t0 + ms(2_000)), Admission::Serve);
        assert_eq!(session.handshake("PLAIN", 1).error_code, 0);
        match session.admit(METADATA, t0 + ms(2_001)) {
            Admission::Refuse(reason) => assert!(reason.contains("re-authentication"), "{reason}"),
            other => panic!("{other:?}"),
        }
        assert!(session.failure().is_some());
    }

    #[test]
    fn another_principal_is_refused_with_kafkas_message() {
        let t0 = Instant::now();
        let session = session(3_000, t0);
        let (_, handshake, response) = reauthenticate(&session, "PLAIN", "bob", t0 + ms(100));
        assert_eq!(handshake.error_code, 0);
        let response = response.expect("answered");
        assert_eq!(response.error_code, SASL_AUTHENTICATION_FAILED);
        assert_eq!(
            response.error_message.as_deref(),
            Some("Cannot change principals during re-authentication from User.alice: User.bob")
        );
        assert!(session.failure().is_some());
    }

    #[test]
    fn another_mechanism_is_refused_at_the_first_token() {
        let t0 = Instant::now();
        let session = session(3_000, t0);
        assert_eq!(session.admit(HANDSHAKE, t0), Admission::Serve);
        // Kafka answers the handshake, then fails the exchange.
        assert_eq!(session.handshake("SCRAM-SHA-256", 1).error_code, 0);
        assert_eq!(session.failure(), None);
        let response = session
            .authenticate(&credentials(), b"n,,n=alice,r=abc", t0, 0)
            .expect("answered");
        assert_eq!(response.error_code, SASL_AUTHENTICATION_FAILED);
        assert_eq!(
            response.error_message.as_deref(),
            Some(
                "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for \
                 re-authentication of mechanism 'PLAIN'"
            )
        );
        assert!(session.failure().is_some());
    }

    #[test]
    fn wrong_password_unknown_mechanism_and_raw_tokens_fail_the_reauthentication() {
        let t0 = Instant::now();
        let session = session(3_000, t0);
        assert_eq!(session.admit(HANDSHAKE, t0), Admission::Serve);
        assert_eq!(session.handshake("PLAIN", 1).error_code, 0);
        let response = session
            .authenticate(&credentials(), &plain_token("alice", "nope"), t0, 0)
            .expect("answered");
        assert_eq!(response.error_code, SASL_AUTHENTICATION_FAILED);
        assert_eq!(
            response.error_message.as_deref(),
            Some("Authentication failed: Invalid username or password")
        );
        assert!(session.failure().is_some());

        let session = super::tests::session(3_000, t0);
        assert_eq!(session.admit(HANDSHAKE, t0), Admission::Serve);
        assert_eq!(session.handshake("GSSAPI", 1).error_code, 33);
        assert!(session.failure().is_some());

        let session = super::tests::session(3_000, t0);
        assert_eq!(session.admit(HANDSHAKE, t0), Admission::Serve);
        assert_eq!(session.handshake("PLAIN", 0).error_code, ILLEGAL_SASL_STATE);
        assert!(session.failure().is_some());
    }

    #[test]
    fn a_token_above_the_pre_authentication_bound_closes_unanswered() {
        let t0 = Instant::now();
        let session = session(3_000, t0);
        assert_eq!(session.admit(HANDSHAKE, t0), Admission::Serve);
        assert_eq!(session.handshake("PLAIN", 1).error_code, 0);
        assert!(session
            .authenticate(&credentials(), &[0u8; 2048], t0, 0)
            .is_err());
        assert!(session.failure().is_some());
    }

    #[test]
    fn sasl_authenticate_outside_a_reauthentication_is_kafkas_illegal_state() {
        let t0 = Instant::now();
        let session = session(3_000, t0);
        assert_eq!(session.admit(AUTHENTICATE, t0), Admission::Serve);
        let response = session
            .authenticate(&credentials(), &plain_token("alice", "alice-secret"), t0, 0)
            .expect("answered");
        assert_eq!(response.error_code, ILLEGAL_SASL_STATE);
        assert_eq!(session.failure(), None);
    }
}

//! The exchange before a SASL connection's first other request: ApiVersions (any number of
//! times), SaslHandshake, then the mechanism's tokens, in SaslAuthenticate requests
//! (SaslHandshake v1) or as raw size-prefixed tokens (v0, KIP-43's original form). Requests
//! are read and answered one at a time: nothing else is in flight on the connection yet.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use sasl::scram::{ScramCredential, ScramMechanism};
use sasl::{Credentials, Mechanism, PlainUsers, ServerSession, Step};
use wire::generated::api::{self, ApiKey};
use wire::generated::{
    ApiVersionsRequest, RequestHeader, SaslAuthenticateRequest, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use wire::primitives::{Decodable, Encodable};
use wire::{frame, varint, ErrorCode};

use super::session::{answer, session_lifetime_ms, Session};
use super::{ListenerSasl, SaslServer, AUTHENTICATION_TIMEOUT, MAX_REQUESTS_BEFORE_AUTHENTICATION};
use crate::shard::Shard;
use crate::transport::Transport;

/// Bytes asked of each socket read during the exchange (its messages are small).
const READ_CHUNK_BYTES: usize = 4096;

/// A connection that authenticated.
pub struct Authenticated {
    /// `User:<name>`.
    pub principal: String,
    /// Bytes read after the last authentication message (the client's next requests).
    pub unread: BytesMut,
    /// Its lifetime and re-authentications, for `connection::serve`.
    pub session: Session,
}

/// Runs the exchange on `transport` (a connection of `listener`, a SASL one). `Err` is the
/// reason the connection must be closed, for the log; an answer the client should read (the
/// failed SaslAuthenticate, say) has been written by then.
pub async fn authenticate(
    shard: &Rc<Shard>,
    transport: &mut Transport,
    server: &Arc<SaslServer>,
) -> Result<Authenticated, String> {
    let listener = server
        .listener(&transport.listener)
        .ok_or_else(|| format!("listener {} has no SASL settings", transport.listener))?;
    let exchange = run(shard, transport, server, listener);
    let timeout = glommio::timer::sleep(AUTHENTICATION_TIMEOUT);
    futures::pin_mut!(exchange, timeout);
    match futures::future::select(exchange, timeout).await {
        futures::future::Either::Left((outcome, _)) => outcome,
        futures::future::Either::Right(_) => Err(format!(
            "SASL authentication not complete after {} s",
            AUTHENTICATION_TIMEOUT.as_secs()
        )),
    }
}

/// Where the exchange stands.
enum State {
    /// Before SaslHandshake.
    Start,
    /// After SaslHandshake v1: SaslAuthenticate requests carry the tokens.
    Framed(ServerSession),
    /// After SaslHandshake v0: raw tokens follow.
    Raw(ServerSession),
}

async fn run(
    shard: &Rc<Shard>,
    transport: &mut Transport,
    server: &Arc<SaslServer>,
    listener: &ListenerSasl,
) -> Result<Authenticated, String> {
    let credentials = ShardCredentials {
        shard,
        plain: &listener.plain_users,
    };
    let mut buffer = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let mut state = State::Start;
    for _ in 0..MAX_REQUESTS_BEFORE_AUTHENTICATION {
        let request = read_frame(transport, &mut buffer, server.max_receive_size).await?;
        let now_ms = now_ms();
        if let State::Raw(session) = &mut state {
            // KIP-43's v0 form: the token is the whole frame, the answer a bare frame too.
            return match session.step(&request, &credentials, &server.oauth, now_ms) {
                Ok(Step::Continue(challenge)) => {
                    write_raw(transport, &challenge).await?;
                    continue;
                }
                Ok(Step::Done {
                    response,
                    user,
                    expires_at_ms,
                }) => {
                    write_raw(transport, &response).await?;
                    let completed = Completed {
                        mechanism: session.mechanism(),
                        user,
                        expires_at_ms,
                        now_ms,
                    };
                    Ok(done(server, &transport.listener, completed, buffer))
                }
                Err(error) => Err(format!("SASL authentication failed: {error}")),
            };
        }
        let mut request = request;
        if request.len() < 8 {
            return Err(format!(
                "request of {} bytes is shorter than a request header",
                request.len()
            ));
        }
        let api_key = i16::from_be_bytes([request[0], request[1]]);
        let version = i16::from_be_bytes([request[2], request[3]]);
        let correlation_id = i32::from_be_bytes([request[4], request[5], request[6], request[7]]);
        let Some(key) = ApiKey::from_i16(api_key) else {
            return Err(format!(
                "API key {api_key} before SASL authentication completed"
            ));
        };
        let served = crate::handlers::SUPPORTED
            .iter()
            .find(|(k, _, _)| *k == key)
            .map(|&(_, min, max)| (min..=max).contains(&version));
        let reply = Reply {
            key,
            version,
            correlation_id,
        };
        if key == ApiKey::ApiVersions {
            // KIP-511: a version we do not serve is answered in a v0 body.
            if served != Some(true) {
                let response = crate::handlers::api_versions::unsupported_version_response();
                write(
                    transport,
                    &Reply {
                        version: 0,
                        ..reply
                    },
                    &response,
                )
                .await?;
                continue;
            }
            skip_header(&mut request, api_key, version)?;
            let decoded = ApiVersionsRequest::decode(&mut request, version)
                .map_err(|error| format!("undecodable ApiVersions: {error}"))?;
            let response = crate::handlers::api_versions::answer(version, &decoded);
            write(transport, &reply, &response).await?;
            continue;
        }
        if served != Some(true) {
            return Err(format!(
                "{key:?} v{version} before SASL authentication completed"
            ));
        }
        skip_header(&mut request, api_key, version)?;
        match (key, &mut state) {
            (ApiKey::SaslHandshake, State::Start) => {
                let handshake = SaslHandshakeRequest::decode(&mut request, version)
                    .map_err(|error| format!("undecodable SaslHandshake: {error}"))?;
                let enabled: Vec<String> = listener
                    .mechanisms
                    .iter()
                    .map(|m| m.name().to_string())
                    .collect();
                let chosen = Mechanism::parse(&handshake.mechanism)
                    .filter(|m| listener.mechanisms.contains(m));
                let response = SaslHandshakeResponse {
                    error_code: if chosen.is_some() {
                        0
                    } else {
                        ErrorCode::UnsupportedSaslMechanism.code()
                    },
                    mechanisms: enabled,
                    ..Default::default()
                };
                write(transport, &reply, &response).await?;
                let Some(mechanism) = chosen else {
                    return Err(format!(
                        "SASL mechanism {:?} is not enabled on this listener",
                        handshake.mechanism
                    ));
                };
                let session = ServerSession::new_random(mechanism);
                state = if version == 0 {
                    State::Raw(session)
                } else {
                    State::Framed(session)
                };
            }
            (ApiKey::SaslAuthenticate, State::Framed(session)) => {
                let authenticate = SaslAuthenticateRequest::decode(&mut request, version)
                    .map_err(|error| format!("undecodable SaslAuthenticate: {error}"))?;
                let stepped = session.step(
                    &authenticate.auth_bytes,
                    &credentials,
                    &server.oauth,
                    now_ms,
                );
                let (response, outcome) = match stepped {
                    Ok(Step::Continue(challenge)) => (answer(0, None, challenge, 0), None),
                    Ok(Step::Done {
                        response,
                        user,
                        expires_at_ms,
                    }) => {
                        let completed = Completed {
                            mechanism: session.mechanism(),
                            user,
                            expires_at_ms,
                            now_ms,
                        };
                        let lifetime_ms = completed.lifetime_ms(server, &transport.listener);
                        (
                            answer(0, None, response, lifetime_ms.unwrap_or(0)),
                            Some(Ok(completed)),
                        )
                    }
                    Err(error) => (
                        answer(error.error_code(), Some(error.to_string()), Vec::new(), 0),
                        Some(Err(error.to_string())),
                    ),
                };
                write(transport, &reply, &response).await?;
                match outcome {
                    None => {}
                    Some(Ok(completed)) => {
                        return Ok(done(server, &transport.listener, completed, buffer))
                    }
                    Some(Err(reason)) => {
                        return Err(format!("SASL authentication failed: {reason}"))
                    }
                }
            }
            (ApiKey::SaslAuthenticate, _) => {
                let response = answer(
                    ErrorCode::IllegalSaslState.code(),
                    Some("SaslAuthenticate before a SaslHandshake v1".to_string()),
                    Vec::new(),
                    0,
                );
                write(transport, &reply, &response).await?;
                return Err("SaslAuthenticate before a SaslHandshake v1".into());
            }
            (ApiKey::SaslHandshake, _) => {
                let response = SaslHandshakeResponse {
                    error_code: ErrorCode::IllegalSaslState.code(),
                    ..Default::default()
                };
                write(transport, &reply, &response).await?;
                return Err("a second SaslHandshake".into());
            }
            (other, _) => {
                return Err(format!(
                    "{other:?} request before SASL authentication completed"
                ))
            }
        }
    }
    Err(format!(
        "more than {MAX_REQUESTS_BEFORE_AUTHENTICATION} requests without completing SASL authentication"
    ))
}

/// A successful exchange, before its session is made.
struct Completed {
    mechanism: Mechanism,
    user: String,
    expires_at_ms: Option<i64>,
    /// When the last token was read (wall clock, as `expires_at_ms`).
    now_ms: i64,
}

impl Completed {
    fn lifetime_ms(&self, server: &SaslServer, listener: &str) -> Option<i64> {
        let max_reauth_ms = server.max_reauth_ms(listener, self.mechanism);
        session_lifetime_ms(max_reauth_ms, self.expires_at_ms, self.now_ms)
    }
}

fn done(
    server: &Arc<SaslServer>,
    listener: &str,
    completed: Completed,
    unread: BytesMut,
) -> Authenticated {
    let lifetime_ms = completed.lifetime_ms(server, listener);
    let principal = format!("User:{}", completed.user);
    let session = Session::new(
        server.clone(),
        listener,
        completed.mechanism,
        principal.clone(),
        lifetime_ms,
        Instant::now(),
    );
    Authenticated {
        principal,
        unread,
        session,
    }
}

pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Skips the request header (its client id is not needed here).
fn skip_header(request: &mut Bytes, api_key: i16, version: i16) -> Result<(), String> {
    let header_version = api::request_header_version(api_key, version);
    RequestHeader::decode(request, header_version)
        .map(|_| ())
        .map_err(|error| format!("bad request header: {error}"))
}

/// Reads one whole frame (without its size prefix); frames above `max` close the connection.
async fn read_frame(
    transport: &mut Transport,
    buffer: &mut BytesMut,
    max: usize,
) -> Result<Bytes, String> {
    loop {
        match frame::frame_body_len(buffer, max) {
            Err(error) => {
                return Err(format!(
                "refused frame before SASL authentication (sasl.server.max.receive.size): {error}"
            ))
            }
            Ok(Some(body_len)) => {
                let mut whole = buffer
                    .split_to(frame::FRAME_HEADER_BYTES + body_len)
                    .freeze();
                whole.advance(frame::FRAME_HEADER_BYTES);
                return Ok(whole);
            }
            Ok(None) => {}
        }
        let start = buffer.len();
        buffer.resize(start + READ_CHUNK_BYTES, 0);
        let read = transport.reader.read(&mut buffer[start..]).await;
        match read {
            Ok(0) => {
                buffer.truncate(start);
                return Err("peer closed the connection during SASL authentication".into());
            }
            Ok(n) => buffer.truncate(start + n),
            Err(error) => {
                buffer.truncate(start);
                return Err(format!("read failed during SASL authentication: {error}"));
            }
        }
    }
}

/// How a response is framed: the request's key, version and correlation id.
struct Reply {
    key: ApiKey,
    version: i16,
    correlation_id: i32,
}

async fn write<T: Encodable>(
    transport: &mut Transport,
    reply: &Reply,
    body: &T,
) -> Result<(), String> {
    let header_version = api::response_header_version(reply.key as i16, reply.version);
    let mut out = BytesMut::with_capacity(64);
    out.put_i32(0);
    out.put_i32(reply.correlation_id);
    if header_version >= 1 {
        varint::write_unsigned_varint(&mut out, 0);
    }
    body.encode(&mut out, reply.version)
        .map_err(|error| format!("{:?} response not encodable: {error}", reply.key))?;
    let len = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    transport
        .writer
        .write_all(&out)
        .await
        .map_err(|error| format!("write failed during SASL authentication: {error}"))
}

async fn write_raw(transport: &mut Transport, token: &[u8]) -> Result<(), String> {
    let mut out = BytesMut::with_capacity(4 + token.len());
    out.put_i32(token.len() as i32);
    out.extend_from_slice(token);
    transport
        .writer
        .write_all(&out)
        .await
        .map_err(|error| format!("write failed during SASL authentication: {error}"))
}

/// The credentials a listener's exchange checks against: SCRAM ones from the metadata
/// (AlterUserScramCredentials), PLAIN ones from the listener's JAAS configuration.
pub(super) struct ShardCredentials<'a> {
    pub(super) shard: &'a Rc<Shard>,
    pub(super) plain: &'a PlainUsers,
}

impl Credentials for ShardCredentials<'_> {
    fn scram(&self, mechanism: ScramMechanism, user: &str) -> Option<ScramCredential> {
        self.shard.scram_credential(mechanism, user)
    }

    fn plain_password(&self, user: &str) -> Option<String> {
        self.plain.password(user).map(str::to_string)
    }
}

//! SaslHandshake and SaslAuthenticate once a connection is being served. On a SASL listener
//! they belong to the connection's session (`authentication::Session`): a re-authentication
//! (KIP-368), or, where none may begin, KafkaApis' answer. On a listener without SASL, Kafka's
//! KafkaApis answers both with ILLEGAL_SASL_STATE; so do we. The exchange before
//! authentication is `authentication`'s.

use std::rc::Rc;

use wire::generated::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::authentication::Session;
use crate::shard::Shard;

pub fn handshake(
    ctx: &RequestContext,
    request: SaslHandshakeRequest,
    session: Option<&Session>,
) -> Response {
    let response = match session {
        Some(session) => session.handshake(&request.mechanism, ctx.api_version),
        None => SaslHandshakeResponse {
            error_code: ErrorCode::IllegalSaslState.code(),
            ..Default::default()
        },
    };
    encode_response(ctx, ctx.api_version, &response)
}

/// `Err` (close unanswered): a token above `sasl.server.max.receive.size`.
pub fn authenticate(
    ctx: &RequestContext,
    request: SaslAuthenticateRequest,
    shard: &Rc<Shard>,
    session: Option<&Session>,
) -> Response {
    let response = match session {
        Some(session) => session.authenticate_on(shard, &request.auth_bytes)?,
        None => SaslAuthenticateResponse {
            error_code: ErrorCode::IllegalSaslState.code(),
            error_message: Some(
                "SaslAuthenticate request received after successful authentication".to_string(),
            ),
            ..Default::default()
        },
    };
    encode_response(ctx, ctx.api_version, &response)
}

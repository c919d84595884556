//! SaslHandshake and SaslAuthenticate once a connection is being served: on a SASL listener
//! after authentication (re-authentication, KIP-368, is not served), or on a listener without
//! SASL. Kafka's KafkaApis answers both with ILLEGAL_SASL_STATE; so do we. The exchange
//! before authentication is `authentication`'s.

use wire::generated::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};

pub fn handshake(ctx: &RequestContext, _request: SaslHandshakeRequest) -> Response {
    let response = SaslHandshakeResponse {
        error_code: ErrorCode::IllegalSaslState.code(),
        ..Default::default()
    };
    encode_response(ctx, ctx.api_version, &response)
}

pub fn authenticate(ctx: &RequestContext, _request: SaslAuthenticateRequest) -> Response {
    let response = SaslAuthenticateResponse {
        error_code: ErrorCode::IllegalSaslState.code(),
        error_message: Some(
            "SaslAuthenticate request received after successful authentication".to_string(),
        ),
        ..Default::default()
    };
    encode_response(ctx, ctx.api_version, &response)
}

//! ApiVersions: the APIs and versions this broker serves (`handlers::SUPPORTED`, with Produce
//! advertised from v0 as Kafka 4.0 does: `handlers::ADVERTISED_BELOW_SERVED`), and the
//! KIP-511 answer to a version we do not serve: error UNSUPPORTED_VERSION in a v0 body that
//! lists ApiVersions' own range (as Kafka), so the client can retry at a version we serve.

use wire::generated::api::ApiKey;
use wire::generated::api_versions_response::ApiVersion;
use wire::generated::{ApiVersionsRequest, ApiVersionsResponse};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response, SUPPORTED};

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .map(|&(key, min, max)| {
            let (min_version, max_version) = super::advertised_range(key, min, max);
            ApiVersion {
                api_key: key as i16,
                min_version,
                max_version,
                ..Default::default()
            }
        })
        .collect()
}

pub fn handle(ctx: &RequestContext, _request: ApiVersionsRequest) -> Response {
    encode_response(ctx, ctx.api_version, &response())
}

/// The answer to an ApiVersions request at a version we serve (also before SASL
/// authentication, see `authentication`).
pub fn response() -> ApiVersionsResponse {
    ApiVersionsResponse {
        error_code: 0,
        api_keys: api_keys(),
        ..Default::default()
    }
}

/// The body to encode at version 0 for a request at a version we do not serve.
/// KIP-511's answer to an ApiVersions version we do not serve: UNSUPPORTED_VERSION and, as
/// Kafka's `ApiVersionsResponse.createApiVersionsResponse` for this case, only ApiVersions'
/// own range (the client retries with a version in it and then learns the rest).
pub fn unsupported_version_response() -> ApiVersionsResponse {
    ApiVersionsResponse {
        error_code: ErrorCode::UnsupportedVersion.code(),
        api_keys: api_keys()
            .into_iter()
            .filter(|key| key.api_key == ApiKey::ApiVersions as i16)
            .collect(),
        ..Default::default()
    }
}

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

pub fn handle(ctx: &RequestContext, request: ApiVersionsRequest) -> Response {
    encode_response(ctx, ctx.api_version, &answer(ctx.api_version, &request))
}

/// The answer to an ApiVersions request at a version we serve: from v3 (KIP-511) the client
/// software name and version must match Kafka's `SOFTWARE_NAME_VERSION_PATTERN`
/// (`[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`), else INVALID_REQUEST with no API keys,
/// as Kafka's `ApiVersionsRequest.isValid` / `getErrorResponse`.
pub fn answer(version: i16, request: &ApiVersionsRequest) -> ApiVersionsResponse {
    if version >= 3
        && !(valid_software_field(&request.client_software_name)
            && valid_software_field(&request.client_software_version))
    {
        return ApiVersionsResponse {
            error_code: ErrorCode::InvalidRequest.code(),
            ..Default::default()
        };
    }
    response()
}

/// Kafka's `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`, matched against the whole value.
fn valid_software_field(value: &str) -> bool {
    let bytes = value.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.')
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(name: &str, version: &str) -> ApiVersionsRequest {
        ApiVersionsRequest {
            client_software_name: name.to_string(),
            client_software_version: version.to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn kip511_software_name_and_version_are_validated_from_v3() {
        let invalid = ErrorCode::InvalidRequest.code();
        for (name, version) in [
            ("-x", "1.0"),
            ("x", "1 0"),
            ("", "1"),
            ("a", ""),
            ("bad name!", "1"),
            ("a.", "1"),
        ] {
            let v3 = answer(3, &request(name, version));
            assert_eq!(v3.error_code, invalid, "{name:?} {version:?}");
            assert!(v3.api_keys.is_empty());
            assert_eq!(answer(4, &request(name, version)).error_code, invalid);
            // Before v3 the fields do not exist: not checked.
            assert_eq!(answer(2, &request(name, version)).error_code, 0);
        }
        for (name, version) in [
            ("apache-kafka-java", "4.4.0"),
            ("librdkafka", "2.3.0"),
            ("a", "1"),
        ] {
            let v3 = answer(3, &request(name, version));
            assert_eq!(v3.error_code, 0, "{name:?} {version:?}");
            assert!(!v3.api_keys.is_empty());
        }
    }
}

//! DescribeUserScramCredentials (API 50) and AlterUserScramCredentials (API 51), KIP-554 as
//! Kafka 4 serves them. Describe is answered from this shard's image (Kafka's brokers answer
//! it from their metadata cache). Alter goes to the metadata core, which validates it as
//! Kafka's `ScramControlManager` does and commits its records to the metadata log (in a
//! cluster: through the active controller, as Kafka forwards it), then every shard has the
//! new credentials before the answer. Authorization (Kafka: DESCRIBE / ALTER on the cluster)
//! is not checked here.

use std::rc::Rc;
use std::time::Duration;

use wire::generated::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use wire::generated::{
    alter_user_scram_credentials_response, AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
};

use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::forward;
use crate::metadata::image::Image;
use crate::metadata::scram::Upsertion;
use crate::shard::Shard;

/// How long a cluster node waits for a change the active controller committed to reach this
/// shard's image before answering anyway (a describe right after then sees it).
const ADOPT_WAIT: Duration = Duration::from_secs(10);

pub async fn describe(
    shard: Rc<Shard>,
    request: DescribeUserScramCredentialsRequest,
    ctx: RequestContext,
) -> Response {
    // Kafka: DESCRIBE on the cluster, or the whole request is refused.
    if !shard.authorize_cluster(&ctx, acl::AclOperation::Describe) {
        let code = ErrorCode::ClusterAuthorizationFailed;
        let response = DescribeUserScramCredentialsResponse {
            error_code: code.code(),
            error_message: Some(code.message().to_string()),
            ..Default::default()
        };
        return encode_response(&ctx, ctx.api_version, &response);
    }
    let users: Option<Vec<String>> = request
        .users
        .map(|users| users.into_iter().map(|u| u.name).collect());
    let described = shard.image().scram.describe(users.as_deref());
    let response = DescribeUserScramCredentialsResponse {
        results: described
            .into_iter()
            .map(|d| DescribeUserScramCredentialsResult {
                user: d.user,
                error_code: d.error_code,
                error_message: d.error_message,
                credential_infos: d
                    .credentials
                    .into_iter()
                    .map(|(mechanism, iterations)| CredentialInfo {
                        mechanism,
                        iterations,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

pub async fn alter(
    shard: Rc<Shard>,
    request: AlterUserScramCredentialsRequest,
    ctx: RequestContext,
) -> Response {
    let call = forward::AlterScramCredentials {
        deletions: request
            .deletions
            .into_iter()
            .map(|d| (d.name, d.mechanism))
            .collect(),
        upsertions: request
            .upsertions
            .into_iter()
            .map(|u| Upsertion {
                name: u.name,
                mechanism: u.mechanism,
                iterations: u.iterations,
                salt: u.salt.to_vec(),
                salted_password: u.salted_password.to_vec(),
            })
            .collect(),
    };
    // What the image must show once the change is here: (user, mechanism, the salt of an
    // upsert or None for a deletion).
    let expected: Vec<(String, i8, Option<Vec<u8>>)> = call
        .deletions
        .iter()
        .map(|(name, mechanism)| (name.clone(), *mechanism, None))
        .chain(
            call.upsertions
                .iter()
                .map(|u| (u.name.clone(), u.mechanism, Some(u.salt.clone()))),
        )
        .collect();
    // Kafka (ControllerApis): ALTER on the cluster, or every user is refused.
    let allowed = shard.authorize_cluster(&ctx, acl::AclOperation::Alter);
    let results = if !allowed {
        let code = ErrorCode::ClusterAuthorizationFailed;
        call.refuse_all(code.code(), code.message())
    } else if call.deletions.is_empty() && call.upsertions.is_empty() {
        Vec::new()
    } else {
        shard.call(0, call).await
    };
    if shard.cluster.is_some() {
        // The active controller may be another node: its answer can come before this node's
        // image has the change.
        let done: Vec<&(String, i8, Option<Vec<u8>>)> = expected
            .iter()
            .filter(|(user, _, _)| results.iter().any(|r| r.user == *user && r.error_code == 0))
            .collect();
        let applied = |image: &Image| {
            done.iter().all(|(user, mechanism, salt)| {
                let held = image.scram.get(*mechanism, user);
                match salt {
                    None => held.is_none(),
                    Some(salt) => held.is_some_and(|entry| entry.salt == *salt),
                }
            })
        };
        if !shard.wait_for_image(applied, ADOPT_WAIT).await {
            tracing::warn!("committed SCRAM credentials are not in this shard's image yet");
        }
    }
    let response = AlterUserScramCredentialsResponse {
        results: results
            .into_iter()
            .map(
                |r| alter_user_scram_credentials_response::AlterUserScramCredentialsResult {
                    user: r.user,
                    error_code: r.error_code,
                    error_message: r.error_message,
                    ..Default::default()
                },
            )
            .collect(),
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

//! DescribeAcls (API 29), CreateAcls (30) and DeleteAcls (31), as Kafka 4's KRaft nodes serve
//! them (`AclApis` over the `StandardAuthorizer`). Describe is answered from this shard's
//! image. Create and delete go to the metadata core, which validates them as Kafka's
//! `AclControlManager` does and commits their records to the metadata log (in a cluster:
//! through the active controller, as Kafka forwards them); every shard has the new ACLs
//! before the answer. With no authorizer configured (`authorizer.class.name` empty) each
//! answers SECURITY_DISABLED, as Kafka does.

use std::rc::Rc;
use std::time::Duration;

use wire::generated::create_acls_response::AclCreationResult;
use wire::generated::delete_acls_request::DeleteAclsFilter;
use wire::generated::delete_acls_response::DeleteAclsFilterResult;
use wire::generated::describe_acls_response::{AclDescription, DescribeAclsResource};
use wire::generated::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::forward;
use crate::metadata::acls::{AclCreateResult, AclDeleteResult};
use crate::metadata::image::Image;
use crate::shard::acls::{binding_of, filter_of, matching_acl};
use crate::shard::Shard;

/// Kafka's message for SECURITY_DISABLED (`AclApis`: `new SecurityDisabledException(...)`).
const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// How long a cluster node waits for a change the active controller committed to reach this
/// shard's image before answering anyway (a describe right after then sees it).
const ADOPT_WAIT: Duration = Duration::from_secs(10);

fn no_authorizer(shard: &Shard) -> bool {
    shard.config.authorizer.is_none()
}

pub async fn describe(
    shard: Rc<Shard>,
    request: DescribeAclsRequest,
    ctx: RequestContext,
) -> Response {
    let mut response = DescribeAclsResponse::default();
    if no_authorizer(&shard) {
        response.error_code = ErrorCode::SecurityDisabled.code();
        response.error_message = Some(NO_AUTHORIZER.into());
        return encode_response(&ctx, ctx.api_version, &response);
    }
    // Kafka's AclApis: DESCRIBE on the cluster, or the whole request is refused.
    if !shard.authorize_cluster(&ctx, acl::AclOperation::Describe) {
        let code = ErrorCode::ClusterAuthorizationFailed;
        response.error_code = code.code();
        response.error_message = Some(code.message().into());
        return encode_response(&ctx, ctx.api_version, &response);
    }
    // The same seven fields as a DeleteAcls filter.
    let filter = filter_of(DeleteAclsFilter {
        resource_type_filter: request.resource_type_filter,
        resource_name_filter: request.resource_name_filter,
        pattern_type_filter: request.pattern_type_filter,
        principal_filter: request.principal_filter,
        host_filter: request.host_filter,
        operation: request.operation,
        permission_type: request.permission_type,
        ..Default::default()
    });
    match crate::metadata::acls::describe(&shard.image().acls, &filter) {
        Ok(resources) => {
            response.resources = resources
                .into_iter()
                .map(|(pattern, entries)| DescribeAclsResource {
                    resource_type: pattern.resource_type.code(),
                    resource_name: pattern.name,
                    pattern_type: pattern.pattern_type.code(),
                    acls: entries
                        .into_iter()
                        .map(|entry| AclDescription {
                            principal: entry.principal,
                            host: entry.host,
                            operation: entry.operation.code(),
                            permission_type: entry.permission.code(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect();
        }
        Err(error) => {
            response.error_code = error.error_code();
            response.error_message = Some(error.to_string());
        }
    }
    encode_response(&ctx, ctx.api_version, &response)
}

pub async fn create(shard: Rc<Shard>, request: CreateAclsRequest, ctx: RequestContext) -> Response {
    let count = request.creations.len();
    let results = if no_authorizer(&shard) {
        vec![AclCreateResult::refused(ErrorCode::SecurityDisabled.code(), NO_AUTHORIZER); count]
    } else if !shard.authorize_cluster(&ctx, acl::AclOperation::Alter) {
        // Kafka's AclApis: ALTER on the cluster, or every creation is refused.
        let code = ErrorCode::ClusterAuthorizationFailed;
        vec![AclCreateResult::refused(code.code(), code.message()); count]
    } else if count == 0 {
        Vec::new()
    } else {
        let call = forward::CreateAcls {
            bindings: request.creations.into_iter().map(binding_of).collect(),
        };
        let bindings = call.bindings.clone();
        let results = shard.call(0, call).await;
        if shard.cluster.is_some() {
            // The active controller may be another node: its answer can come before this
            // node's image has the new ACLs.
            let created: Vec<_> = bindings
                .iter()
                .zip(&results)
                .filter(|(_, r)| r.error_code == 0)
                .map(|(binding, _)| binding.to_filter())
                .collect();
            let applied =
                |image: &Image| created.iter().all(|f| image.acls.acls(f).next().is_some());
            if !shard.wait_for_image(applied, ADOPT_WAIT).await {
                tracing::warn!("created ACLs are not in this shard's image yet");
            }
        }
        results
    };
    let response = CreateAclsResponse {
        results: results
            .into_iter()
            .map(|r| AclCreationResult {
                error_code: r.error_code,
                error_message: r.error_message,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

pub async fn delete(shard: Rc<Shard>, request: DeleteAclsRequest, ctx: RequestContext) -> Response {
    let count = request.filters.len();
    let results = if no_authorizer(&shard) {
        vec![AclDeleteResult::refused(ErrorCode::SecurityDisabled.code(), NO_AUTHORIZER); count]
    } else if !shard.authorize_cluster(&ctx, acl::AclOperation::Alter) {
        // Kafka's AclApis: ALTER on the cluster, or every filter is refused.
        let code = ErrorCode::ClusterAuthorizationFailed;
        vec![AclDeleteResult::refused(code.code(), code.message()); count]
    } else if count == 0 {
        Vec::new()
    } else {
        let call = forward::DeleteAcls {
            filters: request.filters.into_iter().map(filter_of).collect(),
        };
        let results = shard.call(0, call).await;
        if shard.cluster.is_some() {
            let deleted: Vec<_> = results
                .iter()
                .flat_map(|r| r.deleted.iter().map(|b| b.to_filter()))
                .collect();
            let applied =
                |image: &Image| deleted.iter().all(|f| image.acls.acls(f).next().is_none());
            if !shard.wait_for_image(applied, ADOPT_WAIT).await {
                tracing::warn!("deleted ACLs are still in this shard's image");
            }
        }
        results
    };
    let response = DeleteAclsResponse {
        filter_results: results
            .into_iter()
            .map(|r| DeleteAclsFilterResult {
                error_code: r.error_code,
                error_message: r.error_message,
                matching_acls: r.deleted.iter().map(matching_acl).collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    encode_response(&ctx, ctx.api_version, &response)
}

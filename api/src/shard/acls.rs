//! ACLs on the metadata core: CreateAcls and DeleteAcls validated and committed by its
//! `Controller` (Kafka's `AclControlManager`), or sent to the active controller of a cluster
//! as the Kafka request they are; and the conversions between the ACL APIs' wire structs and
//! the `acl` crate's bindings and filters. DescribeAcls needs none of this: every shard
//! answers it from its own image.

use wire::generated::api::ApiKey;
use wire::generated::create_acls_request::AclCreation;
use wire::generated::delete_acls_request::DeleteAclsFilter;
use wire::generated::delete_acls_response::DeleteAclsMatchingAcl;
use wire::generated::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
};

use super::*;
use crate::metadata::acls::{AclCreateResult, AclDeleteResult};
use acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType,
    ResourcePattern, ResourceType,
};

/// The versions a change is forwarded to the active controller with (the newest).
const CREATE_ACLS_VERSION: i16 = 3;
const DELETE_ACLS_VERSION: i16 = 3;

impl Shard {
    /// Metadata core only: CreateAcls. Validated against the committed image, its records
    /// committed (one batch) and published to every shard before the answer; in a cluster
    /// whose active controller is another node, sent there.
    pub(super) async fn create_acls(
        self: &Rc<Self>,
        call: forward::CreateAcls,
    ) -> Vec<AclCreateResult> {
        let controller = self
            .controller
            .as_ref()
            .expect("CreateAcls runs on the metadata core");
        if let Some(to) = self.forward_target() {
            return forward_create(to, &call.bindings).await;
        }
        let _serial = self.topic_changes.acquire_permit(1).await;
        self.adopt_committed();
        let mut results = match controller.borrow_mut().create_acls(&call.bindings) {
            Ok(results) => results,
            Err(error) => {
                tracing::error!(%error, "ACLs not written to the metadata log");
                let refused = AclCreateResult::refused(
                    ErrorCode::UnknownServerError.code(),
                    error.to_string(),
                );
                return vec![refused; call.bindings.len()];
            }
        };
        if results.iter().any(|r| r.error_code == 0) {
            if let Err(code) = self.publish_image().await {
                for result in results.iter_mut().filter(|r| r.error_code == 0) {
                    *result = AclCreateResult::refused(code, control_plane::NOT_COMMITTED);
                }
            }
        }
        results
    }

    /// Metadata core only: DeleteAcls, as [`Shard::create_acls`].
    pub(super) async fn delete_acls(
        self: &Rc<Self>,
        call: forward::DeleteAcls,
    ) -> Vec<AclDeleteResult> {
        let controller = self
            .controller
            .as_ref()
            .expect("DeleteAcls runs on the metadata core");
        if let Some(to) = self.forward_target() {
            return forward_delete(to, &call.filters).await;
        }
        let _serial = self.topic_changes.acquire_permit(1).await;
        self.adopt_committed();
        let mut results = match controller.borrow_mut().delete_acls(&call.filters) {
            Ok(results) => results,
            Err(error) => {
                tracing::error!(%error, "ACL removals not written to the metadata log");
                let refused = AclDeleteResult::refused(
                    ErrorCode::UnknownServerError.code(),
                    error.to_string(),
                );
                return vec![refused; call.filters.len()];
            }
        };
        if results.iter().any(|r| !r.deleted.is_empty()) {
            if let Err(code) = self.publish_image().await {
                for result in results.iter_mut().filter(|r| r.error_code == 0) {
                    *result = AclDeleteResult::refused(code, control_plane::NOT_COMMITTED);
                }
            }
        }
        results
    }
}

impl Serve<Shard> for forward::CreateAcls {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<AclCreateResult> {
        shard.create_acls(self).await
    }
}

impl Serve<Shard> for forward::DeleteAcls {
    async fn serve(self, shard: &Rc<Shard>) -> Vec<AclDeleteResult> {
        shard.delete_acls(self).await
    }
}

/// The binding a CreateAcls creation asks for (codes Kafka does not know read as `UNKNOWN`,
/// which validation refuses).
pub(crate) fn binding_of(creation: AclCreation) -> AclBinding {
    AclBinding::new(
        ResourcePattern::new(
            ResourceType::from_code(creation.resource_type),
            creation.resource_name,
            PatternType::from_code(creation.resource_pattern_type),
        ),
        AccessControlEntry::new(
            creation.principal,
            creation.host,
            AclOperation::from_code(creation.operation),
            AclPermissionType::from_code(creation.permission_type),
        ),
    )
}

/// The filter of a DeleteAcls (and, field for field, a DescribeAcls) request.
pub(crate) fn filter_of(filter: DeleteAclsFilter) -> AclBindingFilter {
    AclBindingFilter {
        resource_type: ResourceType::from_code(filter.resource_type_filter),
        name: filter.resource_name_filter,
        pattern_type: PatternType::from_code(filter.pattern_type_filter),
        principal: filter.principal_filter,
        host: filter.host_filter,
        operation: AclOperation::from_code(filter.operation),
        permission: AclPermissionType::from_code(filter.permission_type),
    }
}

/// A deleted binding as DeleteAcls lists it (its own error code 0, Kafka's
/// `DeleteAclsResponse.matchingAcl`).
pub(crate) fn matching_acl(binding: &AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl {
        error_code: 0,
        error_message: None,
        resource_type: binding.pattern.resource_type.code(),
        resource_name: binding.pattern.name.clone(),
        pattern_type: binding.pattern.pattern_type.code(),
        principal: binding.entry.principal.clone(),
        host: binding.entry.host.clone(),
        operation: binding.entry.operation.code(),
        permission_type: binding.entry.permission.code(),
        ..Default::default()
    }
}

fn creation_of(binding: &AclBinding) -> AclCreation {
    AclCreation {
        resource_type: binding.pattern.resource_type.code(),
        resource_name: binding.pattern.name.clone(),
        resource_pattern_type: binding.pattern.pattern_type.code(),
        principal: binding.entry.principal.clone(),
        host: binding.entry.host.clone(),
        operation: binding.entry.operation.code(),
        permission_type: binding.entry.permission.code(),
        ..Default::default()
    }
}

fn wire_filter(filter: &AclBindingFilter) -> DeleteAclsFilter {
    DeleteAclsFilter {
        resource_type_filter: filter.resource_type.code(),
        resource_name_filter: filter.name.clone(),
        pattern_type_filter: filter.pattern_type.code(),
        principal_filter: filter.principal.clone(),
        host_filter: filter.host.clone(),
        operation: filter.operation.code(),
        permission_type: filter.permission.code(),
        ..Default::default()
    }
}

fn binding_of_match(acl: DeleteAclsMatchingAcl) -> AclBinding {
    AclBinding::new(
        ResourcePattern::new(
            ResourceType::from_code(acl.resource_type),
            acl.resource_name,
            PatternType::from_code(acl.pattern_type),
        ),
        AccessControlEntry::new(
            acl.principal,
            acl.host,
            AclOperation::from_code(acl.operation),
            AclPermissionType::from_code(acl.permission_type),
        ),
    )
}

fn unreachable_message(error: &to_controller::ForwardError) -> String {
    format!("The active controller could not be reached: {error}")
}

/// CreateAcls sent to the active controller at `to`: one result per binding as it answered;
/// every binding NOT_CONTROLLER when it could not be asked.
async fn forward_create(
    to: Option<std::net::SocketAddr>,
    bindings: &[AclBinding],
) -> Vec<AclCreateResult> {
    let request = CreateAclsRequest {
        creations: bindings.iter().map(creation_of).collect(),
        ..Default::default()
    };
    let answered = to_controller::call::<_, CreateAclsResponse>(
        to,
        ApiKey::CreateAcls,
        CREATE_ACLS_VERSION,
        &request,
    )
    .await;
    match answered {
        Ok(response) if response.results.len() == bindings.len() => response
            .results
            .into_iter()
            .map(|r| AclCreateResult {
                error_code: r.error_code,
                error_message: r.error_message,
            })
            .collect(),
        Ok(response) => {
            tracing::warn!(
                asked = bindings.len(),
                answered = response.results.len(),
                "the active controller answered CreateAcls with another number of results"
            );
            let refused = AclCreateResult::refused(
                ErrorCode::UnknownServerError.code(),
                "The active controller's answer does not match the request.",
            );
            vec![refused; bindings.len()]
        }
        Err(error) => {
            tracing::info!(%error, "CreateAcls forwarded to the active controller failed");
            let refused = AclCreateResult::refused(
                ErrorCode::NotController.code(),
                unreachable_message(&error),
            );
            vec![refused; bindings.len()]
        }
    }
}

/// DeleteAcls sent to the active controller at `to`, as [`forward_create`].
async fn forward_delete(
    to: Option<std::net::SocketAddr>,
    filters: &[AclBindingFilter],
) -> Vec<AclDeleteResult> {
    let request = DeleteAclsRequest {
        filters: filters.iter().map(wire_filter).collect(),
        ..Default::default()
    };
    let answered = to_controller::call::<_, DeleteAclsResponse>(
        to,
        ApiKey::DeleteAcls,
        DELETE_ACLS_VERSION,
        &request,
    )
    .await;
    match answered {
        Ok(response) if response.filter_results.len() == filters.len() => response
            .filter_results
            .into_iter()
            .map(|r| AclDeleteResult {
                error_code: r.error_code,
                error_message: r.error_message,
                deleted: r.matching_acls.into_iter().map(binding_of_match).collect(),
            })
            .collect(),
        Ok(response) => {
            tracing::warn!(
                asked = filters.len(),
                answered = response.filter_results.len(),
                "the active controller answered DeleteAcls with another number of results"
            );
            let refused = AclDeleteResult::refused(
                ErrorCode::UnknownServerError.code(),
                "The active controller's answer does not match the request.",
            );
            vec![refused; filters.len()]
        }
        Err(error) => {
            tracing::info!(%error, "DeleteAcls forwarded to the active controller failed");
            let refused = AclDeleteResult::refused(
                ErrorCode::NotController.code(),
                unreachable_message(&error),
            );
            vec![refused; filters.len()]
        }
    }
}

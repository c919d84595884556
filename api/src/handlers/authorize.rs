//! Authorization of requests, as Kafka's `AuthHelper` does it for KafkaApis and
//! ControllerApis: the handlers call these before acting, with Kafka's operation, resource
//! and error code for each API (the table is in ARCHITECTURE.md, "Authorization (ACLs)").
//! With no `authorizer.class.name` every check answers "allowed" at once, with no image
//! borrow and no allocation; a request another broker forwarded to this node's controller
//! (`RequestContext::trusted`) was checked by that broker and is not checked again.
//!
//! Runs on the shard that serves the connection, against that shard's image (see
//! `shard::authorization`). A decision allocates nothing; the filters below allocate only
//! the lists they return.

use std::collections::HashSet;

use acl::{AclOperation, ResourceType, CLUSTER_NAME};

use super::RequestContext;
use crate::shard::Shard;

impl Shard {
    /// Whether this request is checked at all (an authorizer is configured and the request
    /// is not a trusted forwarded one). Handlers use it to skip building what only a check
    /// needs.
    pub(crate) fn authorizes(&self, ctx: &RequestContext) -> bool {
        self.authorizer.is_some() && !ctx.trusted
    }

    /// Kafka's `authorize(context, operation, resourceType, name)` on a LITERAL resource.
    pub(crate) fn authorize(
        &self,
        ctx: &RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        !self.authorizes(ctx)
            || self.acl_allows(&ctx.principal, &ctx.host, operation, resource_type, name)
    }

    /// `operation` on the one CLUSTER resource (`kafka-cluster`).
    pub(crate) fn authorize_cluster(&self, ctx: &RequestContext, operation: AclOperation) -> bool {
        self.authorize(ctx, operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Kafka's `authorizeByResourceType`.
    pub(crate) fn authorize_any(
        &self,
        ctx: &RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        !self.authorizes(ctx)
            || self.acl_allows_any(&ctx.principal, &ctx.host, operation, resource_type)
    }

    /// Kafka's `AuthHelper.authorizedOperations`: the bit set of the resource type's
    /// operations this request's principal may do (all of them with no authorizer).
    pub(crate) fn authorized_operations(
        &self,
        ctx: &RequestContext,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        if ctx.trusted {
            return acl::operations_bit_field(
                acl::supported_operations(resource_type).iter().copied(),
            );
        }
        self.acl_operations(&ctx.principal, &ctx.host, resource_type, name)
    }

    /// Kafka's `filterByAuthorized`: the names among `names` the request may do `operation`
    /// on, each name decided once however often it appears.
    pub(crate) fn authorized_names<'a>(
        &self,
        ctx: &RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        names: impl IntoIterator<Item = &'a str>,
    ) -> HashSet<&'a str> {
        let mut decided: HashSet<&'a str> = HashSet::new();
        let mut denied: HashSet<&'a str> = HashSet::new();
        for name in names {
            if decided.contains(name) || denied.contains(name) {
                continue;
            }
            if self.authorize(ctx, operation, resource_type, name) {
                decided.insert(name);
            } else {
                denied.insert(name);
            }
        }
        decided
    }

    /// Kafka's `partitionSeqByAuthorized`: `items` split into those whose resource the request
    /// may do `operation` on and the others, each in its original order (one decision per
    /// distinct name).
    pub(crate) fn partition_authorized<T>(
        &self,
        ctx: &RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        items: Vec<T>,
        name: impl Fn(&T) -> &str,
    ) -> (Vec<T>, Vec<T>) {
        if !self.authorizes(ctx) {
            return (items, Vec::new());
        }
        let mut cache: Vec<(String, bool)> = Vec::new();
        let (mut allowed, mut refused) = (Vec::new(), Vec::new());
        for item in items {
            let resource = name(&item);
            let decision = match cache.iter().find(|(seen, _)| seen == resource) {
                Some((_, decision)) => *decision,
                None => {
                    let decision = self.authorize(ctx, operation, resource_type, resource);
                    cache.push((resource.to_owned(), decision));
                    decision
                }
            };
            if decision {
                allowed.push(item);
            } else {
                refused.push(item);
            }
        }
        (allowed, refused)
    }
}

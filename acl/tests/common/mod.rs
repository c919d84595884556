//! Shared test helpers: ACLs written as tuples, authorizers built from them.

#![allow(dead_code)]

use acl::{
    AccessControlEntry, AclBinding, AclId, AclOperation, AclPermissionType, Authorizer,
    AuthorizerConfig, PatternType, ResourcePattern, ResourceType,
};

/// (resource type, resource name, pattern type, principal, host, operation, permission).
pub type Acl = (
    ResourceType,
    &'static str,
    PatternType,
    &'static str,
    &'static str,
    AclOperation,
    AclPermissionType,
);

pub fn binding(acl: &Acl) -> AclBinding {
    let (rt, name, pt, principal, host, op, perm) = *acl;
    AclBinding::new(
        ResourcePattern::new(rt, name, pt),
        AccessControlEntry::new(principal, host, op, perm),
    )
}

pub fn id(n: usize) -> AclId {
    (n as u128 + 1).to_be_bytes()
}

pub fn config(super_users: &[&str], allow_everyone_if_no_acl_found: bool) -> AuthorizerConfig {
    AuthorizerConfig {
        super_users: super_users.iter().map(|s| s.to_string()).collect(),
        allow_everyone_if_no_acl_found,
    }
}

pub fn authorizer(acls: &[Acl], config: AuthorizerConfig) -> Authorizer {
    Authorizer::from_acls(
        config,
        acls.iter().enumerate().map(|(n, a)| (id(n), binding(a))),
    )
    .expect("test ACLs are distinct")
}

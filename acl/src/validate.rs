//! The checks an ACL passes before it is stored and a DeleteAcls filter passes before it is
//! applied, and the parse of principals and `super.users`. Pure functions.
//!
//! [`validate_new`] is the whole CreateAcls path of a Kafka node in one call. Kafka refuses a
//! binding in three places: the request (an `UNKNOWN` code fails its parse; `ANY` or `MATCH`
//! fails the `ResourcePattern`/`AccessControlEntry` constructors), `AclApis.handleCreateAcls`
//! (the CLUSTER name, the empty name) and `AclControlManager.validateNewAcl` (the enum values,
//! the principal). Here every one of them answers `INVALID_REQUEST` with the controller's
//! message, checked in the order Kafka reaches them: enum values first, then the broker's
//! checks, then the principal.

use crate::binding::{AclBinding, AclBindingFilter};
use crate::error::AclError;
use crate::types::{AclOperation, AclPermissionType, PatternType, ResourceType};
use crate::CLUSTER_NAME;

/// Checks a binding a CreateAcls request asks for, as Kafka does.
pub fn validate_new(binding: &AclBinding) -> Result<(), AclError> {
    let pattern = &binding.pattern;
    let entry = &binding.entry;
    if matches!(
        pattern.resource_type,
        ResourceType::Unknown | ResourceType::Any
    ) {
        return Err(AclError::InvalidResourceType(pattern.resource_type));
    }
    if !matches!(
        pattern.pattern_type,
        PatternType::Literal | PatternType::Prefixed
    ) {
        return Err(AclError::InvalidPatternType(pattern.pattern_type));
    }
    if matches!(entry.operation, AclOperation::Unknown | AclOperation::Any) {
        return Err(AclError::InvalidOperation(entry.operation));
    }
    if !matches!(
        entry.permission,
        AclPermissionType::Deny | AclPermissionType::Allow
    ) {
        return Err(AclError::InvalidPermissionType(entry.permission));
    }
    // AclApis: a CLUSTER ACL of any pattern type must name the one cluster resource.
    if pattern.resource_type == ResourceType::Cluster && pattern.name != CLUSTER_NAME {
        return Err(AclError::InvalidClusterName);
    }
    if pattern.name.is_empty() {
        return Err(AclError::EmptyResourceName);
    }
    // Kafka accepts any `type:name` here, even an empty type or name; only a principal with no
    // colon could never match a request's principal.
    if !entry.principal.contains(':') {
        return Err(AclError::InvalidAclPrincipal(entry.principal.clone()));
    }
    Ok(())
}

/// Checks a DeleteAcls filter, as `AclControlManager.validateFilter` does. (DescribeAcls
/// refuses the same `UNKNOWN` values, at the request's parse.)
pub fn validate_filter(filter: &AclBindingFilter) -> Result<(), AclError> {
    if filter.pattern_is_unknown() {
        return Err(AclError::UnknownPatternFilter);
    }
    if filter.entry_is_unknown() {
        return Err(AclError::UnknownEntryFilter);
    }
    Ok(())
}

/// Kafka's `SecurityUtils.parseKafkaPrincipal`: `Type:name` split at the first colon, into
/// (type, name). Either part may be empty; no colon, or an empty string, is refused.
pub fn parse_principal(text: &str) -> Result<(&str, &str), AclError> {
    text.split_once(':')
        .ok_or_else(|| AclError::InvalidPrincipal(text.to_owned()))
}

/// Kafka's `super.users` value: principals separated by `;` (a distinguished name may hold
/// commas), each trimmed as Java's `String.trim` does, empty ones dropped, each one checked
/// with [`parse_principal`].
pub fn parse_super_users(value: &str) -> Result<Vec<String>, AclError> {
    let mut users = Vec::new();
    for part in value.split(';') {
        let user = java_trim(part);
        if user.is_empty() {
            continue;
        }
        parse_principal(user)?;
        if !users.iter().any(|u| u == user) {
            users.push(user.to_owned());
        }
    }
    Ok(users)
}

/// Java's `String.trim`: strips every char up to and including U+0020 from both ends, which
/// is not Rust's Unicode `trim`.
pub(crate) fn java_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c <= ' ')
}

//! ACL bindings and the filters DescribeAcls and DeleteAcls select them with: Kafka's
//! `ResourcePattern`, `AccessControlEntry`, `AclBinding` and `AclBindingFilter` (which folds
//! `ResourcePatternFilter` and `AccessControlEntryFilter` into one flat struct, as the
//! requests carry it). Pure data and matching; no bounds of its own (names are as long as the
//! request's strings).

use std::fmt;

use crate::types::{AclOperation, AclPermissionType, PatternType, ResourceType};
use crate::WILDCARD;

/// Kafka's `ResourcePattern`: the resource side of an ACL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourcePattern {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern_type: PatternType,
}

/// Kafka's `AccessControlEntry`: who may (or may not) do what, from where.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AccessControlEntry {
    /// `Type:name`, e.g. `User:alice`; `User:*` is every principal.
    pub principal: String,
    /// The client's address as Java prints it ([`crate::java_host_address`]), or `*`.
    pub host: String,
    pub operation: AclOperation,
    pub permission: AclPermissionType,
}

/// Kafka's `AclBinding`: one ACL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AclBinding {
    pub pattern: ResourcePattern,
    pub entry: AccessControlEntry,
}

/// Kafka's `AclBindingFilter` (a `ResourcePatternFilter` plus an `AccessControlEntryFilter`):
/// `None` strings and the `Any` values match everything; `PatternType::Match` matches the
/// ACLs that apply to the named resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AclBindingFilter {
    pub resource_type: ResourceType,
    pub name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: AclOperation,
    pub permission: AclPermissionType,
}

impl ResourcePattern {
    pub fn new(
        resource_type: ResourceType,
        name: impl Into<String>,
        pattern_type: PatternType,
    ) -> Self {
        ResourcePattern {
            resource_type,
            name: name.into(),
            pattern_type,
        }
    }

    /// Kafka's `isUnknown`.
    pub fn is_unknown(&self) -> bool {
        self.resource_type.is_unknown() || self.pattern_type.is_unknown()
    }
}

impl AccessControlEntry {
    pub fn new(
        principal: impl Into<String>,
        host: impl Into<String>,
        operation: AclOperation,
        permission: AclPermissionType,
    ) -> Self {
        AccessControlEntry {
            principal: principal.into(),
            host: host.into(),
            operation,
            permission,
        }
    }

    /// Kafka's `isUnknown`.
    pub fn is_unknown(&self) -> bool {
        self.operation.is_unknown() || self.permission.is_unknown()
    }
}

impl AclBinding {
    pub fn new(pattern: ResourcePattern, entry: AccessControlEntry) -> Self {
        AclBinding { pattern, entry }
    }

    /// Kafka's `isUnknown`: some field read as `Unknown` from a newer peer.
    pub fn is_unknown(&self) -> bool {
        self.pattern.is_unknown() || self.entry.is_unknown()
    }

    /// Kafka's `toFilter`: the filter that matches exactly this binding.
    pub fn to_filter(&self) -> AclBindingFilter {
        AclBindingFilter {
            resource_type: self.pattern.resource_type,
            name: Some(self.pattern.name.clone()),
            pattern_type: self.pattern.pattern_type,
            principal: Some(self.entry.principal.clone()),
            host: Some(self.entry.host.clone()),
            operation: self.entry.operation,
            permission: self.entry.permission,
        }
    }
}

impl AclBindingFilter {
    /// Kafka's `AclBindingFilter.ANY`.
    pub const ANY: AclBindingFilter = AclBindingFilter {
        resource_type: ResourceType::Any,
        name: None,
        pattern_type: PatternType::Any,
        principal: None,
        host: None,
        operation: AclOperation::Any,
        permission: AclPermissionType::Any,
    };

    /// Kafka's `AclBindingFilter.matches`: the pattern half and the entry half both match.
    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.matches_pattern(&binding.pattern) && self.matches_entry(&binding.entry)
    }

    /// Kafka's `ResourcePatternFilter.matches`.
    pub fn matches_pattern(&self, pattern: &ResourcePattern) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != pattern.resource_type {
            return false;
        }
        if self.pattern_type != PatternType::Any
            && self.pattern_type != PatternType::Match
            && self.pattern_type != pattern.pattern_type
        {
            return false;
        }
        let Some(name) = &self.name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == pattern.pattern_type {
            return *name == pattern.name;
        }
        // A MATCH filter: the patterns that would apply to a resource with this name.
        match pattern.pattern_type {
            PatternType::Literal => *name == pattern.name || pattern.name == WILDCARD,
            PatternType::Prefixed => name.starts_with(&pattern.name),
            // Kafka throws IllegalArgumentException here; no stored ACL has another type
            // (validation refuses them), so matching nothing is the same answer.
            _ => false,
        }
    }

    /// Kafka's `AccessControlEntryFilter.matches`.
    pub fn matches_entry(&self, entry: &AccessControlEntry) -> bool {
        if self
            .principal
            .as_ref()
            .is_some_and(|p| *p != entry.principal)
        {
            return false;
        }
        if self.host.as_ref().is_some_and(|h| *h != entry.host) {
            return false;
        }
        if self.operation != AclOperation::Any && self.operation != entry.operation {
            return false;
        }
        self.permission == AclPermissionType::Any || self.permission == entry.permission
    }

    /// Kafka's `ResourcePatternFilter.isUnknown`.
    pub fn pattern_is_unknown(&self) -> bool {
        self.resource_type.is_unknown() || self.pattern_type.is_unknown()
    }

    /// Kafka's `AccessControlEntryFilter.isUnknown`.
    pub fn entry_is_unknown(&self) -> bool {
        self.operation.is_unknown() || self.permission.is_unknown()
    }

    /// Kafka's `AclBindingFilter.isUnknown`.
    pub fn is_unknown(&self) -> bool {
        self.pattern_is_unknown() || self.entry_is_unknown()
    }

    /// Kafka's `findIndefiniteField`: why this filter could match more than one binding, in
    /// Kafka's words, or `None` when it names exactly one.
    pub fn find_indefinite_field(&self) -> Option<&'static str> {
        match self.resource_type {
            ResourceType::Any => return Some("Resource type is ANY."),
            ResourceType::Unknown => return Some("Resource type is UNKNOWN."),
            _ => {}
        }
        if self.name.is_none() {
            return Some("Resource name is NULL.");
        }
        match self.pattern_type {
            PatternType::Match => return Some("Resource pattern type is MATCH."),
            PatternType::Unknown => return Some("Resource pattern type is UNKNOWN."),
            _ => {}
        }
        if self.principal.is_none() {
            return Some("Principal is NULL");
        }
        if self.host.is_none() {
            return Some("Host is NULL");
        }
        match self.operation {
            AclOperation::Any => return Some("Operation is ANY"),
            AclOperation::Unknown => return Some("Operation is UNKNOWN"),
            _ => {}
        }
        match self.permission {
            AclPermissionType::Any => Some("Permission type is ANY"),
            AclPermissionType::Unknown => Some("Permission type is UNKNOWN"),
            _ => None,
        }
    }

    /// Kafka's `matchesAtMostOne`.
    pub fn matches_at_most_one(&self) -> bool {
        self.find_indefinite_field().is_none()
    }
}

// The Display forms are Kafka's `toString`s, so log lines read as the Java broker's do.

impl fmt::Display for ResourcePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ResourcePattern(resourceType={}, name={}, patternType={})",
            self.resource_type, self.name, self.pattern_type
        )
    }
}

impl fmt::Display for AccessControlEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(principal={}, host={}, operation={}, permissionType={})",
            self.principal, self.host, self.operation, self.permission
        )
    }
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(pattern={}, entry={})", self.pattern, self.entry)
    }
}

impl fmt::Display for AclBindingFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(patternFilter=ResourcePattern(resourceType={}, name={}, patternType={}), \
             entryFilter=(principal={}, host={}, operation={}, permissionType={}))",
            self.resource_type,
            self.name.as_deref().unwrap_or("<any>"),
            self.pattern_type,
            self.principal.as_deref().unwrap_or("<any>"),
            self.host.as_deref().unwrap_or("<any>"),
            self.operation,
            self.permission
        )
    }
}

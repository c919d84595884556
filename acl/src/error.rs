//! The crate's refusals. [`AclError`] is what a client or an operator sees (CreateAcls,
//! DeleteAcls, `super.users`, `ssl.principal.mapping.rules`), each with Kafka's message text
//! and Kafka's error code; [`AclStoreError`] is a broken metadata log (an ACL record added
//! twice or removed unseen), which Kafka throws as a `RuntimeException`.

use crate::types::{AclOperation, AclPermissionType, PatternType, ResourceType};
use crate::AclId;

/// Kafka's `INVALID_REQUEST`.
pub const INVALID_REQUEST: i16 = 42;
/// Kafka's `INVALID_CONFIG`.
pub const INVALID_CONFIG: i16 = 40;
/// Kafka's `UNKNOWN_SERVER_ERROR`.
pub const UNKNOWN_SERVER_ERROR: i16 = -1;

/// A refused ACL, filter, or configuration value, with Kafka's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclError {
    // CreateAcls (AclControlManager.validateNewAcl and AclApis.handleCreateAcls).
    #[error("Invalid resourceType {0}")]
    InvalidResourceType(ResourceType),
    #[error("Invalid patternType {0}")]
    InvalidPatternType(PatternType),
    #[error("Invalid operation {0}")]
    InvalidOperation(AclOperation),
    #[error("Invalid permissionType {0}")]
    InvalidPermissionType(AclPermissionType),
    #[error(
        "The only valid name for the CLUSTER resource is {}",
        crate::CLUSTER_NAME
    )]
    InvalidClusterName,
    #[error("Invalid empty resource name")]
    EmptyResourceName,
    #[error(
        "Could not parse principal from `{0}` (no colon is present separating the principal \
         type from the principal name)"
    )]
    InvalidAclPrincipal(String),

    // DeleteAcls (AclControlManager.validateFilter).
    #[error("Unknown patternFilter.")]
    UnknownPatternFilter,
    #[error("Unknown entryFilter.")]
    UnknownEntryFilter,

    // `super.users` (SecurityUtils.parseKafkaPrincipal).
    #[error("expected a string in format principalType:principalName but got {0}")]
    InvalidPrincipal(String),

    // `ssl.principal.mapping.rules` (SslPrincipalMapper).
    #[error("Invalid rule: {0}")]
    InvalidRule(String),
    #[error("Invalid rule: `{rule}`, unmatched substring: `{unmatched}`")]
    UnmatchedRuleText { rule: String, unmatched: String },
    /// Java would throw `PatternSyntaxException`; the text is the `regex` crate's, and a
    /// Java-only construct (look-around, back-references) lands here too.
    #[error("Invalid rule pattern `{pattern}`: {reason}")]
    InvalidRulePattern { pattern: String, reason: String },
    #[error("No rules apply to {distinguished_name}, rules {rules}")]
    NoMatchingRule {
        distinguished_name: String,
        rules: String,
    },
    /// A replacement Java's `Matcher.appendReplacement` refuses (`$x`, `No group 4`, ...),
    /// found when a name is mapped, as in Kafka.
    #[error("{0}")]
    InvalidReplacement(String),
}

impl AclError {
    /// The Kafka error code a response carries for this refusal.
    pub fn error_code(&self) -> i16 {
        match self {
            AclError::InvalidResourceType(_)
            | AclError::InvalidPatternType(_)
            | AclError::InvalidOperation(_)
            | AclError::InvalidPermissionType(_)
            | AclError::InvalidClusterName
            | AclError::EmptyResourceName
            | AclError::InvalidAclPrincipal(_)
            | AclError::UnknownPatternFilter
            | AclError::UnknownEntryFilter => INVALID_REQUEST,
            AclError::InvalidPrincipal(_)
            | AclError::InvalidRule(_)
            | AclError::UnmatchedRuleText { .. }
            | AclError::InvalidRulePattern { .. } => INVALID_CONFIG,
            // A failed SSL principal mapping fails the handshake: no Kafka response carries
            // it, and any code a caller reports for it is Kafka's generic one.
            AclError::NoMatchingRule { .. } | AclError::InvalidReplacement(_) => {
                UNKNOWN_SERVER_ERROR
            }
        }
    }
}

/// A metadata log the authorizer cannot apply; Kafka's `AclCache` throws the same three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AclStoreError {
    #[error("An ACL with ID {} already exists.", crate::acl_id_string(.0))]
    DuplicateId(AclId),
    #[error("Unable to add the ACL with ID {} to aclsByResource", crate::acl_id_string(.0))]
    DuplicateAcl(AclId),
    #[error("ID {} not found in aclsById.", crate::acl_id_string(.0))]
    UnknownId(AclId),
}

impl AclStoreError {
    /// What a request that hit this would answer: Kafka's `UNKNOWN_SERVER_ERROR`.
    pub fn error_code(&self) -> i16 {
        UNKNOWN_SERVER_ERROR
    }
}

//! What one ACL says about one request (StandardAuthorizerData's `findResult`), and which
//! operations each resource type supports (`AclEntry.supportedOperations`). Pure functions on
//! the hot path: no allocation, a handful of comparisons.

use crate::types::{AclOperation, AclPermissionType, ResourceType};
use crate::{Decision, WILDCARD, WILDCARD_PRINCIPAL};

/// The operations Kafka lists for a resource type (`AclEntry.supportedOperations`), which
/// are the bits a Metadata, DescribeCluster or DescribeGroups answer may set. `Unknown` and
/// `Any` support none (Kafka throws "Not a concrete resource type").
pub fn supported_operations(resource_type: ResourceType) -> &'static [AclOperation] {
    use AclOperation::*;
    match resource_type {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        ResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        ResourceType::TransactionalId => &[Describe, Write],
        ResourceType::DelegationToken => &[Describe],
        ResourceType::User => &[CreateTokens, DescribeTokens],
        ResourceType::Unknown | ResourceType::Any => &[],
    }
}

/// Kafka's `Utils.to32BitField` over operation codes: bit `code` set for each operation.
pub fn operations_bit_field(operations: impl IntoIterator<Item = AclOperation>) -> i32 {
    operations
        .into_iter()
        .fold(0, |bits, op| bits | operation_bit(op))
}

pub(crate) fn operation_bit(operation: AclOperation) -> i32 {
    1 << operation.code()
}

/// An ALLOW for one of these implies DESCRIBE.
fn implies_describe(operation: AclOperation) -> bool {
    use AclOperation::*;
    matches!(operation, Describe | Read | Write | Delete | Alter)
}

/// An ALLOW for one of these implies DESCRIBE_CONFIGS.
fn implies_describe_configs(operation: AclOperation) -> bool {
    matches!(
        operation,
        AclOperation::DescribeConfigs | AclOperation::AlterConfigs
    )
}

/// Whether an ACL's principal names the request's: equal, or the wildcard `User:*`.
///
/// Kafka compares parsed `KafkaPrincipal`s (type and name split at the first colon); for the
/// `Type:name` strings both sides are, that is string equality.
pub(crate) fn principal_matches(acl_principal: &str, principal: &str) -> bool {
    acl_principal == principal || acl_principal == WILDCARD_PRINCIPAL
}

/// Whether an ACL's host names the request's: equal, or `*`.
pub(crate) fn host_matches(acl_host: &str, host: &str) -> bool {
    acl_host == WILDCARD || acl_host == host
}

/// Kafka's `findResult` for an ACL whose resource already matched: `None` when the ACL says
/// nothing about this principal, host and operation.
///
/// Implication runs one way only. An ALLOW for READ, WRITE, DELETE or ALTER also allows
/// DESCRIBE, and ALTER_CONFIGS allows DESCRIBE_CONFIGS; a DENY denies only its own operation
/// (a DENY on READ leaves DESCRIBE alone), and ALL, allowed or denied, covers everything.
/// An ACL whose permission is neither ALLOW nor DENY counts as a DENY, as in Kafka.
pub(crate) fn acl_result(
    acl_principal: &str,
    acl_host: &str,
    acl_operation: AclOperation,
    acl_permission: AclPermissionType,
    principal: &str,
    host: &str,
    operation: AclOperation,
) -> Option<Decision> {
    if !principal_matches(acl_principal, principal) || !host_matches(acl_host, host) {
        return None;
    }
    if !operation_matches(acl_operation, acl_permission, operation) {
        return None;
    }
    Some(if acl_permission == AclPermissionType::Allow {
        Decision::Allow
    } else {
        Decision::Deny
    })
}

/// The operation half of [`acl_result`].
pub(crate) fn operation_matches(
    acl_operation: AclOperation,
    acl_permission: AclPermissionType,
    operation: AclOperation,
) -> bool {
    if acl_operation == AclOperation::All {
        return true;
    }
    if acl_permission != AclPermissionType::Allow {
        return operation == acl_operation;
    }
    match operation {
        AclOperation::Describe => implies_describe(acl_operation),
        AclOperation::DescribeConfigs => implies_describe_configs(acl_operation),
        _ => operation == acl_operation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AclOperation::*;
    use AclPermissionType::{Allow, Deny};

    fn result(op: AclOperation, perm: AclPermissionType, asked: AclOperation) -> Option<Decision> {
        acl_result("User:bob", "*", op, perm, "User:bob", "10.0.0.1", asked)
    }

    #[test]
    fn kafka_find_result_implication() {
        // StandardAuthorizerTest.testFindResultImplication.
        for op in [Describe, Read, Write, Delete, Alter] {
            assert_eq!(result(op, Allow, Describe), Some(Decision::Allow), "{op}");
        }
        assert_eq!(result(Create, Allow, Describe), None);
        for op in [Read, Write, Delete, Alter] {
            assert_eq!(result(op, Deny, Describe), None, "{op}");
        }
        assert_eq!(result(Describe, Deny, Describe), Some(Decision::Deny));
        for op in [DescribeConfigs, AlterConfigs] {
            assert_eq!(result(op, Allow, DescribeConfigs), Some(Decision::Allow));
        }
        assert_eq!(result(AlterConfigs, Deny, DescribeConfigs), None);
        assert_eq!(
            result(AlterConfigs, Deny, AlterConfigs),
            Some(Decision::Deny)
        );
        assert_eq!(result(All, Deny, Describe), Some(Decision::Deny));
        assert_eq!(result(All, Allow, ClusterAction), Some(Decision::Allow));
        // Implication does not reach the other way.
        assert_eq!(result(Describe, Allow, Read), None);
        assert_eq!(result(DescribeConfigs, Allow, AlterConfigs), None);
    }

    #[test]
    fn unknown_permission_counts_as_deny() {
        assert_eq!(
            result(Read, AclPermissionType::Unknown, Read),
            Some(Decision::Deny)
        );
    }

    #[test]
    fn bit_field_sets_code_bits() {
        assert_eq!(operations_bit_field([Read, Write]), (1 << 3) | (1 << 4));
        assert_eq!(operations_bit_field([]), 0);
    }

    #[test]
    fn supported_operations_are_kafkas() {
        assert_eq!(supported_operations(ResourceType::Topic).len(), 8);
        assert_eq!(supported_operations(ResourceType::Cluster).len(), 7);
        assert!(supported_operations(ResourceType::Any).is_empty());
    }
}

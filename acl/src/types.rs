//! The four enums of Kafka's ACL model (`ResourceType`, `PatternType`, `AclOperation`,
//! `AclPermissionType`), with Kafka's numeric codes, names and parsing. Pure data; no bounds
//! beyond the codes themselves (an `i8` on the wire).
//!
//! Every enum orders its variants by code, which is also Kafka's declaration order, so the
//! derived `Ord` is Java's `Enum.compareTo` (the authorizer's sort order relies on it).

use std::fmt;

/// Declares one Kafka enum: variants with their code, Java `name()` and the Pascal-case name
/// `SecurityUtils` uses (the `kafka-acls` tool and the audit log print those).
macro_rules! kafka_enum {
    (
        $(#[$doc:meta])*
        $name:ident {
            $($(#[$vdoc:meta])* $variant:ident = $code:literal, $upper:literal, $pascal:literal;)*
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(i8)]
        pub enum $name {
            $($(#[$vdoc])* $variant = $code,)*
        }

        impl $name {
            /// Every variant, in code order.
            pub const VALUES: &'static [$name] = &[$($name::$variant,)*];

            /// Kafka's `fromCode`: a code Kafka does not know is `Unknown`, never an error, so
            /// a newer client's value reads as "unknown" exactly as the Java broker reads it.
            pub fn from_code(code: i8) -> Self {
                match code {
                    $($code => $name::$variant,)*
                    _ => $name::Unknown,
                }
            }

            /// The code Kafka puts on the wire and in metadata records.
            pub fn code(self) -> i8 {
                self as i8
            }

            /// Java's `name()`: `"TOPIC"`, `"DESCRIBE_CONFIGS"`, ... (what `toString` prints
            /// inside Kafka's error messages).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $upper,)*
                }
            }

            /// `SecurityUtils`' Pascal-case name: `"TransactionalId"`, `"DescribeConfigs"`.
            pub fn pascal_name(self) -> &'static str {
                match self {
                    $($name::$variant => $pascal,)*
                }
            }

            /// Case-insensitive parse of either name (`"describe_configs"`, `"DescribeConfigs"`,
            /// `"DESCRIBECONFIGS"`); anything else is `Unknown`, as Kafka's `fromString` and
            /// `SecurityUtils` lookups answer.
            pub fn parse(text: &str) -> Self {
                $name::VALUES
                    .iter()
                    .copied()
                    .find(|v| {
                        v.name().eq_ignore_ascii_case(text)
                            || v.pascal_name().eq_ignore_ascii_case(text)
                    })
                    .unwrap_or($name::Unknown)
            }

            /// Kafka's `isUnknown`.
            pub fn is_unknown(self) -> bool {
                self == $name::Unknown
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_enum! {
    /// Kafka's `ResourceType`: what an ACL protects.
    ResourceType {
        Unknown = 0, "UNKNOWN", "Unknown";
        /// Only in filters: matches every resource type.
        Any = 1, "ANY", "Any";
        Topic = 2, "TOPIC", "Topic";
        Group = 3, "GROUP", "Group";
        /// The one resource named [`crate::CLUSTER_NAME`].
        Cluster = 4, "CLUSTER", "Cluster";
        TransactionalId = 5, "TRANSACTIONAL_ID", "TransactionalId";
        DelegationToken = 6, "DELEGATION_TOKEN", "DelegationToken";
        User = 7, "USER", "User";
    }
}

kafka_enum! {
    /// Kafka's `PatternType` (KIP-290): how an ACL's resource name matches resources.
    PatternType {
        Unknown = 0, "UNKNOWN", "Unknown";
        /// Only in filters: matches every pattern type, names compared exactly.
        Any = 1, "ANY", "Any";
        /// Only in filters: matches the ACLs that would apply to the named resource.
        Match = 2, "MATCH", "Match";
        /// The name is the resource's name, or `*` for every resource.
        Literal = 3, "LITERAL", "Literal";
        /// The name is a prefix of the resources' names.
        Prefixed = 4, "PREFIXED", "Prefixed";
    }
}

kafka_enum! {
    /// Kafka's `AclOperation`. Kafka's note applies: no more than 30 operations fit the
    /// `authorized_operations` bit set of the Metadata response.
    AclOperation {
        Unknown = 0, "UNKNOWN", "Unknown";
        /// Only in filters: matches every operation.
        Any = 1, "ANY", "Any";
        /// In an ACL: every operation.
        All = 2, "ALL", "All";
        Read = 3, "READ", "Read";
        Write = 4, "WRITE", "Write";
        Create = 5, "CREATE", "Create";
        Delete = 6, "DELETE", "Delete";
        Alter = 7, "ALTER", "Alter";
        Describe = 8, "DESCRIBE", "Describe";
        ClusterAction = 9, "CLUSTER_ACTION", "ClusterAction";
        DescribeConfigs = 10, "DESCRIBE_CONFIGS", "DescribeConfigs";
        AlterConfigs = 11, "ALTER_CONFIGS", "AlterConfigs";
        IdempotentWrite = 12, "IDEMPOTENT_WRITE", "IdempotentWrite";
        CreateTokens = 13, "CREATE_TOKENS", "CreateTokens";
        DescribeTokens = 14, "DESCRIBE_TOKENS", "DescribeTokens";
    }
}

kafka_enum! {
    /// Kafka's `AclPermissionType`.
    AclPermissionType {
        Unknown = 0, "UNKNOWN", "Unknown";
        /// Only in filters: matches both.
        Any = 1, "ANY", "Any";
        Deny = 2, "DENY", "Deny";
        Allow = 3, "ALLOW", "Allow";
    }
}

// The authorized-operations bit set is an i32 with bit `code` per operation.
const _: () = assert!((AclOperation::DescribeTokens as i8) < 31);

impl PatternType {
    /// Kafka's `isSpecific`: a pattern type an ACL (not a filter) can have.
    pub fn is_specific(self) -> bool {
        !matches!(
            self,
            PatternType::Unknown | PatternType::Any | PatternType::Match
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_read_as_unknown() {
        for v in ResourceType::VALUES {
            assert_eq!(ResourceType::from_code(v.code()), *v);
        }
        for v in PatternType::VALUES {
            assert_eq!(PatternType::from_code(v.code()), *v);
        }
        for v in AclOperation::VALUES {
            assert_eq!(AclOperation::from_code(v.code()), *v);
        }
        for v in AclPermissionType::VALUES {
            assert_eq!(AclPermissionType::from_code(v.code()), *v);
        }
        for code in [-1i8, 15, 100, i8::MIN, i8::MAX] {
            assert_eq!(AclOperation::from_code(code), AclOperation::Unknown);
        }
        assert_eq!(ResourceType::from_code(8), ResourceType::Unknown);
        assert_eq!(ResourceType::from_code(-1), ResourceType::Unknown);
        assert_eq!(PatternType::from_code(5), PatternType::Unknown);
        assert_eq!(AclOperation::from_code(15), AclOperation::Unknown);
        assert_eq!(AclPermissionType::from_code(4), AclPermissionType::Unknown);
    }

    #[test]
    fn codes_are_kafkas() {
        // Kafka's AclOperationTest, ResourceTypeTest and AclPermissionTypeTest tables.
        let ops = [
            (AclOperation::Unknown, 0, "UNKNOWN"),
            (AclOperation::Any, 1, "ANY"),
            (AclOperation::All, 2, "ALL"),
            (AclOperation::Read, 3, "READ"),
            (AclOperation::Write, 4, "WRITE"),
            (AclOperation::Create, 5, "CREATE"),
            (AclOperation::Delete, 6, "DELETE"),
            (AclOperation::Alter, 7, "ALTER"),
            (AclOperation::Describe, 8, "DESCRIBE"),
            (AclOperation::ClusterAction, 9, "CLUSTER_ACTION"),
            (AclOperation::DescribeConfigs, 10, "DESCRIBE_CONFIGS"),
            (AclOperation::AlterConfigs, 11, "ALTER_CONFIGS"),
            (AclOperation::IdempotentWrite, 12, "IDEMPOTENT_WRITE"),
            (AclOperation::CreateTokens, 13, "CREATE_TOKENS"),
            (AclOperation::DescribeTokens, 14, "DESCRIBE_TOKENS"),
        ];
        assert_eq!(ops.len(), AclOperation::VALUES.len());
        for (op, code, name) in ops {
            assert_eq!(op.code(), code);
            assert_eq!(op.to_string(), name);
            assert_eq!(AclOperation::parse(name), op);
            assert_eq!(AclOperation::parse(&name.to_lowercase()), op);
        }
        let types = [
            (ResourceType::Unknown, 0, "UNKNOWN"),
            (ResourceType::Any, 1, "ANY"),
            (ResourceType::Topic, 2, "TOPIC"),
            (ResourceType::Group, 3, "GROUP"),
            (ResourceType::Cluster, 4, "CLUSTER"),
            (ResourceType::TransactionalId, 5, "TRANSACTIONAL_ID"),
            (ResourceType::DelegationToken, 6, "DELEGATION_TOKEN"),
            (ResourceType::User, 7, "USER"),
        ];
        for (t, code, name) in types {
            assert_eq!(t.code(), code);
            assert_eq!(t.to_string(), name);
            assert_eq!(ResourceType::parse(name), t);
        }
        let perms = [
            (AclPermissionType::Unknown, 0, "UNKNOWN"),
            (AclPermissionType::Any, 1, "ANY"),
            (AclPermissionType::Deny, 2, "DENY"),
            (AclPermissionType::Allow, 3, "ALLOW"),
        ];
        for (p, code, name) in perms {
            assert_eq!(p.code(), code);
            assert_eq!(p.to_string(), name);
            assert_eq!(AclPermissionType::parse(name), p);
        }
        let patterns = [
            (PatternType::Unknown, 0, "UNKNOWN"),
            (PatternType::Any, 1, "ANY"),
            (PatternType::Match, 2, "MATCH"),
            (PatternType::Literal, 3, "LITERAL"),
            (PatternType::Prefixed, 4, "PREFIXED"),
        ];
        for (p, code, name) in patterns {
            assert_eq!(p.code(), code);
            assert_eq!(p.to_string(), name);
            assert_eq!(PatternType::parse(name), p);
        }
    }

    #[test]
    fn parse_accepts_both_spellings_in_any_case() {
        assert_eq!(
            AclOperation::parse("DescribeConfigs"),
            AclOperation::DescribeConfigs
        );
        assert_eq!(
            AclOperation::parse("DESCRIBECONFIGS"),
            AclOperation::DescribeConfigs
        );
        assert_eq!(
            AclOperation::parse("describe_configs"),
            AclOperation::DescribeConfigs
        );
        assert_eq!(
            ResourceType::parse("transactionalid"),
            ResourceType::TransactionalId
        );
        assert_eq!(PatternType::parse("prefixed"), PatternType::Prefixed);
        assert_eq!(AclPermissionType::parse("Allow"), AclPermissionType::Allow);
        assert_eq!(AclOperation::parse("frobnicate"), AclOperation::Unknown);
        assert_eq!(AclOperation::parse(""), AclOperation::Unknown);
        assert_eq!(
            ResourceType::TransactionalId.pascal_name(),
            "TransactionalId"
        );
    }

    #[test]
    fn order_is_code_order() {
        assert!(PatternType::Unknown < PatternType::Literal);
        assert!(PatternType::Literal < PatternType::Prefixed);
        assert!(AclOperation::All < AclOperation::Read);
    }

    #[test]
    fn specific_pattern_types() {
        assert!(PatternType::Literal.is_specific());
        assert!(PatternType::Prefixed.is_specific());
        assert!(!PatternType::Match.is_specific());
        assert!(!PatternType::Any.is_specific());
        assert!(!PatternType::Unknown.is_specific());
    }
}

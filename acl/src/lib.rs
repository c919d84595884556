//! Kafka's ACL model and its StandardAuthorizer's decisions, with no I/O and no async, so the
//! broker can check every request as a Java Kafka node would, and the controller can validate
//! CreateAcls and DeleteAcls as Kafka's does.
//!
//! - [`types`] holds `ResourceType`, `PatternType`, `AclOperation`, `AclPermissionType`, with
//!   Kafka's codes and names.
//! - [`binding`] holds ACL bindings and the filters DescribeAcls/DeleteAcls select them with.
//! - [`validate`] holds the checks of a new ACL and of a filter; principals and `super.users`.
//! - [`authorizer`] holds the stored ACLs and the decisions (`authorize`,
//!   `authorized_operations`, `authorize_any`), over the index in `index`.
//! - [`principal_mapper`] holds `ssl.principal.mapping.rules`.
//! - [`host`] holds client addresses printed as ACL hosts are written.
//!
//! Written from Kafka's sources (StandardAuthorizer, StandardAuthorizerData, AclControlManager,
//! the `common.acl` and `common.resource` classes, SslPrincipalMapper); each module says where
//! it departs from them.

pub mod authorizer;
pub mod binding;
pub mod error;
pub mod host;
mod index;
pub mod operations;
pub mod principal_mapper;
pub mod types;
pub mod validate;

pub use authorizer::{Authorizer, AuthorizerConfig};
pub use binding::{AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern};
pub use error::{AclError, AclStoreError};
pub use host::java_host_address;
pub use operations::{operations_bit_field, supported_operations};
pub use principal_mapper::PrincipalMapper;
pub use types::{AclOperation, AclPermissionType, PatternType, ResourceType};
pub use validate::{parse_principal, parse_super_users, validate_filter, validate_new};

/// The name of the one CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// A LITERAL resource name that matches every resource, and the host that matches every host.
pub const WILDCARD: &str = "*";
/// The principal that matches every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// An ACL's id: the `Uuid` of its `AccessControlEntryRecord`, as 16 big-endian bytes (the
/// bytes of `wire::Uuid`).
pub type AclId = [u8; 16];

/// An authorization answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    Allow,
    Deny,
}

impl Decision {
    pub fn is_allowed(self) -> bool {
        self == Decision::Allow
    }
}

/// Kafka's `Uuid.toString`: URL-safe base64 without padding (22 chars), for messages.
pub fn acl_id_string(id: &AclId) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(22);
    for chunk in id.chunks(3) {
        let mut bytes = [0u8; 3];
        bytes[..chunk.len()].copy_from_slice(chunk);
        let word = u32::from(bytes[0]) << 16 | u32::from(bytes[1]) << 8 | u32::from(bytes[2]);
        // A chunk of n bytes carries n + 1 base64 digits.
        for digit in 0..=chunk.len() {
            let sextet = (word >> (18 - 6 * digit)) & 0x3f;
            out.push(char::from(ALPHABET[sextet as usize]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_id_string_is_kafkas_uuid_text() {
        assert_eq!(acl_id_string(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        // Base64url of the 16 bytes, unpadded.
        let mut id = [0u8; 16];
        id[15] = 1;
        assert_eq!(acl_id_string(&id), "AAAAAAAAAAAAAAAAAAAAAQ");
        assert_eq!(acl_id_string(&[0xff; 16]), "_____________________w");
    }
}

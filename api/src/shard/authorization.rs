//! The broker's authorizer settings (`authorizer.class.name`, `super.users`,
//! `allow.everyone.if.no.acl.found`), parsed once at start-up and kept on every shard. The
//! ACLs themselves are the metadata image's (`Image::acls`, replayed from the metadata log),
//! and each request is checked against them in `handlers::authorize`, on the shard that
//! serves the connection, with no lock and no mesh call.

use crate::config::BrokerConfig;

/// The settings a shard authorizes with: `None` when `authorizer.class.name` is unset (every
/// request allowed, as Kafka without an authorizer). A bad `super.users` is an error naming
/// the key (start-up reports it and stops).
pub fn authorizer_config(
    config: &BrokerConfig,
) -> Result<Option<acl::AuthorizerConfig>, acl::AclError> {
    let Some(settings) = &config.authorizer else {
        return Ok(None);
    };
    Ok(Some(acl::AuthorizerConfig {
        super_users: acl::parse_super_users(&settings.super_users)?,
        allow_everyone_if_no_acl_found: settings.allow_everyone_if_no_acl_found,
    }))
}

impl super::Shard {
    /// Whether `principal` from `host` may do `operation` on the LITERAL resource: always
    /// with no authorizer configured; otherwise Kafka's StandardAuthorizer decision over this
    /// shard's image's ACLs under the broker's settings. One `RefCell` borrow and an index
    /// walk; no allocation.
    pub fn acl_allows(
        &self,
        principal: &str,
        host: &str,
        operation: acl::AclOperation,
        resource_type: acl::ResourceType,
        name: &str,
    ) -> bool {
        let Some(config) = &self.authorizer else {
            return true;
        };
        self.image
            .borrow()
            .acls
            .authorize_with(config, principal, host, operation, resource_type, name)
            .is_allowed()
    }

    /// Kafka's `authorizeByResourceType`: whether `operation` is allowed on some resource of
    /// the type (always with no authorizer configured).
    pub fn acl_allows_any(
        &self,
        principal: &str,
        host: &str,
        operation: acl::AclOperation,
        resource_type: acl::ResourceType,
    ) -> bool {
        let Some(config) = &self.authorizer else {
            return true;
        };
        self.image
            .borrow()
            .acls
            .authorize_any_with(config, principal, host, operation, resource_type)
            .is_allowed()
    }

    /// The `authorized_operations` bit set for a resource; with no authorizer configured,
    /// every operation the type supports (Kafka's `AuthHelper.authorizedOperations`).
    pub fn acl_operations(
        &self,
        principal: &str,
        host: &str,
        resource_type: acl::ResourceType,
        name: &str,
    ) -> i32 {
        let Some(config) = &self.authorizer else {
            return acl::operations_bit_field(
                acl::supported_operations(resource_type).iter().copied(),
            );
        };
        self.image.borrow().acls.authorized_operations_with(
            config,
            principal,
            host,
            resource_type,
            name,
        )
    }
}

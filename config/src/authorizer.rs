//! `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found` (Kafka's names):
//! whether requests are checked against the ACLs in the metadata log, and who bypasses them.
//! The values are parsed and checked at start-up by the broker (the `acl` crate), which
//! names the key in every error.

use super::ConfigError;

/// Kafka's KRaft authorizer, the only one served.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// The authorizer's settings, present when `authorizer.class.name` names one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizerSettings {
    /// `super.users`, raw (Kafka's `;`-separated principals, e.g. `User:admin;User:ops`).
    pub super_users: String,
    /// `allow.everyone.if.no.acl.found`.
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerSettings {
    /// `None` when `authorizer.class.name` is empty (Kafka's default: no authorization, and
    /// the ACL APIs answer SECURITY_DISABLED).
    pub(super) fn from_values<'a>(
        get: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Option<AuthorizerSettings>, ConfigError> {
        let class = get("authorizer.class.name").unwrap_or("").trim();
        if class.is_empty() {
            return Ok(None);
        }
        if class != STANDARD_AUTHORIZER {
            return Err(ConfigError::InvalidValue {
                key: "authorizer.class.name".into(),
                value: class.into(),
                expected: format!("empty (no authorization) or {STANDARD_AUTHORIZER}"),
            });
        }
        Ok(Some(AuthorizerSettings {
            super_users: get("super.users").unwrap_or("").trim().to_string(),
            allow_everyone_if_no_acl_found: get("allow.everyone.if.no.acl.found")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
        }))
    }
}

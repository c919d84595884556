//! Kafka's StandardAuthorizer: the stored ACLs (added and removed by id as the metadata log
//! replays `AccessControlEntryRecord`s) and the decisions made from them. Owned by whoever
//! replays the metadata image; `authorize` takes `&self`, allocates nothing, and runs once per
//! resource per request.
//!
//! The decision, as StandardAuthorizerData makes it:
//! 1. A super user (`super.users`, compared as `Type:name` strings) is allowed everything.
//! 2. The ACLs that apply to the resource are the LITERAL ones with its name, the LITERAL
//!    `*`, and the PREFIXED ones whose name starts the resource's ([`crate::index`]).
//! 3. Among those, one that names the principal (or `User:*`), the host (or `*`) and the
//!    operation (or an operation implying it, [`crate::operations`]) decides: any DENY wins,
//!    otherwise any ALLOW allows.
//! 4. When none decides: if any ACL applied to the resource at all, whoever it was for, the
//!    answer is DENY; only a resource with no applicable ACL gets the
//!    `allow.everyone.if.no.acl.found` answer.
//!
//! Bounds: none of its own; memory is linear in the ACLs (each held three times: by id, in
//! Kafka's order, and in the index), a decision costs what [`crate::index`] says.

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::ControlFlow;

use crate::binding::{AclBinding, AclBindingFilter};
use crate::error::AclStoreError;
use crate::index::{IndexedAcl, TypeIndex};
use crate::operations::{acl_result, operation_bit, supported_operations};
use crate::types::{AclOperation, AclPermissionType, PatternType, ResourceType};
use crate::{AclId, Decision};

/// The authorizer's two settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// `super.users`: principals as `Type:name`, already split (Kafka's value separates them
    /// with `;`, see [`crate::parse_super_users`]). Compared as exact strings.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found` (default false).
    pub allow_everyone_if_no_acl_found: bool,
}

/// The stored ACLs and Kafka's decisions over them.
#[derive(Debug)]
pub struct Authorizer {
    config: AuthorizerConfig,
    super_users: HashSet<String>,
    by_id: HashMap<AclId, AclBinding>,
    /// Every binding in Kafka's `StandardAcl` order, which is the order DescribeAcls lists.
    ordered: BTreeMap<KafkaOrder, AclId>,
    /// One index per resource type code (0..=7).
    index: [TypeIndex; ResourceType::VALUES.len()],
}

impl Authorizer {
    /// An authorizer with no ACLs.
    pub fn new(config: AuthorizerConfig) -> Self {
        Authorizer {
            super_users: config.super_users.iter().cloned().collect(),
            config,
            by_id: HashMap::new(),
            ordered: BTreeMap::new(),
            index: std::array::from_fn(|_| TypeIndex::default()),
        }
    }

    /// An authorizer holding `acls`, as Kafka's `loadSnapshot` builds one.
    pub fn from_acls(
        config: AuthorizerConfig,
        acls: impl IntoIterator<Item = (AclId, AclBinding)>,
    ) -> Result<Self, AclStoreError> {
        let mut authorizer = Authorizer::new(config);
        for (id, binding) in acls {
            authorizer.add(id, binding)?;
        }
        Ok(authorizer)
    }

    /// Replaces every ACL (a metadata snapshot); on an error nothing changes.
    pub fn load_snapshot(
        &mut self,
        acls: impl IntoIterator<Item = (AclId, AclBinding)>,
    ) -> Result<(), AclStoreError> {
        *self = Authorizer::from_acls(self.config.clone(), acls)?;
        Ok(())
    }

    pub fn config(&self) -> &AuthorizerConfig {
        &self.config
    }

    /// Applies new settings and keeps the ACLs, as Kafka's `configure` does.
    pub fn set_config(&mut self, config: AuthorizerConfig) {
        self.super_users = config.super_users.iter().cloned().collect();
        self.config = config;
    }

    /// Adds the ACL of an `AccessControlEntryRecord`. Refuses an id already present and a
    /// binding already stored under another id, as Kafka's `AclCache` does; bindings are not
    /// validated here (the controller did, and Kafka's replay does not either).
    pub fn add(&mut self, id: AclId, binding: AclBinding) -> Result<(), AclStoreError> {
        if self.by_id.contains_key(&id) {
            return Err(AclStoreError::DuplicateId(id));
        }
        let key = KafkaOrder(binding);
        if self.ordered.contains_key(&key) {
            return Err(AclStoreError::DuplicateAcl(id));
        }
        let binding = key.0.clone();
        self.index[type_slot(binding.pattern.resource_type)].insert(
            &binding.pattern.name,
            IndexedAcl {
                id,
                pattern_type: binding.pattern.pattern_type,
                principal: binding.entry.principal.as_str().into(),
                host: binding.entry.host.as_str().into(),
                operation: binding.entry.operation,
                permission: binding.entry.permission,
            },
        );
        self.ordered.insert(key, id);
        self.by_id.insert(id, binding);
        Ok(())
    }

    /// Removes the ACL of a `RemoveAccessControlEntryRecord`, returning it.
    pub fn remove(&mut self, id: AclId) -> Result<AclBinding, AclStoreError> {
        let binding = self.by_id.remove(&id).ok_or(AclStoreError::UnknownId(id))?;
        let pattern = &binding.pattern;
        let indexed = self.index[type_slot(pattern.resource_type)].remove(
            &pattern.name,
            pattern.pattern_type,
            &id,
        );
        let binding = KafkaOrder(binding);
        let ordered = self.ordered.remove(&binding);
        assert!(
            indexed && ordered == Some(id),
            "ACL {id:?} was stored in only some maps"
        );
        Ok(binding.0)
    }

    pub fn get(&self, id: &AclId) -> Option<&AclBinding> {
        self.by_id.get(id)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Every binding, in Kafka's order (resource type, name descending, pattern type,
    /// operation, principal, host, permission).
    pub fn bindings(&self) -> impl Iterator<Item = &AclBinding> + '_ {
        self.ordered.keys().map(|key| &key.0)
    }

    /// Every binding with its id, in Kafka's order.
    pub fn entries(&self) -> impl Iterator<Item = (AclId, &AclBinding)> + '_ {
        self.ordered.iter().map(|(key, id)| (*id, &key.0))
    }

    /// The bindings a DescribeAcls filter selects (Kafka's `acls(filter)`), in Kafka's order.
    pub fn acls<'a>(
        &'a self,
        filter: &'a AclBindingFilter,
    ) -> impl Iterator<Item = &'a AclBinding> + 'a {
        self.bindings().filter(move |b| filter.matches(b))
    }

    /// The ids and bindings a DeleteAcls filter selects.
    pub fn matching<'a>(
        &'a self,
        filter: &'a AclBindingFilter,
    ) -> impl Iterator<Item = (AclId, &'a AclBinding)> + 'a {
        self.entries().filter(move |(_, b)| filter.matches(b))
    }

    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }

    /// Kafka's `authorize` for one action on a LITERAL resource. `principal` is `Type:name`
    /// (`User:alice`); `host` is the client's address as Java prints it
    /// ([`crate::java_host_address`]).
    pub fn authorize(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> Decision {
        let settings = Settings {
            super_user: self.is_super_user(principal),
            allow_everyone_if_no_acl_found: self.config.allow_everyone_if_no_acl_found,
        };
        self.decide(
            settings,
            principal,
            host,
            operation,
            resource_type,
            resource_name,
        )
    }

    /// [`Authorizer::authorize`] under `config` rather than the authorizer's own settings: a
    /// broker keeps `super.users` and `allow.everyone.if.no.acl.found` in its own
    /// configuration while the ACLs come from the metadata image. Super users are compared
    /// with a linear scan of `config.super_users` (a handful); no allocation.
    pub fn authorize_with(
        &self,
        config: &AuthorizerConfig,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> Decision {
        let settings = Settings::of(config, principal);
        self.decide(
            settings,
            principal,
            host,
            operation,
            resource_type,
            resource_name,
        )
    }

    fn decide(
        &self,
        settings: Settings,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> Decision {
        if settings.super_user {
            return Decision::Allow;
        }
        let mut applied = false;
        let mut allowed = false;
        let flow = self.index[type_slot(resource_type)].visit(resource_name, &mut |acl| {
            applied = true;
            match acl_result(
                &acl.principal,
                &acl.host,
                acl.operation,
                acl.permission,
                principal,
                host,
                operation,
            ) {
                Some(Decision::Deny) => ControlFlow::Break(()),
                Some(Decision::Allow) => {
                    allowed = true;
                    ControlFlow::Continue(())
                }
                None => ControlFlow::Continue(()),
            }
        });
        if flow.is_break() {
            Decision::Deny
        } else if allowed {
            Decision::Allow
        } else {
            settings.no_acl_decision(applied)
        }
    }

    /// The `authorized_operations` bit set of Metadata, DescribeCluster and DescribeGroups
    /// answers (Kafka's `AuthHelper.authorizedOperations`): bit `code` set for each
    /// operation the resource type supports ([`crate::supported_operations`]) that
    /// [`Authorizer::authorize`] allows. One walk of the index serves every operation.
    pub fn authorized_operations(
        &self,
        principal: &str,
        host: &str,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> i32 {
        let settings = Settings {
            super_user: self.is_super_user(principal),
            allow_everyone_if_no_acl_found: self.config.allow_everyone_if_no_acl_found,
        };
        self.operations(settings, principal, host, resource_type, resource_name)
    }

    /// [`Authorizer::authorized_operations`] under `config` (see
    /// [`Authorizer::authorize_with`]).
    pub fn authorized_operations_with(
        &self,
        config: &AuthorizerConfig,
        principal: &str,
        host: &str,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> i32 {
        let settings = Settings::of(config, principal);
        self.operations(settings, principal, host, resource_type, resource_name)
    }

    fn operations(
        &self,
        settings: Settings,
        principal: &str,
        host: &str,
        resource_type: ResourceType,
        resource_name: &str,
    ) -> i32 {
        let operations = supported_operations(resource_type);
        let all_bits = operations
            .iter()
            .fold(0, |bits, op| bits | operation_bit(*op));
        if settings.super_user {
            return all_bits;
        }
        let (mut applied, mut allow_bits, mut deny_bits) = (false, 0, 0);
        let _ = self.index[type_slot(resource_type)].visit(resource_name, &mut |acl| {
            applied = true;
            for op in operations {
                match acl_result(
                    &acl.principal,
                    &acl.host,
                    acl.operation,
                    acl.permission,
                    principal,
                    host,
                    *op,
                ) {
                    Some(Decision::Allow) => allow_bits |= operation_bit(*op),
                    Some(Decision::Deny) => deny_bits |= operation_bit(*op),
                    None => {}
                }
            }
            ControlFlow::Continue(())
        });
        let undecided = all_bits & !allow_bits & !deny_bits;
        let defaulted = match settings.no_acl_decision(applied) {
            Decision::Allow => undecided,
            Decision::Deny => 0,
        };
        (allow_bits & !deny_bits) | defaulted
    }

    /// Kafka's `Authorizer.authorizeByResourceType` (InitProducerId asks it for
    /// IDEMPOTENT_WRITE's fallback, WRITE on any topic): whether the principal may do
    /// `operation` on at least one resource of the type.
    ///
    /// First the ordinary decision for a resource named "hardcode", so super users, any
    /// matching wildcard or prefix ALLOW (with implication) and `allow.everyone.if.no.acl.found`
    /// for a type with no applicable ACL all allow. Then, without implication, ACLs naming the
    /// principal, host and the operation or ALL: a LITERAL `*` DENY denies; a LITERAL `*`
    /// ALLOW allows; otherwise some LITERAL ALLOW with no LITERAL DENY of the same name and no
    /// PREFIXED DENY on a prefix of it, or some PREFIXED ALLOW with no PREFIXED DENY on a
    /// prefix of it, allows.
    ///
    /// # Panics
    /// On `Any` or `Unknown` as operation or resource type, where Kafka throws
    /// `IllegalArgumentException`: callers name a concrete one in code.
    pub fn authorize_any(
        &self,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> Decision {
        let settings = Settings {
            super_user: self.is_super_user(principal),
            allow_everyone_if_no_acl_found: self.config.allow_everyone_if_no_acl_found,
        };
        self.any(settings, principal, host, operation, resource_type)
    }

    /// [`Authorizer::authorize_any`] under `config` (see [`Authorizer::authorize_with`]).
    ///
    /// # Panics
    /// As [`Authorizer::authorize_any`].
    pub fn authorize_any_with(
        &self,
        config: &AuthorizerConfig,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> Decision {
        let settings = Settings::of(config, principal);
        self.any(settings, principal, host, operation, resource_type)
    }

    fn any(
        &self,
        settings: Settings,
        principal: &str,
        host: &str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> Decision {
        assert!(
            !matches!(resource_type, ResourceType::Any | ResourceType::Unknown),
            "authorize_any needs a concrete resource type, not {resource_type}"
        );
        assert!(
            !matches!(operation, AclOperation::Any | AclOperation::Unknown),
            "authorize_any needs a concrete operation, not {operation}"
        );
        if self.decide(
            settings,
            principal,
            host,
            operation,
            resource_type,
            "hardcode",
        ) == Decision::Allow
        {
            return Decision::Allow;
        }
        let index = &self.index[type_slot(resource_type)];
        let applies = |acl: &IndexedAcl, permission: AclPermissionType| {
            acl.permission == permission && acl.applies_exactly(principal, host, operation)
        };
        if index
            .wildcard
            .iter()
            .any(|a| applies(a, AclPermissionType::Deny))
        {
            return Decision::Deny;
        }
        if index
            .wildcard
            .iter()
            .any(|a| applies(a, AclPermissionType::Allow))
        {
            return Decision::Allow;
        }
        let prefix_denied = |name: &str| index.prefix_denied(name, principal, host, operation);
        for (name, acls) in &index.literal {
            if acls.iter().any(|a| applies(a, AclPermissionType::Allow))
                && !acls.iter().any(|a| applies(a, AclPermissionType::Deny))
                && !prefix_denied(name)
            {
                return Decision::Allow;
            }
        }
        for (name, acls) in &index.prefixed {
            let prefixed_allow = acls.iter().any(|a| {
                a.pattern_type == PatternType::Prefixed && applies(a, AclPermissionType::Allow)
            });
            if prefixed_allow && !prefix_denied(name) {
                return Decision::Allow;
            }
        }
        Decision::Deny
    }

    #[cfg(test)]
    pub(crate) fn index_is_empty(&self) -> bool {
        self.index.iter().all(TypeIndex::is_empty)
    }
}

/// What a decision needs of the settings: whether the principal is a super user, and
/// `allow.everyone.if.no.acl.found`.
#[derive(Clone, Copy)]
struct Settings {
    super_user: bool,
    allow_everyone_if_no_acl_found: bool,
}

impl Settings {
    fn of(config: &AuthorizerConfig, principal: &str) -> Settings {
        Settings {
            super_user: config.super_users.iter().any(|user| user == principal),
            allow_everyone_if_no_acl_found: config.allow_everyone_if_no_acl_found,
        }
    }

    /// The answer when no ACL decided: DENY if any applied to the resource, else the
    /// configured default.
    fn no_acl_decision(self, applied: bool) -> Decision {
        if !applied && self.allow_everyone_if_no_acl_found {
            Decision::Allow
        } else {
            Decision::Deny
        }
    }
}

fn type_slot(resource_type: ResourceType) -> usize {
    usize::from(resource_type.code().unsigned_abs())
}

/// A binding ordered as Kafka's `StandardAcl.compareTo`: resource type, name in reverse,
/// pattern type, operation, principal, host, permission. (Names compare as UTF-8 bytes where
/// Java compares UTF-16 units; the two differ only between surrogate pairs and U+E000..U+FFFF.)
#[derive(Debug, Clone, PartialEq, Eq)]
struct KafkaOrder(AclBinding);

impl KafkaOrder {
    #[allow(clippy::type_complexity)]
    fn key(
        &self,
    ) -> (
        ResourceType,
        Reverse<&str>,
        PatternType,
        AclOperation,
        &str,
        &str,
        AclPermissionType,
    ) {
        let (p, e) = (&self.0.pattern, &self.0.entry);
        (
            p.resource_type,
            Reverse(p.name.as_str()),
            p.pattern_type,
            e.operation,
            e.principal.as_str(),
            e.host.as_str(),
            e.permission,
        )
    }
}

impl Ord for KafkaOrder {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for KafkaOrder {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binding::{AccessControlEntry, ResourcePattern};

    fn binding(name: &str, pattern_type: PatternType, op: AclOperation) -> AclBinding {
        AclBinding::new(
            ResourcePattern::new(ResourceType::Topic, name, pattern_type),
            AccessControlEntry::new("User:bob", "*", op, AclPermissionType::Allow),
        )
    }

    #[test]
    fn add_and_remove_keep_every_map_in_step() {
        let mut authorizer = Authorizer::new(AuthorizerConfig::default());
        let a = binding("foo", PatternType::Literal, AclOperation::Read);
        let b = binding("fo", PatternType::Prefixed, AclOperation::Write);
        authorizer.add([1; 16], a.clone()).unwrap();
        authorizer.add([2; 16], b.clone()).unwrap();
        assert_eq!(
            authorizer.add([1; 16], b.clone()),
            Err(AclStoreError::DuplicateId([1; 16]))
        );
        assert_eq!(
            authorizer.add([3; 16], a.clone()),
            Err(AclStoreError::DuplicateAcl([3; 16]))
        );
        assert_eq!(authorizer.len(), 2);
        // Kafka's order: names descending.
        assert_eq!(authorizer.bindings().collect::<Vec<_>>(), vec![&a, &b]);
        assert_eq!(authorizer.remove([1; 16]), Ok(a));
        assert_eq!(
            authorizer.remove([1; 16]),
            Err(AclStoreError::UnknownId([1; 16]))
        );
        assert_eq!(authorizer.remove([2; 16]), Ok(b));
        assert!(authorizer.is_empty());
        assert!(authorizer.index_is_empty());
    }

    #[test]
    fn load_snapshot_replaces_everything_or_nothing() {
        let mut authorizer = Authorizer::new(AuthorizerConfig::default());
        authorizer
            .add(
                [1; 16],
                binding("foo", PatternType::Literal, AclOperation::Read),
            )
            .unwrap();
        let dup = binding("bar", PatternType::Literal, AclOperation::Read);
        let bad = authorizer.load_snapshot([([2; 16], dup.clone()), ([3; 16], dup.clone())]);
        assert_eq!(bad, Err(AclStoreError::DuplicateAcl([3; 16])));
        assert!(authorizer.get(&[1; 16]).is_some());
        authorizer.load_snapshot([([2; 16], dup.clone())]).unwrap();
        assert_eq!(authorizer.bindings().collect::<Vec<_>>(), vec![&dup]);
    }
}

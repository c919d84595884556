//! The authorizer's lookup structure for one resource type: which stored ACLs apply to a
//! resource name, found without allocating.
//!
//! An ACL applies to a name when it is LITERAL with that name, LITERAL `*`, or PREFIXED with
//! a prefix of the name. Kafka finds them in one sorted set (resource type, then name in
//! reverse); here each kind has its own map: a hash map for literal names, a list for the
//! wildcard, and a sorted map of prefixes walked downwards from the name, jumping over every
//! run of keys that cannot be a prefix (see [`TypeIndex::visit`]). A lookup costs one hash
//! probe plus O(p + L) ordered-map probes for p matching prefixes and a name of L chars (in
//! practice one or two probes).
//!
//! Two of Kafka's quirks are kept, so answers are the Java broker's: its scan treats every
//! pattern type other than LITERAL as a prefix (validation lets only LITERAL and PREFIXED
//! in, so that never shows), and it never applies the LITERAL `*` to a name that starts with
//! `*` ([`skips_wildcard`]). One is not: for a name starting with a char below `*` (space,
//! `!`, `"`, `#`, `$`, `%`, `&`, `'`, `(`, `)`), an ACL sorting below `*` that shares the
//! name's first char without being its prefix sends Kafka's scan into an endless loop or an
//! exception; here such a name gets the plain answer.

use std::collections::{BTreeMap, HashMap};
use std::ops::{Bound, ControlFlow};

use crate::operations::{host_matches, principal_matches};
use crate::types::{AclOperation, AclPermissionType, PatternType};
use crate::{AclId, WILDCARD};

/// One stored ACL as the index holds it: what a decision reads.
#[derive(Debug, Clone)]
pub(crate) struct IndexedAcl {
    pub(crate) id: AclId,
    pub(crate) pattern_type: PatternType,
    pub(crate) principal: Box<str>,
    pub(crate) host: Box<str>,
    pub(crate) operation: AclOperation,
    pub(crate) permission: AclPermissionType,
}

impl IndexedAcl {
    /// Whether the ACL names this principal and host and this operation or ALL, without
    /// implication: `authorizeByResourceType`'s test.
    pub(crate) fn applies_exactly(&self, principal: &str, host: &str, op: AclOperation) -> bool {
        host_matches(&self.host, host)
            && principal_matches(&self.principal, principal)
            && (self.operation == op || self.operation == AclOperation::All)
    }
}

/// The ACLs of one resource type.
#[derive(Debug, Default)]
pub(crate) struct TypeIndex {
    /// LITERAL ACLs by name, except `*`.
    pub(crate) literal: HashMap<Box<str>, Vec<IndexedAcl>>,
    /// LITERAL ACLs named `*`.
    pub(crate) wildcard: Vec<IndexedAcl>,
    /// Every other ACL, by its name taken as a prefix.
    pub(crate) prefixed: BTreeMap<Box<str>, Vec<IndexedAcl>>,
}

impl TypeIndex {
    pub(crate) fn insert(&mut self, name: &str, acl: IndexedAcl) {
        if acl.pattern_type != PatternType::Literal {
            self.prefixed.entry(name.into()).or_default().push(acl);
        } else if name == WILDCARD {
            self.wildcard.push(acl);
        } else {
            self.literal.entry(name.into()).or_default().push(acl);
        }
    }

    /// Removes the ACL `id` stored under this name and pattern type; false if absent.
    pub(crate) fn remove(&mut self, name: &str, pattern_type: PatternType, id: &AclId) -> bool {
        fn take(list: &mut Vec<IndexedAcl>, id: &AclId) -> bool {
            match list.iter().position(|a| a.id == *id) {
                Some(at) => {
                    list.swap_remove(at);
                    true
                }
                None => false,
            }
        }
        if pattern_type != PatternType::Literal {
            let Some(list) = self.prefixed.get_mut(name) else {
                return false;
            };
            let removed = take(list, id);
            if list.is_empty() {
                self.prefixed.remove(name);
            }
            removed
        } else if name == WILDCARD {
            take(&mut self.wildcard, id)
        } else {
            let Some(list) = self.literal.get_mut(name) else {
                return false;
            };
            let removed = take(list, id);
            if list.is_empty() {
                self.literal.remove(name);
            }
            removed
        }
    }

    /// Calls `visit` on every ACL that applies to a resource named `name`, until it breaks.
    ///
    /// The prefix walk looks at keys in descending order, starting at `name` itself. A key
    /// that is a prefix of the name matches, and the walk goes on below it. A key that is not
    /// shares some first `m` bytes with the name and is greater than `name[..m]`, while every
    /// prefix of the name below it is at most `name[..m]` long; so the walk jumps to the
    /// greatest key not above `name[..m]`. Each step either matches or shortens that bound.
    pub(crate) fn visit<'a>(
        &'a self,
        name: &'a str,
        visit: &mut impl FnMut(&'a IndexedAcl) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        if let Some(acls) = self.literal.get(name) {
            acls.iter().try_for_each(&mut *visit)?;
        }
        if !skips_wildcard(name) {
            self.wildcard.iter().try_for_each(&mut *visit)?;
        }
        let mut upper: Bound<&str> = Bound::Included(name);
        while let Some((key, acls)) = self
            .prefixed
            .range::<str, _>((Bound::Unbounded, upper))
            .next_back()
        {
            let common = common_prefix_bytes(name, key);
            if common == key.len() {
                acls.iter().try_for_each(&mut *visit)?;
                upper = Bound::Excluded(key);
            } else {
                upper = Bound::Included(&name[..floor_char_boundary(name, common)]);
            }
        }
        ControlFlow::Continue(())
    }

    /// Whether a PREFIXED DENY that applies (by [`IndexedAcl::applies_exactly`]) has a name
    /// that is a non-empty prefix of `name`: `authorizeByResourceType`'s "dominated" test,
    /// which looks at prefixes one char longer at a time from the first char.
    pub(crate) fn prefix_denied(
        &self,
        name: &str,
        principal: &str,
        host: &str,
        op: AclOperation,
    ) -> bool {
        name.char_indices()
            .map(|(at, c)| &name[..at + c.len_utf8()])
            .any(|prefix| {
                self.prefixed.get(prefix).is_some_and(|acls| {
                    acls.iter().any(|a| {
                        a.pattern_type == PatternType::Prefixed
                            && a.permission == AclPermissionType::Deny
                            && a.applies_exactly(principal, host, op)
                    })
                })
            })
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.literal.is_empty() && self.wildcard.is_empty() && self.prefixed.is_empty()
    }
}

/// Kafka's scan never counts the LITERAL `*` for a name that starts with `*` and is longer:
/// the wildcard's name is then a prefix of the resource's, and StandardAuthorizerData skips
/// every LITERAL ACL whose name is a proper prefix before it tests for the wildcard. Topic
/// names cannot hold `*`; group and transactional ids can, and get Kafka's answer here.
pub(crate) fn skips_wildcard(name: &str) -> bool {
    name.len() > WILDCARD.len() && name.starts_with(WILDCARD)
}

fn common_prefix_bytes(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

/// The largest char boundary of `text` at or below `at` (`str::floor_char_boundary` is not
/// stable yet).
fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(n: u8, pattern_type: PatternType) -> IndexedAcl {
        IndexedAcl {
            id: [n; 16],
            pattern_type,
            principal: "User:a".into(),
            host: "*".into(),
            operation: AclOperation::Read,
            permission: AclPermissionType::Allow,
        }
    }

    fn matching(index: &TypeIndex, name: &str) -> Vec<u8> {
        let mut ids = Vec::new();
        let _ = index.visit(name, &mut |a| {
            ids.push(a.id[0]);
            ControlFlow::Continue(())
        });
        ids.sort_unstable();
        ids
    }

    #[test]
    fn walk_finds_every_prefix_and_skips_the_rest() {
        // Kafka's own example from StandardAuthorizerData.findAclRule.
        let mut index = TypeIndex::default();
        let names = [
            (1, "gar", PatternType::Prefixed),
            (2, "foobar", PatternType::Prefixed),
            (3, "foob", PatternType::Literal),
            (4, "foo", PatternType::Prefixed),
            (5, "fb", PatternType::Prefixed),
            (6, "fa", PatternType::Prefixed),
            (7, "f", PatternType::Prefixed),
            (8, "eeee", PatternType::Literal),
            (9, "*", PatternType::Literal),
            (10, "foobar", PatternType::Literal),
            (11, "foobarbaz", PatternType::Prefixed),
        ];
        for (n, name, pt) in names {
            index.insert(name, acl(n, pt));
        }
        assert_eq!(matching(&index, "foobar"), vec![2, 4, 7, 9, 10]);
        assert_eq!(matching(&index, "foob"), vec![3, 4, 7, 9]);
        assert_eq!(matching(&index, "fz"), vec![7, 9]);
        assert_eq!(matching(&index, "zzz"), vec![9]);
        assert_eq!(matching(&index, ""), vec![9]);
        // Kafka's quirk: the wildcard does not apply to longer names starting with `*`.
        assert_eq!(matching(&index, "*"), vec![9]);
        assert_eq!(matching(&index, "*foo"), Vec::<u8>::new());
        assert!(index.remove("foo", PatternType::Prefixed, &[4; 16]));
        assert!(!index.remove("foo", PatternType::Prefixed, &[4; 16]));
        assert_eq!(matching(&index, "foobar"), vec![2, 7, 9, 10]);
    }

    #[test]
    fn walk_backs_off_to_char_boundaries() {
        let mut index = TypeIndex::default();
        index.insert("é", acl(1, PatternType::Prefixed));
        index.insert("éa", acl(2, PatternType::Prefixed));
        index.insert("è", acl(3, PatternType::Prefixed));
        // "é" is C3 A9 and "è" C3 A8: they share a byte but no char.
        assert_eq!(matching(&index, "éz"), vec![1]);
        assert_eq!(matching(&index, "èa"), vec![3]);
        assert_eq!(matching(&index, "ê"), Vec::<u8>::new());
    }
}

//! The authorizer against a naive model over random ACL sets: every decision
//! (`authorize`, `authorized_operations`, `authorize_any`) and every listing must equal what
//! a linear scan written straight from Kafka's rules answers. Small alphabets make names,
//! prefixes, principals and hosts collide often.
#![allow(clippy::unwrap_used)] // a test: a failed unwrap is the failure report

mod common;

use std::collections::HashSet;

use acl::AclOperation::{self, *};
use acl::AclPermissionType::{self, Allow, Deny};
use acl::{
    supported_operations, AccessControlEntry, AclBinding, AclBindingFilter, AuthorizerConfig,
    Decision, PatternType, ResourcePattern, ResourceType,
};
use common::id;
use proptest::prelude::*;
use proptest::sample::select;

const PRINCIPALS: &[&str] = &["User:alice", "User:bob", "User:*", "Group:x"];
const HOSTS: &[&str] = &["*", "h1", "h2"];
const TYPES: &[ResourceType] = &[
    ResourceType::Topic,
    ResourceType::Group,
    ResourceType::Cluster,
];
const OPS: &[AclOperation] = &[
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
    CreateTokens,
    DescribeTokens,
];

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("*".to_owned()),
        6 => proptest::collection::vec(select(vec!['a', 'b', '*', 'é']), 0..4)
            .prop_map(|chars| chars.into_iter().collect()),
    ]
}

fn pattern_type() -> impl Strategy<Value = PatternType> {
    prop_oneof![
        8 => Just(PatternType::Literal),
        8 => Just(PatternType::Prefixed),
        1 => Just(PatternType::Unknown),
    ]
}

fn permission() -> impl Strategy<Value = AclPermissionType> {
    prop_oneof![8 => Just(Allow), 8 => Just(Deny), 1 => Just(AclPermissionType::Unknown)]
}

fn binding() -> impl Strategy<Value = AclBinding> {
    (
        select(TYPES),
        name(),
        pattern_type(),
        select(PRINCIPALS),
        select(HOSTS),
        select(OPS),
        permission(),
    )
        .prop_map(|(rt, name, pt, principal, host, op, perm)| {
            AclBinding::new(
                ResourcePattern::new(rt, name, pt),
                AccessControlEntry::new(principal, host, op, perm),
            )
        })
}

/// (principal, host, operation, resource type, resource name).
type Query = (
    &'static str,
    &'static str,
    AclOperation,
    ResourceType,
    String,
);

fn query() -> impl Strategy<Value = Query> {
    (
        select(PRINCIPALS),
        select(&["h1", "h2"][..]),
        select(OPS),
        select(TYPES),
        name(),
    )
}

// ---- The model: Kafka's rules as plainly as they can be written. ----

fn applies_to_resource(b: &AclBinding, rt: ResourceType, name: &str) -> bool {
    let p = &b.pattern;
    p.resource_type == rt
        && match p.pattern_type {
            // Kafka's scan skips the wildcard for longer names that start with `*`.
            PatternType::Literal => {
                p.name == name || (p.name == "*" && (name == "*" || !name.starts_with('*')))
            }
            _ => name.starts_with(p.name.as_str()),
        }
}

fn says(b: &AclBinding, principal: &str, host: &str, op: AclOperation) -> Option<Decision> {
    let e = &b.entry;
    let who = e.principal == principal || e.principal == "User:*";
    let from = e.host == host || e.host == "*";
    let implied = e.permission == Allow
        && ((op == Describe && [Read, Write, Delete, Alter].contains(&e.operation))
            || (op == DescribeConfigs && e.operation == AlterConfigs));
    let what = e.operation == All || e.operation == op || implied;
    (who && from && what).then_some(if e.permission == Allow {
        Decision::Allow
    } else {
        Decision::Deny
    })
}

fn model_authorize(acls: &[AclBinding], config: &AuthorizerConfig, q: &Query) -> Decision {
    let (principal, host, op, rt, name) = q;
    if config.super_users.iter().any(|s| s == principal) {
        return Decision::Allow;
    }
    let applying: Vec<_> = acls
        .iter()
        .filter(|b| applies_to_resource(b, *rt, name))
        .collect();
    let said: Vec<_> = applying
        .iter()
        .filter_map(|b| says(b, principal, host, *op))
        .collect();
    let allowed = if said.contains(&Decision::Deny) {
        false
    } else {
        said.contains(&Decision::Allow)
            || (applying.is_empty() && config.allow_everyone_if_no_acl_found)
    };
    if allowed {
        Decision::Allow
    } else {
        Decision::Deny
    }
}

/// Kafka's `Authorizer.authorizeByResourceType`, transcribed.
fn model_authorize_any(acls: &[AclBinding], config: &AuthorizerConfig, q: &Query) -> Decision {
    let (principal, host, op, rt, _) = q;
    let hardcode = (*principal, *host, *op, *rt, "hardcode".to_owned());
    if model_authorize(acls, config, &hardcode) == Decision::Allow {
        return Decision::Allow;
    }
    let (mut deny_literal, mut deny_prefixed) = (HashSet::new(), HashSet::new());
    let (mut allow_literal, mut allow_prefixed) = (HashSet::new(), HashSet::new());
    let mut wildcard_allow = false;
    for b in acls.iter().filter(|b| b.pattern.resource_type == *rt) {
        let e = &b.entry;
        if (e.host != *host && e.host != "*")
            || (e.principal != *principal && e.principal != "User:*")
            || (e.operation != *op && e.operation != All)
        {
            continue;
        }
        let (literal, name) = (
            b.pattern.pattern_type == PatternType::Literal,
            b.pattern.name.as_str(),
        );
        let prefixed = b.pattern.pattern_type == PatternType::Prefixed;
        if e.permission == Deny {
            if literal && name == "*" {
                return Decision::Deny;
            } else if literal {
                deny_literal.insert(name);
            } else if prefixed {
                deny_prefixed.insert(name);
            }
        } else if e.permission == Allow {
            if literal && name == "*" {
                wildcard_allow = true;
            } else if literal {
                allow_literal.insert(name);
            } else if prefixed {
                allow_prefixed.insert(name);
            }
        }
    }
    if wildcard_allow {
        return Decision::Allow;
    }
    let dominated = |name: &str| {
        let mut prefix = String::new();
        name.chars().any(|c| {
            prefix.push(c);
            deny_prefixed.contains(prefix.as_str())
        })
    };
    let literal_ok = allow_literal
        .iter()
        .any(|n| !deny_literal.contains(n) && !dominated(n));
    let prefixed_ok = allow_prefixed.iter().any(|n| !dominated(n));
    if literal_ok || prefixed_ok {
        Decision::Allow
    } else {
        Decision::Deny
    }
}

/// Kafka's `StandardAcl.compareTo`.
fn kafka_cmp(a: &AclBinding, b: &AclBinding) -> std::cmp::Ordering {
    let key = |x: &AclBinding| {
        (
            x.pattern.resource_type,
            x.pattern.pattern_type,
            x.entry.operation,
        )
    };
    a.pattern
        .resource_type
        .cmp(&b.pattern.resource_type)
        .then_with(|| b.pattern.name.cmp(&a.pattern.name))
        .then_with(|| key(a).cmp(&key(b)))
        .then_with(|| a.entry.principal.cmp(&b.entry.principal))
        .then_with(|| a.entry.host.cmp(&b.entry.host))
        .then_with(|| a.entry.permission.cmp(&b.entry.permission))
}

fn config() -> impl Strategy<Value = AuthorizerConfig> {
    (
        proptest::collection::vec(select(PRINCIPALS), 0..2),
        any::<bool>(),
    )
        .prop_map(|(users, allow)| AuthorizerConfig {
            super_users: users.into_iter().map(str::to_owned).collect(),
            allow_everyone_if_no_acl_found: allow,
        })
}

fn filter() -> impl Strategy<Value = AclBindingFilter> {
    (
        select(vec![
            ResourceType::Any,
            ResourceType::Topic,
            ResourceType::Group,
        ]),
        proptest::option::of(name()),
        select(vec![
            PatternType::Any,
            PatternType::Match,
            PatternType::Literal,
            PatternType::Prefixed,
        ]),
        proptest::option::of(select(PRINCIPALS)),
        select(vec![AclOperation::Any, Read, All]),
        select(vec![AclPermissionType::Any, Allow, Deny]),
    )
        .prop_map(
            |(resource_type, name, pattern_type, principal, operation, permission)| {
                AclBindingFilter {
                    resource_type,
                    name,
                    pattern_type,
                    principal: principal.map(str::to_owned),
                    host: None,
                    operation,
                    permission,
                }
            },
        )
}

/// A denser space: one resource type, few names, principals, hosts and operations, so that
/// ALLOWs and DENYs on the same or overlapping patterns meet often.
fn dense_binding() -> impl Strategy<Value = AclBinding> {
    let names = select(vec!["", "a", "ab", "b", "*", "h", "ha"]);
    let ops = select(vec![Read, Describe, All]);
    (
        names,
        pattern_type(),
        select(&["User:alice", "User:*"][..]),
        select(&["*", "h1"][..]),
        ops,
        permission(),
    )
        .prop_map(|(name, pt, principal, host, op, perm)| {
            let pattern = ResourcePattern::new(ResourceType::Topic, name, pt);
            AclBinding::new(pattern, AccessControlEntry::new(principal, host, op, perm))
        })
}

fn dense_query() -> impl Strategy<Value = Query> {
    let names = select(vec!["", "a", "ab", "abc", "b", "*", "hardcode"]).prop_map(str::to_owned);
    (
        select(&["User:alice", "User:bob"][..]),
        Just("h1"),
        select(vec![Read, Describe]),
        Just(ResourceType::Topic),
        names,
    )
}

fn check(
    drawn: Vec<AclBinding>,
    removals: Vec<prop::sample::Index>,
    config: AuthorizerConfig,
    queries: Vec<Query>,
    filters: Vec<AclBindingFilter>,
) -> Result<(), TestCaseError> {
    // Distinct bindings under ids 0.., then some removed again.
    let mut acls: Vec<AclBinding> = Vec::new();
    for b in drawn {
        if !acls.contains(&b) {
            acls.push(b);
        }
    }
    let mut authorizer = common::authorizer(&[], config.clone());
    let mut ids = Vec::new();
    for (n, b) in acls.iter().enumerate() {
        authorizer.add(id(n), b.clone()).unwrap();
        ids.push(id(n));
    }
    for index in removals {
        if acls.is_empty() {
            break;
        }
        let at = index.index(acls.len());
        prop_assert_eq!(authorizer.remove(ids.remove(at)).unwrap(), acls.remove(at));
    }

    for q in &queries {
        let (principal, host, op, rt, name) = q;
        let got = authorizer.authorize(principal, host, *op, *rt, name);
        prop_assert_eq!(got, model_authorize(&acls, &config, q), "authorize {:?}", q);

        let bits = authorizer.authorized_operations(principal, host, *rt, name);
        let mut want = 0;
        for op in supported_operations(*rt) {
            let asked = (*principal, *host, *op, *rt, name.clone());
            if model_authorize(&acls, &config, &asked) == Decision::Allow {
                want |= 1 << op.code();
            }
        }
        prop_assert_eq!(bits, want, "authorized_operations {:?}", q);

        let got = authorizer.authorize_any(principal, host, *op, *rt);
        prop_assert_eq!(
            got,
            model_authorize_any(&acls, &config, q),
            "authorize_any {:?}",
            q
        );
    }

    let mut sorted = acls.clone();
    sorted.sort_by(kafka_cmp);
    prop_assert_eq!(
        authorizer.bindings().cloned().collect::<Vec<_>>(),
        sorted.clone()
    );
    for f in &filters {
        let want: Vec<_> = sorted.iter().filter(|b| f.matches(b)).cloned().collect();
        prop_assert_eq!(authorizer.acls(f).cloned().collect::<Vec<_>>(), want);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn authorizer_matches_the_model(
        drawn in proptest::collection::vec(binding(), 0..24),
        removals in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        config in config(),
        queries in proptest::collection::vec(query(), 1..24),
        filters in proptest::collection::vec(filter(), 1..4),
    ) {
        check(drawn, removals, config, queries, filters)?;
    }

    #[test]
    fn authorizer_matches_the_model_on_dense_acls(
        drawn in proptest::collection::vec(dense_binding(), 0..12),
        removals in proptest::collection::vec(any::<prop::sample::Index>(), 0..3),
        allow_everyone in any::<bool>(),
        queries in proptest::collection::vec(dense_query(), 1..12),
    ) {
        let config = AuthorizerConfig {
            super_users: vec![],
            allow_everyone_if_no_acl_found: allow_everyone,
        };
        check(drawn, removals, config, queries, vec![AclBindingFilter::ANY])?;
    }
}

//! Kafka's own authorizer tests, ported: StandardAuthorizerTest (decisions, listing),
//! BaseAuthorizerTest's `authorizeByResourceType` cases (as `authorize_any`), and the
//! authorized-operations bit set.
#![allow(clippy::unwrap_used)] // a test: a failed unwrap is the failure report

mod common;

use acl::AclOperation::*;
use acl::AclPermissionType::{Allow, Deny};
use acl::PatternType::{Literal as LIT, Prefixed as PRE};
use acl::ResourceType::{Cluster as C, Group as G, Topic as T, TransactionalId as X};
use acl::{
    operations_bit_field, supported_operations, AclBindingFilter, AclOperation, Decision,
    PatternType, ResourceType, CLUSTER_NAME,
};
use common::{authorizer, binding, config, id, Acl};

const Y: Decision = Decision::Allow;
const N: Decision = Decision::Deny;
/// InetAddress.getLocalHost() in Kafka's tests; any address not otherwise named.
const LOCAL: &str = "127.0.0.1";

fn decisions(
    acls: &[Acl],
    principal: &str,
    host: &str,
    actions: &[(AclOperation, ResourceType, &str)],
) -> Vec<Decision> {
    let authorizer = authorizer(acls, config(&["User:superman"], false));
    actions
        .iter()
        .map(|(op, rt, name)| authorizer.authorize(principal, host, *op, *rt, name))
        .collect()
}

#[test]
fn deny_precedence_with_operation_all() {
    let acls: &[Acl] = &[
        (T, "foo", LIT, "User:alice", "*", All, Deny),
        (T, "foo", PRE, "User:alice", "*", Read, Allow),
        (T, "foo", LIT, "User:*", "*", All, Deny),
        (T, "foo", PRE, "User:*", "*", Describe, Allow),
    ];
    let alice = [
        (Write, T, "foo"),
        (Read, T, "foo"),
        (Describe, T, "foo"),
        (Read, T, "foobar"),
    ];
    assert_eq!(decisions(acls, "User:alice", LOCAL, &alice), [N, N, N, Y]);
    let bob = [
        (Describe, T, "foo"),
        (Read, T, "foo"),
        (Write, T, "foo"),
        (Describe, T, "foobaz"),
        (Read, T, "foobaz"),
    ];
    assert_eq!(decisions(acls, "User:bob", LOCAL, &bob), [N, N, N, Y, N]);
}

#[test]
fn topic_acl_with_operation_all() {
    let acls: &[Acl] = &[
        (T, "foo", LIT, "User:*", "*", All, Allow),
        (T, "bar", PRE, "User:alice", "*", All, Allow),
        (T, "baz", LIT, "User:bob", "*", All, Allow),
    ];
    let a = [
        (Write, T, "foo"),
        (DescribeConfigs, T, "bar"),
        (Describe, T, "baz"),
    ];
    assert_eq!(decisions(acls, "User:alice", LOCAL, &a), [Y, Y, N]);
    let b = [(Write, T, "foo"), (Read, T, "bar"), (Describe, T, "baz")];
    assert_eq!(decisions(acls, "User:bob", LOCAL, &b), [Y, N, Y]);
    let m = [(Describe, T, "foo"), (Write, T, "bar"), (Read, T, "baz")];
    assert_eq!(decisions(acls, "User:malory", LOCAL, &m), [Y, N, N]);
}

#[test]
fn host_address_acl_validation() {
    let (host1, host2) = ("192.168.1.1", "192.168.1.2");
    let acls: &[Acl] = &[
        (T, "foo", LIT, "User:alice", "192.168.1.1", Read, Deny),
        (T, "foo", LIT, "User:alice", "*", Read, Allow),
        (T, "bar", LIT, "User:bob", "192.168.1.2", Read, Allow),
        (T, "bar", LIT, "User:*", LOCAL, Describe, Allow),
    ];
    let actions = [(Read, T, "foo"), (Read, T, "bar"), (Describe, T, "bar")];
    assert_eq!(decisions(acls, "User:alice", LOCAL, &actions), [Y, N, Y]);
    assert_eq!(decisions(acls, "User:alice", host1, &actions), [N, N, N]);
    assert_eq!(decisions(acls, "User:alice", host2, &actions), [Y, N, N]);
    assert_eq!(decisions(acls, "User:bob", LOCAL, &actions), [N, N, Y]);
    assert_eq!(decisions(acls, "User:bob", host1, &actions), [N, N, N]);
    assert_eq!(decisions(acls, "User:bob", host2, &actions), [N, Y, Y]);
}

#[test]
fn authorization_with_many_acls() {
    let acls: &[Acl] = &[
        (T, "green2", LIT, "User:*", "*", Read, Allow),
        (T, "green", PRE, "User:bob", "*", Read, Allow),
        (T, "betamax4", LIT, "User:bob", "*", Read, Allow),
        (T, "betamax", LIT, "User:bob", "*", Read, Allow),
        (T, "beta", PRE, "User:*", "*", Read, Allow),
        (T, "alpha", PRE, "User:*", "*", Read, Allow),
        (T, "alp", PRE, "User:bob", "*", Read, Deny),
        (G, "*", LIT, "User:bob", "*", Write, Allow),
        (G, "wheel", LIT, "User:*", "*", Write, Deny),
    ];
    let first = [(Read, T, "green1"), (Write, G, "wheel")];
    assert_eq!(decisions(acls, "User:bob", LOCAL, &first), [Y, N]);
    let second = [
        (Read, T, "alpha"),
        (Write, G, "arbitrary"),
        (Read, T, "ala"),
    ];
    assert_eq!(decisions(acls, "User:bob", LOCAL, &second), [N, Y, N]);
}

#[test]
fn prefix_acls() {
    let acls: &[Acl] = &[
        (T, "fooa", PRE, "User:alice", "*", All, Allow),
        (T, "foobar", LIT, "User:bob", "*", All, Allow),
        (T, "f", PRE, "User:bob", "*", All, Allow),
    ];
    let bob = [
        (Write, T, "foobarr"),
        (Read, T, "goobar"),
        (Read, T, "fooa"),
    ];
    assert_eq!(decisions(acls, "User:bob", LOCAL, &bob), [Y, N, Y]);
    let alice = [(Describe, T, "fooa"), (Write, T, "bar"), (Read, T, "baz")];
    assert_eq!(decisions(acls, "User:alice", LOCAL, &alice), [Y, N, N]);
}

#[test]
fn simple_authorizations_and_super_user() {
    let acls: &[Acl] = &[
        (T, "foo_", PRE, "User:bob", "*", Read, Allow),
        (T, "foo_", PRE, "User:bob", "*", Write, Allow),
        (G, "bar", LIT, "User:*", "*", DescribeConfigs, Allow),
        (G, "bar", LIT, "User:*", "*", AlterConfigs, Allow),
    ];
    assert_eq!(
        decisions(acls, "User:bob", LOCAL, &[(Read, T, "foo_")]),
        [Y]
    );
    assert_eq!(
        decisions(acls, "User:fred", LOCAL, &[(AlterConfigs, G, "bar")]),
        [Y]
    );
    assert_eq!(
        decisions(acls, "User:superman", LOCAL, &[(Delete, T, "anything")]),
        [Y]
    );
}

#[test]
fn allow_everyone_if_no_acl_found_enabled_and_disabled() {
    let acls: &[Acl] = &[(T, "topic1", LIT, "User:Alice", "*", Read, Allow)];
    let on = authorizer(acls, config(&["User:alice", "User:chris"], true));
    assert_eq!(on.authorize("User:Bob", LOCAL, Read, T, "topic1"), N);
    assert_eq!(on.authorize("User:Bob", LOCAL, Read, T, "topic2"), Y);
    let off = authorizer(acls, config(&["User:alice", "User:chris"], false));
    assert_eq!(off.authorize("User:Bob", LOCAL, Read, T, "topic1"), N);
    assert_eq!(off.authorize("User:Bob", LOCAL, Read, T, "topic2"), N);
}

#[test]
fn list_acls_in_kafka_order_and_by_filter() {
    let foo_read: Acl = (T, "foo_", PRE, "User:bob", "*", Read, Allow);
    let foo_write: Acl = (T, "foo_", PRE, "User:bob", "*", Write, Allow);
    let bar_dc: Acl = (G, "bar", LIT, "User:*", "*", DescribeConfigs, Deny);
    let bar_ac: Acl = (G, "bar", LIT, "User:*", "*", AlterConfigs, Deny);
    // Added out of order: the listing is Kafka's order whatever the order of adds.
    let mut authorizer = authorizer(&[bar_ac, foo_write, bar_dc, foo_read], config(&[], false));
    let all: Vec<_> = authorizer.acls(&AclBindingFilter::ANY).cloned().collect();
    let expect = [foo_read, foo_write, bar_dc, bar_ac].map(|a| binding(&a));
    assert_eq!(all, expect);
    authorizer.remove(id(1)).unwrap();
    let all: Vec<_> = authorizer.bindings().cloned().collect();
    assert_eq!(all, [foo_read, bar_dc, bar_ac].map(|a| binding(&a)));
    let topics = AclBindingFilter {
        resource_type: T,
        ..AclBindingFilter::ANY
    };
    let found: Vec<_> = authorizer.acls(&topics).cloned().collect();
    assert_eq!(found, [binding(&foo_read)]);
    let ids: Vec<_> = authorizer.matching(&topics).map(|(id, _)| id).collect();
    assert_eq!(ids, [id(3)]);
}

/// `authorize_any` as BaseAuthorizerTest's authorizeByResourceType tests.
mod by_resource_type {
    use super::*;
    use acl::Authorizer;

    const U1: &str = "User:user1";
    const U2: &str = "User:user2";
    const H1: &str = "192.168.1.1";
    const H2: &str = "192.168.1.2";

    fn empty() -> Authorizer {
        authorizer(&[], config(&[], false))
    }

    fn add(authorizer: &mut Authorizer, acl: Acl) -> acl::AclId {
        let id = (0..).map(id).find(|i| authorizer.get(i).is_none()).unwrap();
        authorizer.add(id, binding(&acl)).unwrap();
        id
    }

    #[test]
    fn multiple_add_and_remove() {
        let mut a = empty();
        let allow: Acl = (T, "sb1", LIT, U1, H1, Read, Allow);
        let deny: Acl = (T, "sb1", LIT, U1, H1, Read, Deny);
        for _ in 0..3 {
            assert_eq!(a.authorize_any(U1, H1, Read, T), N);
            let allow_id = add(&mut a, allow);
            assert_eq!(a.authorize_any(U1, H1, Read, T), Y);
            for _ in 0..3 {
                let deny_id = add(&mut a, deny);
                assert_eq!(a.authorize_any(U1, H1, Read, T), N);
                a.remove(deny_id).unwrap();
                assert_eq!(a.authorize_any(U1, H1, Read, T), Y);
            }
            a.remove(allow_id).unwrap();
            assert_eq!(a.authorize_any(U1, H1, Read, T), N);
        }
    }

    #[test]
    fn unrelated_deny_does_not_dominate_allow() {
        let acls: &[Acl] = &[
            (T, "sb1", LIT, U1, H1, Read, Deny),
            (T, "sb1", LIT, U2, H1, Read, Deny),
            (T, "sb1", LIT, U1, H2, Write, Deny),
            (T, "sb1", LIT, U2, H2, Read, Deny),
            (T, "sb1", LIT, U1, H2, Read, Allow),
            (T, "sb2", LIT, U1, H2, Read, Deny),
            (G, "s", PRE, U1, H2, Read, Deny),
        ];
        let a = authorizer(acls, config(&[], false));
        assert_eq!(a.authorize_any(U1, H1, Read, T), N);
        assert_eq!(a.authorize_any(U1, H1, Read, G), N);
        assert_eq!(a.authorize_any(U1, H1, Read, X), N);
        assert_eq!(a.authorize_any(U1, H1, Read, C), N);
        assert_eq!(a.authorize_any(U1, H2, Read, T), Y);
    }

    #[test]
    fn deny_takes_precedence() {
        let mut a = empty();
        add(&mut a, (T, "sb1", LIT, U1, H1, Write, Allow));
        assert_eq!(a.authorize_any(U1, H1, Write, T), Y);
        add(&mut a, (T, "sb1", LIT, U1, H1, Write, Deny));
        assert_eq!(a.authorize_any(U1, H1, Write, T), N);
    }

    #[test]
    fn prefixed_deny_dominates() {
        let mut a = empty();
        add(&mut a, (G, "abcde", PRE, U1, H1, Read, Allow));
        assert_eq!(a.authorize_any(U1, H1, Read, G), Y);
        add(&mut a, (G, "abcd", PRE, U1, H1, Read, Deny));
        assert_eq!(a.authorize_any(U1, H1, Read, G), N);
        add(&mut a, (G, "abc", PRE, U1, H1, Read, Allow));
        assert_eq!(a.authorize_any(U1, H1, Read, G), Y);
        add(&mut a, (G, "a", PRE, U1, H1, Read, Deny));
        assert_eq!(a.authorize_any(U1, H1, Read, G), N);
        add(&mut a, (G, "ab", PRE, U1, H1, Read, Allow));
        assert_eq!(a.authorize_any(U1, H1, Read, G), N);
    }

    #[test]
    fn wildcard_deny_dominates() {
        let mut a = empty();
        add(&mut a, (G, "hello", PRE, U1, H1, Write, Allow));
        assert_eq!(a.authorize_any(U1, H1, Write, G), Y);
        add(&mut a, (G, "*", LIT, U1, H1, Write, Deny));
        assert_eq!(a.authorize_any(U1, H1, Write, G), N);
        add(&mut a, (G, "*", LIT, U1, H1, Write, Allow));
        assert_eq!(a.authorize_any(U1, H1, Write, G), N);
        add(&mut a, (G, "aloha", LIT, U1, H1, Write, Allow));
        assert_eq!(a.authorize_any(U1, H1, Write, G), N);
    }

    #[test]
    fn with_all_operation_ace() {
        let mut a = empty();
        assert_eq!(a.authorize_any(U1, H1, Read, T), N);
        add(&mut a, (T, "sb1", LIT, U1, H1, Write, Deny));
        add(&mut a, (T, "sb1", LIT, U1, H1, All, Allow));
        assert_eq!(a.authorize_any(U1, H1, Read, T), Y);
        add(&mut a, (T, "sb1", LIT, U1, H1, All, Deny));
        assert_eq!(a.authorize_any(U1, H1, Read, T), N);
    }

    #[test]
    fn with_all_host_and_all_principal_aces() {
        for (wild_principal, wild_host) in [(U1, "*"), ("User:*", H1)] {
            let mut a = empty();
            add(&mut a, (T, "sb1", LIT, U1, H1, Read, Allow));
            assert_eq!(a.authorize_any(U1, H1, Read, T), Y);
            add(
                &mut a,
                (T, "sb1", LIT, wild_principal, wild_host, Read, Deny),
            );
            assert_eq!(a.authorize_any(U1, H1, Read, T), N);
            add(&mut a, (T, "sb2", LIT, U1, H1, Read, Deny));
            let other = if wild_host == "*" { (U1, H2) } else { (U2, H1) };
            assert_eq!(a.authorize_any(other.0, other.1, Read, T), N);
            add(
                &mut a,
                (T, "sb2", LIT, wild_principal, wild_host, Read, Allow),
            );
            assert_eq!(a.authorize_any(other.0, other.1, Read, T), Y);
            add(
                &mut a,
                (T, "sb2", LIT, wild_principal, wild_host, Read, Deny),
            );
            assert_eq!(a.authorize_any(other.0, other.1, Read, T), N);
        }
    }

    #[test]
    fn no_implication_but_hardcode_check_has_it() {
        // A literal READ does not allow DESCRIBE on some topic...
        let a = authorizer(&[(T, "t", LIT, U1, "*", Read, Allow)], config(&[], false));
        assert_eq!(a.authorize_any(U1, H1, Describe, T), N);
        // ...but a wildcard READ does, through the "hardcode" resource's ordinary decision.
        let a = authorizer(&[(T, "*", LIT, U1, "*", Read, Allow)], config(&[], false));
        assert_eq!(a.authorize_any(U1, H1, Describe, T), Y);
        // As do a super user and allow.everyone.if.no.acl.found with no ACL on "hardcode".
        let a = authorizer(&[(T, "*", LIT, U2, "*", All, Deny)], config(&[U1], false));
        assert_eq!(a.authorize_any(U1, H1, Write, T), Y);
        let a = authorizer(&[(T, "t", LIT, U2, "*", Read, Allow)], config(&[], true));
        assert_eq!(a.authorize_any(U1, H1, Write, T), Y);
    }

    #[test]
    #[should_panic(expected = "concrete resource type")]
    fn refuses_any_resource_type() {
        empty().authorize_any(U1, H1, Read, ResourceType::Any);
    }
}

#[test]
fn authorized_operations_bit_set() {
    let acls: &[Acl] = &[
        (T, "orders", LIT, "User:alice", "*", Read, Allow),
        (T, "ord", PRE, "User:alice", "*", AlterConfigs, Allow),
        (T, "*", LIT, "User:alice", "*", Write, Deny),
        (C, CLUSTER_NAME, LIT, "User:alice", "*", All, Allow),
        (C, CLUSTER_NAME, LIT, "User:alice", "*", Alter, Deny),
    ];
    let a = authorizer(acls, config(&["User:admin"], false));
    let topic = a.authorized_operations("User:alice", LOCAL, T, "orders");
    assert_eq!(
        topic,
        operations_bit_field([Read, Describe, DescribeConfigs, AlterConfigs])
    );
    let cluster = a.authorized_operations("User:alice", LOCAL, C, CLUSTER_NAME);
    let expect = supported_operations(C)
        .iter()
        .copied()
        .filter(|op| *op != Alter);
    assert_eq!(cluster, operations_bit_field(expect));
    let admin = a.authorized_operations("User:admin", LOCAL, G, "g");
    assert_eq!(
        admin,
        operations_bit_field(supported_operations(G).iter().copied())
    );
    assert_eq!(a.authorized_operations("User:bob", LOCAL, G, "g"), 0);
    assert_eq!(
        a.authorized_operations("User:alice", LOCAL, ResourceType::Any, "x"),
        0
    );
    let everyone = authorizer(acls, config(&[], true));
    let group_ops = operations_bit_field(supported_operations(G).iter().copied());
    assert_eq!(
        everyone.authorized_operations("User:bob", LOCAL, G, "g"),
        group_ops
    );
    assert_eq!(
        everyone.authorized_operations("User:bob", LOCAL, T, "orders"),
        0
    );
    // Each bit is exactly what authorize answers for that operation.
    for (principal, rt, name) in [
        ("User:alice", T, "orders"),
        ("User:alice", T, "x"),
        ("User:bob", C, CLUSTER_NAME),
    ] {
        for authz in [&a, &everyone] {
            let bits = authz.authorized_operations(principal, LOCAL, rt, name);
            let allowed = supported_operations(rt).iter().copied().filter(|op| {
                authz
                    .authorize(principal, LOCAL, *op, rt, name)
                    .is_allowed()
            });
            assert_eq!(
                bits,
                operations_bit_field(allowed),
                "{principal} {rt}:{name}"
            );
        }
    }
}

#[test]
fn non_literal_patterns_in_the_store_act_as_prefixes() {
    // Kafka's scan treats every non-LITERAL ACL as a prefix; validation keeps them out.
    let acls: &[Acl] = &[(T, "fo", PatternType::Unknown, "User:a", "*", Read, Allow)];
    let a = authorizer(acls, config(&[], false));
    assert_eq!(a.authorize("User:a", LOCAL, Read, T, "foo"), Y);
    // authorize_any counts only LITERAL and PREFIXED ones.
    assert_eq!(a.authorize_any("User:a", LOCAL, Read, T), N);
}

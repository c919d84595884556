//! The authorizer's decisions as a table, written from Kafka's documentation
//! (docs/security.html: "Authorization and ACLs" and "Operations and Resources on Protocols")
//! and StandardAuthorizerData's rules: implication, DENY precedence, LITERAL, PREFIXED and
//! wildcard patterns, principals and hosts, super users, and `allow.everyone.if.no.acl.found`
//! both ways.
#![allow(clippy::unwrap_used)] // a test: a failed unwrap is the failure report

mod common;

use acl::AclOperation::{self, *};
use acl::AclPermissionType::{Allow, Deny};
use acl::PatternType::{Literal as LIT, Prefixed as PRE};
use acl::ResourceType::{
    self, Cluster as C, DelegationToken as D, Group as G, Topic as T, TransactionalId as X,
    User as U,
};
use acl::{Decision, CLUSTER_NAME};
use common::{authorizer, config, Acl};

const Y: Decision = Decision::Allow;
const N: Decision = Decision::Deny;
const KC: &str = CLUSTER_NAME;
const ALICE: &str = "User:alice";
const BOB: &str = "User:bob";
const OPS: &str = "User:ops";
const BROKER: &str = "User:broker";
const H1: &str = "10.0.0.1";
const H2: &str = "10.0.0.2";

/// (why, ACLs, principal, host, operation, resource type, resource name, expected).
type Row = (
    &'static str,
    &'static [Acl],
    &'static str,
    &'static str,
    AclOperation,
    ResourceType,
    &'static str,
    Decision,
);

/// A producer (alice), a consumer (bob), a follower (broker) and an operator (ops).
#[rustfmt::skip]
const DOCS: &[Acl] = &[
    (T, "orders", LIT, ALICE, "*", Write, Allow),
    (X, "tx-1", LIT, ALICE, "*", Write, Allow),
    (C, KC, LIT, ALICE, "*", IdempotentWrite, Allow),
    (T, "orders", LIT, BOB, "*", Read, Allow),
    (G, "billing", LIT, BOB, "*", Read, Allow),
    (C, KC, LIT, BROKER, "*", ClusterAction, Allow),
    (C, KC, LIT, OPS, "*", Alter, Allow),
    (C, KC, LIT, OPS, "*", AlterConfigs, Allow),
    (T, "orders", LIT, OPS, "*", Delete, Allow),
    (U, "carol", LIT, OPS, "*", CreateTokens, Allow),
    (D, "token-1", LIT, OPS, "*", Describe, Allow),
];

/// "Operations and Resources on Protocols": each API's operation on its resource.
#[rustfmt::skip]
const PROTOCOLS: &[Row] = &[
    ("PRODUCE (0): Write on Topic", DOCS, ALICE, H1, Write, T, "orders", Y),
    ("PRODUCE (0): Write on TransactionalId", DOCS, ALICE, H1, Write, X, "tx-1", Y),
    ("PRODUCE (0): IdempotentWrite on Cluster", DOCS, ALICE, H1, IdempotentWrite, C, KC, Y),
    ("FETCH (1): Read on Topic is not implied by Write", DOCS, ALICE, H1, Read, T, "orders", N),
    ("FETCH (1): Read on Topic", DOCS, BOB, H1, Read, T, "orders", Y),
    ("FETCH (1): ClusterAction on Cluster, for followers", DOCS,
        BROKER, H1, ClusterAction, C, KC, Y),
    ("FETCH (1): a consumer is no follower", DOCS, BOB, H1, ClusterAction, C, KC, N),
    ("LIST_OFFSETS (2): Describe on Topic, implied by Write", DOCS,
        ALICE, H1, Describe, T, "orders", Y),
    ("METADATA (3): Describe on Topic, implied by Read", DOCS, BOB, H1, Describe, T, "orders", Y),
    ("METADATA (3): Create on Cluster is not implied", DOCS, ALICE, H1, Create, C, KC, N),
    ("METADATA (3): Create on Topic is not implied", DOCS, ALICE, H1, Create, T, "orders", N),
    ("OFFSET_COMMIT (8): Read on Group", DOCS, BOB, H1, Read, G, "billing", Y),
    ("OFFSET_FETCH (9): Describe on Group, implied by Read", DOCS,
        BOB, H1, Describe, G, "billing", Y),
    ("FIND_COORDINATOR (10): Describe on TransactionalId, by Write", DOCS,
        ALICE, H1, Describe, X, "tx-1", Y),
    ("JOIN_GROUP (11): Read on another Group", DOCS, BOB, H1, Read, G, "other", N),
    ("DESCRIBE_GROUPS (15): another principal's Read", DOCS, ALICE, H1, Describe, G, "billing", N),
    ("CREATE_TOPICS (19): Create on Topic is not implied by Delete", DOCS,
        OPS, H1, Create, T, "orders", N),
    ("DELETE_TOPICS (20): Delete on Topic", DOCS, OPS, H1, Delete, T, "orders", Y),
    ("OFFSET_FOR_LEADER_EPOCH (23): Describe on Topic, by Delete", DOCS,
        OPS, H1, Describe, T, "orders", Y),
    ("INIT_PRODUCER_ID (22): Write on TransactionalId", DOCS, BOB, H1, Write, X, "tx-1", N),
    ("DESCRIBE_ACLS (29): Describe on Cluster, implied by Alter", DOCS,
        OPS, H1, Describe, C, KC, Y),
    ("CREATE_ACLS (30): Alter on Cluster", DOCS, OPS, H1, Alter, C, KC, Y),
    ("DESCRIBE_CONFIGS (32): DescribeConfigs, by AlterConfigs", DOCS,
        OPS, H1, DescribeConfigs, C, KC, Y),
    ("ALTER_CONFIGS (33): AlterConfigs on Cluster", DOCS, OPS, H1, AlterConfigs, C, KC, Y),
    ("ALTER_CONFIGS (33): ClusterAction does not imply it", DOCS,
        BROKER, H1, AlterConfigs, C, KC, N),
    ("CREATE_DELEGATION_TOKEN (38): CreateTokens on User", DOCS,
        OPS, H1, CreateTokens, U, "carol", Y),
    ("DESCRIBE_DELEGATION_TOKEN (41): DescribeTokens not implied", DOCS,
        OPS, H1, DescribeTokens, U, "carol", N),
    ("DESCRIBE_DELEGATION_TOKEN (41): Describe on DelegationToken", DOCS,
        OPS, H1, Describe, D, "token-1", Y),
    ("a Topic ACL says nothing about a Group of that name", DOCS, BOB, H1, Read, G, "orders", N),
];

#[rustfmt::skip]
const RULES: &[Row] = &[
    // DENY wins over ALLOW, whichever pattern each comes from.
    ("DENY beats ALLOW on the same literal",
        &[(T, "t", LIT, ALICE, "*", Read, Allow), (T, "t", LIT, ALICE, "*", Read, Deny)],
        ALICE, H1, Read, T, "t", N),
    ("a prefixed DENY beats a literal ALLOW",
        &[(T, "t", LIT, ALICE, "*", Read, Allow), (T, "t", PRE, ALICE, "*", Read, Deny)],
        ALICE, H1, Read, T, "t", N),
    ("a literal DENY beats a prefixed ALLOW",
        &[(T, "te", PRE, ALICE, "*", Read, Allow), (T, "test", LIT, ALICE, "*", Read, Deny)],
        ALICE, H1, Read, T, "test", N),
    ("... on that name only",
        &[(T, "te", PRE, ALICE, "*", Read, Allow), (T, "test", LIT, ALICE, "*", Read, Deny)],
        ALICE, H1, Read, T, "tea", Y),
    ("a wildcard DENY beats a literal ALLOW",
        &[(T, "t", LIT, ALICE, "*", Read, Allow), (T, "*", LIT, ALICE, "*", Read, Deny)],
        ALICE, H1, Read, T, "t", N),
    ("a DENY for User:* beats an ALLOW for the principal",
        &[(T, "t", LIT, ALICE, "*", Read, Allow), (T, "t", LIT, "User:*", "*", Read, Deny)],
        ALICE, H1, Read, T, "t", N),
    ("a DENY from every host beats an ALLOW from this one",
        &[(T, "t", LIT, ALICE, H1, Read, Allow), (T, "t", LIT, ALICE, "*", Read, Deny)],
        ALICE, H1, Read, T, "t", N),
    ("a DENY for another host leaves the ALLOW",
        &[(T, "t", LIT, ALICE, "*", Read, Allow), (T, "t", LIT, ALICE, H2, Read, Deny)],
        ALICE, H1, Read, T, "t", Y),
    ("a DENY for another principal leaves the ALLOW",
        &[(T, "t", LIT, ALICE, "*", Read, Allow), (T, "t", LIT, BOB, "*", Read, Deny)],
        ALICE, H1, Read, T, "t", Y),
    ("DENY ALL beats ALLOW READ",
        &[(T, "t", LIT, ALICE, "*", Read, Allow), (T, "t", LIT, ALICE, "*", All, Deny)],
        ALICE, H1, Read, T, "t", N),
    ("DENY ALL denies DESCRIBE too",
        &[(T, "t", LIT, ALICE, "*", All, Allow), (T, "t", LIT, ALICE, "*", All, Deny)],
        ALICE, H1, Describe, T, "t", N),
    // DENY does not imply: it denies only its own operation.
    ("DENY READ leaves an implied DESCRIBE allowed",
        &[(T, "t", LIT, ALICE, "*", All, Allow), (T, "t", LIT, ALICE, "*", Read, Deny)],
        ALICE, H1, Describe, T, "t", Y),
    ("DENY READ with ALLOW READ: DESCRIBE still implied",
        &[(T, "t", LIT, ALICE, "*", Read, Allow), (T, "t", LIT, ALICE, "*", Read, Deny)],
        ALICE, H1, Describe, T, "t", Y),
    ("DENY DESCRIBE does not deny READ",
        &[(T, "t", LIT, ALICE, "*", Read, Allow), (T, "t", LIT, ALICE, "*", Describe, Deny)],
        ALICE, H1, Read, T, "t", Y),
    ("DENY DESCRIBE denies DESCRIBE over an implying ALLOW",
        &[(T, "t", LIT, ALICE, "*", Read, Allow), (T, "t", LIT, ALICE, "*", Describe, Deny)],
        ALICE, H1, Describe, T, "t", N),
    ("DENY ALTER_CONFIGS leaves DESCRIBE_CONFIGS",
        &[(T, "t", LIT, ALICE, "*", All, Allow), (T, "t", LIT, ALICE, "*", AlterConfigs, Deny)],
        ALICE, H1, DescribeConfigs, T, "t", Y),
    // Patterns: LITERAL is the exact name (case-sensitive) or "*"; PREFIXED starts the name.
    ("a literal names only its resource", &[(T, "foo", LIT, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, T, "foobar", N),
    ("a literal is case-sensitive", &[(T, "foo", LIT, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, T, "Foo", N),
    ("a prefix covers its own name", &[(T, "foo", PRE, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, T, "foo", Y),
    ("a prefix covers longer names", &[(T, "foo", PRE, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, T, "foo-bar", Y),
    ("a prefix does not cover shorter names", &[(T, "foo", PRE, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, T, "fo", N),
    ("a prefix is case-sensitive", &[(T, "foo", PRE, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, T, "FOOBAR", N),
    ("the literal * covers every name", &[(T, "*", LIT, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, T, "anything", Y),
    ("a prefixed * is no wildcard", &[(T, "*", PRE, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, T, "anything", N),
    ("a prefixed * covers names starting with *", &[(T, "*", PRE, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, T, "*x", Y),
    ("Kafka's scan skips the literal * for longer names starting with *",
        &[(G, "*", LIT, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, G, "*x", N),
    ("... so a wildcard DENY does not reach them either",
        &[(G, "*", LIT, ALICE, "*", Read, Deny), (G, "*", PRE, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, G, "*x", Y),
    ("... but does reach the group named *",
        &[(G, "*", LIT, ALICE, "*", Read, Deny), (G, "*", PRE, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, G, "*", N),
    ("a literal * does not cover another resource type", &[(G, "*", LIT, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, T, "t", N),
    ("one of many prefixes allows",
        &[
            (T, "a", PRE, BOB, "*", Read, Allow),
            (T, "ab", PRE, ALICE, "*", Read, Allow),
            (T, "abc", PRE, BOB, "*", Read, Allow),
        ],
        ALICE, H1, Read, T, "abcd", Y),
    ("a longer prefix than the name does not count", &[(T, "abcde", PRE, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, T, "abcd", N),
    // Principals: exact strings, or User:* for every principal of every type.
    ("User:* allows any user", &[(T, "t", LIT, "User:*", "*", Read, Allow)],
        BOB, H1, Read, T, "t", Y),
    ("User:* allows another principal type too", &[(T, "t", LIT, "User:*", "*", Read, Allow)],
        "Group:devs", H1, Read, T, "t", Y),
    ("Group:* is not a wildcard", &[(T, "t", LIT, "Group:*", "*", Read, Allow)],
        "Group:devs", H1, Read, T, "t", N),
    ("principal names are case-sensitive", &[(T, "t", LIT, "User:Alice", "*", Read, Allow)],
        ALICE, H1, Read, T, "t", N),
    ("principal types are case-sensitive", &[(T, "t", LIT, "user:alice", "*", Read, Allow)],
        ALICE, H1, Read, T, "t", N),
    // Hosts: exact strings, or "*".
    ("an ACL for this host", &[(T, "t", LIT, ALICE, H1, Read, Allow)], ALICE, H1, Read, T, "t", Y),
    ("an ACL for another host", &[(T, "t", LIT, ALICE, H2, Read, Allow)],
        ALICE, H1, Read, T, "t", N),
    ("IPv6 hosts as Java prints them", &[(T, "t", LIT, ALICE, "0:0:0:0:0:0:0:1", Read, Allow)],
        ALICE, "0:0:0:0:0:0:0:1", Read, T, "t", Y),
    ("an abbreviated IPv6 ACL never matches", &[(T, "t", LIT, ALICE, "::1", Read, Allow)],
        ALICE, "0:0:0:0:0:0:0:1", Read, T, "t", N),
    // Super users (this table's super.users is User:admin).
    ("a super user passes a DENY ALL", &[(T, "t", LIT, "User:*", "*", All, Deny)],
        "User:admin", H1, Write, T, "t", Y),
    ("a super user needs no ACL", &[], "User:admin", H1, ClusterAction, C, KC, Y),
    ("super users are exact strings", &[], "User:Admin", H1, ClusterAction, C, KC, N),
    // With allow.everyone.if.no.acl.found off (this table), no ACL means DENY.
    ("no ACL at all", &[], ALICE, H1, Read, T, "t", N),
    ("no ACL on this resource", &[(T, "other", LIT, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, T, "t", N),
];

/// The implications, as the docs and StandardAuthorizerData list them, for ALLOW ACLs: the
/// operation asked for, and the ACL operations (besides itself and ALL) that grant it.
const IMPLIED_BY: &[(AclOperation, &[AclOperation])] = &[
    (Describe, &[Read, Write, Delete, Alter]),
    (DescribeConfigs, &[AlterConfigs]),
];

/// Operations an ACL may hold.
const CONCRETE: &[AclOperation] = &[
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

fn check(rows: &[Row], allow_everyone: bool) {
    let mut failures = Vec::new();
    for (why, acls, principal, host, op, rt, name, expect) in rows {
        let authorizer = authorizer(acls, config(&["User:admin"], allow_everyone));
        let got = authorizer.authorize(principal, host, *op, *rt, name);
        if got != *expect {
            failures.push(format!("{why}: {principal} {op} {rt}:{name} got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn protocols_table() {
    check(PROTOCOLS, false);
}

#[test]
fn rules_table() {
    check(RULES, false);
}

#[rustfmt::skip]
const ALLOW_EVERYONE: &[Row] = &[
    ("no ACL at all: allowed", &[], ALICE, H1, Read, T, "t", Y),
    ("ACLs only on other resources: allowed", &[(T, "other", LIT, BOB, "*", Read, Allow)],
        ALICE, H1, Read, T, "t", Y),
    ("ACLs only on another resource type: allowed", &[(G, "t", LIT, BOB, "*", Read, Allow)],
        ALICE, H1, Read, T, "t", Y),
    ("an ACL for someone else on it: denied", &[(T, "t", LIT, BOB, "*", Read, Allow)],
        ALICE, H1, Read, T, "t", N),
    ("an ACL for another host on it: denied", &[(T, "t", LIT, ALICE, H2, Read, Allow)],
        ALICE, H1, Read, T, "t", N),
    ("an ACL for another operation on it: denied", &[(T, "t", LIT, ALICE, "*", Write, Allow)],
        ALICE, H1, Read, T, "t", N),
    ("a DENY for another operation on it: denied", &[(T, "t", LIT, ALICE, "*", Write, Deny)],
        ALICE, H1, Read, T, "t", N),
    ("a covering prefix for someone else: denied", &[(T, "t", PRE, BOB, "*", Read, Allow)],
        ALICE, H1, Read, T, "topic", N),
    ("a wildcard for someone else: denied", &[(T, "*", LIT, BOB, "*", Read, Allow)],
        ALICE, H1, Read, T, "t", N),
    ("a longer literal is not on it: allowed", &[(T, "topic", LIT, BOB, "*", Read, Allow)],
        ALICE, H1, Read, T, "t", Y),
    ("a longer prefix is not on it: allowed", &[(T, "topic", PRE, BOB, "*", Read, Allow)],
        ALICE, H1, Read, T, "t", Y),
    ("a DENY that applies still denies", &[(T, "t", LIT, ALICE, "*", Read, Deny)],
        ALICE, H1, Read, T, "t", N),
    ("an ALLOW that applies still allows", &[(T, "t", LIT, ALICE, "*", Read, Allow)],
        ALICE, H1, Read, T, "t", Y),
];

#[test]
fn allow_everyone_if_no_acl_found_table() {
    check(ALLOW_EVERYONE, true);
    // The same rows with the setting off: only an applying ALLOW allows.
    let off: Vec<Row> = ALLOW_EVERYONE
        .iter()
        .map(|r| {
            (
                r.0,
                r.1,
                r.2,
                r.3,
                r.4,
                r.5,
                r.6,
                if r.0.ends_with("still allows") { Y } else { N },
            )
        })
        .collect();
    check(&off, false);
}

/// Every ACL operation and permission against every operation asked for: an ALLOW grants
/// its operation, ALL, and what it implies; a DENY (beside an ALLOW ALL) denies its own
/// operation and ALL only.
#[test]
fn every_implication_both_ways() {
    for acl_op in CONCRETE {
        for asked in CONCRETE.iter().filter(|op| **op != All) {
            let implied = IMPLIED_BY
                .iter()
                .any(|(target, by)| target == asked && by.contains(acl_op));
            let grants = *acl_op == All || acl_op == asked || implied;
            let allow = authorizer(
                &[(T, "t", LIT, ALICE, "*", *acl_op, Allow)],
                config(&[], false),
            );
            let expect = if grants { Y } else { N };
            assert_eq!(
                allow.authorize(ALICE, H1, *asked, T, "t"),
                expect,
                "ALLOW {acl_op}, {asked}"
            );

            let denies = *acl_op == All || acl_op == asked;
            let acls = [
                (T, "t", LIT, ALICE, "*", *acl_op, Deny),
                (T, "t", LIT, ALICE, "*", All, Allow),
            ];
            let deny = authorizer(&acls, config(&[], false));
            let expect = if denies { N } else { Y };
            assert_eq!(
                deny.authorize(ALICE, H1, *asked, T, "t"),
                expect,
                "DENY {acl_op}, {asked}"
            );
        }
    }
}

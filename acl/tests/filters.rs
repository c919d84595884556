//! Filter matching as Kafka's ResourcePatternFilterTest and AclBindingTest check it.
#![allow(clippy::unwrap_used)] // a test: a failed unwrap is the failure report

use acl::AclOperation::{self, All, Read, Unknown as UnknownOp};
use acl::AclPermissionType::{self, Allow, Deny};
use acl::PatternType::{
    self, Any as AnyPattern, Literal as LITERAL, Match as MATCH, Prefixed as PREFIXED,
};
use acl::ResourceType::{self, Any as AnyType, Group as GROUP, Topic as TOPIC};
use acl::{AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern};

/// A filter on the pattern only (Kafka's `ResourcePatternFilter` with an ANY entry filter).
fn pattern_filter(rt: ResourceType, name: Option<&str>, pt: PatternType) -> AclBindingFilter {
    AclBindingFilter {
        resource_type: rt,
        name: name.map(str::to_owned),
        pattern_type: pt,
        ..AclBindingFilter::ANY
    }
}

fn pattern(rt: ResourceType, name: &str, pt: PatternType) -> ResourcePattern {
    ResourcePattern::new(rt, name, pt)
}

#[test]
fn resource_pattern_filter_test() {
    use ResourceType::Unknown;
    assert!(pattern_filter(Unknown, None, LITERAL).pattern_is_unknown());
    assert!(pattern_filter(GROUP, None, PatternType::Unknown).pattern_is_unknown());

    // (why, filter, pattern, matches), one row per Kafka test method.
    let rows = [
        (
            "different resource type",
            (TOPIC, Some("Name"), LITERAL),
            (GROUP, "Name", LITERAL),
            false,
        ),
        (
            "different name",
            (TOPIC, Some("Different"), PREFIXED),
            (TOPIC, "Name", PREFIXED),
            false,
        ),
        (
            "different name case",
            (TOPIC, Some("NAME"), LITERAL),
            (TOPIC, "Name", LITERAL),
            false,
        ),
        (
            "different pattern type",
            (TOPIC, Some("Name"), LITERAL),
            (TOPIC, "Name", PREFIXED),
            false,
        ),
        (
            "resource type ANY",
            (AnyType, Some("Name"), PREFIXED),
            (TOPIC, "Name", PREFIXED),
            true,
        ),
        (
            "resource name any",
            (TOPIC, None, PREFIXED),
            (TOPIC, "Name", PREFIXED),
            true,
        ),
        (
            "pattern type ANY",
            (TOPIC, None, AnyPattern),
            (TOPIC, "Name", PREFIXED),
            true,
        ),
        (
            "pattern type MATCH",
            (TOPIC, None, MATCH),
            (TOPIC, "Name", PREFIXED),
            true,
        ),
        (
            "literal exact",
            (TOPIC, Some("Name"), LITERAL),
            (TOPIC, "Name", LITERAL),
            true,
        ),
        (
            "literal, filter ANY",
            (TOPIC, Some("Name"), AnyPattern),
            (TOPIC, "Name", LITERAL),
            true,
        ),
        (
            "literal, filter MATCH",
            (TOPIC, Some("Name"), MATCH),
            (TOPIC, "Name", LITERAL),
            true,
        ),
        (
            "literal is no prefix",
            (TOPIC, Some("Name-something"), MATCH),
            (TOPIC, "Name", LITERAL),
            false,
        ),
        (
            "literal wildcard exact",
            (TOPIC, Some("*"), LITERAL),
            (TOPIC, "*", LITERAL),
            true,
        ),
        (
            "wildcard vs other name",
            (TOPIC, Some("Name"), LITERAL),
            (TOPIC, "*", LITERAL),
            false,
        ),
        (
            "wildcard the way around",
            (TOPIC, Some("*"), LITERAL),
            (TOPIC, "Name", LITERAL),
            false,
        ),
        (
            "wildcard, filter ANY",
            (TOPIC, Some("Name"), AnyPattern),
            (TOPIC, "*", LITERAL),
            false,
        ),
        (
            "wildcard, filter MATCH",
            (TOPIC, Some("Name"), MATCH),
            (TOPIC, "*", LITERAL),
            true,
        ),
        (
            "prefixed exact",
            (TOPIC, Some("Name"), PREFIXED),
            (TOPIC, "Name", PREFIXED),
            true,
        ),
        (
            "both prefixed, filter shorter",
            (TOPIC, Some("Name"), PREFIXED),
            (TOPIC, "Name-something", PREFIXED),
            false,
        ),
        (
            "both prefixed, pattern shorter",
            (TOPIC, Some("Name-something"), PREFIXED),
            (TOPIC, "Name", PREFIXED),
            false,
        ),
        (
            "prefixed, filter ANY",
            (TOPIC, Some("Name-something"), AnyPattern),
            (TOPIC, "Name", PREFIXED),
            false,
        ),
        (
            "prefixed, filter MATCH",
            (TOPIC, Some("Name-something"), MATCH),
            (TOPIC, "Name", PREFIXED),
            true,
        ),
        // Beyond Kafka's tests: MATCH against a longer prefix, and a MATCH filter on MATCH.
        (
            "longer prefix, filter MATCH",
            (TOPIC, Some("Name"), MATCH),
            (TOPIC, "Name-x", PREFIXED),
            false,
        ),
        (
            "unknown pattern, filter MATCH",
            (TOPIC, Some("Name"), MATCH),
            (TOPIC, "Name", PatternType::Unknown),
            false,
        ),
    ];
    for (why, (frt, fname, fpt), (prt, pname, ppt), expect) in rows {
        let filter = pattern_filter(frt, fname, fpt);
        assert_eq!(
            filter.matches_pattern(&pattern(prt, pname, ppt)),
            expect,
            "{why}"
        );
    }
}

fn acl(
    name: &str,
    principal: &str,
    host: &str,
    op: AclOperation,
    perm: AclPermissionType,
) -> AclBinding {
    AclBinding::new(
        pattern(TOPIC, name, LITERAL),
        AccessControlEntry::new(principal, host, op, perm),
    )
}

fn entry_filter(principal: Option<&str>, perm: AclPermissionType) -> AclBindingFilter {
    AclBindingFilter {
        principal: principal.map(str::to_owned),
        permission: perm,
        ..AclBindingFilter::ANY
    }
}

#[test]
fn acl_binding_test() {
    let acl1 = acl("mytopic", "User:ANONYMOUS", "", All, Allow);
    let acl2 = acl("mytopic", "User:*", "", Read, Allow);
    let acl3 = acl("mytopic2", "User:ANONYMOUS", "127.0.0.1", Read, Deny);
    let unknown = acl("mytopic2", "User:ANONYMOUS", "127.0.0.1", UnknownOp, Deny);
    let any_anonymous = entry_filter(Some("User:ANONYMOUS"), AclPermissionType::Any);
    let any_deny = entry_filter(None, Deny);
    let any_mytopic = pattern_filter(TOPIC, Some("mytopic"), LITERAL);

    assert_eq!(acl1, acl("mytopic", "User:ANONYMOUS", "", All, Allow));
    assert_ne!(acl1, acl2);
    for b in [&acl1, &acl2, &acl3] {
        assert!(AclBindingFilter::ANY.matches(b));
    }
    assert!(any_anonymous.matches(&acl1));
    assert!(!any_anonymous.matches(&acl2));
    assert!(any_anonymous.matches(&acl3));
    assert!(!any_deny.matches(&acl1));
    assert!(!any_deny.matches(&acl2));
    assert!(any_deny.matches(&acl3));
    assert!(any_mytopic.matches(&acl1));
    assert!(any_mytopic.matches(&acl2));
    assert!(!any_mytopic.matches(&acl3));
    assert!(any_anonymous.matches(&unknown));
    assert!(any_deny.matches(&unknown));
    assert!(!any_mytopic.matches(&unknown));

    // testUnknowns
    for b in [&acl1, &acl2, &acl3] {
        assert!(!b.is_unknown());
    }
    for f in [&any_anonymous, &any_deny, &any_mytopic] {
        assert!(!f.is_unknown());
    }
    assert!(unknown.is_unknown());

    // testMatchesAtMostOne
    for b in [&acl1, &acl2, &acl3] {
        assert_eq!(b.to_filter().find_indefinite_field(), None);
        assert!(b.to_filter().matches(b));
    }
    for f in [&any_anonymous, &any_deny, &any_mytopic] {
        assert!(!f.matches_at_most_one());
    }
    assert_eq!(
        any_mytopic.find_indefinite_field(),
        Some("Principal is NULL")
    );
    assert_eq!(
        AclBindingFilter::ANY.find_indefinite_field(),
        Some("Resource type is ANY.")
    );
}

#[test]
fn entry_filter_fields() {
    let b = acl("t", "User:a", "10.0.0.1", Read, Allow);
    let host = |h: &str| AclBindingFilter {
        host: Some(h.to_owned()),
        ..AclBindingFilter::ANY
    };
    assert!(host("10.0.0.1").matches(&b));
    // A filter's "*" is a literal value, not a wildcard: it selects ACLs written with "*".
    assert!(!host("*").matches(&b));
    let op = |o| AclBindingFilter {
        operation: o,
        ..AclBindingFilter::ANY
    };
    assert!(op(Read).matches(&b));
    assert!(!op(All).matches(&b));
}

#[test]
fn display_is_kafkas_to_string() {
    let b = acl("t", "User:a", "*", Read, Allow);
    assert_eq!(
        b.to_string(),
        "(pattern=ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL), \
         entry=(principal=User:a, host=*, operation=READ, permissionType=ALLOW))"
    );
    assert_eq!(
        AclBindingFilter::ANY.to_string(),
        "(patternFilter=ResourcePattern(resourceType=ANY, name=<any>, patternType=ANY), \
         entryFilter=(principal=<any>, host=<any>, operation=ANY, permissionType=ANY))"
    );
}

//! CreateAcls and DeleteAcls validation, principals and `super.users`, as Kafka checks them
//! (AclControlManagerTest, StandardAuthorizerTest.testGetConfiguredSuperUsers, AclApis).
#![allow(clippy::unwrap_used)] // a test: a failed unwrap is the failure report

use acl::{
    parse_principal, parse_super_users, validate_filter, validate_new, AccessControlEntry,
    AclBinding, AclBindingFilter, AclError, AclOperation, AclPermissionType, PatternType,
    ResourcePattern, ResourceType, CLUSTER_NAME,
};

fn good() -> AclBinding {
    AclBinding::new(
        ResourcePattern::new(ResourceType::Topic, "foo", PatternType::Literal),
        AccessControlEntry::new(
            "User:alice",
            "*",
            AclOperation::Read,
            AclPermissionType::Allow,
        ),
    )
}

fn refused(change: impl FnOnce(&mut AclBinding)) -> (i16, String) {
    let mut binding = good();
    change(&mut binding);
    let error = validate_new(&binding).expect_err("refused");
    (error.error_code(), error.to_string())
}

#[test]
fn valid_bindings_pass() {
    assert_eq!(validate_new(&good()), Ok(()));
    let prefixed = |b: &mut AclBinding| b.pattern.pattern_type = PatternType::Prefixed;
    let mut b = good();
    prefixed(&mut b);
    assert_eq!(validate_new(&b), Ok(()));
    for rt in [
        ResourceType::Group,
        ResourceType::TransactionalId,
        ResourceType::DelegationToken,
        ResourceType::User,
    ] {
        let mut b = good();
        b.pattern.resource_type = rt;
        assert_eq!(validate_new(&b), Ok(()), "{rt}");
    }
    let mut cluster = good();
    cluster.pattern =
        ResourcePattern::new(ResourceType::Cluster, CLUSTER_NAME, PatternType::Literal);
    assert_eq!(validate_new(&cluster), Ok(()));
    // Kafka takes any principal with a colon, even an odd one, and any host text.
    for principal in ["User:", ":", "Group:devs", "User:a:b"] {
        let mut b = good();
        b.entry.principal = principal.to_owned();
        assert_eq!(validate_new(&b), Ok(()), "{principal}");
    }
    let mut b = good();
    b.entry.host = "not-an-address".to_owned();
    assert_eq!(validate_new(&b), Ok(()));
}

#[test]
fn kafka_messages_and_codes() {
    type Change = Box<dyn FnOnce(&mut AclBinding)>;
    let cases: Vec<(Change, &str)> = vec![
        (
            Box::new(|b| b.pattern.resource_type = ResourceType::Any),
            "Invalid resourceType ANY",
        ),
        (
            Box::new(|b| b.pattern.resource_type = ResourceType::Unknown),
            "Invalid resourceType UNKNOWN",
        ),
        (
            Box::new(|b| b.pattern.pattern_type = PatternType::Match),
            "Invalid patternType MATCH",
        ),
        (
            Box::new(|b| b.pattern.pattern_type = PatternType::Any),
            "Invalid patternType ANY",
        ),
        (
            Box::new(|b| b.pattern.pattern_type = PatternType::Unknown),
            "Invalid patternType UNKNOWN",
        ),
        (
            Box::new(|b| b.entry.operation = AclOperation::Any),
            "Invalid operation ANY",
        ),
        (
            Box::new(|b| b.entry.operation = AclOperation::Unknown),
            "Invalid operation UNKNOWN",
        ),
        (
            Box::new(|b| b.entry.permission = AclPermissionType::Any),
            "Invalid permissionType ANY",
        ),
        (
            Box::new(|b| b.entry.permission = AclPermissionType::Unknown),
            "Invalid permissionType UNKNOWN",
        ),
        (
            Box::new(|b| b.pattern.resource_type = ResourceType::Cluster),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (
            Box::new(|b| {
                b.pattern.resource_type = ResourceType::Cluster;
                b.pattern.pattern_type = PatternType::Prefixed;
                b.pattern.name = "kafka".to_owned();
            }),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (
            Box::new(|b| b.pattern.name.clear()),
            "Invalid empty resource name",
        ),
        (
            Box::new(|b| b.entry.principal = "alice".to_owned()),
            "Could not parse principal from `alice` (no colon is present separating the \
             principal type from the principal name)",
        ),
        (
            Box::new(|b| b.entry.principal.clear()),
            "Could not parse principal from `` (no colon is present separating the \
             principal type from the principal name)",
        ),
    ];
    for (change, message) in cases {
        assert_eq!(refused(change), (42, message.to_owned()));
    }
}

#[test]
fn enum_values_are_checked_before_names_and_principals() {
    let (_, message) = refused(|b| {
        b.pattern.name.clear();
        b.entry.principal = "x".to_owned();
        b.entry.operation = AclOperation::Any;
    });
    assert_eq!(message, "Invalid operation ANY");
    let (_, message) = refused(|b| {
        b.pattern.resource_type = ResourceType::Cluster;
        b.pattern.name.clear();
    });
    assert_eq!(
        message,
        "The only valid name for the CLUSTER resource is kafka-cluster"
    );
}

#[test]
fn delete_filters() {
    assert_eq!(validate_filter(&AclBindingFilter::ANY), Ok(()));
    let with = |f: fn(&mut AclBindingFilter)| {
        let mut filter = AclBindingFilter::ANY;
        f(&mut filter);
        validate_filter(&filter)
    };
    assert_eq!(
        with(|f| f.resource_type = ResourceType::Unknown),
        Err(AclError::UnknownPatternFilter)
    );
    assert_eq!(
        with(|f| f.pattern_type = PatternType::Unknown),
        Err(AclError::UnknownPatternFilter)
    );
    assert_eq!(
        with(|f| f.operation = AclOperation::Unknown),
        Err(AclError::UnknownEntryFilter)
    );
    assert_eq!(
        with(|f| f.permission = AclPermissionType::Unknown),
        Err(AclError::UnknownEntryFilter)
    );
    assert_eq!(with(|f| f.pattern_type = PatternType::Match), Ok(()));
    let error = with(|f| f.operation = AclOperation::Unknown).unwrap_err();
    assert_eq!(
        (error.error_code(), error.to_string()),
        (42, "Unknown entryFilter.".to_owned())
    );
    assert_eq!(
        AclError::UnknownPatternFilter.to_string(),
        "Unknown patternFilter."
    );
}

#[test]
fn principals() {
    assert_eq!(parse_principal("User:alice"), Ok(("User", "alice")));
    assert_eq!(parse_principal("User:a:b"), Ok(("User", "a:b")));
    assert_eq!(parse_principal("User:"), Ok(("User", "")));
    assert_eq!(
        parse_principal(""),
        Err(AclError::InvalidPrincipal(String::new()))
    );
    assert_eq!(
        parse_principal("bob"),
        Err(AclError::InvalidPrincipal("bob".to_owned()))
    );
}

#[test]
fn configured_super_users() {
    // StandardAuthorizerTest.testGetConfiguredSuperUsers.
    assert_eq!(parse_super_users(""), Ok(vec![]));
    assert_eq!(parse_super_users(" "), Ok(vec![]));
    let two = Ok(vec!["User:bob".to_owned(), "User:alice".to_owned()]);
    assert_eq!(parse_super_users("User:bob;User:alice "), two);
    assert_eq!(parse_super_users(";  User:bob  ;  User:alice "), two);
    let error = parse_super_users("bob;:alice").unwrap_err();
    assert_eq!(
        error.to_string(),
        "expected a string in format principalType:principalName but got bob"
    );
    assert_eq!(error.error_code(), 40);
    // Distinguished names keep their commas: the separator is ";".
    assert_eq!(
        parse_super_users("User:CN=a,OU=b;User:c"),
        Ok(vec!["User:CN=a,OU=b".to_owned(), "User:c".to_owned()])
    );
}

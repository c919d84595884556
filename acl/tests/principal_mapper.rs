//! `ssl.principal.mapping.rules`, ported from Kafka's SslPrincipalMapperTest.
#![allow(clippy::unwrap_used)] // a test: a failed unwrap is the failure report

use acl::{AclError, PrincipalMapper};

#[test]
fn valid_rules() {
    for rules in [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
    ] {
        assert!(PrincipalMapper::parse(rules).is_ok(), "{rules}");
    }
}

#[test]
fn invalid_rules() {
    for rules in [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    ] {
        let error = PrincipalMapper::parse(rules).expect_err(rules);
        assert_eq!(error.error_code(), 40, "{rules}");
    }
    assert_eq!(
        PrincipalMapper::parse("DEFAULT/L").unwrap_err().to_string(),
        "Invalid rule: `DEFAULT/L`, unmatched substring: `/L`"
    );
    assert!(matches!(
        PrincipalMapper::parse("RULE:(unclosed/$1/").unwrap_err(),
        AclError::InvalidRulePattern { .. }
    ));
}

#[test]
fn ssl_principal_mapper() {
    let rules = [
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]
    .join(", ");
    let mapper = PrincipalMapper::parse(&rules).unwrap();
    let map = |dn: &str| mapper.map(dn).unwrap();
    assert_eq!(map("CN=Duke,OU=ServiceUsers,O=Org,C=US"), "duke");
    assert_eq!(map("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"), "duke@sme");
    assert_eq!(map("cn=duke,ou=sme,dc=mycp,dc=com"), "DUKE@SME");
    assert_eq!(map("cN=duke,OU=JavaSoft,O=Sun Microsystems"), "DUKE");
    assert_eq!(
        map("OU=JavaSoft,O=Sun Microsystems,C=US"),
        "OU=JavaSoft,O=Sun Microsystems,C=US"
    );
}

fn splits_as(expected: &str, rules: &str) {
    let mapper = PrincipalMapper::parse(rules).unwrap();
    assert_eq!(
        mapper.to_string(),
        format!("SslPrincipalMapper(rules = {expected})"),
        "{rules:?}"
    );
}

#[test]
fn rules_splitting() {
    splits_as("[]", "");
    splits_as("[DEFAULT]", "DEFAULT");
    splits_as("[RULE:/]", "RULE://");
    splits_as("[RULE:/.*]", "RULE:/.*/");
    splits_as("[RULE:/.*/L]", "RULE:/.*/L");
    splits_as("[RULE:/, DEFAULT]", "RULE://,DEFAULT");
    splits_as("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  ");
    splits_as(
        "[RULE:   /     , DEFAULT]",
        "  RULE:   /     / ,  DEFAULT  ",
    );
    splits_as(
        "[RULE:  /     /U, DEFAULT]",
        "  RULE:  /     /U   ,DEFAULT  ",
    );
    splits_as(
        "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
        "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
    );

    // Empty rules are ignored.
    splits_as("[]", ",   , , ,      , , ,   ");
    splits_as("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,");
    splits_as(
        "[RULE: /   , DEFAULT]",
        ",  , RULE: /   /    ,,,   DEFAULT, ,   ",
    );
    splits_as(
        "[RULE:   /  /U, DEFAULT]",
        "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,",
    );

    // Escape sequences.
    splits_as(r"[RULE:\/\\\(\)\n\t/\/\/]", r"RULE:\/\\\(\)\n\t/\/\//");
    splits_as(
        r"[RULE:\**\/+/*/L, RULE:\/*\**/**]",
        r"RULE:\**\/+/*/L,RULE:\/*\**/**/",
    );

    // Rules rule.
    splits_as(
        "[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, \
         /DEFAULT, DEFAULT]",
        "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, \
         /DEFAULT/,DEFAULT",
    );
}

#[test]
fn comma_with_whitespace() {
    let mapper = PrincipalMapper::parse(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT").unwrap();
    assert_eq!(
        mapper
            .map(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz")
            .unwrap(),
        r"Tkac\, Adam"
    );
}

#[test]
fn no_matching_rule() {
    let mapper = PrincipalMapper::parse("RULE:^CN=(.*)$/$1/").unwrap();
    let error = mapper.map("OU=x").unwrap_err();
    assert_eq!(
        error.to_string(),
        "No rules apply to OU=x, rules [RULE:^CN=(.*)$/$1]"
    );
    let empty = PrincipalMapper::parse("").unwrap();
    assert!(matches!(
        empty.map("CN=a"),
        Err(AclError::NoMatchingRule { .. })
    ));
    assert_eq!(PrincipalMapper::default().map("CN=a").unwrap(), "CN=a");
}

#[test]
fn java_replacement_semantics() {
    let map = |rules: &str, dn: &str| PrincipalMapper::parse(rules).unwrap().map(dn);
    // A back-reference past the last group is shortened, then kept literally.
    assert_eq!(map("RULE:^CN=(.*)$/$12/", "CN=a").unwrap(), "a2");
    assert_eq!(map("RULE:^CN=(.*)$/$2-$1/", "CN=a").unwrap(), "$2-a");
    // Named groups, escapes, and a group that did not take part.
    assert_eq!(
        map("RULE:^CN=(?<who>[a-z]+)(x)?$/${who}\\$$2/", "CN=bob").unwrap(),
        "bob$"
    );
    // Every match of the pattern is replaced, as String.replaceAll does.
    assert_eq!(map("RULE:[a-z]*/<$0>/", "ab").unwrap(), "<ab><>");
    // Errors Java raises while expanding, at map time as in Kafka.
    assert!(matches!(
        map("RULE:^CN=(.*)$/$x/", "CN=a"),
        Err(AclError::InvalidReplacement(_))
    ));
    assert!(matches!(
        map("RULE:^CN=.*$/$1/", "CN=a"),
        Err(AclError::InvalidReplacement(_))
    ));
    assert!(matches!(
        map("RULE:^(CN)=.*$/${nope}/", "CN=a"),
        Err(AclError::InvalidReplacement(_))
    ));
}

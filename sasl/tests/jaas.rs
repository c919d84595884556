//! `sasl.jaas.config` parsing: Kafka's syntax, its tokenizer's quirks and its errors.

use sasl::jaas::{parse, JaasEntry, JaasError};

fn entry(module: &str, flag: &str, options: &[(&str, &str)]) -> JaasEntry {
    JaasEntry {
        login_module: module.into(),
        flag: flag.into(),
        options: options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

#[test]
fn kafkas_documented_plain_example() {
    let text = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#;
    let entries = parse(text).expect("parses");
    assert_eq!(
        entries,
        vec![entry(
            "org.apache.kafka.common.security.plain.PlainLoginModule",
            "required",
            &[
                ("username", "admin"),
                ("password", "admin-secret"),
                ("user_admin", "admin-secret"),
                ("user_alice", "alice-secret"),
            ],
        )]
    );
    assert_eq!(entries[0].option("user_alice"), Some("alice-secret"));
    assert_eq!(entries[0].option("user_bob"), None);
}

#[test]
fn several_entries_unquoted_values_and_flags_in_any_case() {
    let text = "a.B Required k=v-1.x $k2='single';\n c OPTIONAL;d sufficient e=f;g Requisite;";
    let entries = parse(text).expect("parses");
    assert_eq!(
        entries,
        vec![
            entry("a.B", "required", &[("k", "v-1.x"), ("$k2", "single")]),
            entry("c", "optional", &[]),
            entry("d", "sufficient", &[("e", "f")]),
            entry("g", "requisite", &[]),
        ]
    );
}

#[test]
fn quoted_values_keep_spaces_and_unescape() {
    let text = r#"m required a="x y;z=w" b="q\"uote\\back" c="tab\there\101\7";"#;
    let entries = parse(text).expect("parses");
    assert_eq!(entries.len(), 1);
    let options = &entries[0].options;
    assert_eq!(options[0], ("a".into(), "x y;z=w".into()));
    assert_eq!(options[1], ("b".into(), "q\"uote\\back".into()));
    assert_eq!(options[2], ("c".into(), "tab\there\u{41}\u{7}".into()));
    // No doubled-quote escape: 'it' ends the value and 's' reads as the next key.
    assert_eq!(
        parse("m required d='it''s';"),
        Err(JaasError::MissingValue("s".into()))
    );
}

#[test]
fn comments_are_skipped() {
    let text = "// leading comment\n m /* flag next */ required k=\"v\"; // done\n /* tail */";
    assert_eq!(parse(text), Ok(vec![entry("m", "required", &[("k", "v")])]));
    assert_eq!(
        parse("m required k=v; / lone slash comments the line\n"),
        parse("m required k=v;")
    );
}

#[test]
fn repeated_options_keep_the_last_value() {
    let entries = parse("m required k=\"1\" j=x k=\"2\";").expect("parses");
    assert_eq!(
        entries[0].options,
        vec![("k".into(), "2".into()), ("j".into(), "x".into())]
    );
}

#[test]
fn errors() {
    let cases: [(&str, JaasError); 12] = [
        ("", JaasError::NoLoginModule),
        ("  // only a comment", JaasError::NoLoginModule),
        ("m", JaasError::MissingControlFlag),
        ("m \"required\" k=v", JaasError::MissingSemicolon),
        ("m required k=v", JaasError::MissingSemicolon),
        ("m required k=v; n required", JaasError::MissingSemicolon),
        ("m required k;", JaasError::MissingValue("k".into())),
        ("m required k=;", JaasError::MissingValue("k".into())),
        (
            "m required retries=3;",
            JaasError::MissingValue("retries".into()),
        ),
        (
            "m mandatory;",
            JaasError::InvalidControlFlag("mandatory".into()),
        ),
        ("m required k=\"v;", JaasError::UnterminatedQuote),
        ("; m required;", JaasError::InvalidLoginModule),
    ];
    for (text, expected) in cases {
        assert_eq!(parse(text), Err(expected), "{text:?}");
    }
    assert_eq!(parse("m ;"), Err(JaasError::ControlFlagNotAvailable));
    assert_eq!(
        parse("m required k=\"v\nw\";"),
        Err(JaasError::UnterminatedQuote)
    );
    assert_eq!(
        JaasError::MissingValue("k".into()).to_string(),
        "Value not specified for key 'k' in JAAS config"
    );
}

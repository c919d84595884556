use super::*;

#[test]
fn topic_arguments_as_kafkas() {
    assert_eq!(
        parse_topic_partitions("orders").unwrap(),
        TopicSpec {
            topic: "orders".into(),
            partitions: vec![]
        }
    );
    assert_eq!(
        parse_topic_partitions("orders:0,2").unwrap().partitions,
        vec![0, 2]
    );
    assert!(parse_topic_partitions("orders:x").is_err());
    assert!(parse_topic_partitions("orders:-1").is_err());
    assert!(parse_topic_partitions(":1").is_err());
}

#[test]
fn new_offsets_follow_kafkas_scenarios_and_clamp() {
    let n = |s, c, t| new_offset(s, "t-0", 10, 100, c, t).unwrap();
    assert_eq!(n(Scenario::Earliest, None, None), 10);
    assert_eq!(n(Scenario::Latest, None, None), 100);
    assert_eq!(n(Scenario::Offset(50), None, None), 50);
    assert_eq!(n(Scenario::Offset(5), None, None), 10);
    assert_eq!(n(Scenario::Offset(500), None, None), 100);
    assert_eq!(n(Scenario::ShiftBy(-5), Some(40), None), 35);
    assert_eq!(n(Scenario::ShiftBy(-50), Some(40), None), 10);
    assert_eq!(n(Scenario::ShiftBy(500), Some(40), None), 100);
    assert_eq!(n(Scenario::Time(0), None, Some(42)), 42);
    assert_eq!(n(Scenario::Time(0), None, Some(-1)), 100);
    assert_eq!(n(Scenario::Current, Some(40), None), 40);
    assert_eq!(n(Scenario::Current, None, None), 100);
    assert!(new_offset(Scenario::FromFile, "t-0", 0, 9, None, None).is_err());
    let err = new_offset(Scenario::ShiftBy(1), "t-0", 0, 9, None, None).unwrap_err();
    assert!(err.to_string().contains("no current committed offset"));
}

fn listed(id: &str, state: &str, t: &str) -> Listed {
    Listed {
        group_id: id.into(),
        protocol_type: "consumer".into(),
        state: state.into(),
        group_type: t.into(),
        coordinator: 1,
    }
}

#[test]
fn list_prints_names_or_columns() {
    let groups = [
        listed("a", "Stable", "classic"),
        listed("b", "Empty", "consumer"),
    ];
    let mut out = Vec::new();
    print_list(&groups, None, None, false, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), "a\nb\n");
    let mut out = Vec::new();
    print_list(&groups, Some("empty"), None, false, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "GROUP           STATE\nb               Empty\n"
    );
    let mut out = Vec::new();
    print_list(&groups, Some(""), Some("Classic"), false, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "GROUP           TYPE            STATE\na               Classic         Stable\n"
    );
    let mut out = Vec::new();
    print_list(&groups, None, None, true, &mut out).unwrap();
    let first: serde_json::Value =
        serde_json::from_str(String::from_utf8(out).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(first["group"], "a");
    assert_eq!(first["state"], "Stable");
}

#[test]
fn offsets_table_has_kafkas_columns_and_dashes() {
    let rows = vec![
        OffsetRow {
            topic: "orders".into(),
            partition: 0,
            current: Some(5),
            log_end: Some(12),
            member: None,
        },
        OffsetRow {
            topic: "orders".into(),
            partition: 1,
            current: None,
            log_end: Some(3),
            member: Some(MemberInfo {
                member_id: "m-1".into(),
                client_id: "c".into(),
                host: "/127.0.0.1".into(),
                ..Default::default()
            }),
        },
    ];
    let mut out = Vec::new();
    print_offsets("g", &rows, false, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], OFFSET_COLUMNS);
    assert_eq!(
        lines[1],
        ["g", "orders", "0", "5", "12", "7", "-", "-", "-"]
    );
    assert_eq!(
        lines[2],
        ["g", "orders", "1", "-", "3", "-", "m-1", "/127.0.0.1", "c"]
    );
}

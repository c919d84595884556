use super::*;

fn entity(parts: &[(&str, Option<&str>)]) -> Entity {
    let mut e: Entity = parts
        .iter()
        .map(|(t, n)| (t.to_string(), n.map(str::to_owned)))
        .collect();
    e.sort();
    e
}

fn set(parts: &[(&str, Option<&str>)], key: &str, value: f64) -> Alteration {
    Alteration {
        entity: entity(parts),
        ops: vec![(key.into(), Some(value))],
    }
}

fn image_with(alterations: &[Alteration]) -> QuotaImage {
    let mut image = QuotaImage::default();
    let (records, results) = image.alter(alterations);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    for record in &records {
        let MetadataRecord::ClientQuota(q) = record else {
            panic!("not a quota record: {record:?}")
        };
        image.apply(q);
    }
    image
}

#[test]
fn precedence_follows_kafkas_eight_levels() {
    let key = PRODUCER_BYTE_RATE;
    let levels: Vec<Alteration> = vec![
        set(&[(USER, Some("alice")), (CLIENT_ID, Some("app"))], key, 1.0),
        set(&[(USER, Some("alice")), (CLIENT_ID, None)], key, 2.0),
        set(&[(USER, Some("alice"))], key, 3.0),
        set(&[(USER, None), (CLIENT_ID, Some("app"))], key, 4.0),
        set(&[(USER, None), (CLIENT_ID, None)], key, 5.0),
        set(&[(USER, None)], key, 6.0),
        set(&[(CLIENT_ID, Some("app"))], key, 7.0),
        set(&[(CLIENT_ID, None)], key, 8.0),
    ];
    // With levels 1..=8 present the first wins; dropping it exposes the next.
    for first in 0..levels.len() {
        let image = image_with(&levels[first..]);
        let (quota, _) = image.resolve("alice", "app", key).expect("a quota applies");
        assert_eq!(quota, (first + 1) as f64);
    }
    assert_eq!(QuotaImage::default().resolve("alice", "app", key), None);
    // A default user quota is each user's own: the sharing key names the user.
    let image = image_with(&levels[5..6]);
    let (_, shared) = image.resolve("bob", "x", key).unwrap();
    assert_eq!(
        shared,
        SharedBy {
            user: Some("bob".into()),
            client_id: None
        }
    );
    assert_eq!(image.resolve("bob", "x", CONSUMER_BYTE_RATE), None);
}

#[test]
fn alter_validates_as_kafka() {
    let image = QuotaImage::default();
    let refused = |a: Alteration| image.alter(&[a]).1.remove(0).unwrap_err();
    assert_eq!(
        refused(set(&[], PRODUCER_BYTE_RATE, 1.0)).message,
        "Invalid empty client quota entity"
    );
    assert_eq!(
        refused(set(&[("group", Some("g"))], PRODUCER_BYTE_RATE, 1.0)).message,
        "Unhandled client quota entity type: group"
    );
    assert_eq!(
        refused(set(&[(USER, Some(""))], PRODUCER_BYTE_RATE, 1.0)).message,
        "Empty user not supported"
    );
    assert_eq!(
        refused(set(
            &[(USER, Some("a")), (IP, Some("1.2.3.4"))],
            PRODUCER_BYTE_RATE,
            1.0
        ))
        .message,
        "Invalid empty client quota entity"
    );
    assert_eq!(
        refused(set(
            &[(IP, Some("not an ip"))],
            CONNECTION_CREATION_RATE,
            1.0
        ))
        .message,
        "not an ip is not a valid IP or resolvable host."
    );
    assert_eq!(
        refused(set(&[(USER, Some("a"))], CONNECTION_CREATION_RATE, 1.0)).message,
        "Invalid configuration key connection_creation_rate"
    );
    assert_eq!(
        refused(set(&[(USER, Some("a"))], PRODUCER_BYTE_RATE, 1.5)).message,
        "Configuration producer_byte_rate must be a Long value"
    );
    let twice = Alteration {
        entity: entity(&[(USER, Some("a"))]),
        ops: vec![
            (PRODUCER_BYTE_RATE.into(), Some(1.0)),
            (PRODUCER_BYTE_RATE.into(), None),
        ],
    };
    assert!(refused(twice)
        .message
        .starts_with("Duplicate quota key producer_byte_rate"));
    let (records, results) = image.alter(&[
        set(&[(USER, Some("a"))], REQUEST_PERCENTAGE, 12.5),
        set(&[(USER, Some("a"))], PRODUCER_BYTE_RATE, 1.0),
    ]);
    assert!(results[0].is_ok());
    assert!(results[1]
        .as_ref()
        .unwrap_err()
        .message
        .starts_with("Ignoring duplicate entity"));
    assert_eq!(records.len(), 1);
    for refusal in results.into_iter().filter_map(Result::err) {
        assert_eq!(refusal.code, 42);
    }
}

#[test]
fn alter_writes_only_changes_and_removes() {
    let image = image_with(&[set(&[(USER, Some("a"))], PRODUCER_BYTE_RATE, 1024.0)]);
    let same = image.alter(&[set(&[(USER, Some("a"))], PRODUCER_BYTE_RATE, 1024.0)]);
    assert!(same.0.is_empty() && same.1[0].is_ok());
    let absent = image.alter(&[Alteration {
        entity: entity(&[(USER, Some("b"))]),
        ops: vec![(PRODUCER_BYTE_RATE.into(), None)],
    }]);
    assert!(absent.0.is_empty() && absent.1[0].is_ok());
    let (records, _) = image.alter(&[Alteration {
        entity: entity(&[(USER, Some("a"))]),
        ops: vec![(PRODUCER_BYTE_RATE.into(), None)],
    }]);
    let mut image = image;
    for r in &records {
        let MetadataRecord::ClientQuota(q) = r else {
            unreachable!()
        };
        image.apply(q);
    }
    assert!(image.is_empty());
}

#[test]
fn describe_filters_as_kafka() {
    let image = image_with(&[
        set(&[(USER, Some("alice"))], PRODUCER_BYTE_RATE, 1.0),
        set(
            &[(USER, Some("alice")), (CLIENT_ID, Some("app"))],
            PRODUCER_BYTE_RATE,
            2.0,
        ),
        set(&[(USER, None)], CONSUMER_BYTE_RATE, 3.0),
        set(&[(CLIENT_ID, Some("app"))], REQUEST_PERCENTAGE, 4.0),
        set(&[(IP, Some("10.0.0.1"))], CONNECTION_CREATION_RATE, 5.0),
    ]);
    let component = |t: &str, m: i8, s: Option<&str>| Component {
        entity_type: t.into(),
        match_type: m,
        matched: s.map(str::to_owned),
    };
    let count = |c: &[Component], strict: bool| image.describe(c, strict).unwrap().len();
    assert_eq!(count(&[], false), 5);
    assert_eq!(count(&[], true), 0);
    assert_eq!(
        count(&[component(USER, MATCH_EXACT, Some("alice"))], false),
        2
    );
    assert_eq!(
        count(&[component(USER, MATCH_EXACT, Some("alice"))], true),
        1
    );
    assert_eq!(count(&[component(USER, MATCH_DEFAULT, None)], false), 1);
    assert_eq!(count(&[component(USER, MATCH_SPECIFIED, None)], false), 3);
    assert_eq!(
        count(&[component(CLIENT_ID, MATCH_SPECIFIED, None)], true),
        1
    );
    assert_eq!(count(&[component(IP, MATCH_SPECIFIED, None)], false), 1);
    let refused = |c: &[Component]| image.describe(c, false).unwrap_err();
    assert_eq!(
        refused(&[component("", MATCH_EXACT, Some("x"))]).message,
        "Invalid empty entity type."
    );
    assert_eq!(
        refused(&[component("group", MATCH_SPECIFIED, None)]).code,
        35
    );
    assert_eq!(
        refused(&[component(USER, MATCH_EXACT, None)]).message,
        "Request specified MATCH_TYPE_EXACT, but set match string to null."
    );
    assert!(refused(&[
        component(USER, MATCH_SPECIFIED, None),
        component(USER, MATCH_DEFAULT, None)
    ])
    .message
    .contains("cannot appear more than once"));
    assert!(refused(&[
        component(IP, MATCH_SPECIFIED, None),
        component(USER, MATCH_DEFAULT, None)
    ])
    .message
    .starts_with("Invalid entity filter component combination"));
    assert_eq!(
        refused(&[component(USER, 7, None)]).message,
        "Unknown match type 7"
    );
}

#[test]
fn snapshot_rebuilds_the_same_quotas() {
    let image = image_with(&[
        set(&[(USER, Some("alice"))], PRODUCER_BYTE_RATE, 1.0),
        set(&[(CLIENT_ID, None)], REQUEST_PERCENTAGE, 0.25),
    ]);
    let mut rebuilt = QuotaImage::default();
    for r in image.to_records() {
        let MetadataRecord::ClientQuota(q) = r else {
            unreachable!()
        };
        rebuilt.apply(&q);
    }
    assert_eq!(rebuilt, image);
}

#[test]
fn mentions_follows_sets_and_removes() {
    let alice = entity(&[(USER, Some("alice"))]);
    let bob = entity(&[(USER, Some("bob"))]);
    let record = |entity: &Entity, value: Option<f64>| QuotaRecord {
        entity: entity.clone(),
        key: REQUEST_PERCENTAGE.into(),
        value: value.unwrap_or(0.0),
        remove: value.is_none(),
    };
    let mut image = QuotaImage::default();
    assert!(!image.mentions(REQUEST_PERCENTAGE));
    image.apply(&record(&alice, Some(50.0)));
    image.apply(&record(&alice, Some(60.0)));
    image.apply(&record(&bob, Some(70.0)));
    assert!(image.mentions(REQUEST_PERCENTAGE));
    assert!(!image.mentions(PRODUCER_BYTE_RATE));
    image.apply(&record(&alice, None));
    // Removing a key twice, or one never set, counts nothing.
    image.apply(&record(&alice, None));
    assert!(image.mentions(REQUEST_PERCENTAGE));
    image.apply(&record(&bob, None));
    assert!(!image.mentions(REQUEST_PERCENTAGE));
    assert_eq!(image, QuotaImage::default());
}

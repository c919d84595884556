//! ACLs: records applied and replayed (also across a restart of the metadata log and through
//! a snapshot), and CreateAcls / DeleteAcls / DescribeAcls answered with Kafka's codes and
//! messages.

use acl::{AclOperation as Op, AclPermissionType as Perm, PatternType, ResourceType};

use super::*;
use crate::image::Image;
use crate::{Controller, Disk};

fn binding(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    principal: &str,
    operation: Op,
) -> AclBinding {
    AclBinding::new(
        ResourcePattern::new(resource_type, name, pattern_type),
        AccessControlEntry::new(principal, "*", operation, Perm::Allow),
    )
}

fn topic(name: &str, principal: &str) -> AclBinding {
    binding(
        ResourceType::Topic,
        name,
        PatternType::Literal,
        principal,
        Op::Read,
    )
}

/// Ids 1, 2, 3, ... (the controller draws random ones).
fn counter() -> impl FnMut() -> AclId {
    let mut next = 0u8;
    move || {
        next += 1;
        [next; 16]
    }
}

fn cfg() -> config::BrokerConfig {
    config::load(None, &[]).unwrap()
}

fn filter_all() -> AclBindingFilter {
    AclBindingFilter::ANY
}

#[test]
fn records_apply_remove_and_snapshot() {
    let add = |id: u8, b: AclBinding| MetadataRecord::AccessControlEntry {
        id: [id; 16],
        binding: b,
    };
    let mut img = Image::from_records(&[
        add(1, topic("orders", "User:alice")),
        add(2, topic("orders", "User:bob")),
        add(
            3,
            binding(
                ResourceType::Group,
                "g-",
                PatternType::Prefixed,
                "User:bob",
                Op::Read,
            ),
        ),
    ]);
    assert_eq!(img.acls.len(), 3);
    let before = img.clone();
    img.apply(&MetadataRecord::RemoveAccessControlEntry { id: [2; 16] });
    assert_eq!(img.acls.len(), 2);
    assert!(img.acls.get(&[2; 16]).is_none());
    // The previous version is untouched (copy on write).
    assert_eq!(before.acls.len(), 3);
    assert_ne!(img, before);
    // A removal of nothing, an id added twice and a binding added twice change nothing.
    let same = img.clone();
    img.apply_all(&[
        MetadataRecord::RemoveAccessControlEntry { id: [9; 16] },
        add(1, topic("other", "User:x")),
        add(7, topic("orders", "User:alice")),
    ]);
    assert_eq!(img, same);
    // A snapshot rebuilds the same ACLs with the same ids.
    let replayed = Image::from_records(&img.to_records());
    assert_eq!(replayed, img);
    assert_eq!(
        replayed.acls.get(&[3; 16]).map(|b| b.pattern.name.as_str()),
        Some("g-")
    );
    // A batch touching no ACL keeps sharing them.
    let mut next = img.clone();
    next.apply(&MetadataRecord::ProducerIds {
        broker_id: 1,
        broker_epoch: 1,
        next_producer_id: 1000,
    });
    assert!(std::sync::Arc::ptr_eq(&next.acls, &img.acls));
}

#[test]
fn create_validates_as_kafka() {
    let mut img = Image::default();
    let (records, results) = create(&img.acls, &[topic("orders", "User:alice")], counter());
    assert_eq!(results, [AclCreateResult::SUCCESS]);
    img.apply_all(&records);

    let invalid = |message: &str| AclCreateResult::refused(42, message);
    let asked = [
        // Already stored: success, no record.
        topic("orders", "User:alice"),
        topic("orders", "User:bob"),
        // Twice in one request: one record.
        topic("orders", "User:bob"),
        topic("orders", "alice"),
        binding(
            ResourceType::Cluster,
            "cluster",
            PatternType::Literal,
            "User:a",
            Op::Alter,
        ),
        binding(
            ResourceType::Cluster,
            "kafka-cluster",
            PatternType::Literal,
            "User:a",
            Op::Alter,
        ),
        binding(
            ResourceType::Any,
            "x",
            PatternType::Literal,
            "User:a",
            Op::Read,
        ),
        binding(
            ResourceType::Topic,
            "x",
            PatternType::Match,
            "User:a",
            Op::Read,
        ),
        binding(
            ResourceType::Topic,
            "x",
            PatternType::Literal,
            "User:a",
            Op::Any,
        ),
        binding(
            ResourceType::Topic,
            "",
            PatternType::Literal,
            "User:a",
            Op::Read,
        ),
        AclBinding::new(
            ResourcePattern::new(ResourceType::Topic, "x", PatternType::Literal),
            AccessControlEntry::new("User:a", "*", Op::Read, Perm::Any),
        ),
    ];
    let (records, results) = create(&img.acls, &asked, counter());
    assert_eq!(
        results,
        [
            AclCreateResult::SUCCESS,
            AclCreateResult::SUCCESS,
            AclCreateResult::SUCCESS,
            invalid(
                "Could not parse principal from `alice` (no colon is present separating the \
                 principal type from the principal name)"
            ),
            invalid("The only valid name for the CLUSTER resource is kafka-cluster"),
            AclCreateResult::SUCCESS,
            invalid("Invalid resourceType ANY"),
            invalid("Invalid patternType MATCH"),
            invalid("Invalid operation ANY"),
            invalid("Invalid empty resource name"),
            invalid("Invalid permissionType ANY"),
        ]
    );
    assert_eq!(records.len(), 2, "bob's ACL once and the cluster ACL");
    let ids: Vec<AclId> = records
        .iter()
        .map(|r| match r {
            MetadataRecord::AccessControlEntry { id, .. } => *id,
            other => panic!("an ACL record: {other:?}"),
        })
        .collect();
    // The counter's first id is taken by alice's ACL: drawn again.
    assert!(!ids.contains(&[1; 16]), "{ids:?}");
    assert_ne!(ids[0], ids[1]);
}

#[test]
fn delete_lists_each_match_and_removes_it_once() {
    let mut img = Image::default();
    let (records, _) = create(
        &img.acls,
        &[
            topic("orders", "User:alice"),
            topic("orders", "User:bob"),
            topic("payments", "User:bob"),
        ],
        counter(),
    );
    img.apply_all(&records);
    let by_principal = |p: &str| AclBindingFilter {
        principal: Some(p.into()),
        ..AclBindingFilter::ANY
    };
    let orders = AclBindingFilter {
        resource_type: ResourceType::Topic,
        name: Some("orders".into()),
        pattern_type: PatternType::Literal,
        ..AclBindingFilter::ANY
    };
    let unknown = AclBindingFilter {
        operation: Op::Unknown,
        ..AclBindingFilter::ANY
    };
    let (records, results) = delete(
        &img.acls,
        &[
            by_principal("User:bob"),
            orders,
            unknown,
            by_principal("User:zed"),
        ],
    );
    assert_eq!(results[0].deleted.len(), 2);
    assert_eq!(results[1].deleted.len(), 2);
    assert_eq!(
        (results[2].error_code, results[2].error_message.as_deref()),
        (42, Some("Unknown entryFilter."))
    );
    assert_eq!(
        (results[3].error_code, results[3].deleted.len()),
        (0, 0),
        "matching nothing is no error"
    );
    // bob's two and alice's: three removals although four matches.
    assert_eq!(records.len(), 3);
    img.apply_all(&records);
    assert!(img.acls.is_empty());
}

#[test]
fn describe_groups_by_resource() {
    let mut img = Image::default();
    let prefixed = binding(
        ResourceType::Topic,
        "ord",
        PatternType::Prefixed,
        "User:carol",
        Op::Write,
    );
    let (records, _) = create(
        &img.acls,
        &[
            topic("orders", "User:alice"),
            topic("orders", "User:bob"),
            topic("*", "User:dan"),
            prefixed.clone(),
            binding(
                ResourceType::Group,
                "g",
                PatternType::Literal,
                "User:bob",
                Op::Read,
            ),
        ],
        counter(),
    );
    img.apply_all(&records);
    let all = describe(&img.acls, &filter_all()).unwrap();
    assert_eq!(all.len(), 4, "{all:?}");
    let orders = all
        .iter()
        .find(|(p, _)| p.name == "orders" && p.pattern_type == PatternType::Literal)
        .unwrap();
    assert_eq!(orders.1.len(), 2);
    // MATCH: what applies to topic "orders": the literal, the wildcard and the prefix.
    let matching = describe(
        &img.acls,
        &AclBindingFilter {
            resource_type: ResourceType::Topic,
            name: Some("orders".into()),
            pattern_type: PatternType::Match,
            ..AclBindingFilter::ANY
        },
    )
    .unwrap();
    let names: Vec<(&str, PatternType)> = matching
        .iter()
        .map(|(p, _)| (p.name.as_str(), p.pattern_type))
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.contains(&("ord", PatternType::Prefixed)));
    assert!(names.contains(&("*", PatternType::Literal)));
    // PREFIXED: only the prefixed ACL of exactly that name.
    let only = describe(
        &img.acls,
        &AclBindingFilter {
            name: Some("ord".into()),
            pattern_type: PatternType::Prefixed,
            ..AclBindingFilter::ANY
        },
    )
    .unwrap();
    assert_eq!(only, [(prefixed.pattern, vec![prefixed.entry])]);
    let unknown = AclBindingFilter {
        resource_type: ResourceType::Unknown,
        ..AclBindingFilter::ANY
    };
    assert_eq!(describe(&img.acls, &unknown).unwrap_err().error_code(), 42);
}

#[test]
fn too_many_records_write_nothing() {
    let img = Image::default();
    let many: Vec<AclBinding> = (0..=MAX_RECORDS_PER_USER_OP)
        .map(|i| topic(&format!("t{i}"), "User:a"))
        .collect();
    let mut n = 0u64;
    let (records, results) = create(&img.acls, &many, || {
        n += 1;
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&n.to_be_bytes());
        id
    });
    assert!(records.is_empty());
    assert!(results.iter().all(|r| r.error_code == -1));
}

/// ACLs live in the metadata log: a restart replays them (from the log, then from a
/// snapshot), and a deletion survives too.
#[test]
fn acls_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Controller::open(&Disk::Real, dir.path(), cfg()).unwrap();
    let results = c
        .create_acls(&[topic("orders", "User:alice"), topic("orders", "User:bob")])
        .unwrap();
    assert!(results.iter().all(|r| r.error_code == 0), "{results:?}");
    let before: Vec<(AclId, AclBinding)> = c
        .image()
        .acls
        .entries()
        .map(|(id, b)| (id, b.clone()))
        .collect();
    assert_eq!(before.len(), 2);
    drop(c);

    let mut c = Controller::open(&Disk::Real, dir.path(), cfg()).unwrap();
    let after: Vec<(AclId, AclBinding)> = c
        .image()
        .acls
        .entries()
        .map(|(id, b)| (id, b.clone()))
        .collect();
    assert_eq!(after, before, "same ids, same bindings");
    let deleted = c
        .delete_acls(&[AclBindingFilter {
            principal: Some("User:bob".into()),
            ..AclBindingFilter::ANY
        }])
        .unwrap();
    assert_eq!(deleted[0].deleted, [topic("orders", "User:bob")]);
    c.snapshot().unwrap();
    drop(c);

    let c = Controller::open(&Disk::Real, dir.path(), cfg()).unwrap();
    let image = c.image();
    let left: Vec<&AclBinding> = image.acls.bindings().collect();
    assert_eq!(left, [&topic("orders", "User:alice")]);
}

/// A staged controller (a cluster's metadata core) stages the records for the quorum.
#[test]
fn staged_changes_wait_for_the_quorum() {
    let mut c = Controller::staged(cfg(), std::sync::Arc::new(Image::default()));
    c.create_acls(&[topic("orders", "User:alice")]).unwrap();
    let staged = c.take_staged();
    assert_eq!(staged.len(), 1);
    c.adopt(std::sync::Arc::new(Image::from_records(&staged)));
    let results = c.delete_acls(&[AclBindingFilter::ANY]).unwrap();
    assert_eq!(results[0].deleted.len(), 1);
    assert_eq!(c.take_staged().len(), 1);
}

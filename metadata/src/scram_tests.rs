//! SCRAM credentials: records applied and replayed (also across a restart of the metadata
//! log and through a snapshot), and AlterUserScramCredentials / DescribeUserScramCredentials
//! answered with Kafka's codes and messages.

use std::collections::BTreeMap;

use super::*;
use crate::image::Image;
use crate::{Controller, Disk};

/// Stand-in for the SCRAM arithmetic (the `sasl` crate's): keys that show which salted
/// password and mechanism they came from.
fn derive(mechanism: i8, salted: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut stored = vec![mechanism as u8];
    stored.extend_from_slice(salted);
    let mut server = stored.clone();
    server.push(0xff);
    (stored, server)
}

fn upsert(name: &str, mechanism: i8, iterations: i32) -> Upsertion {
    Upsertion {
        name: name.into(),
        mechanism,
        iterations,
        salt: b"salt".to_vec(),
        salted_password: format!("{name}-{mechanism}").into_bytes(),
    }
}

fn codes(results: &[AlterResult]) -> BTreeMap<String, (i16, Option<String>)> {
    results
        .iter()
        .map(|r| (r.user.clone(), (r.error_code, r.error_message.clone())))
        .collect()
}

fn cfg() -> config::BrokerConfig {
    config::load(None, &[]).unwrap()
}

#[test]
fn records_apply_replace_remove_and_snapshot() {
    let record = |name: &str, mechanism, iterations| {
        MetadataRecord::UserScramCredential(ScramCredentialRecord {
            name: name.into(),
            mechanism,
            salt: vec![1],
            stored_key: vec![2],
            server_key: vec![3],
            iterations,
        })
    };
    let mut img = Image::from_records(&[
        record("alice", SCRAM_SHA_256, 4096),
        record("alice", SCRAM_SHA_512, 8192),
        record("bob", SCRAM_SHA_256, 4096),
    ]);
    assert_eq!(
        img.scram.get(SCRAM_SHA_512, "alice").unwrap().iterations,
        8192
    );
    // Replacing keeps one credential per user and mechanism.
    img.apply(&record("alice", SCRAM_SHA_256, 5000));
    assert_eq!(
        img.scram.get(SCRAM_SHA_256, "alice").unwrap().iterations,
        5000
    );
    let before = img.clone();
    img.apply(&MetadataRecord::RemoveUserScramCredential {
        name: "bob".into(),
        mechanism: SCRAM_SHA_256,
    });
    assert!(img.scram.get(SCRAM_SHA_256, "bob").is_none());
    // The previous version is untouched (the credentials are shared until changed).
    assert!(before.scram.get(SCRAM_SHA_256, "bob").is_some());
    // A removal of nothing changes nothing.
    let same = img.clone();
    img.apply(&MetadataRecord::RemoveUserScramCredential {
        name: "carol".into(),
        mechanism: SCRAM_SHA_512,
    });
    assert_eq!(img, same);
    // A snapshot rebuilds the same credentials.
    assert_eq!(Image::from_records(&img.to_records()), img);
    // Keys never reach a log line.
    let shown = format!("{:?}", img.scram);
    assert!(
        !shown.contains("stored_key") && !shown.contains("salt"),
        "{shown}"
    );
}

#[test]
fn alter_refuses_as_kafka() {
    let mut img = ScramImage::default();
    let (records, _) = img.alter(
        &[],
        &[
            upsert("alice", SCRAM_SHA_256, 4096),
            upsert("dup", SCRAM_SHA_256, 4096),
        ],
        derive,
    );
    for r in &records {
        if let MetadataRecord::UserScramCredential(c) = r {
            img.upsert(c);
        }
    }
    let (records, results) = img.alter(
        &[
            ("alice".into(), SCRAM_SHA_256),
            ("nobody".into(), SCRAM_SHA_256),
            ("".into(), SCRAM_SHA_256),
            ("dup".into(), SCRAM_SHA_256),
            ("dup".into(), SCRAM_SHA_512),
            ("alice2".into(), 7),
        ],
        &[
            upsert("few", SCRAM_SHA_256, MIN_ITERATIONS - 1),
            upsert("many", SCRAM_SHA_512, MAX_ITERATIONS + 1),
            upsert("low", SCRAM_SHA_512, MIN_ITERATIONS),
            upsert("high", SCRAM_SHA_256, MAX_ITERATIONS),
            upsert("mech", 0, 8192),
            upsert("", SCRAM_SHA_512, 8192),
            upsert("twice", SCRAM_SHA_256, 8192),
            upsert("twice", SCRAM_SHA_512, 8192),
            upsert("dup", SCRAM_SHA_256, 8192),
        ],
        derive,
    );
    let got = codes(&results);
    let want = |code: i16, message: &str| (code, Some(message.to_string()));
    assert_eq!(got["alice"], (0, None));
    assert_eq!(got["low"], (0, None));
    assert_eq!(got["high"], (0, None));
    assert_eq!(
        got["nobody"],
        want(
            91,
            "Attempt to delete a user credential that does not exist"
        )
    );
    assert_eq!(got[""], want(93, "Username must not be empty"));
    let duplicate = want(
        92,
        "A user credential cannot be altered twice in the same request",
    );
    assert_eq!(got["dup"], duplicate);
    assert_eq!(got["twice"], duplicate);
    assert_eq!(got["alice2"], want(33, "Unknown SCRAM mechanism"));
    assert_eq!(got["mech"], want(33, "Unknown SCRAM mechanism"));
    assert_eq!(got["few"], want(93, "Too few iterations"));
    assert_eq!(got["many"], want(93, "Too many iterations"));
    assert_eq!(results.len(), got.len(), "one result per distinct user");
    // Only the valid alterations are written: alice's deletion, low's and high's upserts.
    assert_eq!(records.len(), 3);
    assert_eq!(
        records[0],
        MetadataRecord::RemoveUserScramCredential {
            name: "alice".into(),
            mechanism: SCRAM_SHA_256
        }
    );
    let MetadataRecord::UserScramCredential(low) = &records[1] else {
        panic!("an upsert record: {:?}", records[1]);
    };
    let (stored, server) = derive(SCRAM_SHA_512, b"low-2");
    assert_eq!(
        (&low.name, low.iterations, &low.stored_key, &low.server_key),
        (&"low".to_string(), MIN_ITERATIONS, &stored, &server)
    );
}

#[test]
fn describe_as_kafka() {
    let mut img = ScramImage::default();
    let (records, _) = img.alter(
        &[],
        &[
            upsert("alice", SCRAM_SHA_256, 4096),
            upsert("bob", SCRAM_SHA_512, 8192),
        ],
        derive,
    );
    for r in &records {
        if let MetadataRecord::UserScramCredential(c) = r {
            img.upsert(c);
        }
    }
    let (more, _) = img.alter(&[], &[upsert("alice", SCRAM_SHA_512, 10000)], derive);
    let MetadataRecord::UserScramCredential(c) = &more[0] else {
        panic!("an upsert record");
    };
    img.upsert(c);
    let all = img.describe(None);
    assert_eq!(
        all.iter().map(|d| d.user.as_str()).collect::<Vec<_>>(),
        ["alice", "bob"]
    );
    assert_eq!(
        all[0].credentials,
        [(SCRAM_SHA_256, 4096), (SCRAM_SHA_512, 10000)]
    );
    assert_eq!(img.describe(Some(&[])), all, "an empty list is every user");
    let named = img.describe(Some(&["bob".into(), "zed".into(), "x".into(), "x".into()]));
    let by_user: BTreeMap<_, _> = named.iter().map(|d| (d.user.as_str(), d)).collect();
    assert_eq!(by_user.len(), 3);
    assert_eq!(by_user["bob"].credentials, [(SCRAM_SHA_512, 8192)]);
    assert_eq!(by_user["zed"].error_code, 91);
    assert_eq!(
        by_user["zed"].error_message.as_deref(),
        Some("Attempt to describe a user credential that does not exist: zed")
    );
    assert_eq!(by_user["x"].error_code, 92);
    assert_eq!(
        by_user["x"].error_message.as_deref(),
        Some("Cannot describe SCRAM credentials for the same user twice in a single request: x")
    );
    assert!(ScramImage::default().describe(None).is_empty());
}

/// Credentials live in the metadata log: a restart replays them (from the log, then from a
/// snapshot), and a deletion survives too.
#[test]
fn credentials_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Controller::open(&Disk::Real, dir.path(), cfg()).unwrap();
    let results = c
        .alter_scram_credentials(
            &[],
            &[
                upsert("alice", SCRAM_SHA_256, 8192),
                upsert("bob", SCRAM_SHA_512, 4096),
            ],
            derive,
        )
        .unwrap();
    assert!(results.iter().all(|r| r.error_code == 0), "{results:?}");
    let before = c.image().scram.clone();
    drop(c);

    let mut c = Controller::open(&Disk::Real, dir.path(), cfg()).unwrap();
    assert_eq!(c.image().scram, before);
    let alice = c.image().scram.get(SCRAM_SHA_256, "alice").unwrap().clone();
    assert_eq!(alice.salt, b"salt");
    assert_eq!(
        (alice.stored_key, alice.iterations),
        (derive(1, b"alice-1").0, 8192)
    );
    let results = c
        .alter_scram_credentials(&[("bob".into(), SCRAM_SHA_512)], &[], derive)
        .unwrap();
    assert_eq!(results[0].error_code, 0);
    c.snapshot().unwrap();
    drop(c);

    let c = Controller::open(&Disk::Real, dir.path(), cfg()).unwrap();
    assert!(c.image().scram.get(SCRAM_SHA_512, "bob").is_none());
    assert!(c.image().scram.get(SCRAM_SHA_256, "alice").is_some());
}

/// A staged controller (a cluster's metadata core) stages the records for the quorum and
/// validates deletions against its image.
#[test]
fn staged_alterations_wait_for_the_quorum() {
    let mut c = Controller::staged(cfg(), std::sync::Arc::new(Image::default()));
    c.alter_scram_credentials(&[], &[upsert("alice", SCRAM_SHA_256, 8192)], derive)
        .unwrap();
    let staged = c.take_staged();
    assert_eq!(staged.len(), 1);
    let committed = Image::from_records(&staged);
    c.adopt(std::sync::Arc::new(committed));
    let results = c
        .alter_scram_credentials(&[("alice".into(), SCRAM_SHA_256)], &[], derive)
        .unwrap();
    assert_eq!(results[0].error_code, 0);
    assert_eq!(c.take_staged().len(), 1);
}

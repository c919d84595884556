use super::*;
use wire::ErrorCode;

fn args(member_id: &str, client: &str) -> JoinArgs {
    JoinArgs {
        member_id: member_id.into(),
        group_instance_id: None,
        client_id: client.into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"m"))],
        require_known_member_id: true,
    }
}

/// A JoinGroup's answer, refused or not, as the fields the tests read.
struct Answer {
    error_code: i16,
    member_id: String,
    generation_id: i32,
    leader: String,
    members: Vec<JoinedMember>,
}

fn answer(reply: JoinReply) -> Answer {
    match reply {
        Ok(j) => Answer {
            error_code: 0,
            member_id: j.member_id,
            generation_id: j.generation_id,
            leader: j.leader,
            members: j.members,
        },
        Err(refused) => Answer {
            error_code: refused.error.error_code().code(),
            member_id: refused.member_id,
            generation_id: -1,
            leader: String::new(),
            members: Vec::new(),
        },
    }
}

fn now_response(step: Step<JoinReply>) -> Answer {
    match step {
        Step::Now(r) => answer(r),
        Step::Wait(_) => panic!("expected an immediate answer"),
    }
}

fn waited<T>(step: Step<T>) -> oneshot::Receiver<T> {
    match step {
        Step::Wait(r) => r,
        Step::Now(_) => panic!("expected to wait"),
    }
}

fn join_two(group: &mut ClassicGroup) -> (String, String) {
    let first = now_response(group.join(args("", "a"), 0, 100, 100));
    assert_eq!(first.error_code, ErrorCode::MemberIdRequired.code());
    assert!(first.member_id.starts_with("a-"));
    let a = first.member_id;
    let b = now_response(group.join(args("", "b"), 0, 100, 100)).member_id;
    let mut ra = waited(group.join(args(&a, "a"), 1, 100, 100));
    let mut rb = waited(group.join(args(&b, "b"), 2, 100, 100));
    assert!(
        ra.try_recv().unwrap().is_none(),
        "initial delay holds the join"
    );
    group.tick(200);
    let ja = answer(ra.try_recv().unwrap().unwrap());
    let jb = answer(rb.try_recv().unwrap().unwrap());
    assert_eq!(ja.generation_id, 1);
    assert_eq!(ja.leader, a);
    assert_eq!(ja.members.len(), 2, "leader sees every member");
    assert!(jb.members.is_empty());
    assert_eq!(group.state(), State::CompletingRebalance);
    (a, b)
}

#[test]
fn member_id_required_then_join_sync_stable() {
    let mut group = ClassicGroup::new();
    let (a, b) = join_two(&mut group);
    let mut sb = waited(group.sync(&b, None, 1, None, None, vec![], 300));
    let mut sa = waited(group.sync(
        &a,
        None,
        1,
        Some("consumer"),
        Some("range"),
        vec![
            (a.clone(), Bytes::from_static(b"A")),
            (b.clone(), Bytes::from_static(b"B")),
        ],
        300,
    ));
    assert!(group.leader_synced());
    group.assignments_persisted(1, true, 301);
    assert_eq!(group.state(), State::Stable);
    assert_eq!(
        &sa.try_recv().unwrap().unwrap().unwrap().assignment[..],
        b"A"
    );
    assert_eq!(
        &sb.try_recv().unwrap().unwrap().unwrap().assignment[..],
        b"B"
    );
    assert_eq!(group.heartbeat(&a, None, 1, 400), Ok(()));
    assert_eq!(
        group.heartbeat(&a, None, 0, 400),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        group.heartbeat("x", None, 1, 400),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn leave_and_expiry_rebalance() {
    let mut group = ClassicGroup::new();
    let (a, b) = join_two(&mut group);
    let _sa = group.sync(&a, None, 1, None, None, vec![], 300);
    group.assignments_persisted(1, true, 300);
    assert_eq!(group.leave(&b, None, 400), Ok(()));
    assert_eq!(group.state(), State::PreparingRebalance);
    assert_eq!(
        group.heartbeat(&a, None, 1, 400),
        Err(GroupError::RebalanceInProgress)
    );
    let mut ra = waited(group.join(args(&a, "a"), 500, 100, 100));
    let ja = answer(ra.try_recv().unwrap().unwrap());
    assert_eq!(ja.generation_id, 2);
    // a never syncs nor heartbeats: the sync deadline passes and then its session.
    group.tick(500 + 30_001);
    group.tick(500 + 30_001 + 40_000);
    assert_eq!(group.state(), State::Empty);
    assert_eq!(group.member_count(), 0);
}

#[test]
fn static_member_rejoins_without_rebalance() {
    let mut group = ClassicGroup::new();
    let mut s = args("", "s");
    s.group_instance_id = Some("i1".into());
    let mut r = waited(group.join(s.clone(), 0, 100, 0));
    let j = r.try_recv().unwrap().unwrap().unwrap();
    let _sync = group.sync(
        &j.member_id,
        Some("i1"),
        1,
        None,
        None,
        vec![(j.member_id.clone(), Bytes::from_static(b"X"))],
        1,
    );
    group.assignments_persisted(1, true, 1);
    assert_eq!(group.state(), State::Stable);
    // Restart: same instance id, empty member id.
    let again = now_response(group.join(s.clone(), 10, 100, 0));
    assert_eq!(again.error_code, 0);
    assert_eq!(again.generation_id, 1, "no rebalance");
    assert_ne!(again.member_id, j.member_id);
    assert_eq!(group.state(), State::Stable);
    // The old incarnation is fenced.
    assert_eq!(
        group.heartbeat(&j.member_id, Some("i1"), 1, 11),
        Err(GroupError::FencedInstanceId)
    );
    let sync = group.sync(&again.member_id, Some("i1"), 1, None, None, vec![], 12);
    match sync {
        Step::Now(r) => assert_eq!(&r.unwrap().assignment[..], b"X"),
        Step::Wait(_) => panic!("stable group answers at once"),
    }
}

#[test]
fn protocol_selection_and_inconsistency() {
    let mut group = ClassicGroup::new();
    let mut a = args("", "a");
    a.require_known_member_id = false;
    a.protocols = vec![
        ("range".into(), Bytes::new()),
        ("roundrobin".into(), Bytes::new()),
    ];
    let _ = group.join(a.clone(), 0, 100, 10);
    let mut b = a.clone();
    b.protocols = vec![("roundrobin".into(), Bytes::new())];
    let _ = group.join(b, 0, 100, 10);
    group.tick(20);
    assert_eq!(group.protocol_name.as_deref(), Some("roundrobin"));
    let mut c = a.clone();
    c.protocols = vec![("sticky".into(), Bytes::new())];
    let r = now_response(group.join(c, 2, 100, 0));
    assert_eq!(r.error_code, ErrorCode::InconsistentGroupProtocol.code());
}

#[test]
fn subscription_topics_are_read() {
    let mut buf = vec![0u8, 1, 0, 0, 0, 2];
    for t in ["ab", "c"] {
        buf.extend_from_slice(&(t.len() as i16).to_be_bytes());
        buf.extend_from_slice(t.as_bytes());
    }
    buf.extend_from_slice(&[0, 0, 0, 0]);
    assert_eq!(
        subscribed_topics(&buf),
        vec!["ab".to_string(), "c".to_string()]
    );
    assert!(subscribed_topics(&[0xff]).is_empty());
    assert!(subscribed_topics(&[0, 0, 0x7f, 0xff, 0xff, 0xff]).is_empty());
}

#[test]
fn offset_commit_delete_and_offset_delete_checks() {
    let mut group = ClassicGroup::new();
    assert_eq!(group.validate_offset_commit("", -1), Ok(()));
    assert_eq!(
        group.validate_offset_commit("x", 0),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(group.validate_delete(), Ok(()));
    assert_eq!(group.offsets_in_use(), Ok(Vec::new()));
    let (a, b) = join_two(&mut group);
    assert_eq!(
        group.validate_offset_commit(&a, 1),
        Err(GroupError::RebalanceInProgress)
    );
    let _sa = group.sync(&a, None, 1, None, None, vec![], 300);
    group.assignments_persisted(1, true, 300);
    assert_eq!(group.validate_offset_commit(&b, 1), Ok(()));
    assert_eq!(
        group.validate_offset_commit(&b, 0),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        group.validate_offset_commit("", -1),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(group.validate_delete(), Err(GroupError::NonEmptyGroup));
    // The members' metadata (b"m") names no topics.
    assert_eq!(group.offsets_in_use(), Ok(Vec::new()));
    group.protocol_type = Some("connect".into());
    assert_eq!(group.offsets_in_use(), Err(GroupError::NonEmptyGroup));
    group.mark_dead();
    assert_eq!(
        group.validate_offset_commit(&b, 1),
        Err(GroupError::CoordinatorNotAvailable)
    );
    assert_eq!(group.validate_delete(), Err(GroupError::GroupIdNotFound));
}

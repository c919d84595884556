use super::*;
use crate::records::GroupRecord;
use proptest::prelude::*;
use wire::ErrorCode;

const T1: TopicId = [1; 16];
const T2: TopicId = [2; 16];

fn topics(name: &str) -> Option<(TopicId, i32)> {
    match name {
        "t1" => Some((T1, 6)),
        "t2" => Some((T2, 3)),
        _ => None,
    }
}

fn ctx() -> RequestContext<'static> {
    RequestContext {
        api_version: 1,
        client_id: "client",
        client_host: "/127.0.0.1",
    }
}

/// A well-behaved consumer: it owns exactly what the last assignment gave it and reports it.
#[derive(Clone, Debug)]
struct Client {
    member_id: String,
    instance_id: Option<String>,
    epoch: i32,
    owned: Assignment,
    topics: Vec<String>,
}

impl Client {
    fn new(id: &str, topics: &[&str]) -> Client {
        Client {
            member_id: id.into(),
            instance_id: None,
            epoch: 0,
            owned: Assignment::new(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
        }
    }

    fn request(&self) -> HeartbeatRequest {
        let joining = self.epoch == 0;
        HeartbeatRequest {
            group_id: "g".into(),
            member_id: self.member_id.clone(),
            member_epoch: self.epoch,
            instance_id: self.instance_id.clone(),
            rebalance_timeout_ms: if joining { 30_000 } else { -1 },
            subscribed_topic_names: joining.then(|| self.topics.clone()),
            topic_partitions: Some(
                self.owned
                    .iter()
                    .map(|(t, p)| (*t, p.iter().copied().collect()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn apply(&mut self, response: &Answer) {
        assert_eq!(response.error_code, 0, "{:?}", response.error_message);
        self.member_id = response.member_id.clone().unwrap();
        self.epoch = response.member_epoch;
        if let Some(assignment) = &response.assignment {
            self.owned = assignment.clone();
        }
    }
}

/// A heartbeat's reply, refused or not, as the fields the tests read (a refusal's as the
/// response carries it: no member id, epoch 0, its code and message).
#[derive(Debug)]
struct Answer {
    error_code: i16,
    error_message: Option<String>,
    member_id: Option<String>,
    member_epoch: i32,
    heartbeat_interval_ms: i32,
    assignment: Option<Assignment>,
}

impl From<HeartbeatReply> for Answer {
    fn from(reply: HeartbeatReply) -> Answer {
        match reply {
            Ok(h) => Answer {
                error_code: 0,
                error_message: None,
                member_id: Some(h.member_id),
                member_epoch: h.member_epoch,
                heartbeat_interval_ms: h.heartbeat_interval_ms,
                assignment: h.assignment,
            },
            Err(refusal) => Answer {
                error_code: refusal.error.error_code().code(),
                error_message: Some(refusal.message),
                member_id: None,
                member_epoch: 0,
                heartbeat_interval_ms: 0,
                assignment: None,
            },
        }
    }
}

struct Harness {
    group: ConsumerGroup,
    log: Vec<GroupRecord>,
    config: ConsumerGroupConfig,
    now: i64,
}

impl Harness {
    fn new() -> Harness {
        Harness {
            group: ConsumerGroup::new("g"),
            log: Vec::new(),
            config: ConsumerGroupConfig::default(),
            now: 1_000,
        }
    }

    fn send(&mut self, request: &HeartbeatRequest) -> Answer {
        let (response, records) =
            self.group
                .heartbeat(request, &ctx(), self.now, &topics, &self.config);
        self.log.extend(records);
        self.check();
        response.into()
    }

    fn beat(&mut self, client: &mut Client) -> Answer {
        let response = self.send(&client.request());
        client.apply(&response);
        response
    }

    fn expire(&mut self) {
        let records = self.group.expire(self.now, &topics);
        self.log.extend(records);
        self.check();
    }

    /// Invariants after every call: no partition is owned by two members; replaying the log
    /// (through the record codec) rebuilds the same state.
    fn check(&self) {
        let mut seen = BTreeSet::new();
        for m in self.group.members().values() {
            for a in [&m.assigned, &m.pending_revocation] {
                for (t, parts) in a {
                    for p in parts {
                        assert!(seen.insert((*t, *p)), "{t:?}-{p} owned twice");
                    }
                }
            }
        }
        let mut replayed = ConsumerGroup::new("g");
        for record in &self.log {
            let (key, value) = record.encode().unwrap();
            let decoded = GroupRecord::decode(&key, value.as_deref())
                .unwrap()
                .unwrap();
            assert_eq!(&decoded, record);
            replayed.replay(&decoded);
        }
        assert_eq!(replayed, self.group);
    }
}

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

#[test]
fn first_member_gets_everything() {
    let mut h = Harness::new();
    let mut a = Client::new("a", &["t1", "t2"]);
    let r = h.beat(&mut a);
    assert_eq!(r.member_epoch, 1);
    assert_eq!(r.heartbeat_interval_ms, 5000);
    assert_eq!(count(&a.owned), 9);
    assert_eq!(h.group.state(), GroupState::Stable);
    assert_eq!(h.group.group_epoch(), 1);
    assert_eq!(h.group.assignment_epoch(), 1);
    // A plain heartbeat changes nothing and carries no assignment.
    let before = h.log.len();
    let r = h.beat(&mut a);
    assert!(r.assignment.is_none());
    assert_eq!(h.log.len(), before);
}

#[test]
fn v0_join_without_member_id_gets_one() {
    let mut h = Harness::new();
    let mut a = Client::new("", &["t1"]);
    h.beat(&mut a);
    assert_eq!(a.member_id.len(), 22);
    assert!(h.group.member(&a.member_id).is_some());
}

#[test]
fn partitions_move_only_after_revocation() {
    let mut h = Harness::new();
    let mut a = Client::new("a", &["t1"]);
    h.beat(&mut a);
    assert_eq!(count(&a.owned), 6);
    let mut b = Client::new("b", &["t1"]);
    let r = h.beat(&mut b);
    // b's target partitions are still a's: b waits with nothing.
    assert_eq!(r.member_epoch, 2);
    assert_eq!(count(&b.owned), 0);
    assert_eq!(
        h.group.member("b").unwrap().state,
        MemberState::UnreleasedPartitions
    );
    assert_eq!(h.group.state(), GroupState::Reconciling);
    // a is told to keep 3: it stays at epoch 1 until it stops reporting the other 3.
    let r = h.send(&a.request());
    assert_eq!(r.member_epoch, 1);
    assert_eq!(count(&hb_assignment(&r)), 3);
    assert_eq!(
        h.group.member("a").unwrap().state,
        MemberState::UnrevokedPartitions
    );
    // b still cannot have them while a reports them.
    h.beat(&mut b);
    assert_eq!(count(&b.owned), 0);
    a.apply(&r);
    let r = h.beat(&mut a);
    assert_eq!(r.member_epoch, 2);
    h.beat(&mut b);
    assert_eq!(count(&b.owned), 3);
    assert_eq!(h.group.state(), GroupState::Stable);
    let all: BTreeSet<i32> = a.owned[&T1].union(&b.owned[&T1]).copied().collect();
    assert_eq!(all.len(), 6);
}

fn hb_assignment(r: &Answer) -> Assignment {
    r.assignment.clone().unwrap()
}

fn settle(h: &mut Harness, clients: &mut [Client]) {
    for _ in 0..6 {
        for c in clients.iter_mut() {
            h.beat(c);
        }
    }
    assert_eq!(h.group.state(), GroupState::Stable);
}

#[test]
fn three_members_split_and_a_leaver_hands_over() {
    let mut h = Harness::new();
    let mut clients = vec![
        Client::new("a", &["t1"]),
        Client::new("b", &["t1"]),
        Client::new("c", &["t1"]),
    ];
    settle(&mut h, &mut clients);
    for c in &clients {
        assert_eq!(count(&c.owned), 2);
    }
    let mut leave = clients[2].request();
    leave.member_epoch = LEAVE_GROUP_MEMBER_EPOCH;
    let r = h.send(&leave);
    assert_eq!(r.error_code, 0);
    assert_eq!(r.member_epoch, -1);
    assert!(h.group.member("c").is_none());
    clients.pop();
    settle(&mut h, &mut clients);
    assert_eq!(count(&clients[0].owned) + count(&clients[1].owned), 6);
    assert_eq!(count(&clients[0].owned), 3);
}

#[test]
fn session_expiry_fences_and_rebalance_timeout_fences_a_stuck_revoker() {
    let mut h = Harness::new();
    let mut a = Client::new("a", &["t1"]);
    let mut b = Client::new("b", &["t1"]);
    h.beat(&mut a);
    h.beat(&mut b);
    // a never revokes: after its rebalance timeout (30 s) it is fenced.
    let r = h.send(&a.request());
    assert_eq!(
        h.group.member("a").unwrap().state,
        MemberState::UnrevokedPartitions
    );
    assert!(r.error_code == 0);
    h.now += 29_000;
    h.beat(&mut b);
    h.expire();
    assert!(h.group.member("a").is_some());
    h.now += 1_001;
    assert!(h.group.next_deadline().unwrap() <= h.now);
    h.expire();
    assert!(h.group.member("a").is_none());
    h.beat(&mut b);
    h.beat(&mut b);
    assert_eq!(count(&b.owned), 6);
    // b stops heartbeating: fenced after the session timeout.
    h.now += 44_999;
    h.expire();
    assert!(h.group.member("b").is_some());
    h.now += 1;
    h.expire();
    assert_eq!(h.group.state(), GroupState::Empty);
    // The fenced member's next heartbeat is refused; rejoining works.
    let r = h.send(&b.request());
    assert_eq!(r.error_code, ErrorCode::UnknownMemberId.code());
    b.epoch = 0;
    b.owned.clear();
    h.beat(&mut b);
    assert_eq!(count(&b.owned), 6);
}

#[test]
fn epochs_are_fenced_as_kafka_does() {
    let mut h = Harness::new();
    let mut a = Client::new("a", &["t1"]);
    h.beat(&mut a);
    let mut req = a.request();
    req.member_epoch = 5;
    assert_eq!(h.send(&req).error_code, ErrorCode::FencedMemberEpoch.code());
    // Epoch 2 after b joins; the previous epoch (1) with a subset of the assignment is fine
    // (the response with the new epoch was lost), anything older is fenced.
    let mut b = Client::new("b", &["t1"]);
    h.beat(&mut b);
    a.apply(&h.send(&a.request()));
    h.beat(&mut a);
    assert_eq!(a.epoch, 2);
    let mut stale = a.request();
    stale.member_epoch = 1;
    assert_eq!(h.send(&stale).error_code, 0);
    stale.topic_partitions = None;
    assert_eq!(
        h.send(&stale).error_code,
        ErrorCode::FencedMemberEpoch.code()
    );
    let mut unknown = a.request();
    unknown.member_id = "nobody".into();
    assert_eq!(
        h.send(&unknown).error_code,
        ErrorCode::UnknownMemberId.code()
    );
    // Rejoining with epoch 0 is always allowed (KAFKA-19233).
    let mut rejoin = a.clone();
    rejoin.epoch = 0;
    rejoin.owned.clear();
    assert_eq!(h.beat(&mut rejoin).error_code, 0);
}

#[test]
fn invalid_requests() {
    let mut h = Harness::new();
    let good = Client::new("a", &["t1"]).request();
    type Change = Box<dyn Fn(&mut HeartbeatRequest)>;
    let cases: Vec<(Change, ErrorCode, &str)> = vec![
        (Box::new(|r| r.group_id = " ".into()), ErrorCode::InvalidRequest, "GroupId can't be empty."),
        (Box::new(|r| r.instance_id = Some(String::new())), ErrorCode::InvalidRequest, "InstanceId can't be empty."),
        (Box::new(|r| r.rack_id = Some(String::new())), ErrorCode::InvalidRequest, "RackId can't be empty."),
        (Box::new(|r| r.rebalance_timeout_ms = -1), ErrorCode::InvalidRequest, "RebalanceTimeoutMs must be provided in first request."),
        (Box::new(|r| r.topic_partitions = None), ErrorCode::InvalidRequest, "TopicPartitions must be empty when (re-)joining."),
        (Box::new(|r| r.subscribed_topic_names = None), ErrorCode::InvalidRequest, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
        (Box::new(|r| { r.member_epoch = 3; r.member_id = String::new() }), ErrorCode::InvalidRequest, "MemberId can't be empty."),
        (Box::new(|r| r.member_epoch = -2), ErrorCode::InvalidRequest, "InstanceId can't be null."),
        (Box::new(|r| r.member_epoch = -3), ErrorCode::InvalidRequest, "MemberEpoch is invalid."),
        (Box::new(|r| r.server_assignor = Some("sticky".into())), ErrorCode::UnsupportedAssignor, "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
        (Box::new(|r| r.member_epoch = 1), ErrorCode::GroupIdNotFound, "Group g not found."),
    ];
    for (change, code, message) in cases {
        let mut req = good.clone();
        change(&mut req);
        let r = h.send(&req);
        assert_eq!(
            (r.error_code, r.error_message.as_deref()),
            (code.code(), Some(message))
        );
        assert!(h.log.is_empty());
    }
}

#[test]
fn group_max_size() {
    let mut h = Harness::new();
    h.config.max_size = 1;
    h.beat(&mut Client::new("a", &["t1"]));
    let r = h.send(&Client::new("b", &["t1"]).request());
    assert_eq!(r.error_code, ErrorCode::GroupMaxSizeReached.code());
}

#[test]
fn static_members_leave_and_rejoin_without_moving_partitions() {
    let mut h = Harness::new();
    let mut a = Client::new("a", &["t1"]);
    a.instance_id = Some("ia".into());
    let mut b = Client::new("b", &["t1"]);
    b.instance_id = Some("ib".into());
    let mut clients = vec![a, b];
    settle(&mut h, &mut clients);
    let epoch = h.group.group_epoch();
    let owned_a = clients[0].owned.clone();
    // Another process with the same instance id cannot join while a holds it.
    let mut intruder = Client::new("x", &["t1"]);
    intruder.instance_id = Some("ia".into());
    let r = h.send(&intruder.request());
    assert_eq!(r.error_code, ErrorCode::UnreleasedInstanceId.code());
    let mut wrong = clients[0].request();
    wrong.member_id = "x".into();
    assert_eq!(
        h.send(&wrong).error_code,
        ErrorCode::FencedInstanceId.code()
    );
    // a leaves for now (-2), then comes back as a new member id: same partitions, no new
    // group epoch.
    let mut leave = clients[0].request();
    leave.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
    let r = h.send(&leave);
    assert_eq!((r.error_code, r.member_epoch), (0, -2));
    let mut back = Client::new("a2", &["t1"]);
    back.instance_id = Some("ia".into());
    h.beat(&mut back);
    assert_eq!(back.owned, owned_a);
    assert_eq!(h.group.group_epoch(), epoch);
    assert!(h.group.member("a").is_none());
    assert_eq!(h.group.state(), GroupState::Stable);
    // Leaving with -1 fences the static member for good.
    let mut leave = back.request();
    leave.member_epoch = LEAVE_GROUP_MEMBER_EPOCH;
    assert_eq!(h.send(&leave).error_code, 0);
    assert!(h.group.member("a2").is_none());
    assert_eq!(h.group.group_epoch(), epoch + 1);
}

#[test]
fn subscription_change_and_new_topic_partitions() {
    let mut h = Harness::new();
    let mut a = Client::new("a", &["t1"]);
    h.beat(&mut a);
    let mut req = a.request();
    req.subscribed_topic_names = Some(vec!["t1".into(), "t2".into()]);
    let r = h.send(&req);
    a.apply(&r);
    assert_eq!(h.group.group_epoch(), 2);
    assert_eq!(count(&a.owned), 9);
    // Unsubscribing from t1: it is revoked before the member moves on.
    let mut req = a.request();
    req.subscribed_topic_names = Some(vec!["t2".into()]);
    let r = h.send(&req);
    assert_eq!(
        h.group.member("a").unwrap().state,
        MemberState::UnrevokedPartitions
    );
    a.apply(&r);
    h.beat(&mut a);
    assert_eq!(count(&a.owned), 3);
    assert_eq!(h.group.state(), GroupState::Stable);
}

#[test]
fn describe_and_offset_commit_validation() {
    let mut h = Harness::new();
    let mut a = Client::new("a", &["t1"]);
    let mut req = a.request();
    req.server_assignor = Some("range".into());
    a.apply(&h.send(&req));
    let d = h.group.describe(&h.config);
    assert_eq!(d.group_id, "g");
    assert_eq!(d.state.name(), "Stable");
    assert_eq!(d.assignor_name, "range");
    assert_eq!((d.group_epoch, d.assignment_epoch), (1, 1));
    assert_eq!(d.members.len(), 1);
    let m = &d.members[0];
    assert_eq!(m.member_id, "a");
    assert_eq!(m.client_id, "client");
    assert_eq!(m.assignment[0].topic_name, "t1");
    assert_eq!(m.target_assignment[0].partitions.len(), 6);

    let g = &h.group;
    assert_eq!(g.validate_offset_commit("a", 1, 9, false), Ok(()));
    assert_eq!(
        g.validate_offset_commit("a", 0, 9, false),
        Err(GroupError::StaleMemberEpoch)
    );
    assert_eq!(
        g.validate_offset_commit("z", 1, 9, false),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        g.validate_offset_commit("a", 1, 8, false),
        Err(GroupError::UnsupportedVersion)
    );
    assert_eq!(
        g.validate_offset_commit("", -1, 9, false),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(g.validate_offset_fetch(Some("a"), 1), Ok(()));
    assert_eq!(
        g.validate_offset_fetch(Some("a"), 2),
        Err(GroupError::StaleMemberEpoch)
    );
    assert_eq!(g.validate_offset_fetch(None, -1), Ok(()));
    assert_eq!(
        ConsumerGroup::new("e").validate_offset_commit("", -1, 9, false),
        Ok(())
    );
}

#[test]
fn delete_records_tombstone_an_empty_group() {
    let mut h = Harness::new();
    let mut a = Client::new("a", &["t1"]);
    h.beat(&mut a);
    assert_eq!(h.group.delete_records(), Err(GroupError::NonEmptyGroup));
    let mut leave = a.request();
    leave.member_epoch = -1;
    h.send(&leave);
    let records = h.group.delete_records().unwrap();
    for r in &records {
        h.group.replay(r);
    }
    assert!(h.group.is_deleted());
    assert!(!h.group.exists());
}

#[derive(Clone, Debug)]
enum Op {
    Beat(usize),
    /// Heartbeat without reporting owned partitions (a lighter request).
    BeatWithoutOwned(usize),
    Leave(usize),
    StaticLeave(usize),
    Resubscribe(usize, bool),
    Tick(i64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0usize..5).prop_map(Op::Beat),
        1 => (0usize..5).prop_map(Op::BeatWithoutOwned),
        1 => (0usize..5).prop_map(Op::Leave),
        1 => (0usize..5).prop_map(Op::StaticLeave),
        1 => ((0usize..5), any::<bool>()).prop_map(|(i, b)| Op::Resubscribe(i, b)),
        1 => (0i64..50_000).prop_map(Op::Tick),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random joins, heartbeats, leaves, subscription changes and expiries: no partition is
    /// ever owned twice, replay rebuilds the live state after every step (Harness::check),
    /// and once everyone heartbeats the group settles with every partition assigned.
    #[test]
    fn random_operations_keep_invariants(ops in proptest::collection::vec(op(), 1..60)) {
        let mut h = Harness::new();
        let mut clients: Vec<Client> = (0..5)
            .map(|i| {
                let mut c = Client::new(&format!("m{i}"), &["t1", "t2"]);
                if i % 2 == 1 {
                    c.instance_id = Some(format!("i{i}"));
                }
                c
            })
            .collect();
        for op in ops {
            match op {
                Op::Beat(i) | Op::BeatWithoutOwned(i) => {
                    let mut req = clients[i].request();
                    if matches!(op, Op::BeatWithoutOwned(_)) && clients[i].epoch > 0 {
                        req.topic_partitions = None;
                    }
                    let r = h.send(&req);
                    if r.error_code == 0 {
                        clients[i].apply(&r);
                    } else {
                        // Fenced or unknown: abandon everything and rejoin next time.
                        clients[i].epoch = 0;
                        clients[i].owned.clear();
                    }
                }
                Op::Leave(i) | Op::StaticLeave(i) => {
                    if clients[i].epoch > 0 {
                        let mut req = clients[i].request();
                        req.member_epoch = if matches!(op, Op::StaticLeave(_)) && clients[i].instance_id.is_some() {
                            LEAVE_GROUP_STATIC_MEMBER_EPOCH
                        } else {
                            LEAVE_GROUP_MEMBER_EPOCH
                        };
                        h.send(&req);
                        clients[i].epoch = 0;
                        clients[i].owned.clear();
                        // A static member comes back under a new member id.
                        clients[i].member_id = format!("{}x", clients[i].member_id);
                    }
                }
                Op::Resubscribe(i, both) => {
                    clients[i].topics = if both { vec!["t1".into(), "t2".into()] } else { vec!["t2".into()] };
                    if clients[i].epoch > 0 {
                        let mut req = clients[i].request();
                        req.subscribed_topic_names = Some(clients[i].topics.clone());
                        let r = h.send(&req);
                        if r.error_code == 0 { clients[i].apply(&r) } else { clients[i].epoch = 0; clients[i].owned.clear(); }
                    }
                }
                Op::Tick(ms) => {
                    h.now += ms;
                    h.expire();
                }
            }
        }
        // Everyone (re)joins and heartbeats until stable.
        for _ in 0..10 {
            for c in clients.iter_mut() {
                let r = h.send(&c.request());
                if r.error_code == 0 { c.apply(&r) } else { c.epoch = 0; c.owned.clear(); }
            }
        }
        prop_assert_eq!(h.group.state(), GroupState::Stable);
        let mut owned = BTreeSet::new();
        for c in &clients {
            for (t, parts) in &c.owned {
                for p in parts {
                    prop_assert!(owned.insert((*t, *p)), "{:?}-{} consumed twice", t, p);
                }
            }
        }
        let wanted_t1 = clients.iter().any(|c| c.topics.contains(&"t1".to_string()));
        prop_assert_eq!(owned.len(), 3 + if wanted_t1 { 6 } else { 0 });
    }
}

//! KIP-848's broker-side assignors, `uniform` and `range`: pure functions from the group's
//! subscriptions, the topics and the previous target assignment to the next target assignment.
//!
//! `uniform` (Kafka's `UniformAssignor`) is balanced and sticky: a member keeps the partitions
//! of its previous target that it still subscribes to as long as balance allows, so a
//! rebalance moves only what it must. `range` (Kafka's server-side `RangeAssignor`) gives each
//! subscriber of a topic a contiguous range of it, members ordered by instance id then member
//! id, so co-partitioned topics land on the same members.
//!
//! Topics are named by id; a subscription naming a topic that does not exist is ignored (it
//! is assigned when the topic appears and the group's metadata changes).

use std::collections::{BTreeMap, BTreeSet};

pub use wire::TopicId;

/// Partitions by topic: a member's assignment.
pub type Assignment = BTreeMap<TopicId, BTreeSet<i32>>;

pub use config::ASSIGNOR_NAMES;

pub use config::Assignor;

/// Runs a broker-side assignor (the enum is configuration and lives in `config`).
pub trait Assign {
    /// The next target assignment: one entry per member, empty assignments included.
    fn assign(self, members: &[MemberSpec], topics: &[TopicSpec]) -> BTreeMap<String, Assignment>;
}

impl Assign for Assignor {
    fn assign(self, members: &[MemberSpec], topics: &[TopicSpec]) -> BTreeMap<String, Assignment> {
        let group = ResolvedGroup::new(members, topics);
        match self {
            Assignor::Uniform => uniform(&group),
            Assignor::Range => range(&group),
        }
    }
}

/// A topic the group may be subscribed to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicSpec {
    pub id: TopicId,
    pub name: String,
    pub partitions: i32,
}

/// A member as the assignor sees it.
#[derive(Clone, Debug, Default)]
pub struct MemberSpec {
    pub member_id: String,
    pub instance_id: Option<String>,
    /// Subscribed topic names (a regex subscription is resolved to names by the caller).
    pub topics: BTreeSet<String>,
    /// The member's previous target assignment (what stickiness keeps).
    pub current: Assignment,
}

struct ResolvedGroup<'a> {
    /// Members in the assignor's order: static members by instance id, then the others by
    /// member id (Kafka's RangeAssignor order; deterministic for uniform too).
    members: Vec<&'a MemberSpec>,
    /// Per member (same index), the subscribed topics that exist.
    subscriptions: Vec<BTreeSet<TopicId>>,
    partitions: BTreeMap<TopicId, i32>,
}

impl<'a> ResolvedGroup<'a> {
    fn new(members: &'a [MemberSpec], topics: &[TopicSpec]) -> Self {
        let by_name: BTreeMap<&str, &TopicSpec> =
            topics.iter().map(|t| (t.name.as_str(), t)).collect();
        let mut ordered: Vec<&MemberSpec> = members.iter().collect();
        ordered.sort_by(|a, b| match (&a.instance_id, &b.instance_id) {
            (Some(x), Some(y)) => x.cmp(y).then_with(|| a.member_id.cmp(&b.member_id)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.member_id.cmp(&b.member_id),
        });
        let subscriptions = ordered
            .iter()
            .map(|m| {
                m.topics
                    .iter()
                    .filter_map(|name| by_name.get(name.as_str()))
                    .filter(|t| t.partitions > 0)
                    .map(|t| t.id)
                    .collect()
            })
            .collect();
        let partitions = topics.iter().map(|t| (t.id, t.partitions.max(0))).collect();
        ResolvedGroup {
            members: ordered,
            subscriptions,
            partitions,
        }
    }

    fn empty_result(&self) -> BTreeMap<String, Assignment> {
        self.members
            .iter()
            .map(|m| (m.member_id.clone(), Assignment::new()))
            .collect()
    }
}

/// Kafka's server-side range assignor: per topic, its subscribers in order, each a contiguous
/// range of `partitions / subscribers` partitions, the first `partitions % subscribers`
/// subscribers one more.
fn range(group: &ResolvedGroup) -> BTreeMap<String, Assignment> {
    let mut result = group.empty_result();
    for (&topic, &count) in &group.partitions {
        let subscribers: Vec<usize> = (0..group.members.len())
            .filter(|&i| group.subscriptions[i].contains(&topic))
            .collect();
        if subscribers.is_empty() {
            continue;
        }
        let n = subscribers.len() as i32;
        let (quota, mut extra) = (count / n, count % n);
        let mut next = 0;
        for i in subscribers {
            let mut take = quota;
            if extra > 0 {
                take += 1;
                extra -= 1;
            }
            let end = (next + take).min(count);
            if next < end {
                let assignment = result
                    .get_mut(&group.members[i].member_id)
                    .expect("every member has an entry");
                assignment.insert(topic, (next..end).collect());
            }
            next = end;
        }
    }
    result
}

/// Working state of the uniform assignor: partitions per member (by index) and their owner.
struct Uniform<'g, 'a> {
    group: &'g ResolvedGroup<'a>,
    owned: Vec<BTreeSet<(TopicId, i32)>>,
}

impl Uniform<'_, '_> {
    fn count(&self, member: usize) -> usize {
        self.owned[member].len()
    }
}

/// Kafka's uniform assignor. Homogeneous groups (everyone subscribes to the same topics) get
/// quotas of `total / members`, the members that already hold the most getting the `total %
/// members` extra slots, so a member gives up only what exceeds its quota. Heterogeneous
/// groups: sticky start, unassigned partitions to the least loaded subscriber, then moves
/// from a member to a subscriber of the partition's topic holding two or more fewer, until
/// none is possible (each move lowers the sum of squared counts, so this ends).
fn uniform(group: &ResolvedGroup) -> BTreeMap<String, Assignment> {
    let members = group.members.len();
    let mut result = group.empty_result();
    if members == 0 {
        return result;
    }
    let mut state = Uniform {
        group,
        owned: vec![BTreeSet::new(); members],
    };
    // Sticky start: keep what is still valid, each partition at most once.
    let mut taken: BTreeSet<(TopicId, i32)> = BTreeSet::new();
    for i in 0..members {
        for (topic, parts) in &group.members[i].current {
            if !group.subscriptions[i].contains(topic) {
                continue;
            }
            let count = group.partitions.get(topic).copied().unwrap_or(0);
            for &p in parts {
                if p >= 0 && p < count && taken.insert((*topic, p)) {
                    state.owned[i].insert((*topic, p));
                }
            }
        }
    }
    let subscribed: BTreeSet<TopicId> = group.subscriptions.iter().flatten().copied().collect();
    let mut unassigned: Vec<(TopicId, i32)> = subscribed
        .iter()
        .flat_map(|t| (0..group.partitions[t]).map(move |p| (*t, p)))
        .filter(|tp| !taken.contains(tp))
        .collect();

    let homogeneous = group
        .subscriptions
        .iter()
        .all(|s| *s == group.subscriptions[0]);
    if homogeneous {
        uniform_homogeneous(&mut state, &mut unassigned);
    } else {
        uniform_heterogeneous(&mut state, unassigned);
    }
    for (i, owned) in state.owned.into_iter().enumerate() {
        let assignment = result
            .get_mut(&group.members[i].member_id)
            .expect("every member has an entry");
        for (topic, p) in owned {
            assignment.entry(topic).or_default().insert(p);
        }
    }
    result
}

fn uniform_homogeneous(state: &mut Uniform, unassigned: &mut Vec<(TopicId, i32)>) {
    let members = state.owned.len();
    let total: usize = state.owned.iter().map(BTreeSet::len).sum::<usize>() + unassigned.len();
    let (quota, extra) = (total / members, total % members);
    // The extra slots go to the members holding the most, so fewer partitions move.
    let mut order: Vec<usize> = (0..members).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(state.count(i)));
    let mut quotas = vec![quota; members];
    for &i in order.iter().take(extra) {
        quotas[i] += 1;
    }
    for (owned, &quota) in state.owned.iter_mut().zip(&quotas) {
        while owned.len() > quota {
            let last = owned.pop_last().expect("non-empty");
            unassigned.push(last);
        }
    }
    unassigned.sort_unstable();
    let mut next = unassigned.iter();
    for (owned, &quota) in state.owned.iter_mut().zip(&quotas) {
        while owned.len() < quota {
            match next.next() {
                Some(tp) => {
                    owned.insert(*tp);
                }
                None => break,
            }
        }
    }
}

fn uniform_heterogeneous(state: &mut Uniform, mut unassigned: Vec<(TopicId, i32)>) {
    let group = state.group;
    let members = state.owned.len();
    let subscribers: BTreeMap<TopicId, Vec<usize>> = group
        .partitions
        .keys()
        .map(|t| {
            let subs = (0..members)
                .filter(|&i| group.subscriptions[i].contains(t))
                .collect();
            (*t, subs)
        })
        .collect();
    // Topics with the fewest subscribers first: they have the least freedom.
    unassigned.sort_by_key(|(t, p)| (subscribers[t].len(), *t, *p));
    for (topic, p) in unassigned {
        let target = *subscribers[&topic]
            .iter()
            .min_by_key(|&&i| (state.count(i), i))
            .expect("an unassigned partition belongs to a subscribed topic");
        state.owned[target].insert((topic, p));
    }
    loop {
        let mut donors: Vec<usize> = (0..members).collect();
        donors.sort_by_key(|&i| (std::cmp::Reverse(state.count(i)), i));
        let mut moved = None;
        'search: for &from in &donors {
            for &(topic, p) in state.owned[from].iter().rev() {
                let to = *subscribers[&topic]
                    .iter()
                    .min_by_key(|&&i| (state.count(i), i))
                    .expect("an owner subscribes to its partition's topic");
                if state.count(to) + 1 < state.count(from) {
                    moved = Some((from, to, (topic, p)));
                    break 'search;
                }
            }
        }
        match moved {
            Some((from, to, tp)) => {
                state.owned[from].remove(&tp);
                state.owned[to].insert(tp);
            }
            None => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn topic(n: u8, partitions: i32) -> TopicSpec {
        TopicSpec {
            id: [n; 16],
            name: format!("t{n}"),
            partitions,
        }
    }

    fn member(id: &str, topics: &[u8]) -> MemberSpec {
        MemberSpec {
            member_id: id.into(),
            topics: topics.iter().map(|n| format!("t{n}")).collect(),
            ..Default::default()
        }
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    /// Every partition of a subscribed topic is assigned exactly once, to a subscriber.
    fn check_complete(
        members: &[MemberSpec],
        topics: &[TopicSpec],
        result: &BTreeMap<String, Assignment>,
    ) {
        let mut seen = BTreeSet::new();
        for m in members {
            for (t, parts) in &result[&m.member_id] {
                let spec = topics.iter().find(|s| s.id == *t).expect("known topic");
                assert!(
                    m.topics.contains(&spec.name),
                    "{} not subscribed",
                    m.member_id
                );
                for p in parts {
                    assert!(*p >= 0 && *p < spec.partitions);
                    assert!(seen.insert((*t, *p)), "assigned twice");
                }
            }
        }
        for t in topics {
            if members.iter().any(|m| m.topics.contains(&t.name)) {
                for p in 0..t.partitions {
                    assert!(seen.contains(&(t.id, p)), "{}-{p} unassigned", t.name);
                }
            }
        }
    }

    #[test]
    fn range_is_co_partitioned() {
        let topics = [topic(1, 3), topic(2, 3)];
        let members = [member("a", &[1, 2]), member("b", &[1, 2])];
        let result = Assignor::Range.assign(&members, &topics);
        let expect_a: Assignment = [([1; 16], [0, 1].into()), ([2; 16], [0, 1].into())].into();
        assert_eq!(result["a"], expect_a);
        let expect_b: Assignment = [([1; 16], [2].into()), ([2; 16], [2].into())].into();
        assert_eq!(result["b"], expect_b);
    }

    #[test]
    fn range_orders_static_members_first() {
        let topics = [topic(1, 2)];
        let mut z = member("z", &[1]);
        z.instance_id = Some("i".into());
        let members = [member("a", &[1]), z];
        let result = Assignor::Range.assign(&members, &topics);
        assert_eq!(result["z"][&[1; 16]], [0].into());
        assert_eq!(result["a"][&[1; 16]], [1].into());
    }

    #[test]
    fn uniform_moves_only_what_a_new_member_needs() {
        let topics = [topic(1, 6)];
        let mut members = vec![member("a", &[1]), member("b", &[1])];
        let first = Assignor::Uniform.assign(&members, &topics);
        assert_eq!(count(&first["a"]), 3);
        for m in &mut members {
            m.current = first[&m.member_id].clone();
        }
        members.push(member("c", &[1]));
        let second = Assignor::Uniform.assign(&members, &topics);
        for id in ["a", "b"] {
            assert_eq!(count(&second[id]), 2);
            let kept = second[id][&[1; 16]].is_subset(&first[id][&[1; 16]]);
            assert!(kept, "{id} lost a partition it could keep");
        }
        check_complete(&members, &topics, &second);
    }

    #[test]
    fn unknown_topics_and_no_members() {
        let topics = [topic(1, 2)];
        let members = [member("a", &[9])];
        let result = Assignor::Uniform.assign(&members, &topics);
        assert!(result["a"].is_empty());
        assert!(Assignor::Uniform.assign(&[], &topics).is_empty());
        assert!(Assignor::Range.assign(&members, &topics)["a"].is_empty());
    }

    /// Members (up to 8) subscribing to subsets of up to 4 topics, with previous assignments
    /// drawn at random (possibly overlapping or stale, as after a crash or a metadata change).
    fn group_strategy() -> impl Strategy<Value = (Vec<MemberSpec>, Vec<TopicSpec>)> {
        let topics = proptest::collection::vec(0i32..12, 1..5);
        let members = proptest::collection::vec(
            (
                proptest::collection::btree_set(1u8..5, 0..4),
                any::<bool>(),
                any::<u64>(),
            ),
            0..9,
        );
        (topics, members).prop_map(|(partitions, members)| {
            let topics: Vec<TopicSpec> = partitions
                .iter()
                .enumerate()
                .map(|(i, &p)| topic(i as u8 + 1, p))
                .collect();
            let members = members
                .into_iter()
                .enumerate()
                .map(|(i, (subs, is_static, seed))| {
                    let mut current = Assignment::new();
                    for t in &topics {
                        for p in 0..t.partitions + 1 {
                            if (seed >> ((p as u64 + t.id[0] as u64 * 13) % 64)) & 1 == 1 {
                                current.entry(t.id).or_default().insert(p);
                            }
                        }
                    }
                    MemberSpec {
                        member_id: format!("m{i}"),
                        instance_id: is_static.then(|| format!("i{}", 8 - i)),
                        topics: subs.iter().map(|n| format!("t{n}")).collect(),
                        current,
                    }
                })
                .collect();
            (members, topics)
        })
    }

    proptest! {
        #[test]
        fn uniform_is_complete_and_balanced((members, topics) in group_strategy()) {
            let result = Assignor::Uniform.assign(&members, &topics);
            prop_assert_eq!(result.len(), members.len());
            check_complete(&members, &topics, &result);
            let homogeneous = members.iter().all(|m| m.topics == members[0].topics);
            if homogeneous {
                let counts: Vec<usize> = result.values().map(count).collect();
                let (lo, hi) = (counts.iter().min(), counts.iter().max());
                if let (Some(lo), Some(hi)) = (lo, hi) {
                    prop_assert!(hi - lo <= 1, "unbalanced: {:?}", counts);
                }
            } else {
                // No partition could move to a subscriber holding two or more fewer.
                for a in &members {
                    for t in result[&a.member_id].keys() {
                        let name = &topics.iter().find(|s| s.id == *t).unwrap().name;
                        for b in members.iter().filter(|b| b.topics.contains(name)) {
                            let (ca, cb) = (count(&result[&a.member_id]), count(&result[&b.member_id]));
                            prop_assert!(cb + 1 >= ca, "{} ({ca}) could give to {} ({cb})", a.member_id, b.member_id);
                        }
                    }
                }
            }
        }

        #[test]
        fn uniform_is_sticky_when_nothing_changes((members, topics) in group_strategy()) {
            let mut members = members;
            let first = Assignor::Uniform.assign(&members, &topics);
            for m in &mut members {
                m.current = first[&m.member_id].clone();
            }
            let second = Assignor::Uniform.assign(&members, &topics);
            prop_assert_eq!(first, second);
        }

        #[test]
        fn uniform_keeps_what_balance_allows((members, topics) in group_strategy()) {
            // After a member leaves a balanced homogeneous group, every remaining member keeps
            // everything it had.
            let mut members: Vec<MemberSpec> = members
                .into_iter()
                .map(|mut m| { m.topics = ["t1".to_string()].into(); m })
                .collect();
            let first = Assignor::Uniform.assign(&members, &topics);
            for m in &mut members {
                m.current = first[&m.member_id].clone();
            }
            if members.len() > 1 {
                members.remove(0);
                let second = Assignor::Uniform.assign(&members, &topics);
                check_complete(&members, &topics, &second);
                for m in &members {
                    for (t, parts) in &first[&m.member_id] {
                        let now = second[&m.member_id].get(t).cloned().unwrap_or_default();
                        prop_assert!(parts.is_subset(&now), "{} lost partitions", m.member_id);
                    }
                }
            }
        }

        #[test]
        fn range_is_complete_and_balanced_per_topic((members, topics) in group_strategy()) {
            let result = Assignor::Range.assign(&members, &topics);
            check_complete(&members, &topics, &result);
            for t in &topics {
                let counts: Vec<usize> = members
                    .iter()
                    .filter(|m| m.topics.contains(&t.name))
                    .map(|m| result[&m.member_id].get(&t.id).map_or(0, BTreeSet::len))
                    .collect();
                if let (Some(lo), Some(hi)) = (counts.iter().min(), counts.iter().max()) {
                    prop_assert!(hi - lo <= 1);
                }
            }
        }
    }
}

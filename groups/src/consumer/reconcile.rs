//! Member reconciliation: the next assignment state of one member towards its target, so
//! that a partition is handed over only once its previous owner has let it go.

use std::collections::BTreeSet;

use super::*;

/// Kafka's `CurrentAssignmentBuilder`: the member's next assignment state towards `target`.
pub(super) fn reconcile(
    member: &Member,
    target_epoch: i32,
    target: &Assignment,
    owned: Option<&[(TopicId, Vec<i32>)]>,
    partition_epoch: impl Fn(TopicId, i32) -> i32,
) -> Result<Member, Refusal> {
    // Whether the member still reports any of `revoking` (None: it did not say, so it might).
    let owns_any = |revoking: &Assignment| match owned {
        None => true,
        Some(owned) => owned.iter().any(|(topic, parts)| {
            revoking
                .get(topic)
                .is_some_and(|r| parts.iter().any(|p| r.contains(p)))
        }),
    };
    let next = |epoch: i32| -> Member {
        let mut assigned = Assignment::new();
        let mut revoking = Assignment::new();
        let mut incoming = Assignment::new();
        let mut unreleased = false;
        let topics: BTreeSet<&TopicId> = target.keys().chain(member.assigned.keys()).collect();
        for topic in topics {
            let empty = BTreeSet::new();
            let wanted = target.get(topic).unwrap_or(&empty);
            let current = member.assigned.get(topic).unwrap_or(&empty);
            let keep: BTreeSet<i32> = current.intersection(wanted).copied().collect();
            let give_up: BTreeSet<i32> = current.difference(&keep).copied().collect();
            let mut take: BTreeSet<i32> = wanted.difference(&keep).copied().collect();
            let before = take.len();
            take.retain(|&p| partition_epoch(*topic, p) == -1);
            unreleased |= take.len() != before;
            if !keep.is_empty() {
                assigned.insert(*topic, keep);
            }
            if !give_up.is_empty() {
                revoking.insert(*topic, give_up);
            }
            if !take.is_empty() {
                incoming.insert(*topic, take);
            }
        }
        let mut m = member.clone();
        if !revoking.is_empty() && owns_any(&revoking) {
            m.state = MemberState::UnrevokedPartitions;
            m.previous_member_epoch = m.member_epoch;
            m.member_epoch = epoch;
            m.assigned = assigned;
            m.pending_revocation = revoking;
            return m;
        }
        for (topic, parts) in incoming {
            assigned.entry(topic).or_default().extend(parts);
        }
        m.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        m.previous_member_epoch = m.member_epoch;
        m.member_epoch = target_epoch;
        m.assigned = assigned;
        m.pending_revocation = Assignment::new();
        m
    };
    match member.state {
        MemberState::Stable if member.member_epoch != target_epoch => Ok(next(member.member_epoch)),
        MemberState::Stable => Ok(member.clone()),
        MemberState::UnrevokedPartitions => {
            if owns_any(&member.pending_revocation) {
                Ok(member.clone())
            } else {
                Ok(next(member.member_epoch + 1))
            }
        }
        MemberState::UnreleasedPartitions => Ok(next(member.member_epoch)),
        MemberState::Unknown => {
            if owned.is_none_or(|o| !o.is_empty()) {
                return Err(Refusal::new(
                    GroupError::FencedMemberEpoch,
                    "The consumer group member is in a unknown state. The member must abandon \
                     all its partitions and rejoin."
                        .to_string(),
                ));
            }
            Ok(next(target_epoch))
        }
    }
}

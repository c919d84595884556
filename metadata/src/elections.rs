//! Elections an operator or the controller's timers ask for, as Kafka's
//! `ReplicationControlManager` and `PartitionChangeBuilder` make them (KIP-460's
//! ElectLeaders, KIP-704's unclean recovery left out, see below): the records only; the
//! controller commits them through the quorum.
//!
//! - Preferred (ElectLeaders type 0, and `auto.leader.rebalance.enable`): the partition's
//!   first replica leads if it is in the ISR and usable (registered, unfenced, not shutting
//!   down); else the current leader stays if usable; else the first usable ISR member in
//!   replica order. A partition its preferred replica already leads gets
//!   ELECTION_NOT_NEEDED; one whose leader would not change, PREFERRED_LEADER_NOT_AVAILABLE.
//! - Unclean (ElectLeaders type 1, and leaderless partitions of topics with
//!   `unclean.leader.election.enable`): a partition that has a leader gets
//!   ELECTION_NOT_NEEDED; otherwise the first usable ISR member in replica order leads (a
//!   clean election), else the first usable replica, with itself as the whole ISR: what the
//!   old ISR held beyond its log is lost, as in Kafka. No usable replica:
//!   ELIGIBLE_LEADERS_NOT_AVAILABLE.
//! - Kafka marks an unclean leader RECOVERING (KIP-704) until it has rebuilt transaction
//!   state; with no transactions here there is nothing to rebuild, so partitions stay
//!   RECOVERED and the ISR may grow at once.
//! - ElectLeaders with no partitions (null) means every partition, and its answer leaves out
//!   those that needed no election (Kafka's `electAll`).

use std::collections::BTreeSet;

use wire::generated::elect_leaders_request::ElectLeadersRequest;
use wire::generated::elect_leaders_response::{
    ElectLeadersResponse, PartitionResult, ReplicaElectionResult,
};
use wire::ErrorCode;

use super::image::{Image, PartitionImage, TopicImage};
use super::leadership::{change, usable, NO_LEADER};
use super::records::MetadataRecord;

/// ElectLeaders' `ElectionType`.
pub const PREFERRED: i8 = 0;
pub const UNCLEAN: i8 = 1;

/// Partitions moved back to their preferred replica per rebalance pass at most (Kafka's
/// `maxElectionsPerImbalance`, 1,000); the next pass takes the rest.
pub const MAX_ELECTIONS_PER_REBALANCE: usize = 1000;
/// Partitions one ElectLeaders request may name at most; past it the request gets
/// INVALID_REQUEST (Kafka bounds records per user operation at 10,000).
pub const MAX_ELECTIONS_PER_REQUEST: usize = 10_000;

/// The topic key and the broker default it falls back to.
const UNCLEAN_KEY: &str = "unclean.leader.election.enable";

/// Whether `topic` allows unclean elections: its own config, else the cluster's dynamic
/// default, else this controller's static `unclean.leader.election.enable`.
pub fn unclean_allowed(image: &Image, topic: &TopicImage, static_default: bool) -> bool {
    topic
        .configs
        .get(UNCLEAN_KEY)
        .map(String::as_str)
        .or_else(|| image.broker_config("", UNCLEAN_KEY))
        .map_or(static_default, |v| v.eq_ignore_ascii_case("true"))
}

/// The leader a preferred election gives `p`, if it changes.
fn preferred_leader(image: &Image, p: &PartitionImage) -> Option<i32> {
    let valid = |r: i32| p.isr.contains(&r) && usable(image, r);
    let preferred = *p.replicas.first()?;
    let leader = if valid(preferred) {
        preferred
    } else if valid(p.leader) {
        p.leader
    } else {
        p.replicas.iter().copied().find(|&r| valid(r))?
    };
    (leader != p.leader).then_some(leader)
}

/// The leader and ISR an unclean election gives leaderless `p`, if any replica can lead.
fn unclean_leader(image: &Image, p: &PartitionImage) -> Option<(i32, Option<Vec<i32>>)> {
    let live = |r: &i32| usable(image, *r);
    if let Some(&clean) = p.replicas.iter().find(|r| p.isr.contains(r) && live(r)) {
        return Some((clean, None));
    }
    let unclean = *p.replicas.iter().find(|r| live(r))?;
    Some((unclean, Some(vec![unclean])))
}

/// One partition's election of `kind`: its record, or Kafka's error code.
fn elect_one(
    image: &Image,
    topic: &TopicImage,
    p: &PartitionImage,
    kind: i8,
) -> Result<MetadataRecord, ErrorCode> {
    if kind == UNCLEAN {
        if p.leader != NO_LEADER {
            return Err(ErrorCode::ElectionNotNeeded);
        }
        let (leader, isr) =
            unclean_leader(image, p).ok_or(ErrorCode::EligibleLeadersNotAvailable)?;
        return Ok(change(topic.topic_id, p, leader, isr));
    }
    if p.replicas.first() == Some(&p.leader) {
        return Err(ErrorCode::ElectionNotNeeded);
    }
    let leader = preferred_leader(image, p).ok_or(ErrorCode::PreferredLeaderNotAvailable)?;
    Ok(change(topic.topic_id, p, leader, None))
}

/// ElectLeaders (API 43) on the active controller: the records to commit and the answer to
/// send once they are (see the module docs).
pub fn elect_leaders(
    image: &Image,
    request: &ElectLeadersRequest,
) -> (Vec<MetadataRecord>, ElectLeadersResponse) {
    let mut response = ElectLeadersResponse::default();
    let mut records = Vec::new();
    if request.election_type != PREFERRED && request.election_type != UNCLEAN {
        response.error_code = ErrorCode::InvalidRequest.code();
        return (records, response);
    }
    let result = |partition_id: i32, outcome: Result<(), ErrorCode>| PartitionResult {
        partition_id,
        error_code: outcome.err().map_or(0, ErrorCode::code),
        error_message: None,
        ..Default::default()
    };
    let Some(named) = &request.topic_partitions else {
        for topic in image.topics_by_name.values() {
            let mut results = Vec::new();
            for p in &topic.partitions {
                let outcome = elect_one(image, topic, p, request.election_type);
                if outcome == Err(ErrorCode::ElectionNotNeeded) {
                    continue;
                }
                results.push(result(p.partition_id, outcome.map(|r| records.push(r))));
            }
            if !results.is_empty() {
                response
                    .replica_election_results
                    .push(ReplicaElectionResult {
                        topic: topic.name.clone(),
                        partition_result: results,
                        ..Default::default()
                    });
            }
        }
        return (records, response);
    };
    if named.iter().map(|t| t.partitions.len()).sum::<usize>() > MAX_ELECTIONS_PER_REQUEST {
        response.error_code = ErrorCode::InvalidRequest.code();
        return (records, response);
    }
    for named_topic in named {
        let topic = image.topic(&named_topic.topic);
        // A partition named twice is elected once (the admin client sends a set).
        let mut seen = BTreeSet::new();
        let partition_result = named_topic
            .partitions
            .iter()
            .filter(|&&id| seen.insert(id))
            .map(|&id| {
                let outcome = match topic.and_then(|t| t.partition(id).map(|p| (t, p))) {
                    None => Err(ErrorCode::UnknownTopicOrPartition),
                    Some((t, p)) => elect_one(image, t, p, request.election_type),
                };
                result(id, outcome.map(|r| records.push(r)))
            })
            .collect();
        response
            .replica_election_results
            .push(ReplicaElectionResult {
                topic: named_topic.topic.clone(),
                partition_result,
                ..Default::default()
            });
    }
    (records, response)
}

/// `auto.leader.rebalance.enable`'s pass: preferred elections for partitions not led by
/// their preferred replica where it can lead, at most `MAX_ELECTIONS_PER_REBALANCE`.
pub fn rebalance(image: &Image) -> Vec<MetadataRecord> {
    image
        .topics_by_name
        .values()
        .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
        .filter(|(_, p)| p.replicas.first().is_some_and(|&r| r != p.leader))
        .filter_map(|(t, p)| {
            let leader = preferred_leader(image, p)?;
            // Only a move to the preferred replica balances; any other leader change is
            // left to fencing and the operator.
            (p.replicas.first() == Some(&leader)).then(|| change(t.topic_id, p, leader, None))
        })
        .take(MAX_ELECTIONS_PER_REBALANCE)
        .collect()
}

/// Unclean elections for every leaderless partition of a topic that allows them and has a
/// usable replica.
pub fn elect_unclean_where_allowed(image: &Image, static_default: bool) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for topic in image.topics_by_name.values() {
        if !topic.partitions.iter().any(|p| p.leader == NO_LEADER)
            || !unclean_allowed(image, topic, static_default)
        {
            continue;
        }
        for p in topic.partitions.iter().filter(|p| p.leader == NO_LEADER) {
            if let Some((leader, isr)) = unclean_leader(image, p) {
                out.push(change(topic.topic_id, p, leader, isr));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leadership::take_out;
    use crate::leadership::tests::{cluster, registration};
    use wire::generated::elect_leaders_request::TopicPartitions;

    fn request(kind: i8, partitions: Option<Vec<i32>>) -> ElectLeadersRequest {
        ElectLeadersRequest {
            election_type: kind,
            topic_partitions: partitions.map(|partitions| {
                vec![TopicPartitions {
                    topic: "t".into(),
                    partitions,
                    ..Default::default()
                }]
            }),
            timeout_ms: 1000,
            ..Default::default()
        }
    }

    fn codes(response: &ElectLeadersResponse) -> Vec<(String, i32, i16)> {
        response
            .replica_election_results
            .iter()
            .flat_map(|t| {
                t.partition_result
                    .iter()
                    .map(|p| (t.topic.clone(), p.partition_id, p.error_code))
            })
            .collect()
    }

    fn leader(img: &Image, p: usize) -> i32 {
        img.topic("t").unwrap().partitions[p].leader
    }

    fn set_fenced(img: &mut Image, id: i32, fenced: bool) {
        img.apply(&MetadataRecord::BrokerRegistrationChange {
            broker_id: id,
            broker_epoch: i64::from(id),
            fenced: Some(fenced),
            in_controlled_shutdown: None,
        });
    }

    /// Broker `id` fenced and taken out, as the controller's lifecycle does it.
    fn fence(img: &mut Image, id: i32) {
        set_fenced(img, id, true);
        img.apply_all(&take_out(img, id));
    }

    fn unfence(img: &mut Image, id: i32) {
        set_fenced(img, id, false);
    }

    #[test]
    fn preferred_election_moves_leadership_back_once_the_preferred_replica_is_in_sync() {
        let mut img = cluster();
        fence(&mut img, 1);
        assert_eq!(leader(&img, 0), 2);
        // Broker 1 is back (unfenced) but not in p0's ISR yet: not available.
        unfence(&mut img, 1);
        let (records, response) = elect_leaders(&img, &request(PREFERRED, Some(vec![0, 1, 9])));
        assert!(records.is_empty());
        let not_available = ErrorCode::PreferredLeaderNotAvailable.code();
        let not_needed = ErrorCode::ElectionNotNeeded.code();
        let unknown = ErrorCode::UnknownTopicOrPartition.code();
        assert_eq!(
            codes(&response),
            vec![
                ("t".into(), 0, not_available),
                ("t".into(), 1, not_needed),
                ("t".into(), 9, unknown)
            ]
        );
        // The leader re-admits 1 to the ISR: now it can lead again.
        img.apply(&MetadataRecord::PartitionChange {
            topic_id: [5u8; 16],
            partition_id: 0,
            leader: crate::records::NO_LEADER_CHANGE,
            isr: Some(vec![2, 3, 1]),
            replicas: None,
        });
        // p0, and p2 (only 1 can lead it; it has none since 1 was fenced).
        assert_eq!(rebalance(&img).len(), 2);
        let (records, response) = elect_leaders(&img, &request(PREFERRED, Some(vec![0])));
        assert_eq!(codes(&response), vec![("t".into(), 0, 0)]);
        let epoch = img.topic("t").unwrap().partitions[0].leader_epoch;
        img.apply_all(&records);
        assert_eq!(leader(&img, 0), 1);
        assert_eq!(
            img.topic("t").unwrap().partitions[0].leader_epoch,
            epoch + 1
        );
        assert_eq!(rebalance(&img).len(), 1);
    }

    #[test]
    fn electing_every_partition_answers_only_those_that_needed_it() {
        let mut img = cluster();
        let (records, response) = elect_leaders(&img, &request(PREFERRED, None));
        assert!(records.is_empty());
        assert!(response.replica_election_results.is_empty());
        fence(&mut img, 2);
        unfence(&mut img, 2);
        // p1 (preferred 2) lost 2 from its ISR: the only partition answered, unavailable.
        let (records, response) = elect_leaders(&img, &request(PREFERRED, None));
        assert!(records.is_empty());
        assert_eq!(
            codes(&response),
            vec![("t".into(), 1, ErrorCode::PreferredLeaderNotAvailable.code())]
        );
    }

    #[test]
    fn unclean_election_takes_a_live_out_of_sync_replica_only_when_allowed() {
        let mut img = cluster();
        // p0's ISR shrinks to [1]; then 1 goes: p0 has no leader and ISR [1].
        img.apply(&MetadataRecord::PartitionChange {
            topic_id: [5u8; 16],
            partition_id: 0,
            leader: crate::records::NO_LEADER_CHANGE,
            isr: Some(vec![1]),
            replicas: None,
        });
        fence(&mut img, 1);
        assert_eq!(leader(&img, 0), NO_LEADER);
        // Not allowed by default.
        assert!(elect_unclean_where_allowed(&img, false).is_empty());
        // The broker's static default allows it: 2 leads alone.
        let records = elect_unclean_where_allowed(&img, true);
        let mut allowed = img.clone();
        allowed.apply_all(&records);
        let p0 = &allowed.topic("t").unwrap().partitions[0];
        assert_eq!((p0.leader, p0.isr.clone()), (2, vec![2]));
        // A topic override wins over the default.
        img.apply(&MetadataRecord::Config {
            resource_type: crate::records::RESOURCE_TOPIC,
            resource_name: "t".into(),
            name: UNCLEAN_KEY.into(),
            value: Some("false".into()),
        });
        assert!(elect_unclean_where_allowed(&img, true).is_empty());
        // ElectLeaders UNCLEAN needs no config; a partition with a leader needs no election.
        let (records, response) = elect_leaders(&img, &request(UNCLEAN, Some(vec![0, 1])));
        assert_eq!(
            codes(&response),
            vec![
                ("t".into(), 0, 0),
                ("t".into(), 1, ErrorCode::ElectionNotNeeded.code())
            ]
        );
        img.apply_all(&records);
        assert_eq!(leader(&img, 0), 2);
    }

    #[test]
    fn no_live_replica_means_no_unclean_leader() {
        let mut img = cluster();
        // p2's only replica is 1.
        fence(&mut img, 1);
        let (records, response) = elect_leaders(&img, &request(UNCLEAN, Some(vec![2])));
        assert!(records.is_empty());
        assert_eq!(
            codes(&response),
            vec![("t".into(), 2, ErrorCode::EligibleLeadersNotAvailable.code())]
        );
        img.apply(&registration(1, false));
        assert_eq!(elect_unclean_where_allowed(&img, true).len(), 1);
    }

    #[test]
    fn an_unknown_election_type_is_an_invalid_request() {
        let (records, response) = elect_leaders(&cluster(), &request(7, Some(vec![0])));
        assert!(records.is_empty());
        assert_eq!(response.error_code, ErrorCode::InvalidRequest.code());
    }
}

//! AlterPartition (API 56, KIP-497; v3's `NewIsrWithEpochs`, KIP-903) on the active
//! controller: a partition leader asks to shrink or expand its ISR. Validated as Kafka's
//! `ReplicationControlManager.alterPartition` does, time-free, against an image; returns the
//! records to commit and the response to send once they are.
//!
//! Top level: a requester whose broker epoch is not its registered one (or that is not
//! registered) gets STALE_BROKER_EPOCH and no topics. Per partition, in Kafka's order:
//!
//! - unknown topic: UNKNOWN_TOPIC_ID (v2+, by id), UNKNOWN_TOPIC_OR_PARTITION (v0-1, by
//!   name); unknown partition: UNKNOWN_TOPIC_OR_PARTITION;
//! - a leader epoch or partition epoch newer than the image's: NOT_CONTROLLER (this
//!   controller is likely behind, so the leader looks for another);
//! - an older leader epoch: FENCED_LEADER_EPOCH;
//! - a requester that is not the partition's leader: INVALID_REQUEST;
//! - an older partition epoch: INVALID_UPDATE_VERSION;
//! - an ISR naming a non-replica, a negative id or a broker twice, or not holding the leader
//!   (so never empty): INVALID_REQUEST; a leader recovery state other than RECOVERED (0):
//!   INVALID_REQUEST (no unclean election here, so no partition is ever RECOVERING);
//! - an ISR member that is unregistered, fenced, in controlled shutdown, or (v3) named with
//!   a broker epoch other than its registration's (-1 skips that check):
//!   INELIGIBLE_REPLICA (v2+), OPERATION_NOT_ATTEMPTED (v0-1).
//!
//! A valid change is one PartitionChangeRecord: leader unchanged (`NO_LEADER_CHANGE`), the
//! new ISR, replicas unchanged; applying it bumps the partition epoch. An ISR equal to the
//! current one commits nothing and is answered with the current state (Kafka's builder
//! produces no record for it). A partition named twice in one request is checked against
//! the state the first change left, so the second needs the new partition epoch.

use wire::generated::alter_partition_request::{AlterPartitionRequest, PartitionData};
use wire::generated::alter_partition_response::{self as response, AlterPartitionResponse};
use wire::ErrorCode;

use super::image::{Image, PartitionImage};
use super::records::{MetadataRecord, NO_LEADER_CHANGE};

/// LeaderRecoveryState RECOVERED, the only state partitions here are ever in.
pub const RECOVERED: i8 = 0;

/// Broker epoch "not checked" in v3's `NewIsrWithEpochs` (and what v0-2 imply).
pub const ANY_BROKER_EPOCH: i64 = -1;

/// The records an AlterPartition wants committed and the response to send once they are.
#[derive(Debug, PartialEq)]
pub struct Altered {
    pub records: Vec<MetadataRecord>,
    pub response: AlterPartitionResponse,
}

/// Validates `request` (of `version`) against `image` (see the module docs).
pub fn alter_partition(image: &Image, version: i16, request: &AlterPartitionRequest) -> Altered {
    let registered = image
        .brokers
        .get(&request.broker_id)
        .is_some_and(|b| b.broker_epoch == request.broker_epoch);
    if !registered {
        return Altered {
            records: Vec::new(),
            response: AlterPartitionResponse {
                error_code: ErrorCode::StaleBrokerEpoch.code(),
                ..Default::default()
            },
        };
    }
    // Changes so far, so that a partition named twice is checked against the first change.
    let mut next = image.clone();
    let mut records = Vec::new();
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let found = if version >= 2 {
            next.topic_by_id(&topic.topic_id.0)
                .filter(|_| topic.topic_id.0 != [0; 16])
        } else {
            next.topic(&topic.topic_name)
        }
        .map(|t| t.topic_id);
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let Some(topic_id) = found else {
                let code = if version >= 2 {
                    ErrorCode::UnknownTopicId
                } else {
                    ErrorCode::UnknownTopicOrPartition
                };
                partitions.push(refused(p.partition_index, code.code()));
                continue;
            };
            let current = next
                .topic_by_id(&topic_id)
                .and_then(|t| t.partition(p.partition_index))
                .cloned();
            let current = match validate(&next, request.broker_id, version, current, p) {
                Ok((current, isr)) if isr == current.isr => current,
                Ok((current, isr)) => {
                    let change = MetadataRecord::PartitionChange {
                        topic_id,
                        partition_id: current.partition_id,
                        leader: NO_LEADER_CHANGE,
                        isr: Some(isr),
                        replicas: None,
                    };
                    next.apply(&change);
                    records.push(change);
                    next.topic_by_id(&topic_id)
                        .and_then(|t| t.partition(p.partition_index))
                        .cloned()
                        .unwrap_or(current)
                }
                Err(code) => {
                    partitions.push(refused(p.partition_index, code));
                    continue;
                }
            };
            partitions.push(response::PartitionData {
                partition_index: current.partition_id,
                error_code: 0,
                leader_id: current.leader,
                leader_epoch: current.leader_epoch,
                isr: current.isr,
                leader_recovery_state: RECOVERED,
                partition_epoch: current.partition_epoch,
                ..Default::default()
            });
        }
        topics.push(response::TopicData {
            topic_name: topic.topic_name.clone(),
            topic_id: topic.topic_id,
            partitions,
            ..Default::default()
        });
    }
    Altered {
        records,
        response: AlterPartitionResponse {
            topics,
            ..Default::default()
        },
    }
}

/// The whole request refused with `code` (NOT_CONTROLLER: not active, or the proposal lost).
pub fn refuse_all(code: i16) -> AlterPartitionResponse {
    AlterPartitionResponse {
        error_code: code,
        ..Default::default()
    }
}

fn refused(partition_index: i32, code: i16) -> response::PartitionData {
    response::PartitionData {
        partition_index,
        error_code: code,
        ..Default::default()
    }
}

/// Kafka's `validateAlterPartitionData`: the current partition and the new ISR, or the code.
fn validate(
    image: &Image,
    broker_id: i32,
    version: i16,
    current: Option<PartitionImage>,
    p: &PartitionData,
) -> Result<(PartitionImage, Vec<i32>), i16> {
    let Some(current) = current else {
        return Err(ErrorCode::UnknownTopicOrPartition.code());
    };
    if p.leader_epoch > current.leader_epoch || p.partition_epoch > current.partition_epoch {
        return Err(ErrorCode::NotController.code());
    }
    if p.leader_epoch < current.leader_epoch {
        return Err(ErrorCode::FencedLeaderEpoch.code());
    }
    if broker_id != current.leader {
        return Err(ErrorCode::InvalidRequest.code());
    }
    if p.partition_epoch < current.partition_epoch {
        return Err(ErrorCode::InvalidUpdateVersion.code());
    }
    let members: Vec<(i32, i64)> = if version >= 3 {
        p.new_isr_with_epochs
            .iter()
            .map(|b| (b.broker_id, b.broker_epoch))
            .collect()
    } else {
        p.new_isr.iter().map(|&b| (b, ANY_BROKER_EPOCH)).collect()
    };
    let isr: Vec<i32> = members.iter().map(|&(b, _)| b).collect();
    if !valid_isr(&current.replicas, &isr) || !isr.contains(&current.leader) {
        return Err(ErrorCode::InvalidRequest.code());
    }
    if p.leader_recovery_state != RECOVERED {
        return Err(ErrorCode::InvalidRequest.code());
    }
    let eligible = |&(b, epoch): &(i32, i64)| {
        image.brokers.get(&b).is_some_and(|r| {
            !r.fenced
                && !r.in_controlled_shutdown
                && (epoch == ANY_BROKER_EPOCH || epoch == r.broker_epoch)
        })
    };
    if !members.iter().all(eligible) {
        let code = if version >= 2 {
            ErrorCode::IneligibleReplica
        } else {
            ErrorCode::OperationNotAttempted
        };
        return Err(code.code());
    }
    Ok((current, isr))
}

/// Kafka's `Replicas.validateIsr`: every member a replica, none negative, none twice.
fn valid_isr(replicas: &[i32], isr: &[i32]) -> bool {
    isr.iter()
        .enumerate()
        .all(|(i, b)| *b >= 0 && replicas.contains(b) && !isr[..i].contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leadership::tests::cluster;
    use wire::generated::alter_partition_request::{BrokerState, TopicData};
    use wire::primitives::Uuid;

    const T: [u8; 16] = [5; 16];

    /// Broker 1 asks for p0 of "t" (replicas [1,2,3], led by 1, epochs 0/0).
    fn ask(partition: i32, isr: &[i32]) -> AlterPartitionRequest {
        AlterPartitionRequest {
            broker_id: 1,
            broker_epoch: 1,
            topics: vec![TopicData {
                topic_name: "t".into(),
                topic_id: Uuid(T),
                partitions: vec![PartitionData {
                    partition_index: partition,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    new_isr: isr.to_vec(),
                    new_isr_with_epochs: isr
                        .iter()
                        .map(|&b| BrokerState {
                            broker_id: b,
                            broker_epoch: i64::from(b),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn with(
        mut r: AlterPartitionRequest,
        f: impl FnOnce(&mut PartitionData),
    ) -> AlterPartitionRequest {
        f(&mut r.topics[0].partitions[0]);
        r
    }

    /// The one partition's answer and the records, at `version`.
    fn run(
        img: &Image,
        version: i16,
        r: &AlterPartitionRequest,
    ) -> (response::PartitionData, usize) {
        let out = alter_partition(img, version, r);
        assert_eq!(out.response.error_code, 0);
        (
            out.response.topics[0].partitions[0].clone(),
            out.records.len(),
        )
    }

    fn code(img: &Image, version: i16, r: &AlterPartitionRequest) -> i16 {
        let (p, records) = run(img, version, r);
        assert_eq!(records, 0);
        p.error_code
    }

    #[test]
    fn a_shrink_then_an_expansion_commit_partition_changes() {
        let mut img = cluster();
        let out = alter_partition(&img, 3, &ask(0, &[1, 2]));
        assert_eq!(
            out.records,
            vec![MetadataRecord::PartitionChange {
                topic_id: T,
                partition_id: 0,
                leader: NO_LEADER_CHANGE,
                isr: Some(vec![1, 2]),
                replicas: None,
            }]
        );
        let p = &out.response.topics[0].partitions[0];
        assert_eq!(
            (p.error_code, p.leader_id, p.leader_epoch, p.partition_epoch),
            (0, 1, 0, 1)
        );
        assert_eq!(p.isr, [1, 2]);
        assert_eq!(out.response.topics[0].topic_id, Uuid(T));
        img.apply_all(&out.records);
        assert_eq!(img.topic("t").unwrap().partitions[0].isr, [1, 2]);
        // Back to three at the new partition epoch, v2 (plain ids).
        let back = with(ask(0, &[1, 2, 3]), |p| p.partition_epoch = 1);
        let out = alter_partition(&img, 2, &back);
        assert_eq!(out.records.len(), 1);
        img.apply_all(&out.records);
        let p = &img.topic("t").unwrap().partitions[0];
        assert_eq!(
            (p.isr.clone(), p.partition_epoch, p.leader_epoch),
            (vec![1, 2, 3], 2, 0)
        );
    }

    #[test]
    fn the_same_isr_is_a_no_op_answered_with_the_current_state() {
        let img = cluster();
        let (p, records) = run(&img, 3, &ask(0, &[1, 2, 3]));
        assert_eq!(records, 0);
        assert_eq!(
            (p.error_code, p.partition_epoch, p.isr),
            (0, 0, vec![1, 2, 3])
        );
    }

    #[test]
    fn a_stale_or_unknown_requester_is_refused_as_a_whole() {
        let img = cluster();
        for (broker, epoch) in [(1, 7), (9, 9)] {
            let r = AlterPartitionRequest {
                broker_id: broker,
                broker_epoch: epoch,
                ..ask(0, &[1, 2])
            };
            let out = alter_partition(&img, 3, &r);
            assert_eq!(out.response.error_code, 77);
            assert!(out.response.topics.is_empty() && out.records.is_empty());
        }
    }

    #[test]
    fn unknown_topics_and_partitions() {
        let img = cluster();
        let mut r = ask(0, &[1, 2]);
        r.topics[0].topic_id = Uuid([9; 16]);
        assert_eq!(code(&img, 2, &r), ErrorCode::UnknownTopicId.code());
        r.topics[0].topic_id = Uuid([0; 16]);
        assert_eq!(code(&img, 3, &r), ErrorCode::UnknownTopicId.code());
        // v0-1 name topics.
        assert_eq!(run(&img, 1, &r), (run(&img, 3, &ask(0, &[1, 2])).0, 1));
        r.topics[0].topic_name = "nope".into();
        assert_eq!(code(&img, 0, &r), ErrorCode::UnknownTopicOrPartition.code());
        assert_eq!(
            code(&img, 3, &ask(7, &[1])),
            ErrorCode::UnknownTopicOrPartition.code()
        );
    }

    #[test]
    fn epochs_are_checked_in_kafkas_order() {
        let img = cluster();
        let newer_leader = with(ask(0, &[1, 2]), |p| p.leader_epoch = 1);
        assert_eq!(
            code(&img, 3, &newer_leader),
            ErrorCode::NotController.code()
        );
        let newer_partition = with(ask(0, &[1, 2]), |p| p.partition_epoch = 1);
        assert_eq!(
            code(&img, 3, &newer_partition),
            ErrorCode::NotController.code()
        );
        // Move p0's leader to 2 (leader epoch 1, partition epoch 1): broker 1 is fenced.
        let mut moved = img.clone();
        moved.apply_all(&crate::leadership::take_out(&img, 1));
        let old = ask(0, &[1, 2]);
        assert_eq!(code(&moved, 3, &old), ErrorCode::FencedLeaderEpoch.code());
        // At the current epochs but not the leader.
        let current = with(ask(0, &[2, 3]), |p| {
            p.leader_epoch = 1;
            p.partition_epoch = 1;
        });
        assert_eq!(code(&moved, 3, &current), ErrorCode::InvalidRequest.code());
        // The leader with an old partition epoch: p0's ISR changed since.
        let mut img2 = img.clone();
        img2.apply(&MetadataRecord::PartitionChange {
            topic_id: T,
            partition_id: 0,
            leader: NO_LEADER_CHANGE,
            isr: Some(vec![1, 3]),
            replicas: None,
        });
        assert_eq!(
            code(&img2, 3, &ask(0, &[1, 2])),
            ErrorCode::InvalidUpdateVersion.code()
        );
    }

    #[test]
    fn the_new_isr_must_be_replicas_holding_the_leader() {
        let img = cluster();
        for isr in [&[][..], &[2, 3], &[1, 4], &[1, 1], &[1, -1]] {
            assert_eq!(
                code(&img, 3, &ask(0, isr)),
                ErrorCode::InvalidRequest.code(),
                "{isr:?}"
            );
        }
        let recovering = with(ask(0, &[1]), |p| p.leader_recovery_state = 1);
        assert_eq!(code(&img, 3, &recovering), ErrorCode::InvalidRequest.code());
    }

    #[test]
    fn ineligible_replicas_are_refused() {
        let mut img = cluster();
        // Partition p0 at ISR [1] first, then ask to add each kind of ineligible broker.
        img.apply(&MetadataRecord::PartitionChange {
            topic_id: T,
            partition_id: 0,
            leader: NO_LEADER_CHANGE,
            isr: Some(vec![1]),
            replicas: None,
        });
        let add = |isr: &[i32]| with(ask(0, isr), |p| p.partition_epoch = 1);
        let fenced = {
            let mut i = img.clone();
            i.apply(&MetadataRecord::BrokerRegistrationChange {
                broker_id: 2,
                broker_epoch: 2,
                fenced: Some(true),
                in_controlled_shutdown: None,
            });
            i
        };
        let shutting_down = {
            let mut i = img.clone();
            i.apply(&MetadataRecord::BrokerRegistrationChange {
                broker_id: 2,
                broker_epoch: 2,
                fenced: None,
                in_controlled_shutdown: Some(true),
            });
            i
        };
        let unregistered = {
            let mut i = img.clone();
            i.apply(&MetadataRecord::UnregisterBroker {
                broker_id: 2,
                broker_epoch: 2,
            });
            i
        };
        for i in [&fenced, &shutting_down, &unregistered] {
            assert_eq!(
                code(i, 3, &add(&[1, 2])),
                ErrorCode::IneligibleReplica.code()
            );
            assert_eq!(
                code(i, 2, &add(&[1, 2])),
                ErrorCode::IneligibleReplica.code()
            );
            assert_eq!(
                code(i, 1, &add(&[1, 2])),
                ErrorCode::OperationNotAttempted.code()
            );
        }
        // v3: a stale broker epoch of a member; -1 skips the check; v2 has no epochs.
        let stale = with(add(&[1, 2]), |p| p.new_isr_with_epochs[1].broker_epoch = 99);
        assert_eq!(code(&img, 3, &stale), ErrorCode::IneligibleReplica.code());
        assert_eq!(run(&img, 2, &stale).1, 1);
        let any = with(add(&[1, 2]), |p| p.new_isr_with_epochs[1].broker_epoch = -1);
        assert_eq!(run(&img, 3, &any).1, 1);
    }

    #[test]
    fn a_partition_named_twice_needs_the_new_epoch_the_second_time() {
        let img = cluster();
        let mut r = ask(0, &[1, 2]);
        let again = r.topics[0].partitions[0].clone();
        r.topics[0].partitions.push(PartitionData {
            new_isr_with_epochs: again.new_isr_with_epochs[..1].to_vec(),
            ..again
        });
        let out = alter_partition(&img, 3, &r);
        let codes: Vec<i16> = out.response.topics[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(codes, [0, ErrorCode::InvalidUpdateVersion.code()]);
        assert_eq!(out.records.len(), 1);
    }
}

//! What a broker's fencing, shutdown or return does to the partitions it replicates, as
//! Kafka's `ReplicationControlManager` decides it (KIP-631, KIP-841): the records only; the
//! controller commits them through the quorum and the image applies them.
//!
//! - Taken out (fenced, or in controlled shutdown): every partition whose ISR holds the broker
//!   loses it from the ISR; where it led, the first replica (in replica order, as Kafka's
//!   `PartitionChangeBuilder` elects) that is in the remaining ISR and usable (registered,
//!   unfenced, not shutting down) leads instead. The last member of an ISR is never removed:
//!   the partition is left with no leader (-1) and that one-member ISR, so that only a replica
//!   that holds every acknowledged record can lead it again (no unclean election).
//! - Returned (unfenced): every partition left with no leader whose ISR holds the broker gets
//!   a leader: the first replica in the ISR that is the returning broker or usable (in
//!   practice the returning broker: a leaderless partition's ISR holds no usable broker, or
//!   it would have been elected when that one returned).
//!
//! ISRs also shrink and grow through AlterPartition (see `alter_partition`), so an ISR's
//! order need not be the replicas' order; elections follow the replicas' order either way.
//!
//! Each change is one PartitionChangeRecord; applying it bumps the partition epoch, and the
//! leader epoch when the leader changes (see `image`).

use super::image::{Image, PartitionImage};
use super::records::{MetadataRecord, NO_LEADER_CHANGE};

/// Kafka's "no leader".
pub const NO_LEADER: i32 = -1;

/// Whether `broker` may lead or join an ISR now.
pub(crate) fn usable(image: &Image, broker: i32) -> bool {
    image
        .brokers
        .get(&broker)
        .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
}

/// Records that take `broker` out of every ISR and leadership (see the module docs).
pub fn take_out(image: &Image, broker: i32) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for topic in image.topics_by_name.values() {
        for p in &topic.partitions {
            if !p.isr.contains(&broker) {
                continue;
            }
            if p.isr.len() == 1 {
                // The last in-sync replica: it stays the ISR; only its leadership goes.
                if p.leader == broker {
                    out.push(change(topic.topic_id, p, NO_LEADER, None));
                }
                continue;
            }
            let isr: Vec<i32> = p.isr.iter().copied().filter(|&r| r != broker).collect();
            let leader = if p.leader == broker {
                elect(p, &isr, |r| usable(image, r))
            } else {
                NO_LEADER_CHANGE
            };
            out.push(change(topic.topic_id, p, leader, Some(isr)));
        }
    }
    out
}

/// Records that make `broker` leader of the partitions left leaderless whose ISR holds it.
pub fn elect_returned(image: &Image, broker: i32) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for topic in image.topics_by_name.values() {
        for p in &topic.partitions {
            if p.leader == NO_LEADER && p.isr.contains(&broker) {
                let leader = elect(p, &p.isr, |r| r == broker || usable(image, r));
                out.push(change(topic.topic_id, p, leader, None));
            }
        }
    }
    out
}

/// Kafka's election without unclean leaders: the first replica in `isr` that `acceptable`
/// takes, else no leader.
fn elect(p: &PartitionImage, isr: &[i32], acceptable: impl Fn(i32) -> bool) -> i32 {
    p.replicas
        .iter()
        .copied()
        .find(|&r| isr.contains(&r) && acceptable(r))
        .unwrap_or(NO_LEADER)
}

/// How many partitions `broker` leads.
pub fn leader_count(image: &Image, broker: i32) -> usize {
    image
        .topics_by_name
        .values()
        .flat_map(|t| t.partitions.iter())
        .filter(|p| p.leader == broker)
        .count()
}

pub(crate) fn change(
    topic_id: wire::TopicId,
    p: &PartitionImage,
    leader: i32,
    isr: Option<Vec<i32>>,
) -> MetadataRecord {
    MetadataRecord::PartitionChange {
        topic_id,
        partition_id: p.partition_id,
        leader,
        isr,
        replicas: None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::records::BrokerRegistration;

    pub(crate) fn registration(id: i32, fenced: bool) -> MetadataRecord {
        MetadataRecord::RegisterBroker(BrokerRegistration {
            broker_id: id,
            incarnation_id: [id as u8; 16],
            broker_epoch: i64::from(id),
            endpoints: vec![],
            rack: None,
            fenced,
            in_controlled_shutdown: false,
        })
    }

    /// Brokers 1-3 unfenced; topic "t": p0 replicas/ISR [1,2,3] led by 1, p1 [2,3,1] led by
    /// 2, p2 replicas [1] ISR [1] led by 1.
    pub(crate) fn cluster() -> Image {
        let id = [5u8; 16];
        let part = |p: i32, replicas: Vec<i32>| MetadataRecord::Partition {
            topic_id: id,
            partition_id: p,
            leader: replicas[0],
            isr: replicas.clone(),
            replicas,
            leader_epoch: 0,
            partition_epoch: 0,
            shard: 0,
        };
        Image::from_records(&[
            registration(1, false),
            registration(2, false),
            registration(3, false),
            MetadataRecord::Topic {
                name: "t".into(),
                topic_id: id,
            },
            part(0, vec![1, 2, 3]),
            part(1, vec![2, 3, 1]),
            part(2, vec![1]),
        ])
    }

    fn partition(img: &Image, p: usize) -> PartitionImage {
        img.topic("t").unwrap().partitions[p].clone()
    }

    #[test]
    fn a_fenced_leader_hands_over_to_the_next_usable_isr_member() {
        let mut img = cluster();
        // Broker 2 is fenced already: p0's leadership skips it.
        img.apply(&MetadataRecord::BrokerRegistrationChange {
            broker_id: 2,
            broker_epoch: 2,
            fenced: Some(true),
            in_controlled_shutdown: None,
        });
        img.apply_all(&take_out(&img, 1));
        let p0 = partition(&img, 0);
        assert_eq!(
            (p0.leader, p0.isr.clone(), p0.leader_epoch),
            (3, vec![2, 3], 1)
        );
        // p1: 1 was a follower; it leaves the ISR, the leader stays.
        let p1 = partition(&img, 1);
        assert_eq!(
            (p1.leader, p1.isr.clone(), p1.leader_epoch),
            (2, vec![2, 3], 0)
        );
        assert_eq!(p1.partition_epoch, 1);
        // p2: 1 is the last in-sync replica: no leader, ISR kept.
        let p2 = partition(&img, 2);
        assert_eq!((p2.leader, p2.isr.clone()), (NO_LEADER, vec![1]));
        assert_eq!(leader_count(&img, 1), 0);
    }

    #[test]
    fn a_new_leader_is_elected_in_replica_order_whatever_the_isr_order() {
        let mut img = cluster();
        // An AlterPartition left p0's ISR as [1, 3, 2] (2 re-added last).
        img.apply(&MetadataRecord::PartitionChange {
            topic_id: [5u8; 16],
            partition_id: 0,
            leader: NO_LEADER_CHANGE,
            isr: Some(vec![1, 3, 2]),
            replicas: None,
        });
        img.apply_all(&take_out(&img, 1));
        let p0 = partition(&img, 0);
        assert_eq!((p0.leader, p0.isr.clone()), (2, vec![3, 2]));
        // The leader goes again: 3, the last in-sync replica but one, leads; then 3 goes and
        // is kept alone with no leader; only 3 returning leads it again.
        img.apply_all(&take_out(&img, 2));
        assert_eq!(
            (partition(&img, 0).leader, partition(&img, 0).isr),
            (3, vec![3])
        );
        img.apply_all(&take_out(&img, 3));
        assert_eq!(
            (partition(&img, 0).leader, partition(&img, 0).isr),
            (NO_LEADER, vec![3])
        );
        assert!(elect_returned(&img, 1).iter().all(|r| !matches!(
            r,
            MetadataRecord::PartitionChange {
                partition_id: 0,
                ..
            }
        )));
        img.apply_all(&elect_returned(&img, 3));
        assert_eq!(partition(&img, 0).leader, 3);
    }

    #[test]
    fn a_returning_broker_leads_what_only_it_can() {
        let mut img = cluster();
        img.apply_all(&take_out(&img, 1));
        assert_eq!(partition(&img, 2).leader, NO_LEADER);
        img.apply_all(&elect_returned(&img, 1));
        let p2 = partition(&img, 2);
        assert_eq!((p2.leader, p2.leader_epoch), (1, 2));
        // The others keep their new leaders (a preferred-leader election is separate).
        assert_eq!(partition(&img, 0).leader, 2);
        assert!(elect_returned(&img, 1).is_empty());
    }
}

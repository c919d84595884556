//! Brokers joining, staying and leaving, as Kafka's controller runs them (KIP-631's
//! registration and heartbeats, KIP-841's fencing rules, KIP-966's `PreviousBrokerEpoch`):
//! a state machine with time passed in, returning the metadata records to commit.
//!
//! - Registration (BrokerRegistration, API 62): the cluster id must match
//!   (INCONSISTENT_CLUSTER_ID); a broker id whose registration is held by another
//!   incarnation that still heartbeats within `broker.session.timeout.ms` is refused
//!   (DUPLICATE_BROKER_REGISTRATION) unless the request names that registration's epoch as its
//!   previous one (a clean restart). The new registration starts fenced; its broker epoch is
//!   the metadata offset its RegisterBrokerRecord will have, so it grows with every
//!   registration and a broker has caught up once its metadata reaches it.
//! - Heartbeats (BrokerHeartbeat, API 63), every `broker.heartbeat.interval.ms`: an unknown
//!   broker gets BROKER_ID_NOT_REGISTERED, a stale epoch STALE_BROKER_EPOCH. A fenced broker
//!   that has caught up and does not ask to stay fenced is unfenced (and leads what only it
//!   can); `WantFence` fences it; `WantShutDown` puts it in controlled shutdown, moves its
//!   leaderships and ISR places away, and is answered `ShouldShutDown` once it leads nothing.
//! - Expiry: an unfenced broker with no heartbeat for `broker.session.timeout.ms` is fenced and
//!   taken out of leaderships and ISRs. Contacts live only on the active controller; one that
//!   takes over gives every registered broker a full session from then (as Kafka's
//!   `BrokerHeartbeatManager` does).

use std::collections::BTreeMap;

use super::image::Image;
use super::leadership;
use super::records::{BrokerEndpoint, BrokerRegistration, MetadataRecord};

/// Why a registration or heartbeat is refused, each with Kafka's error code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LifecycleError {
    #[error("Expected cluster ID {expected}, but got cluster ID {got}")]
    InconsistentClusterId { expected: String, got: String },
    #[error("Another broker is registered with that broker id.")]
    DuplicateRegistration,
    #[error("Broker {0} is not registered.")]
    NotRegistered(i32),
    #[error("Expected broker epoch {expected}, but got broker epoch {got}")]
    StaleEpoch { expected: i64, got: i64 },
}

impl LifecycleError {
    pub fn error_code(&self) -> i16 {
        use wire::ErrorCode;
        match self {
            LifecycleError::InconsistentClusterId { .. } => ErrorCode::InconsistentClusterId,
            LifecycleError::DuplicateRegistration => ErrorCode::DuplicateBrokerRegistration,
            LifecycleError::NotRegistered(_) => ErrorCode::BrokerIdNotRegistered,
            LifecycleError::StaleEpoch { .. } => ErrorCode::StaleBrokerEpoch,
        }
        .code()
    }
}

/// A BrokerRegistration request, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    pub broker_id: i32,
    pub cluster_id: String,
    pub incarnation_id: [u8; 16],
    pub endpoints: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    /// The epoch of this broker's previous registration after a clean shutdown, else -1.
    pub previous_broker_epoch: i64,
}

/// A BrokerHeartbeat request, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    pub broker_id: i32,
    pub broker_epoch: i64,
    /// The highest metadata offset the broker has applied.
    pub metadata_offset: i64,
    pub want_fence: bool,
    pub want_shut_down: bool,
}

/// What a heartbeat is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeartbeatReply {
    pub is_caught_up: bool,
    pub is_fenced: bool,
    pub should_shut_down: bool,
}

/// The records a call wants committed, and what to answer once they are.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome<T> {
    pub records: Vec<MetadataRecord>,
    pub reply: T,
}

/// Last heartbeat of each registered broker, by the controller's monotonic clock.
pub struct BrokerLifecycle {
    session_timeout_ms: i64,
    last_contact_ms: BTreeMap<i32, i64>,
}

impl BrokerLifecycle {
    pub fn new(session_timeout_ms: i64) -> BrokerLifecycle {
        BrokerLifecycle {
            session_timeout_ms,
            last_contact_ms: BTreeMap::new(),
        }
    }

    fn alive(&self, broker: i32, now_ms: i64) -> bool {
        self.last_contact_ms
            .get(&broker)
            .is_some_and(|&t| now_ms - t < self.session_timeout_ms)
    }

    /// BrokerRegistration. `next_offset` is the metadata offset the first returned record
    /// will be committed at (it becomes the broker epoch).
    pub fn register(
        &mut self,
        image: &Image,
        cluster_id: &str,
        request: Registration,
        next_offset: u64,
        now_ms: i64,
    ) -> Result<Outcome<i64>, LifecycleError> {
        if request.cluster_id != cluster_id {
            return Err(LifecycleError::InconsistentClusterId {
                expected: cluster_id.to_owned(),
                got: request.cluster_id,
            });
        }
        let mut records = Vec::new();
        if let Some(existing) = image.brokers.get(&request.broker_id) {
            let same_incarnation = existing.incarnation_id == request.incarnation_id;
            let clean_restart = request.previous_broker_epoch == existing.broker_epoch;
            if !same_incarnation && !clean_restart && self.alive(request.broker_id, now_ms) {
                return Err(LifecycleError::DuplicateRegistration);
            }
        }
        let broker_epoch = i64::try_from(next_offset).unwrap_or(i64::MAX);
        records.push(MetadataRecord::RegisterBroker(BrokerRegistration {
            broker_id: request.broker_id,
            incarnation_id: request.incarnation_id,
            broker_epoch,
            endpoints: request.endpoints,
            rack: request.rack,
            fenced: true,
            in_controlled_shutdown: false,
        }));
        // The old incarnation's leaderships and ISR places go: the new one starts fenced and
        // must catch up before it counts.
        if image.brokers.contains_key(&request.broker_id) {
            records.extend(leadership::take_out(image, request.broker_id));
        }
        self.last_contact_ms.insert(request.broker_id, now_ms);
        Ok(Outcome {
            records,
            reply: broker_epoch,
        })
    }

    /// BrokerHeartbeat.
    pub fn heartbeat(
        &mut self,
        image: &Image,
        beat: Heartbeat,
        now_ms: i64,
    ) -> Result<Outcome<HeartbeatReply>, LifecycleError> {
        let Some(reg) = image.brokers.get(&beat.broker_id) else {
            return Err(LifecycleError::NotRegistered(beat.broker_id));
        };
        if reg.broker_epoch != beat.broker_epoch {
            return Err(LifecycleError::StaleEpoch {
                expected: reg.broker_epoch,
                got: beat.broker_epoch,
            });
        }
        self.last_contact_ms.insert(beat.broker_id, now_ms);
        let is_caught_up = beat.metadata_offset >= reg.broker_epoch;
        let change = |fenced: Option<bool>, shutting_down: Option<bool>| {
            MetadataRecord::BrokerRegistrationChange {
                broker_id: reg.broker_id,
                broker_epoch: reg.broker_epoch,
                fenced,
                in_controlled_shutdown: shutting_down,
            }
        };
        let mut records = Vec::new();
        let mut fenced = reg.fenced;
        let mut after = None;
        if beat.want_shut_down {
            if !reg.in_controlled_shutdown {
                records.push(change(None, Some(true)));
                // Leaderships go to the others as of the image with this broker shutting down.
                let mut next = image.clone();
                next.apply_all(&records);
                records.extend(leadership::take_out(&next, reg.broker_id));
                next.apply_all(&records[1..]);
                after = Some(next);
            }
        } else if beat.want_fence {
            if !reg.fenced {
                records.push(change(Some(true), None));
                records.extend(leadership::take_out(image, reg.broker_id));
                fenced = true;
            }
        } else if reg.fenced && is_caught_up {
            records.push(change(Some(false), None));
            records.extend(leadership::elect_returned(image, reg.broker_id));
            fenced = false;
        }
        let leads = leadership::leader_count(after.as_ref().unwrap_or(image), reg.broker_id);
        Ok(Outcome {
            records,
            reply: HeartbeatReply {
                is_caught_up,
                is_fenced: fenced,
                should_shut_down: beat.want_shut_down && leads == 0,
            },
        })
    }

    /// Records fencing every unfenced broker whose session has run out. A broker this
    /// controller has not heard from yet (it just became active) gets a session from now.
    pub fn expire(&mut self, image: &Image, now_ms: i64) -> Vec<MetadataRecord> {
        let mut records = Vec::new();
        let mut next = image.clone();
        for reg in image.brokers.values() {
            let last = *self.last_contact_ms.entry(reg.broker_id).or_insert(now_ms);
            if reg.fenced || now_ms - last < self.session_timeout_ms {
                continue;
            }
            tracing::info!(
                broker = reg.broker_id,
                epoch = reg.broker_epoch,
                silent_ms = now_ms - last,
                "fencing a broker whose session expired"
            );
            let mut these = vec![MetadataRecord::BrokerRegistrationChange {
                broker_id: reg.broker_id,
                broker_epoch: reg.broker_epoch,
                fenced: Some(true),
                in_controlled_shutdown: None,
            }];
            next.apply_all(&these);
            let moves = leadership::take_out(&next, reg.broker_id);
            next.apply_all(&moves);
            these.extend(moves);
            records.extend(these);
        }
        records
    }

    /// Forgets a broker (it unregistered).
    pub fn forget(&mut self, broker: i32) {
        self.last_contact_ms.remove(&broker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leadership::tests::cluster;
    use crate::leadership::NO_LEADER;

    const SESSION_MS: i64 = 9_000;

    fn request(id: i32, incarnation: u8) -> Registration {
        Registration {
            broker_id: id,
            cluster_id: "c".into(),
            incarnation_id: [incarnation; 16],
            endpoints: vec![],
            rack: None,
            previous_broker_epoch: -1,
        }
    }

    fn beat(id: i32, epoch: i64, offset: i64) -> Heartbeat {
        Heartbeat {
            broker_id: id,
            broker_epoch: epoch,
            metadata_offset: offset,
            want_fence: false,
            want_shut_down: false,
        }
    }

    #[test]
    fn register_then_unfence_once_caught_up() {
        let mut life = BrokerLifecycle::new(SESSION_MS);
        let mut img = Image::default();
        let wrong = Registration {
            cluster_id: "other".into(),
            ..request(4, 1)
        };
        let e = life.register(&img, "c", wrong, 10, 0).unwrap_err();
        assert_eq!(e.error_code(), 104);
        let out = life.register(&img, "c", request(4, 1), 10, 0).unwrap();
        assert_eq!(out.reply, 10);
        img.apply_all(&out.records);
        assert!(img.brokers[&4].fenced);
        // Behind its registration: stays fenced.
        let out = life.heartbeat(&img, beat(4, 10, 9), 100).unwrap();
        assert!(out.records.is_empty());
        assert_eq!(
            out.reply,
            HeartbeatReply {
                is_caught_up: false,
                is_fenced: true,
                should_shut_down: false
            }
        );
        let out = life.heartbeat(&img, beat(4, 10, 10), 200).unwrap();
        assert!(!out.reply.is_fenced && out.reply.is_caught_up);
        img.apply_all(&out.records);
        assert!(!img.brokers[&4].fenced);
        // Stale epochs and unknown brokers.
        let e = life.heartbeat(&img, beat(4, 9, 10), 300).unwrap_err();
        assert_eq!(e.error_code(), 77);
        let e = life.heartbeat(&img, beat(5, 1, 10), 300).unwrap_err();
        assert_eq!(e.error_code(), 102);
    }

    #[test]
    fn a_second_incarnation_waits_for_the_first_session_to_end() {
        let mut life = BrokerLifecycle::new(SESSION_MS);
        let mut img = Image::default();
        let out = life.register(&img, "c", request(4, 1), 10, 0).unwrap();
        img.apply_all(&out.records);
        let e = life
            .register(&img, "c", request(4, 2), 20, 5_000)
            .unwrap_err();
        assert_eq!(e.error_code(), 101);
        // A clean restart names its previous epoch and is let in at once.
        let clean = Registration {
            previous_broker_epoch: 10,
            ..request(4, 2)
        };
        assert_eq!(
            life.register(&img, "c", clean, 20, 5_000).unwrap().reply,
            20
        );
        // After the session (the last contact was the registration at 5 s): let in.
        let out = life.register(&img, "c", request(4, 3), 30, 14_000).unwrap();
        img.apply_all(&out.records);
        assert_eq!(img.brokers[&4].broker_epoch, 30);
        // The same incarnation retrying is let in too.
        assert!(life.register(&img, "c", request(4, 3), 31, 14_001).is_ok());
    }

    #[test]
    fn silence_fences_and_moves_leadership() {
        let mut img = cluster();
        let mut life = BrokerLifecycle::new(SESSION_MS);
        // A new controller: every broker gets a session from now.
        assert!(life.expire(&img, 1_000).is_empty());
        for (id, at) in [(2, 5_000), (3, 5_000)] {
            let out = life
                .heartbeat(&img, beat(id, i64::from(id), 100), at)
                .unwrap();
            assert!(out.records.is_empty());
        }
        assert!(life.expire(&img, 9_999).is_empty());
        let records = life.expire(&img, 10_000);
        img.apply_all(&records);
        assert!(img.brokers[&1].fenced);
        let t = img.topic("t").unwrap();
        assert_eq!(
            (t.partitions[0].leader, t.partitions[0].isr.clone()),
            (2, vec![2, 3])
        );
        assert_eq!(t.partitions[2].leader, NO_LEADER);
        // Back: unfenced, and leads what only it could.
        let out = life.heartbeat(&img, beat(1, 1, 100), 11_000).unwrap();
        assert!(!out.reply.is_fenced);
        img.apply_all(&out.records);
        assert_eq!(img.topic("t").unwrap().partitions[2].leader, 1);
    }

    #[test]
    fn controlled_shutdown_moves_leaders_then_says_go() {
        let mut img = cluster();
        let mut life = BrokerLifecycle::new(SESSION_MS);
        let down = Heartbeat {
            want_shut_down: true,
            ..beat(2, 2, 100)
        };
        let out = life.heartbeat(&img, down, 0).unwrap();
        // p1 was led by 2: it moves to 3, so 2 may go at once.
        assert!(out.reply.should_shut_down, "{out:?}");
        img.apply_all(&out.records);
        assert!(img.brokers[&2].in_controlled_shutdown);
        let t = img.topic("t").unwrap();
        assert_eq!(t.partitions[1].leader, 3);
        assert!(!t.partitions[0].isr.contains(&2));
        // Broker 1 is the only ISR member of p2: it keeps nothing it could hand over, and
        // is told to go once it leads nothing.
        let down = Heartbeat {
            want_shut_down: true,
            ..beat(1, 1, 100)
        };
        let out = life.heartbeat(&img, down, 10).unwrap();
        img.apply_all(&out.records);
        assert!(out.reply.should_shut_down);
        assert_eq!(leadership::leader_count(&img, 1), 0);
    }
}

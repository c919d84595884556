//! Where a follower's log departs from its leader's, by leader epoch (KIP-101, KIP-279),
//! never by high watermark (which lost records in Kafka before KIP-101).
//!
//! - Leader (`Partition.fetchRecords` validating `lastFetchedEpoch`, Fetch v12+): the
//!   follower names the epoch of its last batch; when the leader's log ends that epoch before
//!   the fetch offset, or knows it only as part of an older epoch, the answer carries
//!   DivergingEpoch (the largest epoch <= the follower's and where it ends on the leader)
//!   instead of records.
//! - Follower (`AbstractFetcherThread.getOffsetTruncationState`): given that answer, it
//!   truncates to the smaller of the leader's end for the epoch and its own end for the same
//!   epoch; when its own largest epoch <= the leader's is a different one, it truncates to the
//!   end of that and asks again (KIP-279: several rounds when several epochs diverge).

/// A leader epoch and the offset it ends at (the next epoch's start, or the log end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEnd {
    pub epoch: i32,
    pub end_offset: i64,
}

/// The leader's check of a follower's fetch: `Some` (DivergingEpoch) when the follower must
/// truncate first. `end_offset_for(epoch)` is the leader log's answer to
/// OffsetForLeaderEpoch (`None` when it has none).
pub fn diverging_epoch(
    end_offset_for: impl Fn(i32) -> Option<EpochEnd>,
    fetch_offset: i64,
    last_fetched_epoch: i32,
) -> Option<EpochEnd> {
    if last_fetched_epoch < 0 {
        return None;
    }
    let end = end_offset_for(last_fetched_epoch)?;
    (end.epoch < last_fetched_epoch || end.end_offset < fetch_offset).then_some(end)
}

/// Where the follower truncates to, and whether that settles it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncation {
    pub offset: i64,
    /// False: the follower's epochs differ further back; fetch again from `offset` with its
    /// new last epoch and the leader will answer once more.
    pub completed: bool,
}

/// The follower's side: the leader said `leader` (DivergingEpoch); `local_end_for` is the
/// follower log's own OffsetForLeaderEpoch answer, `local_end` its log end.
pub fn truncation_point(
    leader: EpochEnd,
    local_end_for: impl Fn(i32) -> Option<EpochEnd>,
    local_end: i64,
) -> Truncation {
    if leader.epoch < 0 || leader.end_offset < 0 {
        // The leader knows no epoch that old: keep what is below its answer, if any.
        return Truncation {
            offset: leader.end_offset.max(0).min(local_end),
            completed: true,
        };
    }
    match local_end_for(leader.epoch) {
        None => Truncation {
            offset: leader.end_offset.min(local_end),
            completed: true,
        },
        Some(mine) if mine.epoch != leader.epoch => Truncation {
            offset: mine.end_offset.min(local_end),
            completed: false,
        },
        Some(mine) => Truncation {
            offset: leader.end_offset.min(mine.end_offset).min(local_end),
            completed: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An epoch cache as (epoch, start) entries over a log ending at `end`: Kafka's
    /// `endOffsetFor`.
    fn cache(entries: &'static [(i32, i64)], end: i64) -> impl Fn(i32) -> Option<EpochEnd> {
        move |requested| {
            let higher = entries.iter().position(|&(e, _)| e > requested);
            match higher {
                None => entries
                    .last()
                    .map(|&(e, _)| EpochEnd {
                        epoch: e,
                        end_offset: end,
                    })
                    .filter(|_| !entries.is_empty()),
                Some(0) => Some(EpochEnd {
                    epoch: requested,
                    end_offset: entries[0].1,
                }),
                Some(h) => Some(EpochEnd {
                    epoch: entries[h - 1].0,
                    end_offset: entries[h].1,
                }),
            }
        }
    }

    #[test]
    fn kip_101_scenario_1_a_follower_ahead_in_the_same_epoch_truncates_to_the_leaders_end() {
        // Leader: epoch 0 ends at 1 (it has offset 0 only, then became leader at epoch 1 at 1).
        let leader = cache(&[(0, 0), (1, 1)], 1);
        // Follower fetched both offsets 0 and 1 of epoch 0 (the old leader's), end 2.
        let d = diverging_epoch(&leader, 2, 0).expect("diverges");
        assert_eq!(
            d,
            EpochEnd {
                epoch: 0,
                end_offset: 1
            }
        );
        let t = truncation_point(d, cache(&[(0, 0)], 2), 2);
        assert_eq!(
            t,
            Truncation {
                offset: 1,
                completed: true
            }
        );
    }

    #[test]
    fn kip_279_several_diverging_epochs_take_several_rounds() {
        // Leader: epochs 0 [0,2), 2 [2,..). Follower: 0 [0,2), 1 [2,4) (a leader that never
        // committed), end 4.
        let leader = cache(&[(0, 0), (2, 2)], 6);
        let d = diverging_epoch(&leader, 4, 1).expect("diverges");
        assert_eq!(
            d,
            EpochEnd {
                epoch: 0,
                end_offset: 2
            }
        );
        let t = truncation_point(d, cache(&[(0, 0), (1, 2)], 4), 4);
        assert_eq!(t.offset, 2);
        assert!(t.completed);
        // A follower whose own epoch <= the leader's answer differs truncates and asks again.
        let d = EpochEnd {
            epoch: 3,
            end_offset: 5,
        };
        let t = truncation_point(d, cache(&[(0, 0), (2, 3)], 7), 7);
        assert_eq!(
            t,
            Truncation {
                offset: 7,
                completed: false
            }
        );
    }

    #[test]
    fn a_follower_in_step_does_not_diverge() {
        let leader = cache(&[(0, 0), (1, 5)], 9);
        assert_eq!(diverging_epoch(&leader, 9, 1), None);
        assert_eq!(diverging_epoch(&leader, 5, 0), None);
        assert_eq!(diverging_epoch(&leader, 3, -1), None);
        // Fetching past the end of its last epoch on the leader: diverged.
        assert!(diverging_epoch(&leader, 6, 0).is_some());
    }
}

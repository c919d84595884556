//! Where a new partition's replicas go: rack-aware striping with the same contract as Kafka's
//! `StripedReplicaPlacer` (KIP-631's controller), so that a topic created here lands as it
//! would on a Kafka cluster of the same shape.
//!
//! The contract:
//! - every partition gets `replication_factor` distinct brokers, its first (the preferred
//!   leader) unfenced;
//! - replicas of one partition spread over as many racks as there are (a broker with no rack
//!   is in the "no rack" rack), and within a rack unfenced brokers are used before fenced
//!   ones, which are used only when a rack has no unfenced broker left for this partition;
//! - leaders rotate: over every run of as many partitions as there are unfenced brokers, no
//!   broker leads twice while another leads none (with one rack; with racks, leaders rotate
//!   over racks first);
//! - the start is random (a seed passed in, so tests and the simulation are deterministic),
//!   and after every such run the rack and broker orders are reshuffled, so that the same
//!   follower sets do not repeat partition after partition;
//! - Kafka's errors and messages: INVALID_REPLICATION_FACTOR for a factor that is not
//!   positive, for more replicas than registered brokers (fenced ones count, as in Kafka: a
//!   fenced broker can still hold a follower), and when every broker is fenced.
//!
//! The iteration is our own formulation: per partition each rack hands out its brokers in a
//! rotated order, racks taken round-robin from a rotating start; the leader is the first
//! unfenced broker met from that start.

use std::collections::BTreeMap;

/// A broker that can hold replicas (registered, not shutting down).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsableBroker {
    pub id: i32,
    pub rack: Option<String>,
    pub fenced: bool,
}

/// Why replicas could not be placed; every case is Kafka's INVALID_REPLICATION_FACTOR.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    #[error("Invalid replication factor {0}: the replication factor must be positive.")]
    NotPositive(i32),
    #[error("All brokers are currently fenced.")]
    AllFenced,
    #[error(
        "The target replication factor of {replication_factor} cannot be reached because only \
         {registered} broker(s) are registered."
    )]
    TooFewBrokers {
        replication_factor: i32,
        registered: usize,
    },
}

impl PlacementError {
    pub fn error_code(&self) -> i16 {
        wire::ErrorCode::InvalidReplicationFactor.code()
    }
}

/// A small deterministic generator (splitmix64): placement needs a fair shuffle and a random
/// start, not cryptographic randomness, and must replay exactly from a seed in tests.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`); the modulo bias is irrelevant at cluster sizes.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// One rack's brokers, unfenced and fenced apart, each list read from a rotating start.
struct Rack {
    unfenced: Vec<i32>,
    fenced: Vec<i32>,
    /// Where this rack's unfenced (and fenced) lists start for the current partition.
    start: usize,
}

impl Rack {
    /// The `k`-th broker this rack hands out for the current partition: unfenced first (from
    /// the rotating start), then fenced; `None` when it has no more.
    fn nth(&self, k: usize) -> Option<i32> {
        if k < self.unfenced.len() {
            Some(self.unfenced[(self.start + k) % self.unfenced.len()])
        } else {
            let k = k - self.unfenced.len();
            (k < self.fenced.len()).then(|| self.fenced[(self.start + k) % self.fenced.len()])
        }
    }

    fn len(&self) -> usize {
        self.unfenced.len() + self.fenced.len()
    }
}

/// Replica lists for `partitions` new partitions of `replication_factor` replicas each, the
/// preferred leader first.
pub fn place(
    brokers: &[UsableBroker],
    partitions: usize,
    replication_factor: i32,
    seed: u64,
) -> Result<Vec<Vec<i32>>, PlacementError> {
    if replication_factor <= 0 {
        return Err(PlacementError::NotPositive(replication_factor));
    }
    let unfenced_count = brokers.iter().filter(|b| !b.fenced).count();
    if unfenced_count == 0 {
        return Err(PlacementError::AllFenced);
    }
    let rf = replication_factor as usize;
    if rf > brokers.len() {
        return Err(PlacementError::TooFewBrokers {
            replication_factor,
            registered: brokers.len(),
        });
    }
    let mut by_rack: BTreeMap<Option<&str>, Rack> = BTreeMap::new();
    for b in brokers {
        let rack = by_rack.entry(b.rack.as_deref()).or_insert(Rack {
            unfenced: Vec::new(),
            fenced: Vec::new(),
            start: 0,
        });
        if b.fenced {
            rack.fenced.push(b.id);
        } else {
            rack.unfenced.push(b.id);
        }
    }
    let mut rng = SplitMix(seed);
    let mut racks: Vec<Rack> = by_rack.into_values().collect();
    for rack in &mut racks {
        rack.unfenced.sort_unstable();
        rack.fenced.sort_unstable();
        rack.start = rng.below(rack.len().max(1));
    }
    let mut rack_start = rng.below(racks.len());
    let mut out = Vec::with_capacity(partitions);
    for p in 0..partitions {
        if p > 0 && p % unfenced_count == 0 && unfenced_count > 1 {
            rng.shuffle(&mut racks);
            for rack in &mut racks {
                rng.shuffle(&mut rack.unfenced);
                rng.shuffle(&mut rack.fenced);
            }
        }
        out.push(place_one(&racks, rack_start, rf));
        // Rotate: the next partition starts at the next rack, and the racks this one used
        // start one broker further on.
        rack_start = (rack_start + 1) % racks.len();
        for rack in &mut racks {
            rack.start = rack.start.wrapping_add(1);
        }
    }
    Ok(out)
}

/// One partition: the leader is the first unfenced broker met from `rack_start`; the
/// followers come from the racks in turn (the leader's rack skipped on the first lap), each
/// rack handing out its next broker.
fn place_one(racks: &[Rack], rack_start: usize, rf: usize) -> Vec<i32> {
    let n = racks.len();
    // Brokers each rack has handed out for this partition.
    let mut taken = vec![0usize; n];
    let mut replicas = Vec::with_capacity(rf);
    let leader_rack = (0..n)
        .map(|i| (rack_start + i) % n)
        .find(|&r| !racks[r].unfenced.is_empty())
        .expect("place checked that some broker is unfenced");
    replicas.extend(racks[leader_rack].nth(0));
    taken[leader_rack] = 1;
    let mut r = rack_start;
    let mut skipped_leader_rack = false;
    while replicas.len() < rf {
        if r == leader_rack && !skipped_leader_rack {
            skipped_leader_rack = true;
        } else if let Some(b) = racks[r].nth(taken[r]) {
            taken[r] += 1;
            replicas.push(b);
        }
        r = (r + 1) % n;
    }
    replicas
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashMap};

    fn brokers(spec: &[(i32, Option<&str>, bool)]) -> Vec<UsableBroker> {
        spec.iter()
            .map(|&(id, rack, fenced)| UsableBroker {
                id,
                rack: rack.map(str::to_owned),
                fenced,
            })
            .collect()
    }

    fn check_valid(b: &[UsableBroker], placed: &[Vec<i32>], rf: usize) {
        let fenced: BTreeSet<i32> = b.iter().filter(|b| b.fenced).map(|b| b.id).collect();
        let known: BTreeSet<i32> = b.iter().map(|b| b.id).collect();
        for replicas in placed {
            assert_eq!(replicas.len(), rf, "{placed:?}");
            let distinct: BTreeSet<_> = replicas.iter().collect();
            assert_eq!(distinct.len(), rf, "duplicate replica in {replicas:?}");
            assert!(replicas.iter().all(|r| known.contains(r)));
            assert!(
                !fenced.contains(&replicas[0]),
                "fenced leader in {replicas:?}"
            );
        }
    }

    #[test]
    fn kafkas_errors() {
        let three = brokers(&[(1, None, false), (2, None, false), (3, None, true)]);
        assert_eq!(place(&three, 1, 0, 1), Err(PlacementError::NotPositive(0)));
        let e = place(&three, 1, 4, 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "The target replication factor of 4 cannot be reached because only 3 broker(s) are \
             registered."
        );
        assert_eq!(e.error_code(), 38);
        let fenced = brokers(&[(1, None, true)]);
        assert_eq!(place(&fenced, 1, 1, 1), Err(PlacementError::AllFenced));
        // A fenced broker counts as registered: it may hold a follower, never the leader.
        let placed = place(&three, 10, 3, 7).unwrap();
        check_valid(&three, &placed, 3);
    }

    #[test]
    fn a_single_node_places_everything_on_itself() {
        let one = brokers(&[(1, None, false)]);
        assert_eq!(place(&one, 3, 1, 99).unwrap(), vec![vec![1]; 3]);
    }

    #[test]
    fn leaders_rotate_evenly_without_racks() {
        let five: Vec<_> = (1..=5).map(|id| (id, None, false)).collect();
        let b = brokers(&five);
        for seed in 0..50 {
            let placed = place(&b, 50, 3, seed).unwrap();
            check_valid(&b, &placed, 3);
            for run in placed.chunks(5) {
                let leaders: BTreeSet<i32> = run.iter().map(|r| r[0]).collect();
                assert_eq!(leaders.len(), 5, "seed {seed}: {run:?}");
            }
        }
    }

    #[test]
    fn replicas_spread_over_racks() {
        let b = brokers(&[
            (1, Some("a"), false),
            (2, Some("a"), false),
            (3, Some("b"), false),
            (4, Some("b"), false),
            (5, Some("c"), false),
            (6, Some("c"), false),
        ]);
        let rack: HashMap<i32, &str> = b
            .iter()
            .map(|b| (b.id, b.rack.as_deref().unwrap()))
            .collect();
        for seed in 0..50 {
            let placed = place(&b, 60, 3, seed).unwrap();
            check_valid(&b, &placed, 3);
            for replicas in &placed {
                let racks: BTreeSet<&str> = replicas.iter().map(|r| rack[r]).collect();
                assert_eq!(racks.len(), 3, "seed {seed}: {replicas:?}");
            }
            let mut leads: HashMap<i32, usize> = HashMap::new();
            for replicas in &placed {
                *leads.entry(replicas[0]).or_default() += 1;
            }
            let (min, max) = (leads.values().min(), leads.values().max());
            assert!(
                leads.len() == 6 && max.unwrap() - min.unwrap() <= 4,
                "seed {seed}: {leads:?}"
            );
        }
    }

    #[test]
    fn unfenced_brokers_are_used_before_fenced_ones_of_their_rack() {
        let b = brokers(&[
            (1, None, false),
            (2, None, false),
            (3, None, true),
            (4, None, false),
        ]);
        for seed in 0..20 {
            for replicas in place(&b, 30, 3, seed).unwrap() {
                assert!(!replicas.contains(&3), "seed {seed}: {replicas:?}");
            }
            let placed = place(&b, 30, 4, seed).unwrap();
            check_valid(&b, &placed, 4);
        }
    }

    #[test]
    fn any_cluster_shape_gets_valid_placements() {
        let mut rng = SplitMix(12345);
        for _ in 0..2_000 {
            let n = 1 + rng.below(9);
            let racks = rng.below(4);
            let spec: Vec<UsableBroker> = (0..n)
                .map(|i| UsableBroker {
                    id: 100 + i as i32,
                    rack: (racks > 0).then(|| format!("r{}", rng.below(racks))),
                    fenced: rng.below(4) == 0,
                })
                .collect();
            let rf = 1 + rng.below(n) as i32;
            let partitions = rng.below(40);
            match place(&spec, partitions, rf, rng.next()) {
                Ok(placed) => {
                    assert_eq!(placed.len(), partitions);
                    check_valid(&spec, &placed, rf as usize);
                }
                Err(PlacementError::AllFenced) => assert!(spec.iter().all(|b| b.fenced)),
                Err(e) => panic!("{e} for {spec:?} rf {rf}"),
            }
        }
    }
}

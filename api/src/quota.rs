//! Byte-rate quotas as Kafka enforces them (KIP-13, KIP-55, KIP-219): `producer_byte_rate`
//! on Produce request bytes and `consumer_byte_rate` on Fetch response bytes, per (user,
//! client id) as the image's quotas resolve them. A client over its quota gets its answer at
//! once with `throttle_time_ms` set, and its connection reads nothing more for that long
//! (the channel is muted, KIP-219), so a client that ignores the throttle time is held back
//! all the same.
//!
//! The rate is kept as Kafka's clients see it, per broker, not per shard: one clock per
//! sharing key (GCRA: the time by which the bytes so far would have been sent at the quota
//! rate), behind one broker-wide lock taken only by requests a quota applies to. Kafka
//! measures a windowed average (11 windows of 1 s) and throttles by how far it lies above the
//! quota; the clock gives the same long-run rate without the window's edge effects, with a
//! burst of one second's worth allowed before the first throttle.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use crate::metadata::quotas::{QuotaImage, SharedBy, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE};

/// Longest single throttle (Kafka's bound: `quota.window.num` 11 x `quota.window.size.seconds`
/// 1 s). The debt past it is kept, so the next request is throttled again.
pub const MAX_THROTTLE: Duration = Duration::from_secs(11);
/// What a client may send above its rate before it is throttled: this long at the rate.
pub const BURST: Duration = Duration::from_secs(1);
/// Sharing keys tracked at once, broker-wide. When full, keys whose clock is in the past
/// (no debt, so forgetting them changes nothing) are dropped; if none is, the new key is
/// not tracked and its client is not throttled until room comes back (logged).
pub const MAX_SENSORS: usize = 100_000;
/// Shortest time between two sweeps of a full table: a sweep walks every key under the lock,
/// and a swarm of new client ids must not make each one pay for it.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    Produce,
    Fetch,
}

impl QuotaKind {
    fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => PRODUCER_BYTE_RATE,
            QuotaKind::Fetch => CONSUMER_BYTE_RATE,
        }
    }
}

#[derive(Default)]
struct Clocks {
    by_key: HashMap<(QuotaKind, SharedBy), Instant>,
    last_sweep: Option<Instant>,
}

static CLOCKS: LazyLock<Mutex<Clocks>> = LazyLock::new(Mutex::default);

/// The user name Kafka's quotas use: the principal's name (`alice` of `User:alice`).
pub fn quota_user(principal: &str) -> &str {
    principal
        .split_once(':')
        .map_or(principal, |(_, name)| name)
}

/// Charges `bytes` to the client's quota of `kind` and says how long it must now wait
/// (`None`: no quota applies, or it is within it). `bytes` 0 only reads the debt so far.
pub fn charge(
    quotas: &QuotaImage,
    principal: &str,
    client_id: &str,
    kind: QuotaKind,
    bytes: usize,
    now: Instant,
) -> Option<Duration> {
    let (rate, shared) = quotas.resolve(quota_user(principal), client_id, kind.key())?;
    let mut clocks = CLOCKS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    charge_clock(&mut clocks, (kind, shared), rate, bytes, now)
}

fn charge_clock(
    clocks: &mut Clocks,
    key: (QuotaKind, SharedBy),
    rate: f64,
    bytes: usize,
    now: Instant,
) -> Option<Duration> {
    if !clocks.by_key.contains_key(&key) && clocks.by_key.len() >= MAX_SENSORS {
        let due = clocks
            .last_sweep
            .is_none_or(|last| now.saturating_duration_since(last) >= SWEEP_INTERVAL);
        if due {
            clocks.last_sweep = Some(now);
            clocks.by_key.retain(|_, clock| *clock > now);
        }
        if clocks.by_key.len() >= MAX_SENSORS {
            tracing::warn!(
                bound = MAX_SENSORS,
                "quota sensors full: a client goes unthrottled"
            );
            return None;
        }
    }
    let clock = clocks.by_key.entry(key).or_insert(now);
    // A quota of 0 (or less) lets nothing through: every request waits the longest throttle.
    let cost = if rate > 0.0 {
        Duration::try_from_secs_f64(bytes as f64 / rate).unwrap_or(MAX_THROTTLE)
    } else {
        MAX_THROTTLE
    };
    *clock = (*clock).max(now) + cost;
    let wait = clock.saturating_duration_since(now).checked_sub(BURST)?;
    (!wait.is_zero()).then_some(wait.min(MAX_THROTTLE))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> (QuotaKind, SharedBy) {
        let shared = SharedBy {
            user: Some("alice".into()),
            client_id: None,
        };
        (QuotaKind::Produce, shared)
    }

    #[test]
    fn a_client_at_its_rate_is_never_throttled_and_above_it_is() {
        let mut clocks = Clocks::default();
        let start = Instant::now();
        // 1,000 B/s, 100 B every 100 ms for 60 s: exactly the rate.
        for i in 0..600 {
            let now = start + Duration::from_millis(100 * i);
            assert_eq!(charge_clock(&mut clocks, key(), 1000.0, 100, now), None);
        }
        // Twice the rate: after the burst, throttled by what it sent too early.
        let mut throttled = Duration::ZERO;
        let start = start + Duration::from_secs(60);
        for i in 0..100 {
            let now = start + Duration::from_millis(100 * i);
            if let Some(wait) = charge_clock(&mut clocks, key(), 1000.0, 200, now) {
                throttled = wait;
            }
        }
        // 20,000 B at 1,000 B/s take 20 s; 10 s have passed, 1 s is burst.
        let expected = Duration::from_millis(9_100);
        assert!(
            throttled.abs_diff(expected) < Duration::from_millis(200),
            "{throttled:?}"
        );
    }

    #[test]
    fn a_throttle_is_bounded_but_the_debt_is_kept() {
        let mut clocks = Clocks::default();
        let now = Instant::now();
        let wait = charge_clock(&mut clocks, key(), 1.0, 1_000_000, now);
        assert_eq!(wait, Some(MAX_THROTTLE));
        let later = now + MAX_THROTTLE;
        assert_eq!(
            charge_clock(&mut clocks, key(), 1.0, 0, later),
            Some(MAX_THROTTLE)
        );
        assert_eq!(
            charge_clock(&mut clocks, key(), 0.0, 1, now),
            Some(MAX_THROTTLE)
        );
    }

    #[test]
    fn sensors_are_bounded() {
        let mut clocks = Clocks::default();
        let now = Instant::now();
        for i in 0..MAX_SENSORS {
            let shared = SharedBy {
                user: Some(i.to_string()),
                client_id: None,
            };
            // Each in debt, so none can be forgotten.
            charge_clock(&mut clocks, (QuotaKind::Fetch, shared), 1.0, 10, now);
        }
        assert_eq!(charge_clock(&mut clocks, key(), 1.0, 10, now), None);
        assert_eq!(clocks.by_key.len(), MAX_SENSORS);
        // Their debts paid, but the table was swept a moment ago: no sweep yet.
        let soon = now + Duration::from_millis(500);
        clocks.by_key.values_mut().for_each(|clock| *clock = now);
        assert_eq!(charge_clock(&mut clocks, key(), 1.0, 10, soon), None);
        assert_eq!(clocks.by_key.len(), MAX_SENSORS);
        // A sweep interval later they make room.
        let later = now + SWEEP_INTERVAL;
        assert!(charge_clock(&mut clocks, key(), 1.0, 10, later).is_some());
        assert_eq!(clocks.by_key.len(), 1);
    }

    #[test]
    fn quota_user_is_the_principal_name() {
        assert_eq!(quota_user("User:alice"), "alice");
        assert_eq!(quota_user("User:ANONYMOUS"), "ANONYMOUS");
        assert_eq!(quota_user("CN=x"), "CN=x");
    }
}

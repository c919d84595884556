//! Client quotas as Kafka enforces them, per (user, client id) as the image's quotas resolve
//! them:
//! - byte rates (KIP-13, KIP-55): `producer_byte_rate` on Produce request bytes and
//!   `consumer_byte_rate` on Fetch response bytes;
//! - request time (KIP-124): `request_percentage`, the share of one thread's time a client's
//!   requests may take (100 = one whole thread), charged with the time its requests spent
//!   running on a shard (decoding, handling, encoding; not time spent waiting);
//! - controller mutations (KIP-599): `controller_mutation_rate`, partitions created or
//!   deleted per second by CreateTopics, CreatePartitions and DeleteTopics.
//!
//! A client over its quota gets its answer at once with `throttle_time_ms` set, and its
//! connection reads nothing more for that long (the channel is muted, KIP-219), so a client
//! that ignores the throttle time is held back all the same. Controller mutations are also
//! refused, per topic, with THROTTLING_QUOTA_EXCEEDED by the request versions that know it
//! (Kafka's strict mode).
//!
//! The rate is kept as Kafka's clients see it, per broker, not per shard: one clock per
//! sharing key (GCRA: the time by which what was charged so far would have been used at the
//! quota rate), behind one broker-wide lock taken only by requests a quota applies to. Kafka
//! measures a windowed average (11 windows of 1 s) and throttles by how far it lies above the
//! quota; the clock gives the same long-run rate without the window's edge effects, with a
//! burst allowed before the first throttle (one second's worth; for controller mutations the
//! whole 11 s window, as Kafka's token bucket for them).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use std::net::IpAddr;

use crate::metadata::quotas::{
    QuotaImage, SharedBy, CONNECTION_CREATION_RATE, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE,
};

/// Longest single throttle (Kafka's bound: `quota.window.num` 11 x `quota.window.size.seconds`
/// 1 s). The debt past it is kept, so the next request is throttled again.
pub const MAX_THROTTLE: Duration = Duration::from_secs(11);
/// What a client may use above its rate before it is throttled: this long at the rate.
pub const BURST: Duration = Duration::from_secs(1);
/// The burst of controller mutations: Kafka's token bucket for them holds
/// `controller.quota.window.num` (11) x `controller.quota.window.size.seconds` (1) seconds'
/// worth of partitions.
pub const CONTROLLER_MUTATION_BURST: Duration = Duration::from_secs(11);
/// Sharing keys tracked at once, broker-wide. When full, keys whose clock is in the past
/// (no debt, so forgetting them changes nothing) are dropped; if none is, the new key is
/// not tracked and its client is not throttled until room comes back (logged).
pub const MAX_SENSORS: usize = 100_000;
/// Shortest time between two sweeps of a full table: a sweep walks every key under the lock,
/// and a swarm of new client ids must not make each one pay for it.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    /// Produce request bytes.
    Produce,
    /// Fetch response bytes.
    Fetch,
    /// Seconds of a shard's time.
    Request,
    /// Partitions created or deleted.
    ControllerMutation,
    /// Connections accepted from one address.
    ConnectionCreation,
}

impl QuotaKind {
    fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => PRODUCER_BYTE_RATE,
            QuotaKind::Fetch => CONSUMER_BYTE_RATE,
            QuotaKind::Request => REQUEST_PERCENTAGE,
            QuotaKind::ControllerMutation => CONTROLLER_MUTATION_RATE,
            QuotaKind::ConnectionCreation => CONNECTION_CREATION_RATE,
        }
    }

    /// The quota's value as a rate of what is charged per second.
    fn rate(self, quota: f64) -> f64 {
        match self {
            // A percentage of one thread: 100 is one second of work per second.
            QuotaKind::Request => quota / 100.0,
            _ => quota,
        }
    }

    fn burst(self) -> Duration {
        match self {
            QuotaKind::ControllerMutation => CONTROLLER_MUTATION_BURST,
            _ => BURST,
        }
    }
}

/// Who shares one clock: the clients a (user, client id) quota names, or the connections
/// from one address (an ip quota, default or not, is each address's own).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Sharer {
    Clients(SharedBy),
    Address(IpAddr),
}

type ClockKey = (QuotaKind, Sharer);

#[derive(Default)]
struct Clocks {
    by_key: HashMap<ClockKey, Instant>,
    last_sweep: Option<Instant>,
}

static CLOCKS: LazyLock<Mutex<Clocks>> = LazyLock::new(Mutex::default);

/// The broker's clocks (a panic while they were held leaves them usable: they are only
/// times).
fn clocks() -> MutexGuard<'static, Clocks> {
    CLOCKS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Clocks {
    /// Takes back what `amount` at `rate` added to a clock (not before `now`: a refund is no
    /// credit).
    fn give_back(&mut self, key: &ClockKey, rate: f64, amount: f64, now: Instant) {
        if let Some(clock) = self.by_key.get_mut(key) {
            *clock = clock
                .checked_sub(cost(rate, amount))
                .unwrap_or(now)
                .max(now);
        }
    }
}

/// The user name Kafka's quotas use: the principal's name (`alice` of `User:alice`).
pub fn quota_user(principal: &str) -> &str {
    principal
        .split_once(':')
        .map_or(principal, |(_, name)| name)
}

/// Whether any entity of the image has a quota of `kind` (so that requests need not be
/// timed, nor their client's quota looked up, while none does).
pub fn any(quotas: &QuotaImage, kind: QuotaKind) -> bool {
    quotas.mentions(kind.key())
}

/// Charges `amount` (bytes, seconds or partitions, as `kind` counts) to the client's quota of
/// `kind` and says how long it must now wait (`None`: no quota applies, or it is within it).
/// `amount` 0 only reads the debt so far.
pub fn charge(
    quotas: &QuotaImage,
    principal: &str,
    client_id: &str,
    kind: QuotaKind,
    amount: f64,
    now: Instant,
) -> Option<Duration> {
    let (rate, key) = client_clock(quotas, principal, client_id, kind)?;
    charge_clock(&mut clocks(), key, rate, amount, now)
}

/// The rate of the quota of `kind` a client is under, and the clock it shares.
fn client_clock(
    quotas: &QuotaImage,
    principal: &str,
    client_id: &str,
    kind: QuotaKind,
) -> Option<(f64, ClockKey)> {
    let (quota, shared) = quotas.resolve(quota_user(principal), client_id, kind.key())?;
    Some((kind.rate(quota), (kind, Sharer::Clients(shared))))
}

/// Counts a connection from `ip` against its `connection_creation_rate` (KIP-612) and says
/// how long to hold it before closing it when that is exceeded (`None`: accepted). A refused
/// connection is not counted, as in Kafka, so a client retrying after its throttle gets in.
pub fn admit_connection(quotas: &QuotaImage, ip: IpAddr, now: Instant) -> Option<Duration> {
    if !any(quotas, QuotaKind::ConnectionCreation) {
        return None;
    }
    let quota = quotas.resolve_ip(&ip.to_string(), CONNECTION_CREATION_RATE)?;
    let key = (QuotaKind::ConnectionCreation, Sharer::Address(ip));
    let mut clocks = clocks();
    let wait = charge_clock(&mut clocks, key.clone(), quota, 1.0, now)?;
    clocks.give_back(&key, quota, 1.0, now);
    Some(wait)
}

/// Gives back `amount` charged for something that was then not done (a topic whose creation
/// failed costs no controller mutation, as in Kafka, which counts only valid topics).
pub fn refund(
    quotas: &QuotaImage,
    principal: &str,
    client_id: &str,
    kind: QuotaKind,
    amount: f64,
    now: Instant,
) {
    if let Some((rate, key)) = client_clock(quotas, principal, client_id, kind) {
        clocks().give_back(&key, rate, amount, now);
    }
}

/// How long `amount` takes at `rate`; a rate of 0 (or less) lets nothing through: anything
/// costs the longest throttle.
fn cost(rate: f64, amount: f64) -> Duration {
    if rate > 0.0 {
        Duration::try_from_secs_f64(amount.max(0.0) / rate).unwrap_or(MAX_THROTTLE)
    } else if amount > 0.0 {
        MAX_THROTTLE
    } else {
        Duration::ZERO
    }
}

fn charge_clock(
    clocks: &mut Clocks,
    key: ClockKey,
    rate: f64,
    amount: f64,
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
    let burst = key.0.burst();
    let clock = clocks.by_key.entry(key).or_insert(now);
    *clock = (*clock).max(now) + cost(rate, amount);
    // A quota of 0 throttles even a bare look at the debt.
    let wait = if rate > 0.0 {
        clock.saturating_duration_since(now).checked_sub(burst)?
    } else {
        MAX_THROTTLE
    };
    (!wait.is_zero()).then_some(wait.min(MAX_THROTTLE))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ClockKey {
        let shared = SharedBy {
            user: Some("alice".into()),
            client_id: None,
        };
        (QuotaKind::Produce, Sharer::Clients(shared))
    }

    #[test]
    fn a_client_at_its_rate_is_never_throttled_and_above_it_is() {
        let mut clocks = Clocks::default();
        let start = Instant::now();
        // 1,000 B/s, 100 B every 100 ms for 60 s: exactly the rate.
        for i in 0..600 {
            let now = start + Duration::from_millis(100 * i);
            assert_eq!(charge_clock(&mut clocks, key(), 1000.0, 100.0, now), None);
        }
        // Twice the rate: after the burst, throttled by what it sent too early.
        let mut throttled = Duration::ZERO;
        let start = start + Duration::from_secs(60);
        for i in 0..100 {
            let now = start + Duration::from_millis(100 * i);
            if let Some(wait) = charge_clock(&mut clocks, key(), 1000.0, 200.0, now) {
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
        let wait = charge_clock(&mut clocks, key(), 1.0, 1_000_000.0, now);
        assert_eq!(wait, Some(MAX_THROTTLE));
        let later = now + MAX_THROTTLE;
        assert_eq!(
            charge_clock(&mut clocks, key(), 1.0, 0.0, later),
            Some(MAX_THROTTLE)
        );
        assert_eq!(
            charge_clock(&mut clocks, key(), 0.0, 1.0, now),
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
            let key = (QuotaKind::Fetch, Sharer::Clients(shared));
            charge_clock(&mut clocks, key, 1.0, 10.0, now);
        }
        assert_eq!(charge_clock(&mut clocks, key(), 1.0, 10.0, now), None);
        assert_eq!(clocks.by_key.len(), MAX_SENSORS);
        // Their debts paid, but the table was swept a moment ago: no sweep yet.
        let soon = now + Duration::from_millis(500);
        clocks.by_key.values_mut().for_each(|clock| *clock = now);
        assert_eq!(charge_clock(&mut clocks, key(), 1.0, 10.0, soon), None);
        assert_eq!(clocks.by_key.len(), MAX_SENSORS);
        // A sweep interval later they make room.
        let later = now + SWEEP_INTERVAL;
        assert!(charge_clock(&mut clocks, key(), 1.0, 10.0, later).is_some());
        assert_eq!(clocks.by_key.len(), 1);
    }

    #[test]
    fn a_refused_connection_is_not_counted() {
        use crate::metadata::quotas::IP;
        use crate::metadata::records::QuotaRecord;
        let mut quotas = QuotaImage::default();
        // The default ip entity: every address its own 5 per second (a documentation-only
        // address, so that no other test's clock is this one).
        quotas.apply(&QuotaRecord {
            entity: vec![(IP.into(), None)],
            key: CONNECTION_CREATION_RATE.into(),
            value: 5.0,
            remove: false,
        });
        let ip: IpAddr = "192.0.2.77".parse().expect("an address");
        let now = Instant::now();
        for _ in 0..5 {
            assert_eq!(admit_connection(&quotas, ip, now), None);
        }
        let first = admit_connection(&quotas, ip, now).expect("throttled");
        let again = admit_connection(&quotas, ip, now).expect("throttled");
        assert_eq!(first, again, "the refused one did not add to the debt");
        assert_eq!(first, Duration::from_millis(200));
        // A fifth of a second later there is room for one.
        assert_eq!(admit_connection(&quotas, ip, now + first), None);
        let other: IpAddr = "192.0.2.78".parse().expect("an address");
        assert_eq!(admit_connection(&quotas, other, now), None);
    }

    #[test]
    fn quota_user_is_the_principal_name() {
        assert_eq!(quota_user("User:alice"), "alice");
        assert_eq!(quota_user("User:ANONYMOUS"), "ANONYMOUS");
        assert_eq!(quota_user("CN=x"), "CN=x");
    }
}

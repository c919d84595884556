//! The fetch-session cache (Kafka's FetchSessionCacheShard, FetchManager.newContext and
//! updateAndGenerateResponseData) as data and pure functions: no shard, no mesh. A shard holds
//! its `ShardSessions`; `super` (the handler side) opens and completes sessions through it.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::Instant;

use wire::generated::fetch_request::{FetchPartition, FetchTopic};
use wire::generated::FetchRequest;
use wire::primitives::Uuid;
use wire::ErrorCode;

/// The session id of a request or response that has no session.
pub const INVALID_SESSION_ID: i32 = 0;
/// A full fetch that asks for a session (and closes the one it names).
pub const INITIAL_EPOCH: i32 = 0;
/// A full fetch that closes the session it names and asks for none.
pub const FINAL_EPOCH: i32 = -1;
/// How long a session must go unused before any new session may evict it, and how old a
/// session must be before a larger one may: Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
/// (a constant there too, not a configuration key).
pub const MIN_EVICTION_MS: u64 = 120_000;
/// Memory bound of one shard's cache: what its cached partitions may take together, estimated
/// as `PARTITION_COST` plus the topic name per partition. A full fetch whose session would
/// not fit gets no session (as when no slot is free); an incremental fetch that would grow its
/// session past the bound closes it and is answered without a session. Kafka bounds only the
/// slot count; a partition count per session is bounded only by the request size there.
pub const MAX_CACHED_BYTES_PER_SHARD: usize = 64 << 20;
/// Estimated bytes of one cached partition (its entry in the map and in the order), beyond
/// the topic name.
pub const PARTITION_COST: usize = 128;

/// Kafka's FetchMetadata.nextEpoch.
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        FINAL_EPOCH
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// How a session names a topic: by id from Fetch v13 on, by name before.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TopicKey {
    Id(Uuid),
    Name(Rc<str>),
}

impl TopicKey {
    fn cost(&self) -> usize {
        match self {
            TopicKey::Id(_) => 0,
            TopicKey::Name(name) => name.len(),
        }
    }
}

pub type PartitionKey = (TopicKey, i32);

/// What a request asked of a partition (Kafka's FetchRequest.PartitionData).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub fetch_offset: i64,
    pub log_start_offset: i64,
    pub partition_max_bytes: i32,
    pub current_leader_epoch: i32,
    pub last_fetched_epoch: i32,
}

impl Params {
    pub fn of(partition: &FetchPartition) -> Params {
        Params {
            fetch_offset: partition.fetch_offset,
            log_start_offset: partition.log_start_offset,
            partition_max_bytes: partition.partition_max_bytes,
            current_leader_epoch: partition.current_leader_epoch,
            last_fetched_epoch: partition.last_fetched_epoch,
        }
    }

    fn to_partition(self, partition: i32) -> FetchPartition {
        FetchPartition {
            partition,
            current_leader_epoch: self.current_leader_epoch,
            fetch_offset: self.fetch_offset,
            last_fetched_epoch: self.last_fetched_epoch,
            log_start_offset: self.log_start_offset,
            partition_max_bytes: self.partition_max_bytes,
            ..Default::default()
        }
    }
}

/// What a partition's answer was, as far as the session cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub has_records: bool,
}

/// Kafka's CachedPartition.
#[derive(Clone, Debug)]
struct Cached {
    params: Params,
    high_watermark: i64,
    local_log_start_offset: i64,
    /// Place in the session's order.
    place: u64,
}

impl Cached {
    /// Kafka's maybeUpdateResponseData(respData, updateResponseData = true): whether the
    /// partition goes into an incremental response, remembering what it told the client.
    fn must_respond(&mut self, outcome: &Outcome) -> bool {
        let mut must = outcome.has_records;
        if self.high_watermark != outcome.high_watermark {
            must = true;
            self.high_watermark = outcome.high_watermark;
        }
        if self.local_log_start_offset != outcome.log_start_offset {
            must = true;
            self.local_log_start_offset = outcome.log_start_offset;
        }
        if outcome.error_code != 0 {
            // Sent again once the error goes away.
            self.high_watermark = -1;
            must = true;
        }
        must
    }
}

/// One fetch session (Kafka's FetchSession).
#[derive(Debug)]
pub struct Session {
    pub id: i32,
    /// The epoch the next incremental request must carry.
    pub epoch: i32,
    /// Created by a follower (a request with a replica id): may evict consumers' sessions.
    pub privileged: bool,
    pub uses_topic_ids: bool,
    creation_ms: u64,
    last_used_ms: u64,
    partitions: HashMap<PartitionKey, Cached>,
    /// The partitions in session order: request order, and a partition that returned records
    /// moves to the end so that the next responses start with the others (KIP-227).
    order: BTreeMap<u64, PartitionKey>,
    next_place: u64,
    /// Estimated bytes, by `PARTITION_COST` and topic names.
    cost: usize,
}

impl Session {
    fn new(id: i32, privileged: bool, uses_topic_ids: bool, now_ms: u64) -> Session {
        Session {
            id,
            epoch: next_epoch(INITIAL_EPOCH),
            privileged,
            uses_topic_ids,
            creation_ms: now_ms,
            last_used_ms: now_ms,
            partitions: HashMap::new(),
            order: BTreeMap::new(),
            next_place: 0,
            cost: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.partitions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    /// The cached partitions in session order, with what to ask of each.
    pub fn partitions(&self) -> impl Iterator<Item = (&PartitionKey, Params)> + '_ {
        self.order
            .values()
            .map(|key| (key, self.partitions[key].params))
    }

    fn insert(&mut self, key: PartitionKey, params: Params, outcome: Option<&Outcome>) {
        if let Some(cached) = self.partitions.get_mut(&key) {
            cached.params = params;
            return;
        }
        let place = self.next_place;
        self.next_place += 1;
        self.cost += PARTITION_COST + key.0.cost();
        self.order.insert(place, key.clone());
        self.partitions.insert(
            key,
            Cached {
                params,
                high_watermark: outcome.map_or(-1, |o| o.high_watermark),
                local_log_start_offset: outcome.map_or(-1, |o| o.log_start_offset),
                place,
            },
        );
    }

    fn remove(&mut self, key: &PartitionKey) {
        if let Some(cached) = self.partitions.remove(key) {
            self.order.remove(&cached.place);
            self.cost -= PARTITION_COST + key.0.cost();
        }
    }

    fn move_to_end(&mut self, key: &PartitionKey) {
        if let Some(cached) = self.partitions.get_mut(key) {
            let key = self.order.remove(&cached.place).expect("ordered");
            cached.place = self.next_place;
            self.next_place += 1;
            self.order.insert(cached.place, key);
        }
    }
}

/// Kafka's EvictableKey order: unprivileged before privileged, then fewer partitions, then
/// lower id.
fn evictable_key(session: &Session) -> (bool, usize, i32) {
    (session.privileged, session.len(), session.id)
}

/// One shard's sessions (Kafka's FetchSessionCacheShard). Shards take session ids from
/// disjoint ranges: shard `s` of `n` from `[max(1, s * r), (s + 1) * r)` with
/// `r = i32::MAX / n`.
#[derive(Debug)]
pub struct SessionCache {
    shard: usize,
    id_range: i32,
    max_entries: usize,
    max_bytes: usize,
    sessions: HashMap<i32, Rc<RefCell<Session>>>,
    /// Estimated bytes of all sessions, bounded by `max_bytes`.
    bytes: usize,
    /// State of the id generator (splitmix64).
    random: u64,
    /// Sessions evicted to make room (Kafka's IncrementalFetchSessionEvictionsPerSec).
    pub evictions: u64,
}

impl SessionCache {
    /// The cache of shard `shard` of `shard_count`, holding its share of `total_slots`: the
    /// slots divided evenly, the first `total_slots % shard_count` shards taking one more, so
    /// that the shards together hold exactly the configured number.
    pub fn new(shard: usize, shard_count: usize, total_slots: usize, max_bytes: usize) -> Self {
        let shard_count = shard_count.max(1);
        let max_entries =
            total_slots / shard_count + usize::from(shard < total_slots % shard_count);
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos() as u64);
        SessionCache {
            shard,
            id_range: (i32::MAX as usize / shard_count) as i32,
            max_entries,
            max_bytes,
            sessions: HashMap::new(),
            bytes: 0,
            random: seed ^ (shard as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            evictions: 0,
        }
    }

    /// The shard holding session `id` under `shard_count` shards.
    pub fn owner(id: i32, shard_count: usize) -> usize {
        let range = i32::MAX as usize / shard_count.max(1);
        (id.max(0) as usize / range).min(shard_count.max(1) - 1)
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    pub fn max_entries(&self) -> usize {
        self.max_entries
    }

    /// Estimated bytes of all cached partitions.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Cached partitions of all sessions (Kafka's NumIncrementalFetchPartitionsCached).
    pub fn total_partitions(&self) -> usize {
        self.sessions.values().map(|s| s.borrow().len()).sum()
    }

    pub fn get(&self, id: i32) -> Option<Rc<RefCell<Session>>> {
        self.sessions.get(&id).cloned()
    }

    pub fn remove(&mut self, id: i32) -> Option<Rc<RefCell<Session>>> {
        let session = self.sessions.remove(&id)?;
        self.bytes -= session.borrow().cost;
        Some(session)
    }

    fn next_random(&mut self) -> u64 {
        self.random = self.random.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.random;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A random unused id of this shard's range.
    fn new_session_id(&mut self) -> i32 {
        let low = (self.shard as i64 * self.id_range as i64).max(1);
        let high = (self.shard as i64 + 1) * self.id_range as i64;
        loop {
            let id = (low + (self.next_random() % (high - low) as u64) as i64) as i32;
            if id != INVALID_SESSION_ID && !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }

    /// Kafka's tryEvict: a new session (privileged or not, of `size` partitions) may evict
    /// the least recently used session once it has been unused for `MIN_EVICTION_MS`; else
    /// the least valuable evictable one (unprivileged before privileged, then fewer
    /// partitions) when the new one is worth at least as much. A session is evictable by a
    /// privileged one when unprivileged or older than `MIN_EVICTION_MS`, by anyone when older
    /// than `MIN_EVICTION_MS`. Kafka orders by the sizes sessions had when last used; here by
    /// their sizes now (they change only when used).
    fn try_evict(&mut self, privileged: bool, size: usize, now_ms: u64) -> bool {
        let stalest = self
            .sessions
            .values()
            .map(|s| {
                let s = s.borrow();
                (s.last_used_ms, s.id)
            })
            .min();
        let Some((last_used_ms, stalest_id)) = stalest else {
            return false;
        };
        if now_ms.saturating_sub(last_used_ms) > MIN_EVICTION_MS {
            self.remove(stalest_id);
            self.evictions += 1;
            return true;
        }
        let candidate = self
            .sessions
            .values()
            .filter_map(|s| {
                let s = s.borrow();
                let old = now_ms.saturating_sub(s.creation_ms) > MIN_EVICTION_MS;
                let evictable = if privileged {
                    !s.privileged || old
                } else {
                    old
                };
                evictable.then(|| evictable_key(&s))
            })
            .min();
        match candidate {
            Some(key) if (privileged, size, 0) >= key => {
                self.remove(key.2);
                self.evictions += 1;
                true
            }
            _ => false,
        }
    }

    /// Kafka's maybeCreateSession: a new session holding `partitions` (request order, with
    /// what the full fetch answered) if a slot is free or can be freed and its partitions
    /// fit the memory bound; its id, or `INVALID_SESSION_ID`.
    pub fn maybe_create(
        &mut self,
        now_ms: u64,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: impl IntoIterator<Item = (PartitionKey, Params, Outcome)>,
        size: usize,
    ) -> i32 {
        if self.max_entries == 0 {
            return INVALID_SESSION_ID;
        }
        if self.sessions.len() >= self.max_entries && !self.try_evict(privileged, size, now_ms) {
            return INVALID_SESSION_ID;
        }
        let id = self.new_session_id();
        let mut session = Session::new(id, privileged, uses_topic_ids, now_ms);
        for (key, params, outcome) in partitions {
            session.insert(key, params, Some(&outcome));
        }
        if self.bytes + session.cost > self.max_bytes {
            return INVALID_SESSION_ID;
        }
        self.bytes += session.cost;
        self.sessions.insert(id, Rc::new(RefCell::new(session)));
        id
    }

    /// Kafka's touch: the session was used now; its size may have changed.
    fn touch(&mut self, session: &mut Session, old_cost: usize, now_ms: u64) {
        session.last_used_ms = now_ms;
        self.bytes = self.bytes - old_cost + session.cost;
    }
}

/// A shard's fetch sessions, made on first use (the shard count is known once the mesh is).
#[derive(Default)]
pub struct ShardSessions {
    pub(super) cache: RefCell<Option<SessionCache>>,
    /// Origin of the cache's millisecond clock.
    pub(super) started: std::cell::OnceCell<Instant>,
}

impl ShardSessions {
    /// Kafka's NumIncrementalFetchSessions, NumIncrementalFetchPartitionsCached and the count
    /// behind IncrementalFetchSessionEvictionsPerSec, for this shard's metrics (zeros before
    /// the first fetch made the cache).
    pub fn figures(&self) -> SessionFigures {
        self.cache
            .borrow()
            .as_ref()
            .map_or_else(SessionFigures::default, |cache| SessionFigures {
                sessions: cache.len() as u64,
                partitions: cache.total_partitions() as u64,
                evictions: cache.evictions,
            })
    }
}

/// A shard's fetch-session figures at one moment (see `ShardSessions::figures`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SessionFigures {
    pub sessions: u64,
    pub partitions: u64,
    pub evictions: u64,
}

/// How a fetch request relates to sessions (Kafka's FetchContext kinds).
pub enum Context {
    /// The session cannot be used: answer with this error and no partitions.
    Error(ErrorCode),
    /// No session: answer every partition of the request, session id 0.
    Sessionless,
    /// A full fetch that asks for a session: once answered, try to create one.
    Full,
    /// An incremental fetch: the request now names every partition of the session.
    Incremental {
        session: Rc<RefCell<Session>>,
        /// The session epoch once this request is accounted for: a concurrent request that
        /// moved it on makes this one INVALID_FETCH_SESSION_EPOCH.
        expected_epoch: i32,
    },
}

/// The key of a request's topic.
fn topic_key(by_id: bool, name: &str, id: Uuid) -> TopicKey {
    if by_id {
        TopicKey::Id(id)
    } else {
        TopicKey::Name(Rc::from(name))
    }
}

/// Kafka's FetchManager.newContext for a request at `version`: closes the session a full
/// fetch names, checks an incremental one's id, epoch and topic-id usage, applies its added,
/// changed and forgotten partitions and rewrites `request.topics` to all of the session's
/// partitions in session order.
pub fn new_context(
    cache: &mut SessionCache,
    request: &mut FetchRequest,
    version: i16,
    now_ms: u64,
) -> Context {
    if version < 7 {
        return Context::Sessionless;
    }
    let by_id = version >= 13;
    if request.session_epoch == INITIAL_EPOCH || request.session_epoch == FINAL_EPOCH {
        if request.session_id != INVALID_SESSION_ID {
            cache.remove(request.session_id);
        }
        return if request.session_epoch == FINAL_EPOCH {
            Context::Sessionless
        } else {
            Context::Full
        };
    }
    let Some(session) = cache.get(request.session_id) else {
        return Context::Error(ErrorCode::FetchSessionIdNotFound);
    };
    let mut guard = session.borrow_mut();
    if guard.epoch != request.session_epoch {
        return Context::Error(ErrorCode::InvalidFetchSessionEpoch);
    }
    if guard.uses_topic_ids != by_id {
        return Context::Error(ErrorCode::FetchSessionTopicIdError);
    }
    let old_cost = guard.cost;
    for topic in &request.topics {
        let key = topic_key(by_id, &topic.topic, topic.topic_id);
        for partition in &topic.partitions {
            guard.insert(
                (key.clone(), partition.partition),
                Params::of(partition),
                None,
            );
        }
    }
    for topic in &request.forgotten_topics_data {
        let key = topic_key(by_id, &topic.topic, topic.topic_id);
        for &partition in &topic.partitions {
            guard.remove(&(key.clone(), partition));
        }
    }
    let over_budget = cache.bytes - old_cost + guard.cost > cache.max_bytes;
    if guard.is_empty() || over_budget {
        // Kafka closes a session left empty and answers the request's own partitions.
        drop(guard);
        cache.bytes = cache.bytes - old_cost + session.borrow().cost;
        cache.remove(request.session_id);
        return Context::Sessionless;
    }
    cache.touch(&mut guard, old_cost, now_ms);
    guard.epoch = next_epoch(guard.epoch);
    let expected_epoch = guard.epoch;
    request.topics = session_topics(&guard, by_id);
    drop(guard);
    Context::Incremental {
        session,
        expected_epoch,
    }
}

/// The session's partitions as request topics, in session order (a topic appears once per
/// run of its partitions).
fn session_topics(session: &Session, by_id: bool) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    let mut current: Option<&TopicKey> = None;
    for ((topic, partition), params) in session.partitions() {
        if current != Some(topic) {
            let (name, id) = match topic {
                TopicKey::Id(id) => (String::new(), *id),
                TopicKey::Name(name) => (name.to_string(), Uuid::ZERO),
            };
            debug_assert_eq!(by_id, matches!(topic, TopicKey::Id(_)));
            topics.push(FetchTopic {
                topic: name,
                topic_id: id,
                ..Default::default()
            });
            current = Some(topic);
        }
        let last = topics.last_mut().expect("pushed above");
        last.partitions.push(params.to_partition(*partition));
    }
    topics
}

/// What the response says about the session: its id, its top-level error code, and for each
/// partition of the (rewritten) request in order whether it is sent.
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    pub session_id: i32,
    pub error_code: i16,
    pub send: Vec<bool>,
}

/// Kafka's updateAndGenerateResponseData: `outcomes` holds one entry per partition of
/// `request` in order. A full fetch creates its session here; an incremental one keeps the
/// partitions with news and updates what the session remembers of them.
pub fn finish(
    context: &Context,
    cache: &mut SessionCache,
    request: &FetchRequest,
    version: i16,
    outcomes: &[Outcome],
    now_ms: u64,
) -> Answer {
    let all = |session_id| Answer {
        session_id,
        error_code: 0,
        send: vec![true; outcomes.len()],
    };
    match context {
        Context::Error(code) => Answer {
            session_id: INVALID_SESSION_ID,
            error_code: code.code(),
            send: vec![false; outcomes.len()],
        },
        Context::Sessionless => all(INVALID_SESSION_ID),
        Context::Full => {
            let by_id = version >= 13;
            let partitions = request
                .topics
                .iter()
                .flat_map(|topic| {
                    let key = topic_key(by_id, &topic.topic, topic.topic_id);
                    topic
                        .partitions
                        .iter()
                        .map(move |partition| ((key.clone(), partition.partition), partition))
                })
                .zip(outcomes)
                .map(|((key, partition), outcome)| (key, Params::of(partition), *outcome));
            let privileged = replica_id(request) >= 0;
            all(cache.maybe_create(now_ms, privileged, by_id, partitions, outcomes.len()))
        }
        Context::Incremental {
            session,
            expected_epoch,
        } => {
            let mut session = session.borrow_mut();
            if session.epoch != *expected_epoch {
                return Answer {
                    session_id: session.id,
                    error_code: ErrorCode::InvalidFetchSessionEpoch.code(),
                    send: vec![false; outcomes.len()],
                };
            }
            let by_id = session.uses_topic_ids;
            let keys = request.topics.iter().flat_map(|topic| {
                let key = topic_key(by_id, &topic.topic, topic.topic_id);
                topic
                    .partitions
                    .iter()
                    .map(move |partition| (key.clone(), partition.partition))
            });
            let mut send = Vec::with_capacity(outcomes.len());
            for (key, outcome) in keys.zip(outcomes) {
                let must = session
                    .partitions
                    .get_mut(&key)
                    .is_some_and(|cached| cached.must_respond(outcome));
                if must && outcome.has_records {
                    session.move_to_end(&key);
                }
                send.push(must);
            }
            Answer {
                session_id: session.id,
                error_code: 0,
                send,
            }
        }
    }
}

/// `results` (one per partition of `request`, in order) and `request` with the partitions
/// that `send` leaves out removed (and topics left with no partition dropped).
pub fn retain<T>(request: &mut FetchRequest, results: Vec<T>, send: &[bool]) -> Vec<T> {
    let mut index = 0;
    for topic in &mut request.topics {
        topic.partitions.retain(|_| {
            index += 1;
            send[index - 1]
        });
    }
    request.topics.retain(|topic| !topic.partitions.is_empty());
    results
        .into_iter()
        .zip(send)
        .filter_map(|(result, &keep)| keep.then_some(result))
        .collect()
}

/// The fetcher's replica id: -1 for consumers.
fn replica_id(request: &FetchRequest) -> i32 {
    request.replica_id.max(request.replica_state.replica_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(index: i32, offset: i64) -> FetchPartition {
        FetchPartition {
            partition: index,
            fetch_offset: offset,
            partition_max_bytes: 1 << 20,
            ..Default::default()
        }
    }

    fn topic(name: &str, partitions: Vec<FetchPartition>) -> FetchTopic {
        FetchTopic {
            topic: name.to_string(),
            partitions,
            ..Default::default()
        }
    }

    fn request(session_id: i32, epoch: i32, topics: Vec<FetchTopic>) -> FetchRequest {
        FetchRequest {
            session_id,
            session_epoch: epoch,
            topics,
            ..Default::default()
        }
    }

    fn quiet(high_watermark: i64) -> Outcome {
        Outcome {
            error_code: 0,
            high_watermark,
            log_start_offset: 0,
            has_records: false,
        }
    }

    fn names(request: &FetchRequest) -> Vec<(String, i32, i64)> {
        request
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.topic.clone(), p.partition, p.fetch_offset))
            })
            .collect()
    }

    const V: i16 = 12;

    fn cache() -> SessionCache {
        SessionCache::new(0, 1, 10, MAX_CACHED_BYTES_PER_SHARD)
    }

    /// A full fetch of `partitions` partitions of topic "t", answered quietly: the new
    /// session's id.
    fn create(cache: &mut SessionCache, partitions: i32, now_ms: u64) -> i32 {
        let mut full = request(
            0,
            INITIAL_EPOCH,
            vec![topic(
                "t",
                (0..partitions).map(|p| partition(p, 0)).collect(),
            )],
        );
        let context = new_context(cache, &mut full, V, now_ms);
        assert!(matches!(context, Context::Full));
        let outcomes = vec![quiet(0); partitions as usize];
        let answer = finish(&context, cache, &full, V, &outcomes, now_ms);
        assert_eq!(answer.error_code, 0);
        assert!(answer.send.iter().all(|&s| s));
        answer.session_id
    }

    #[test]
    fn full_fetch_creates_session_and_incremental_names_only_changes() {
        let mut cache = cache();
        let id = create(&mut cache, 3, 0);
        assert_ne!(id, INVALID_SESSION_ID);
        assert_eq!(cache.total_partitions(), 3);

        // Epoch 1: one partition changes its offset; the request is rewritten to all three.
        let mut incremental = request(id, 1, vec![topic("t", vec![partition(1, 5)])]);
        let context = new_context(&mut cache, &mut incremental, V, 1);
        assert!(matches!(context, Context::Incremental { .. }));
        assert_eq!(
            names(&incremental),
            vec![("t".into(), 0, 0), ("t".into(), 1, 5), ("t".into(), 2, 0)]
        );
        // Partition 2 got records; partition 0's high watermark moved; 1 is unchanged.
        let outcomes = [
            quiet(7),
            quiet(0),
            Outcome {
                has_records: true,
                ..quiet(0)
            },
        ];
        let answer = finish(&context, &mut cache, &incremental, V, &outcomes, 1);
        assert_eq!(
            answer,
            Answer {
                session_id: id,
                error_code: 0,
                send: vec![true, false, true]
            }
        );
        // Partition 2 returned records: it moves to the end of the session order.
        let mut next = request(id, 2, vec![]);
        let context = new_context(&mut cache, &mut next, V, 2);
        assert!(matches!(context, Context::Incremental { .. }));
        assert_eq!(
            names(&next),
            vec![("t".into(), 0, 0), ("t".into(), 1, 5), ("t".into(), 2, 0)]
        );
        // Nothing changed this time: no partition is sent.
        let answer = finish(
            &context,
            &mut cache,
            &next,
            V,
            &[quiet(7), quiet(0), quiet(0)],
            2,
        );
        assert_eq!(answer.send, vec![false, false, false]);
    }

    #[test]
    fn records_move_a_partition_to_the_end() {
        let mut cache = cache();
        let id = create(&mut cache, 3, 0);
        let mut incremental = request(id, 1, vec![]);
        let context = new_context(&mut cache, &mut incremental, V, 1);
        let data = Outcome {
            has_records: true,
            ..quiet(0)
        };
        finish(
            &context,
            &mut cache,
            &incremental,
            V,
            &[data, quiet(0), quiet(0)],
            1,
        );
        let mut next = request(id, 2, vec![]);
        new_context(&mut cache, &mut next, V, 2);
        let order: Vec<i32> = names(&next).into_iter().map(|(_, p, _)| p).collect();
        assert_eq!(order, vec![1, 2, 0]);
    }

    #[test]
    fn incremental_adds_and_forgets_partitions() {
        let mut cache = cache();
        let id = create(&mut cache, 2, 0);
        let mut add = request(id, 1, vec![topic("u", vec![partition(0, 9)])]);
        add.forgotten_topics_data = vec![wire::generated::fetch_request::ForgottenTopic {
            topic: "t".into(),
            partitions: vec![0, 7],
            ..Default::default()
        }];
        let context = new_context(&mut cache, &mut add, V, 1);
        assert!(matches!(context, Context::Incremental { .. }));
        assert_eq!(names(&add), vec![("t".into(), 1, 0), ("u".into(), 0, 9)]);
        // An added partition is always sent the first time (nothing cached about it yet).
        let answer = finish(&context, &mut cache, &add, V, &[quiet(0), quiet(0)], 1);
        assert_eq!(answer.send, vec![false, true]);
        assert_eq!(cache.total_partitions(), 2);
    }

    #[test]
    fn forgetting_every_partition_closes_the_session() {
        let mut cache = cache();
        let id = create(&mut cache, 1, 0);
        let mut forget = request(id, 1, vec![]);
        forget.forgotten_topics_data = vec![wire::generated::fetch_request::ForgottenTopic {
            topic: "t".into(),
            partitions: vec![0],
            ..Default::default()
        }];
        let context = new_context(&mut cache, &mut forget, V, 1);
        assert!(matches!(context, Context::Sessionless));
        assert_eq!(cache.len(), 0);
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn session_errors() {
        let mut cache = cache();
        let id = create(&mut cache, 1, 0);
        let error = |context: Context| match context {
            Context::Error(code) => code,
            _ => panic!("expected a session error"),
        };
        // Unknown id.
        let mut unknown = request(id ^ 1, 1, vec![]);
        assert_eq!(
            error(new_context(&mut cache, &mut unknown, V, 1)),
            ErrorCode::FetchSessionIdNotFound
        );
        // Wrong epoch (a replayed or skipped request).
        let mut stale = request(id, 2, vec![]);
        assert_eq!(
            error(new_context(&mut cache, &mut stale, V, 1)),
            ErrorCode::InvalidFetchSessionEpoch
        );
        // Topic names in the session, ids in the request (v13+).
        let mut by_id = request(id, 1, vec![]);
        assert_eq!(
            error(new_context(&mut cache, &mut by_id, 13, 1)),
            ErrorCode::FetchSessionTopicIdError
        );
        // None of those moved the epoch: epoch 1 still works.
        let mut good = request(id, 1, vec![]);
        assert!(matches!(
            new_context(&mut cache, &mut good, V, 1),
            Context::Incremental { .. }
        ));
        // A concurrent request that moved the epoch on first fails this one at response time.
        let mut first = request(id, 2, vec![]);
        let first_context = new_context(&mut cache, &mut first, V, 1);
        let mut second = request(id, 3, vec![]);
        let _second_context = new_context(&mut cache, &mut second, V, 1);
        let answer = finish(&first_context, &mut cache, &first, V, &[quiet(0)], 1);
        assert_eq!(
            answer.error_code,
            ErrorCode::InvalidFetchSessionEpoch.code()
        );
        assert_eq!(answer.session_id, id);
    }

    #[test]
    fn full_fetch_closes_named_session_and_final_epoch_makes_none() {
        let mut cache = cache();
        let id = create(&mut cache, 1, 0);
        let mut close = request(id, FINAL_EPOCH, vec![topic("t", vec![partition(0, 0)])]);
        let context = new_context(&mut cache, &mut close, V, 1);
        assert!(matches!(context, Context::Sessionless));
        assert!(cache.get(id).is_none());
        let answer = finish(&context, &mut cache, &close, V, &[quiet(0)], 1);
        assert_eq!(answer.session_id, INVALID_SESSION_ID);
        // Old versions never get a session.
        let mut old = request(0, INITIAL_EPOCH, vec![]);
        assert!(matches!(
            new_context(&mut cache, &mut old, 6, 1),
            Context::Sessionless
        ));
    }

    #[test]
    fn errors_are_always_sent_and_resent_when_cleared() {
        let mut cache = cache();
        let id = create(&mut cache, 1, 0);
        let failed = Outcome {
            error_code: ErrorCode::NotLeaderOrFollower.code(),
            high_watermark: -1,
            log_start_offset: -1,
            has_records: false,
        };
        for epoch in 1..=2 {
            let mut r = request(id, epoch, vec![]);
            let context = new_context(&mut cache, &mut r, V, 1);
            assert_eq!(
                finish(&context, &mut cache, &r, V, &[failed], 1).send,
                vec![true]
            );
        }
        let mut r = request(id, 3, vec![]);
        let context = new_context(&mut cache, &mut r, V, 1);
        assert_eq!(
            finish(&context, &mut cache, &r, V, &[quiet(0)], 1).send,
            vec![true]
        );
    }

    #[test]
    fn eviction_follows_kafka() {
        let mut cache = SessionCache::new(0, 1, 2, MAX_CACHED_BYTES_PER_SHARD);
        let small = create(&mut cache, 1, 0);
        let large = create(&mut cache, 5, 0);
        // Full, and both sessions are young: a new one is refused whatever its size.
        let mut full = request(0, INITIAL_EPOCH, vec![topic("t", vec![partition(0, 0)])]);
        let context = new_context(&mut cache, &mut full, V, 1_000);
        let refused = finish(&context, &mut cache, &full, V, &[quiet(0)], 1_000);
        assert_eq!(refused.session_id, INVALID_SESSION_ID);
        assert_eq!(cache.len(), 2);
        // Once old enough, a session of 3 partitions evicts the smallest (1 partition)...
        let now = MIN_EVICTION_MS + 10;
        // ...but first keep both recently used so that neither is stale.
        for id in [small, large] {
            let epoch = cache.get(id).unwrap().borrow().epoch;
            let mut r = request(id, epoch, vec![]);
            new_context(&mut cache, &mut r, V, now);
        }
        let three = create(&mut cache, 3, now + 1);
        assert_ne!(three, INVALID_SESSION_ID);
        assert!(cache.get(small).is_none(), "the smaller session is evicted");
        assert!(cache.get(large).is_some());
        assert_eq!(cache.evictions, 1);
        // A session smaller than every evictable one cannot evict (the 3-partition one is
        // young; the 5-partition one is larger).
        let mut one = request(0, INITIAL_EPOCH, vec![topic("t", vec![partition(0, 0)])]);
        let context = new_context(&mut cache, &mut one, V, now + 2);
        let answer = finish(&context, &mut cache, &one, V, &[quiet(0)], now + 2);
        assert_eq!(answer.session_id, INVALID_SESSION_ID);
        // A session unused for longer than MIN_EVICTION_MS is evicted by anyone.
        let later = now + 2 + MIN_EVICTION_MS + 1;
        let tiny = create(&mut cache, 1, later);
        assert_ne!(tiny, INVALID_SESSION_ID);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.evictions, 2);
    }

    #[test]
    fn slots_are_divided_among_shards_and_ids_name_their_shard() {
        let shards = 3;
        let caches: Vec<SessionCache> = (0..shards)
            .map(|s| SessionCache::new(s, shards, 1000, MAX_CACHED_BYTES_PER_SHARD))
            .collect();
        let slots: Vec<usize> = caches.iter().map(|c| c.max_entries()).collect();
        assert_eq!(slots, vec![334, 333, 333]);
        for mut cache in caches {
            for _ in 0..50 {
                let id = create(&mut cache, 1, 0);
                assert!(id > 0);
                assert_eq!(SessionCache::owner(id, shards), cache.shard);
            }
        }
        // No slots: no session.
        let mut none = SessionCache::new(0, 1, 0, MAX_CACHED_BYTES_PER_SHARD);
        let mut full = request(0, INITIAL_EPOCH, vec![topic("t", vec![partition(0, 0)])]);
        let context = new_context(&mut none, &mut full, V, 0);
        assert_eq!(
            finish(&context, &mut none, &full, V, &[quiet(0)], 0).session_id,
            INVALID_SESSION_ID
        );
    }

    #[test]
    fn memory_bound_refuses_and_closes_sessions() {
        // Room for three partitions of topic "t".
        let bound = 3 * (PARTITION_COST + 1);
        let mut cache = SessionCache::new(0, 1, 10, bound);
        let mut too_big = request(
            0,
            INITIAL_EPOCH,
            vec![topic("t", (0..4).map(|p| partition(p, 0)).collect())],
        );
        let context = new_context(&mut cache, &mut too_big, V, 0);
        let answer = finish(&context, &mut cache, &too_big, V, &[quiet(0); 4], 0);
        assert_eq!(answer.session_id, INVALID_SESSION_ID);
        assert_eq!(answer.send, vec![true; 4]);
        assert_eq!(cache.bytes(), 0);
        let id = create(&mut cache, 3, 0);
        assert_ne!(id, INVALID_SESSION_ID);
        assert_eq!(cache.bytes(), bound);
        // Growing past the bound closes the session and answers without one.
        let mut grow = request(id, 1, vec![topic("t", vec![partition(3, 0)])]);
        let context = new_context(&mut cache, &mut grow, V, 1);
        assert!(matches!(context, Context::Sessionless));
        assert_eq!(names(&grow), vec![("t".into(), 3, 0)]);
        assert_eq!(cache.len(), 0);
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn epochs_wrap_as_kafka() {
        assert_eq!(next_epoch(INITIAL_EPOCH), 1);
        assert_eq!(next_epoch(i32::MAX), 1);
        assert_eq!(next_epoch(FINAL_EPOCH), FINAL_EPOCH);
    }
}

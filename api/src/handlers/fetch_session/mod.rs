//! Fetch sessions (KIP-227), as Kafka's FetchManager, FetchContext and FetchSessionCacheShard
//! keep them: a full fetch (epoch 0) may create a session that caches the partitions it
//! named; later incremental fetches (epoch 1, 2, ...) name only the partitions that changed or
//! are to be forgotten, and their responses carry only the partitions with something new
//! (records, a moved high watermark or log start offset, an error).
//!
//! Each shard keeps its own cache, for the connections it serves: Kafka shards its cache too
//! (KAFKA-9401), dividing `max.incremental.fetch.session.cache.slots` among the shards and
//! giving each shard a range of session ids, so the id says which shard holds the session.
//! A session is only ever used from the shard that created it; an incremental fetch that
//! arrives on another shard (the client reconnected: SO_REUSEPORT may place the new
//! connection anywhere) gets FETCH_SESSION_ID_NOT_FOUND and the client starts over with a full
//! fetch, which closes the old session on its shard over the mesh.
//!
//! Layout: `cache` is the session cache itself (data and pure functions, below `shard`, which
//! holds a `ShardSessions`); this module adds what needs the shard: finding the shard's cache,
//! and closing a session another shard holds over the mesh.

use std::rc::Rc;
use std::time::Instant;

use wire::generated::FetchRequest;
use wire::ErrorCode;

use crate::forward;
use crate::shard::Shard;

pub mod cache;

pub use cache::*;

impl ShardSessions {
    fn with<T>(&self, shard: &Shard, f: impl FnOnce(&mut SessionCache) -> T) -> T {
        let mut cache = self.cache.borrow_mut();
        let cache = cache.get_or_insert_with(|| {
            SessionCache::new(
                shard.id,
                shard.shard_count(),
                shard.config.max_incremental_fetch_session_cache_slots as usize,
                MAX_CACHED_BYTES_PER_SHARD,
            )
        });
        f(cache)
    }

    fn now_ms(&self) -> u64 {
        self.started.get_or_init(Instant::now).elapsed().as_millis() as u64
    }

    /// Closes session `id` if this shard holds it (a full fetch named it on another shard).
    pub fn close(&self, shard: &Shard, id: i32) {
        self.with(shard, |cache| cache.remove(id));
    }
}

/// Opens the session context of `request` on this shard, first closing on its shard a
/// session that a full fetch names and that another shard holds.
pub async fn open(shard: &Rc<Shard>, request: &mut FetchRequest, version: i16) -> Context {
    let shard_count = shard.shard_count();
    let named = request.session_id;
    let full = request.session_epoch == INITIAL_EPOCH || request.session_epoch == FINAL_EPOCH;
    if version >= 7 && named != INVALID_SESSION_ID {
        let owner = SessionCache::owner(named, shard_count);
        if owner != shard.id {
            if !full {
                return Context::Error(ErrorCode::FetchSessionIdNotFound);
            }
            shard
                .call(owner, forward::CloseFetchSession { session_id: named })
                .await;
        }
    }
    let sessions = &shard.fetch_sessions;
    let now_ms = sessions.now_ms();
    sessions.with(shard, |cache| new_context(cache, request, version, now_ms))
}

/// Completes the session side of a fetch answered with `outcomes` (see [`finish`]).
pub fn complete(
    shard: &Shard,
    context: &Context,
    request: &FetchRequest,
    version: i16,
    outcomes: &[Outcome],
) -> Answer {
    let sessions = &shard.fetch_sessions;
    let now_ms = sessions.now_ms();
    sessions.with(shard, |cache| {
        let answer = finish(context, cache, request, version, outcomes, now_ms);
        if matches!(context, Context::Full) {
            tracing::debug!(
                shard = shard.id,
                session_id = answer.session_id,
                partitions = outcomes.len(),
                sessions = cache.len(),
                slots = cache.max_entries(),
                cached_partitions = cache.total_partitions(),
                cached_bytes = cache.bytes(),
                evictions = cache.evictions,
                "full fetch"
            );
        }
        answer
    })
}

//! Bounds on connections and on the memory they hold.
//!
//! - Broker-wide: open connections (`max.connections`, capped by the file-descriptor limit)
//!   and connections per client IP (`max.connections.per.ip`). Counted with atomics shared by
//!   every shard (and a lock on accept and close only, when a per-IP limit is set): each
//!   shard accepts on its own `SO_REUSEPORT` listener, so no shard alone sees the total.
//! - Per shard ([`ShardBudget`]): bytes of requests read and of responses not yet written
//!   (`queued.max.request.bytes`). Over it, the shard's connections stop reading their
//!   sockets until responses drain (back-pressure: the kernel's socket buffers, then TCP flow
//!   control, hold the rest).
//! - Per connection ([`ConnectionLoad`]): requests read and not yet answered on the wire
//!   (`queued.max.requests`; Kafka counts them per broker, here per connection, so that
//!   parked long polls of many consumers cannot stop a shard from reading), requests whose
//!   handler runs ([`MAX_IN_PROCESS`], of them fetches: [`MAX_FETCHES_IN_PROCESS`], since a
//!   fetch's records are in memory until written), and bytes held
//!   ([`MAX_CONNECTION_PENDING_BYTES`]), so a client that never reads its responses stalls
//!   itself, not its neighbours.

use std::cell::Cell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use config::BrokerConfig;

/// `queued.max.request.bytes` when unset (Kafka's -1, unlimited): bytes of requests and
/// unwritten responses one shard holds before its connections stop reading.
pub const DEFAULT_SHARD_PENDING_BYTES: usize = 64 << 20;

/// Bytes of requests and unwritten responses one connection holds before it stops reading.
/// A single frame or response larger than this is still served (the check is made before
/// reading more), so this bounds pipelining, not message size.
pub const MAX_CONNECTION_PENDING_BYTES: usize = 16 << 20;

/// Share of `RLIMIT_NOFILE` connections may use when `max.connections` is left at Kafka's
/// unlimited default (or set above it): the rest stays for partition logs, the metadata log
/// and the executor's own descriptors, so a connection flood cannot make a log fail to open.
const CONNECTION_FD_SHARE_NUM: u64 = 3;
const CONNECTION_FD_SHARE_DEN: u64 = 4;

/// A refusal is logged at most this often per shard (with the count since the last line), so a
/// connection flood cannot turn into a log flood.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(1);

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (connections are file descriptors) and
/// returns the soft limit now in force.
pub fn raise_fd_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit.rlim_cur = limit.rlim_max;
            }
        }
    }
    limit.rlim_cur
}

/// Why a new connection was refused.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("max.connections ({0}) reached")]
    TooManyConnections(usize),
    #[error("max.connections.per.ip ({limit}) reached for {ip}")]
    TooManyFromIp { ip: IpAddr, limit: usize },
}

/// Broker-wide connection counts, shared by every shard.
pub struct ConnectionLimits {
    max_connections: usize,
    max_per_ip: usize,
    open: AtomicUsize,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

impl ConnectionLimits {
    /// Limits from the configuration; `fd_limit` is the soft `RLIMIT_NOFILE` in force.
    pub fn new(config: &BrokerConfig, fd_limit: u64) -> Arc<ConnectionLimits> {
        let fd_bound = (fd_limit / CONNECTION_FD_SHARE_DEN * CONNECTION_FD_SHARE_NUM).max(1);
        let max_connections = (config.max_connections as u64).min(fd_bound) as usize;
        Arc::new(ConnectionLimits {
            max_connections,
            max_per_ip: config.max_connections_per_ip as usize,
            open: AtomicUsize::new(0),
            per_ip: Mutex::new(HashMap::new()),
        })
    }

    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// Counts a new connection from `ip`, or says why it must be closed at once.
    pub fn admit(self: &Arc<Self>, ip: Option<IpAddr>) -> Result<ConnectionSlot, Refusal> {
        if self.open.fetch_add(1, Ordering::AcqRel) >= self.max_connections {
            self.open.fetch_sub(1, Ordering::AcqRel);
            return Err(Refusal::TooManyConnections(self.max_connections));
        }
        // Unlimited per IP (Kafka's default): no map, no lock.
        let ip = ip.filter(|_| self.max_per_ip < i32::MAX as usize);
        if let Some(ip) = ip {
            let mut per_ip = self
                .per_ip
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let count = per_ip.entry(ip).or_insert(0);
            if *count >= self.max_per_ip {
                drop(per_ip);
                self.open.fetch_sub(1, Ordering::AcqRel);
                return Err(Refusal::TooManyFromIp {
                    ip,
                    limit: self.max_per_ip,
                });
            }
            *count += 1;
        }
        Ok(ConnectionSlot {
            limits: self.clone(),
            ip,
        })
    }
}

/// One admitted connection; dropping it (when the connection ends) frees its place.
pub struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    ip: Option<IpAddr>,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        if let Some(ip) = self.ip {
            let mut per_ip = self
                .limits
                .per_ip
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if let Some(count) = per_ip.get_mut(&ip) {
                *count -= 1;
                if *count == 0 {
                    per_ip.remove(&ip);
                }
            }
        }
        self.limits.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Logs refused connections at most once per [`REFUSAL_LOG_INTERVAL`] per shard.
#[derive(Default)]
pub struct RefusalLog {
    last: Cell<Option<Instant>>,
    unlogged: Cell<u64>,
}

impl RefusalLog {
    pub fn refused(&self, shard: usize, peer: &str, refusal: &Refusal) {
        let now = Instant::now();
        if self
            .last
            .get()
            .is_some_and(|last| now.duration_since(last) < REFUSAL_LOG_INTERVAL)
        {
            self.unlogged.set(self.unlogged.get() + 1);
            return;
        }
        let also = self.unlogged.replace(0);
        self.last.set(Some(now));
        tracing::warn!(shard, peer = %peer, reason = %refusal, also_refused_since_last_line = also, "refusing connection");
    }
}

/// One shard's budget of bytes held for its connections (requests read, responses not yet
/// written).
pub struct ShardBudget {
    max_bytes: usize,
    bytes: Cell<usize>,
    /// Notified when usage falls back under the limit, to wake connections that stopped reading.
    released: event_listener::Event,
}

impl ShardBudget {
    pub fn new(config: &BrokerConfig) -> Rc<ShardBudget> {
        let max_bytes = if config.queued_max_request_bytes > 0 {
            config.queued_max_request_bytes as usize
        } else {
            DEFAULT_SHARD_PENDING_BYTES
        };
        Rc::new(ShardBudget {
            max_bytes,
            bytes: Cell::new(0),
            released: event_listener::Event::new(),
        })
    }

    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Bytes held by this shard now.
    pub fn bytes_held(&self) -> usize {
        self.bytes.get()
    }

    fn add_bytes(&self, bytes: usize) {
        self.bytes.set(self.bytes.get() + bytes);
    }

    fn sub_bytes(&self, bytes: usize) {
        let before = self.bytes.get();
        self.bytes.set(before - bytes);
        if before >= self.max_bytes && before - bytes < self.max_bytes {
            self.released.notify(usize::MAX);
        }
    }
}

/// Requests of one connection whose handler is running at the same time (pipelining: e.g.
/// produces sharing one group commit). Kafka runs one at a time per connection.
pub const MAX_IN_PROCESS: usize = 64;

/// Fetches of one connection whose handler is running at the same time. A fetch response can
/// be as large as the client asks (its records are read into memory before they are
/// written), and clients never pipeline fetches to one broker; so one, as in Kafka.
pub const MAX_FETCHES_IN_PROCESS: usize = 1;

/// One connection's load: requests read and not yet answered on the wire (bounded by
/// `queued.max.requests`), requests whose handler runs ([`MAX_IN_PROCESS`],
/// [`MAX_FETCHES_IN_PROCESS`]), and bytes held ([`MAX_CONNECTION_PENDING_BYTES`], and the
/// shard's budget for reading).
pub struct ConnectionLoad {
    budget: Rc<ShardBudget>,
    max_requests: usize,
    requests: Cell<usize>,
    in_process: Cell<usize>,
    fetches: Cell<usize>,
    held: Cell<usize>,
    /// Notified whenever this connection's load falls (only its reader listens).
    released: event_listener::Event,
}

impl ConnectionLoad {
    pub fn new(budget: Rc<ShardBudget>, max_requests: usize) -> Rc<ConnectionLoad> {
        Rc::new(ConnectionLoad {
            budget,
            max_requests: max_requests.max(1),
            requests: Cell::new(0),
            in_process: Cell::new(0),
            fetches: Cell::new(0),
            held: Cell::new(0),
            released: event_listener::Event::new(),
        })
    }

    /// Whether this connection may hand one more request (a fetch or not) to its handler.
    /// `unread` is what its read buffer holds (that frame among it), not counted here: a frame
    /// already read must never wait for itself.
    pub fn may_dispatch(&self, fetch: bool, unread: usize) -> bool {
        self.requests.get() < self.max_requests
            && self.in_process.get() < MAX_IN_PROCESS
            && (!fetch || self.fetches.get() < MAX_FETCHES_IN_PROCESS)
            && self.held.get().saturating_sub(unread) < MAX_CONNECTION_PENDING_BYTES
    }

    /// Whether this connection may read more bytes (its own bound and its shard's). `unread`
    /// (its partial frame) is not counted: a frame must always be able to complete, or a frame
    /// above a bound would wait for itself.
    pub fn may_read(&self, unread: usize) -> bool {
        self.held.get().saturating_sub(unread) < MAX_CONNECTION_PENDING_BYTES
            && self.budget.bytes.get().saturating_sub(unread) < self.budget.max_bytes
    }

    /// Resolves after the next release of this connection's or its shard's load; create it
    /// before checking the condition, then await it if the condition is still false.
    pub fn listen(&self) -> impl std::future::Future<Output = ()> {
        let own = self.released.listen();
        let shard = self.budget.released.listen();
        async move {
            futures::future::select(own, shard).await;
        }
    }

    /// Requests read and not yet answered on the wire.
    pub fn requests(&self) -> usize {
        self.requests.get()
    }

    /// Fetches whose handler runs (a long poll may be parked among them).
    pub fn fetches(&self) -> usize {
        self.fetches.get()
    }

    /// Holds `bytes` until the returned guard is dropped.
    pub fn charge(self: &Rc<Self>, bytes: usize) -> Charge {
        self.add(bytes);
        Charge {
            owner: self.clone(),
            bytes,
        }
    }

    fn add(&self, bytes: usize) {
        self.held.set(self.held.get() + bytes);
        self.budget.add_bytes(bytes);
    }

    fn sub(&self, bytes: usize) {
        self.held.set(self.held.get() - bytes);
        self.budget.sub_bytes(bytes);
        self.released.notify(usize::MAX);
    }
}

/// Bytes held (a request frame, a partial frame in the read buffer, or a response not yet
/// written); released when dropped, however the connection ends.
pub struct Charge {
    owner: Rc<ConnectionLoad>,
    bytes: usize,
}

impl Charge {
    /// Takes `bytes` out of this charge into a new one (a whole frame out of the read buffer's).
    pub fn split(&mut self, bytes: usize) -> Charge {
        let bytes = bytes.min(self.bytes);
        self.bytes -= bytes;
        Charge {
            owner: self.owner.clone(),
            bytes,
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds `bytes` to this charge.
    pub fn grow(&mut self, bytes: usize) {
        self.owner.add(bytes);
        self.bytes += bytes;
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.owner.sub(self.bytes);
        }
    }
}

/// A request counted against `queued.max.requests` until its response is written.
struct RequestSlot {
    owner: Rc<ConnectionLoad>,
}

impl Drop for RequestSlot {
    fn drop(&mut self) {
        self.owner.requests.set(self.owner.requests.get() - 1);
        self.owner.released.notify(usize::MAX);
    }
}

/// A request whose handler runs.
struct InProcess {
    owner: Rc<ConnectionLoad>,
    fetch: bool,
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.owner.in_process.set(self.owner.in_process.get() - 1);
        if self.fetch {
            self.owner.fetches.set(self.owner.fetches.get() - 1);
        }
        self.owner.released.notify(usize::MAX);
    }
}

/// What a request holds while its handler runs: its places among the connection's requests
/// and its frame's bytes. [`Held::finish`] trades the frame's bytes for the response's.
pub struct Held {
    load: Rc<ConnectionLoad>,
    slot: RequestSlot,
    in_process: InProcess,
    frame: Charge,
}

impl Held {
    /// Counts a request of `load` (`fetch`: a Fetch request) whose frame holds `frame`.
    pub fn new(load: &Rc<ConnectionLoad>, fetch: bool, frame: Charge) -> Held {
        load.requests.set(load.requests.get() + 1);
        load.in_process.set(load.in_process.get() + 1);
        if fetch {
            load.fetches.set(load.fetches.get() + 1);
        }
        Held {
            load: load.clone(),
            slot: RequestSlot {
                owner: load.clone(),
            },
            in_process: InProcess {
                owner: load.clone(),
                fetch,
            },
            frame,
        }
    }

    /// The handler is done: the frame's bytes are released and the response's are held until
    /// it is written. `response` is a handler's output (`handlers::Response`).
    pub fn finish(self, response: crate::Response) -> Outcome {
        let Held {
            load,
            slot,
            in_process,
            frame,
        } = self;
        drop(frame);
        drop(in_process);
        let Some(frame) = response? else {
            return Ok(None);
        };
        // File ranges count as the bytes they will put on the wire: they hold their segment
        // files open (and the page cache busy) until sent, as bytes would hold memory.
        let charge = load.charge(frame.len());
        Ok(Some(HeldResponse {
            frame,
            _charge: charge,
            _slot: slot,
        }))
    }
}

/// A request task's output: the response to write (holding its bytes), none (acks=0), or the
/// reason to close the connection.
pub type Outcome = Result<Option<HeldResponse>, String>;

/// An encoded response frame waiting for its write; holds its bytes and its request's place.
pub struct HeldResponse {
    pub frame: crate::transport::Frame,
    _charge: Charge,
    _slot: RequestSlot,
}

impl std::borrow::Borrow<crate::transport::Frame> for HeldResponse {
    fn borrow(&self) -> &crate::transport::Frame {
        &self.frame
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(requests: u32, shard_bytes: i64) -> Rc<ConnectionLoad> {
        let mut config = BrokerConfig::default();
        config.queued_max_requests = requests;
        config.queued_max_request_bytes = shard_bytes;
        ConnectionLoad::new(ShardBudget::new(&config), requests as usize)
    }

    #[test]
    fn charges_are_released_however_they_end() {
        let load = load(2, 1000);
        let mut buffered = load.charge(0);
        buffered.grow(1500);
        assert!(load.may_read(1500), "a partial frame may always complete");
        let other = load.charge(1000);
        assert!(!load.may_read(1500), "over the shard's 1000 bytes");
        let held = Held::new(&load, true, buffered.split(1200));
        assert!(
            !load.may_dispatch(true, 300),
            "one fetch in process at a time"
        );
        assert!(load.may_dispatch(false, 300));
        assert!(
            load.may_dispatch(false, 1 << 30),
            "a frame already read never waits for itself"
        );
        let response = held
            .finish(Ok(Some(bytes::BytesMut::from(&[0u8; 100][..]).into())))
            .unwrap()
            .unwrap();
        drop(other);
        assert_eq!(load.held.get(), 300 + 100);
        assert!(load.may_read(300));
        assert!(load.may_dispatch(true, 300));
        assert_eq!(load.requests(), 1, "counted until written");
        drop(response);
        drop(buffered);
        assert_eq!(
            (load.held.get(), load.budget.bytes_held(), load.requests()),
            (0, 0, 0)
        );
    }

    #[test]
    fn queued_max_requests_counts_unwritten_responses() {
        let load = load(2, -1);
        assert_eq!(load.budget.max_bytes(), DEFAULT_SHARD_PENDING_BYTES);
        let a = Held::new(&load, false, load.charge(10))
            .finish(Ok(Some(bytes::BytesMut::new().into())));
        let b = Held::new(&load, false, load.charge(10));
        assert!(!load.may_dispatch(false, 0));
        drop(a);
        assert!(load.may_dispatch(false, 0));
        assert!(b.finish(Ok(None)).unwrap().is_none());
        assert_eq!(load.requests(), 0);
    }

    #[test]
    fn connection_limits_count_per_ip_and_in_total() {
        let mut config = BrokerConfig::default();
        config.max_connections_per_ip = 1;
        let limits = ConnectionLimits::new(&config, 8);
        assert_eq!(limits.max_connections(), 6, "3/4 of RLIMIT_NOFILE");
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let two: IpAddr = "10.0.0.2".parse().unwrap();
        let first = limits.admit(Some(one)).unwrap();
        assert!(matches!(
            limits.admit(Some(one)),
            Err(Refusal::TooManyFromIp { .. })
        ));
        let _second = limits.admit(Some(two)).unwrap();
        drop(first);
        let _again = limits.admit(Some(one)).unwrap();
        let others: Vec<_> = (3..8)
            .map(|i| limits.admit(Some(format!("10.0.0.{i}").parse().unwrap())))
            .collect();
        assert!(others[..4].iter().all(Result::is_ok));
        assert!(matches!(others[4], Err(Refusal::TooManyConnections(6))));
    }
}

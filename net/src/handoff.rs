//! Connection handoff: a plaintext connection whose Produce and Fetch requests mostly touch
//! partitions owned by another shard is moved to that shard, so that its requests are served
//! without crossing the mesh (a forwarded single-record produce costs the broker several times
//! the CPU of a local one: two ring hops, two wake-ups).
//!
//! The handlers note the owner shard of each partition a request touches in the connection's
//! [`Tally`]; the connection's read loop counts the requests and, every
//! [`DECIDE_EVERY_REQUESTS`] of them, asks the tally whether one other shard owns at least
//! [`MOVE_SHARE_NUM`]/[`MOVE_SHARE_DEN`] of what they touched. If so, at a quiet point (a
//! frame boundary, no request of the connection in process, every response written) the
//! socket (a duplicate of its fd), the bytes read but not yet handed out (a partial frame) and
//! the connection's identity travel to that shard as a [`Moved`] over the mesh, and that shard
//! serves it from there (`connection::adopt`). A moved connection stays put for at least
//! [`HANDOFF_COOLDOWN`], so a mixed workload cannot make it bounce between shards.
//!
//! TLS connections (user-space or kernel TLS) stay where they were accepted: their session
//! state lives in that shard's memory (rustls) or would have to be re-checked in the kernel.

use std::cell::{Cell, OnceCell, RefCell};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::limits::{ConnectionSlot, ShardBudget};

/// Produce/Fetch requests of a connection looked at together before deciding whether it
/// belongs on another shard.
pub const DECIDE_EVERY_REQUESTS: u32 = 4;

/// Share of the partitions touched in a window that one other shard must own for the
/// connection to move there (hysteresis: a connection split evenly never moves).
pub const MOVE_SHARE_NUM: u64 = 3;
pub const MOVE_SHARE_DEN: u64 = 4;

/// A connection moves at most once in this long (counted from its accept or its last move).
pub const HANDOFF_COOLDOWN: Duration = Duration::from_secs(10);

/// Longest a connection stops reading to let its requests in process finish before a move.
/// Past it (a request that takes long: a slow disk, a client not reading its responses) it
/// reads again and moves at the next quiet point it comes to.
pub const QUIET_WAIT: Duration = Duration::from_millis(100);

/// Which shards own the partitions one connection's requests touch, over the current window.
pub struct Tally {
    /// The shard serving the connection.
    home: usize,
    /// `connection.handoff.enable` and a transport that can move (plaintext, more than one
    /// shard); otherwise nothing is counted.
    enabled: bool,
    requests: Cell<u32>,
    /// Partitions touched in the window, per owner shard.
    owners: RefCell<Vec<u32>>,
    /// No decision before this instant (cooldown after accept, a move or a dropped move).
    settled_until: Cell<Instant>,
    /// A decided move waiting for a quiet point.
    pending: Cell<Option<usize>>,
    /// The connection already stopped reading for [`QUIET_WAIT`] for the pending move.
    waited: Cell<bool>,
}

impl Tally {
    /// A tally for a connection on shard `home` of `shards`. A connection just accepted may
    /// move at once (`cooled`); one just moved waits [`HANDOFF_COOLDOWN`].
    pub fn new(home: usize, shards: usize, enabled: bool, cooled: bool) -> Rc<Tally> {
        let now = Instant::now();
        Rc::new(Tally {
            home,
            enabled: enabled && shards > 1,
            requests: Cell::new(0),
            owners: RefCell::new(vec![0; shards]),
            settled_until: Cell::new(if cooled { now } else { now + HANDOFF_COOLDOWN }),
            pending: Cell::new(None),
            waited: Cell::new(false),
        })
    }

    /// A tally that never moves anything (tests, connections that cannot move).
    pub fn off() -> Rc<Tally> {
        Tally::new(0, 1, false, true)
    }

    /// Notes one partition of a Produce or Fetch request, owned by shard `owner`.
    pub fn note(&self, owner: usize) {
        if !self.enabled || self.pending.get().is_some() {
            return;
        }
        if let Some(count) = self.owners.borrow_mut().get_mut(owner) {
            *count = count.saturating_add(1);
        }
    }

    /// Counts one Produce or Fetch request handed to its handler; at the end of a window,
    /// decides whether the connection should move (see [`Tally::pending`]).
    pub fn request(&self) {
        if !self.enabled || self.pending.get().is_some() {
            return;
        }
        let requests = self.requests.get() + 1;
        if requests < DECIDE_EVERY_REQUESTS {
            self.requests.set(requests);
            return;
        }
        // The handlers of the window's last requests may not have run yet: what they touch
        // counts in the next window.
        self.requests.set(0);
        let mut owners = self.owners.borrow_mut();
        let total: u64 = owners.iter().map(|&count| u64::from(count)).sum();
        let top = owners
            .iter()
            .enumerate()
            .max_by_key(|(_, &count)| count)
            .map(|(shard, &count)| (shard, u64::from(count)));
        owners.iter_mut().for_each(|count| *count = 0);
        if Instant::now() < self.settled_until.get() {
            return;
        }
        if let Some((shard, count)) = top {
            if total > 0 && shard != self.home && count * MOVE_SHARE_DEN >= total * MOVE_SHARE_NUM {
                self.pending.set(Some(shard));
            }
        }
    }

    /// The shard this connection should move to at its next quiet point, if any.
    pub fn pending(&self) -> Option<usize> {
        self.pending.get()
    }

    /// Whether the connection may still stop reading to reach a quiet point (once per move).
    pub fn may_wait(&self) -> bool {
        !self.waited.get()
    }

    /// The connection stopped reading for [`QUIET_WAIT`] without reaching a quiet point: from
    /// now on it reads, and moves at the first quiet point between reads.
    pub fn waited(&self) {
        self.waited.set(true);
    }
}

/// A connection on its way to another shard: everything `connection::serve` needs to go on
/// serving it there.
pub struct Moved {
    /// A duplicate of the socket's fd (the old shard closed its own without shutting the
    /// socket down).
    pub fd: OwnedFd,
    /// Bytes read from the socket and not yet handed out (at most a partial frame).
    pub unread: Bytes,
    pub peer: String,
    pub listener: String,
    pub principal: String,
    /// Its place under `max.connections`, kept across the move.
    pub slot: ConnectionSlot,
}

/// A shard's side of handoffs: the budget its connections (moved in or accepted) share.
#[derive(Default)]
pub struct ShardHandoff {
    budget: OnceCell<Rc<ShardBudget>>,
}

impl ShardHandoff {
    /// The shard's connection budget (`queued.max.request.bytes`), made on first use.
    pub fn budget(&self, config: &config::BrokerConfig) -> Rc<ShardBudget> {
        self.budget.get_or_init(|| ShardBudget::new(config)).clone()
    }
}

/// Duplicates `fd` (close-on-exec), so the socket outlives the old shard's stream.
pub fn duplicate(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: fcntl on a live fd; the result, when valid, is a new fd that we own.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `dup` was just returned by fcntl and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(dup) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(tally: &Tally, owners: &[usize]) {
        for &owner in owners {
            tally.note(owner);
        }
        tally.request();
    }

    #[test]
    fn moves_when_another_shard_owns_most() {
        let tally = Tally::new(0, 2, true, true);
        for _ in 0..DECIDE_EVERY_REQUESTS - 1 {
            window(&tally, &[1]);
            assert_eq!(tally.pending(), None, "no decision before a whole window");
        }
        window(&tally, &[1]);
        assert_eq!(tally.pending(), Some(1));
    }

    #[test]
    fn stays_when_split_or_home() {
        let split = Tally::new(0, 2, true, true);
        for _ in 0..DECIDE_EVERY_REQUESTS * 4 {
            window(&split, &[0, 1]);
        }
        assert_eq!(split.pending(), None, "an even split never moves");
        let home = Tally::new(1, 3, true, true);
        for _ in 0..DECIDE_EVERY_REQUESTS * 4 {
            window(&home, &[1, 1, 1, 2]);
        }
        assert_eq!(home.pending(), None, "most is home already");
        let three_quarters = Tally::new(0, 3, true, true);
        for _ in 0..DECIDE_EVERY_REQUESTS {
            window(&three_quarters, &[2, 2, 2, 0]);
        }
        assert_eq!(three_quarters.pending(), Some(2), "3/4 is enough");
    }

    #[test]
    fn off_or_cooling_never_moves() {
        for tally in [
            Tally::new(0, 2, false, true),
            Tally::new(0, 1, true, true),
            Tally::new(0, 2, true, false),
            Tally::off(),
        ] {
            for _ in 0..DECIDE_EVERY_REQUESTS * 4 {
                window(&tally, &[1]);
            }
            assert_eq!(tally.pending(), None);
        }
        let waited = Tally::new(0, 2, true, true);
        for _ in 0..DECIDE_EVERY_REQUESTS {
            window(&waited, &[1]);
        }
        assert!(waited.may_wait());
        waited.waited();
        for _ in 0..DECIDE_EVERY_REQUESTS * 4 {
            window(&waited, &[0]);
        }
        assert_eq!(waited.pending(), Some(1), "a decided move stays decided");
        assert!(!waited.may_wait(), "reading stops once per move");
    }

    #[test]
    fn unknown_owners_are_ignored() {
        let tally = Tally::new(0, 2, true, true);
        for _ in 0..DECIDE_EVERY_REQUESTS {
            window(&tally, &[7]);
        }
        assert_eq!(tally.pending(), None);
    }

    #[test]
    fn duplicate_keeps_the_socket_open() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let dup = duplicate(std::os::fd::AsRawFd::as_raw_fd(&a)).unwrap();
        drop(a);
        let a = std::os::unix::net::UnixStream::from(dup);
        use std::io::{Read, Write};
        (&a).write_all(b"x").unwrap();
        let mut byte = [0u8; 1];
        (&b).read_exact(&mut byte).unwrap();
        assert_eq!(&byte, b"x");
    }
}

//! Busy polling: while requests arrive close together a shard keeps polling its sockets
//! instead of sleeping between them; when they do not, it sleeps at once.
//!
//! Why: glommio parks an executor that runs out of work, and each park costs a
//! `membarrier(PRIVATE_EXPEDITED)` (IPIs to every core running a thread of the process), an
//! io_uring wait, a context switch, and on wake-up several more `io_uring_enter`s; a request
//! that finds its shard asleep waits for all of that. Polling costs the whole gap between two
//! requests in CPU, so it only pays when that gap is about what a park and wake-up costs:
//! `shard.busy.poll.us` is that threshold. The shard polls only while the recent average gap
//! between socket reads (all its connections together) is under it, and for at most that long
//! after the last read; otherwise it parks as before, so an idle or lightly loaded broker
//! uses no CPU.
//!
//! How, with glommio 0.9's API (its own `spin_before_park` is one fixed duration, set when the
//! executor is built): a spinner task, woken by the first read that finds the shard "hot",
//! sleeps in [`TICK`] steps while the shard stays hot. The executor spins a little longer
//! than a tick ([`EXECUTOR_SPIN`]) before parking, so those ticks expire in its spin loop
//! (which polls the rings without a syscall) rather than in a kernel sleep.

use std::cell::Cell;
use std::future::poll_fn;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

/// How long the spinner sleeps between two looks at whether the shard is still hot.
const TICK: Duration = Duration::from_micros(5);

/// glommio's own spin before parking, when busy polling is on: long enough for a [`TICK`]
/// timer to expire in the spin loop. Also what every transition to idle costs once.
pub const EXECUTOR_SPIN: Duration = Duration::from_micros(10);

/// The newest gap's weight in the running average is 1/2^EWMA_SHIFT.
const EWMA_SHIFT: u32 = 3;

/// Gaps are counted at most this long, so that one long idle spell does not keep the shard
/// cold for thousands of requests afterwards.
const MAX_GAP_NS: u64 = 1_000_000_000;

/// One shard's state (each shard is one thread).
struct State {
    /// `shard.busy.poll.us` in ns; 0 = off.
    window_ns: Cell<u64>,
    last_read: Cell<Option<Instant>>,
    avg_gap_ns: Cell<u64>,
    /// The spinner while it waits for the shard to turn hot.
    spinner: Cell<Option<Waker>>,
    /// Times the shard turned hot, and time spent polling (for the shard's stats line).
    episodes: Cell<u64>,
    polled_ns: Cell<u64>,
}

thread_local! {
    static STATE: State = const {
        State {
            window_ns: Cell::new(0),
            last_read: Cell::new(None),
            avg_gap_ns: Cell::new(MAX_GAP_NS),
            spinner: Cell::new(None),
            episodes: Cell::new(0),
            polled_ns: Cell::new(0),
        }
    };
}

impl State {
    fn hot(&self, now: Instant) -> bool {
        let window = self.window_ns.get();
        window > 0
            && self.avg_gap_ns.get() < window
            && self.last_read.get().is_some_and(|last| {
                (now.saturating_duration_since(last).as_nanos() as u64) < window
            })
    }

    fn note_read(&self, now: Instant) {
        if let Some(last) = self.last_read.get() {
            let gap = (now.saturating_duration_since(last).as_nanos() as u64).min(MAX_GAP_NS);
            let avg = self.avg_gap_ns.get();
            self.avg_gap_ns
                .set(avg - (avg >> EWMA_SHIFT) + (gap >> EWMA_SHIFT));
        }
        self.last_read.set(Some(now));
    }
}

/// Called by a connection after each socket read that brought bytes, with the clock reading
/// it already took for that read.
pub fn note_read(now: Instant) {
    STATE.with(|state| {
        if state.window_ns.get() == 0 {
            return;
        }
        state.note_read(now);
        if state.hot(now) {
            if let Some(spinner) = state.spinner.take() {
                spinner.wake();
            }
        }
    });
}

/// The executor's spin before parking for a `shard.busy.poll.us` of `window`.
pub fn executor_spin(window: Duration) -> Option<Duration> {
    (!window.is_zero()).then_some(EXECUTOR_SPIN)
}

/// The spinner of the current shard (spawn once per shard); returns at once when `window`
/// is zero (busy polling off).
pub async fn run(window: Duration) {
    let window_ns = window.as_nanos() as u64;
    STATE.with(|state| state.window_ns.set(window_ns));
    if window_ns == 0 {
        return;
    }
    loop {
        poll_fn(|cx| {
            STATE.with(|state| {
                if state.hot(Instant::now()) {
                    Poll::Ready(())
                } else {
                    state.spinner.set(Some(cx.waker().clone()));
                    Poll::Pending
                }
            })
        })
        .await;
        let start = Instant::now();
        while STATE.with(|state| state.hot(Instant::now())) {
            glommio::timer::sleep(TICK).await;
        }
        STATE.with(|state| {
            state.episodes.set(state.episodes.get() + 1);
            state
                .polled_ns
                .set(state.polled_ns.get() + start.elapsed().as_nanos() as u64);
        });
    }
}

/// (times the shard turned hot, milliseconds spent polling) on this shard.
pub fn stats() -> (u64, u64) {
    STATE.with(|state| (state.episodes.get(), state.polled_ns.get() / 1_000_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(window_us: u64) -> State {
        State {
            window_ns: Cell::new(window_us * 1000),
            last_read: Cell::new(None),
            avg_gap_ns: Cell::new(MAX_GAP_NS),
            spinner: Cell::new(None),
            episodes: Cell::new(0),
            polled_ns: Cell::new(0),
        }
    }

    fn reads(state: &State, start: Instant, gap: Duration, count: u32) -> Instant {
        let mut now = start;
        for _ in 0..count {
            now += gap;
            state.note_read(now);
        }
        now
    }

    #[test]
    fn frequent_reads_turn_the_shard_hot_and_it_cools_after_the_window() {
        let state = state(50);
        let start = Instant::now();
        let last = reads(&state, start, Duration::from_micros(10), 200);
        assert!(state.hot(last));
        assert!(state.hot(last + Duration::from_micros(40)));
        assert!(!state.hot(last + Duration::from_micros(60)));
    }

    #[test]
    fn sparse_reads_never_turn_it_hot() {
        let state = state(50);
        let last = reads(&state, Instant::now(), Duration::from_micros(100), 500);
        assert!(!state.hot(last));
    }

    #[test]
    fn a_slowdown_cools_it_within_a_few_reads() {
        let state = state(50);
        let last = reads(&state, Instant::now(), Duration::from_micros(10), 200);
        assert!(state.hot(last));
        let last = reads(&state, last, Duration::from_millis(1), 3);
        assert!(!state.hot(last));
    }

    #[test]
    fn off_means_never_hot() {
        let state = state(0);
        let last = reads(&state, Instant::now(), Duration::from_nanos(10), 100);
        assert!(!state.hot(last));
    }
}

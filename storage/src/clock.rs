//! The clock side of the seam: wall time, monotonic time, timers and task spawning, real
//! (system clock, glommio's timer and executor) or simulated (`SimClock`: virtual time that
//! the test moves, and a deterministic single-threaded executor).
//!
//! Why spawning is here: code that waits on time (the group commit's flusher and its
//! periodic check) runs as tasks, and a simulation must own every task to make time virtual
//! and a run reproducible; the real side is the exact glommio call that was used before.

use std::future::Future;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::real;
use super::sim_clock::SimClock;

/// Time: the system's, or a simulated one the test moves. Cloning is cheap (nothing, or an
/// `Rc`).
#[derive(Clone, Default)]
pub enum Clock {
    #[default]
    Real,
    Sim(Rc<SimClock>),
}

impl Clock {
    /// Wall-clock time in ms since the epoch.
    #[inline]
    pub fn now_ms(&self) -> i64 {
        match self {
            Clock::Real => real::now_ms(),
            Clock::Sim(c) => c.now_ms(),
        }
    }

    /// Monotonic time, for durations (figures). The simulated clock maps virtual time onto
    /// an `Instant` fixed at its creation, so durations between two readings are virtual.
    #[inline]
    pub fn instant(&self) -> Instant {
        match self {
            Clock::Real => Instant::now(),
            Clock::Sim(c) => c.instant(),
        }
    }

    /// Completes once `d` has passed (glommio's timer, or the virtual clock).
    pub async fn sleep(&self, d: Duration) {
        match self {
            Clock::Real => {
                glommio::timer::sleep(d).await;
            }
            Clock::Sim(c) => c.sleep(d).await,
        }
    }

    /// Runs `task` detached on the current executor (glommio's on the real side).
    pub fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        match self {
            Clock::Real => {
                glommio::spawn_local(task).detach();
            }
            Clock::Sim(c) => c.spawn(task),
        }
    }
}

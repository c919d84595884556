//! A simulated clock: virtual time that only the test moves, timers on it, and a
//! deterministic single-threaded executor for the tasks of time-driven code (the group
//! commit's flusher, its rounds, acks=all waiters).
//!
//! Deterministic: tasks run in the order they were woken (`futures`' `LocalPool`), timers fire
//! in deadline order (ties in registration order), and nothing reads the host's clock, so a
//! run is a function of its seed. Bounds: one timer entry per live `sleep` future (a re-poll
//! replaces its entry), tasks as many as the code under test spawns.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures::executor::{LocalPool, LocalSpawner};
use futures::task::LocalSpawnExt;

pub struct SimClock {
    /// Wall-clock ms at virtual time zero.
    epoch_ms: i64,
    /// Virtual time since zero, in µs.
    elapsed_us: Cell<u64>,
    /// What `instant()` adds virtual time to.
    base: Instant,
    /// (deadline µs, registration number) -> the sleeping task's waker.
    timers: RefCell<BTreeMap<(u64, u64), Waker>>,
    next_timer: Cell<u64>,
    pool: RefCell<LocalPool>,
    spawner: RefCell<LocalSpawner>,
}

impl SimClock {
    /// A clock reading `epoch_ms` (wall time) at virtual zero.
    pub fn new(epoch_ms: i64) -> Rc<SimClock> {
        let pool = LocalPool::new();
        let spawner = pool.spawner();
        Rc::new(SimClock {
            epoch_ms,
            elapsed_us: Cell::new(0),
            base: Instant::now(),
            timers: RefCell::new(BTreeMap::new()),
            next_timer: Cell::new(0),
            pool: RefCell::new(pool),
            spawner: RefCell::new(spawner),
        })
    }

    pub fn now_ms(&self) -> i64 {
        self.epoch_ms + (self.elapsed_us.get() / 1000) as i64
    }

    pub fn now_us(&self) -> u64 {
        self.elapsed_us.get()
    }

    pub fn instant(&self) -> Instant {
        self.base + Duration::from_micros(self.elapsed_us.get())
    }

    /// Moves wall time forward by `ms` without running anything (timers due are woken; their
    /// tasks run at the next `run_until_stalled`).
    pub fn advance_ms(&self, ms: u64) {
        self.advance_to(self.elapsed_us.get() + ms * 1000);
    }

    fn advance_to(&self, us: u64) {
        assert!(us >= self.elapsed_us.get(), "time only moves forward");
        self.elapsed_us.set(us);
        loop {
            let due = {
                let mut timers = self.timers.borrow_mut();
                match timers.first_key_value() {
                    Some((&(deadline, _), _)) if deadline <= us => timers.pop_first(),
                    _ => None,
                }
            };
            match due {
                Some((_, waker)) => waker.wake(),
                None => break,
            }
        }
    }

    pub fn sleep(self: &Rc<Self>, d: Duration) -> Sleep {
        Sleep {
            clock: self.clone(),
            deadline_us: self.elapsed_us.get() + d.as_micros() as u64,
            entry: None,
        }
    }

    pub fn spawn(&self, task: impl Future<Output = ()> + 'static) {
        self.spawner
            .borrow()
            .spawn_local(task)
            .expect("the simulated executor is alive");
    }

    /// Runs every task until none can make progress without time moving.
    pub fn run_until_stalled(&self) {
        self.pool.borrow_mut().run_until_stalled();
    }

    /// Runs tasks while moving time forward by `d`, firing each timer at its deadline.
    pub fn run_for(&self, d: Duration) {
        let end = self.elapsed_us.get() + d.as_micros() as u64;
        loop {
            self.run_until_stalled();
            let next = self.timers.borrow().first_key_value().map(|(k, _)| k.0);
            match next {
                Some(deadline) if deadline <= end => self.advance_to(deadline),
                _ => break,
            }
        }
        self.advance_to(end);
        self.run_until_stalled();
    }

    /// Runs `fut` (and every task) to completion, moving time to the next timer whenever
    /// nothing can run. Panics when nothing can run and no timer is set (a deadlock). Not
    /// from inside a task.
    pub fn block_on<T>(&self, fut: impl Future<Output = T>) -> T {
        let mut fut = std::pin::pin!(fut);
        let woken = Arc::new(Woken(AtomicBool::new(true)));
        let waker = Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        loop {
            if woken.0.swap(false, Ordering::Relaxed) {
                if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                    return v;
                }
            }
            self.run_until_stalled();
            if woken.0.load(Ordering::Relaxed) {
                continue;
            }
            let next = self.timers.borrow().first_key_value().map(|(k, _)| k.0);
            match next {
                Some(deadline) => self.advance_to(deadline),
                None => panic!("simulation deadlock: no task can run and no timer is set"),
            }
        }
    }

    /// Drops every task and timer (the process died): what they held is released.
    pub fn kill_tasks(&self) {
        let pool = LocalPool::new();
        *self.spawner.borrow_mut() = pool.spawner();
        let old = std::mem::replace(&mut *self.pool.borrow_mut(), pool);
        drop(old);
        self.timers.borrow_mut().clear();
    }
}

/// `block_on`'s own future was woken (it is polled outside the pool).
struct Woken(AtomicBool);

impl std::task::Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// `SimClock::sleep`'s future.
pub struct Sleep {
    clock: Rc<SimClock>,
    deadline_us: u64,
    /// Its key in `timers` while registered.
    entry: Option<(u64, u64)>,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if this.clock.elapsed_us.get() >= this.deadline_us {
            if let Some(key) = this.entry.take() {
                this.clock.timers.borrow_mut().remove(&key);
            }
            return Poll::Ready(());
        }
        let key = *this.entry.get_or_insert_with(|| {
            let n = this.clock.next_timer.get();
            this.clock.next_timer.set(n + 1);
            (this.deadline_us, n)
        });
        this.clock
            .timers
            .borrow_mut()
            .insert(key, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(key) = self.entry.take() {
            if let Ok(mut timers) = self.clock.timers.try_borrow_mut() {
                timers.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_fire_in_deadline_order_on_virtual_time() {
        let clock = SimClock::new(1_000_000);
        let order = Rc::new(RefCell::new(Vec::new()));
        for (name, ms) in [("c", 30u64), ("a", 10), ("b", 20), ("a2", 10)] {
            let (c, o) = (clock.clone(), order.clone());
            clock.spawn(async move {
                c.sleep(Duration::from_millis(ms)).await;
                o.borrow_mut().push((name, c.now_ms()));
            });
        }
        clock.run_for(Duration::from_millis(15));
        assert_eq!(*order.borrow(), [("a", 1_000_010), ("a2", 1_000_010)]);
        assert_eq!(clock.now_ms(), 1_000_015);
        let c = clock.clone();
        let waited = clock.block_on(async move {
            let t0 = c.instant();
            c.sleep(Duration::from_millis(100)).await;
            c.instant() - t0
        });
        assert_eq!(waited, Duration::from_millis(100));
        assert_eq!(
            order.borrow().len(),
            4,
            "block_on fired the others on the way"
        );
        clock.kill_tasks();
    }
}

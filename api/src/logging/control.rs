//! The process's current logger levels and the tracing filter that reads them.
//!
//! Why not `EnvFilter` behind `reload`: an `EnvFilter` directive matches targets by string
//! prefix (`broker::handlers::fetch` would also take `broker::handlers::fetch_session`),
//! Kafka's loggers by module. The filter decides once per callsite (`register_callsite`
//! answers always or never, which tracing caches), so an event that is off costs the macro's
//! cached check only, and an enabled one takes no lock; a change rebuilds tracing's interest
//! cache (every callsite asks again) and moves the `log` crate's ceiling.

use std::sync::{OnceLock, RwLock};

use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber};
use tracing_subscriber::layer::Context;

use config::log_levels::{Level, LoggerLevels};

/// The current levels (one per process: tracing's subscriber is global too).
pub struct Control {
    current: RwLock<LoggerLevels>,
}

static CONTROL: OnceLock<Control> = OnceLock::new();

/// The process's levels (INFO everywhere when `init_broker` did not set them, as in tests).
pub fn control() -> &'static Control {
    CONTROL.get_or_init(|| Control::new(LoggerLevels::default()))
}

/// Sets the starting levels (before the subscriber is installed).
pub fn install(levels: LoggerLevels) -> &'static Control {
    let control = control();
    *control.write() = levels;
    control
}

impl Control {
    fn new(levels: LoggerLevels) -> Control {
        Control {
            current: RwLock::new(levels),
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, LoggerLevels> {
        // A panic while holding the lock leaves valid levels behind: keep using them.
        self.current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A copy of the current levels.
    pub fn levels(&self) -> LoggerLevels {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .effective(metadata.target())
            .enables(metadata.level())
    }

    /// Replaces the levels; `cause` says who asked (logged with the change, at WARN as
    /// Kafka logs a logger change). The line goes out at whichever of the old and new levels
    /// is more verbose, so it is seen both when raising and when lowering.
    pub fn replace(&self, new: LoggerLevels, cause: &str) {
        let old = self.levels();
        if old == new {
            return;
        }
        let summary = new.summary();
        let lowering = new.most_verbose() < old.most_verbose();
        if lowering {
            tracing::warn!(cause, levels = %summary, "log levels changed");
        }
        *self.write() = new;
        self.levels_changed();
        if !lowering {
            tracing::warn!(cause, levels = %summary, "log levels changed");
        }
    }

    /// Every level one step more (or less) verbose.
    pub fn step(&self, more_verbose: bool, cause: &str) {
        let mut levels = self.levels();
        levels.step(more_verbose);
        self.replace(levels, cause);
    }

    /// Makes every callsite ask the filter again, and moves the `log` crate's ceiling (its
    /// records below it are dropped before they reach tracing).
    pub fn levels_changed(&self) {
        tracing::callsite::rebuild_interest_cache();
        let ceiling = match self.levels().most_verbose() {
            Level::Off => tracing_log::log::LevelFilter::Off,
            Level::Error => tracing_log::log::LevelFilter::Error,
            Level::Warn => tracing_log::log::LevelFilter::Warn,
            Level::Info => tracing_log::log::LevelFilter::Info,
            Level::Debug => tracing_log::log::LevelFilter::Debug,
            Level::Trace => tracing_log::log::LevelFilter::Trace,
        };
        tracing_log::log::set_max_level(ceiling);
    }
}

/// The tracing filter: a layer in front of the formatter.
pub struct LevelsFilter;

impl<S: Subscriber> tracing_subscriber::Layer<S> for LevelsFilter {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if control().enabled(metadata) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    /// Asked only for what has no cached interest (records of the `log` crate).
    fn enabled(&self, metadata: &Metadata<'_>, _: Context<'_, S>) -> bool {
        control().enabled(metadata)
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(control().levels().most_verbose().as_filter())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    use tracing_subscriber::layer::SubscriberExt;

    use super::{install, LevelsFilter};
    use config::log_levels::LoggerLevels;

    /// Lines the formatter wrote (so the enabled case is proven to format and write).
    static LINES: AtomicU64 = AtomicU64::new(0);

    struct CountingSink;

    impl std::io::Write for CountingSink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            LINES.fetch_add(
                buf.iter().filter(|&&b| b == b'\n').count() as u64,
                Ordering::Relaxed,
            );
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn ns_per_event(rounds: u32, mut event: impl FnMut(u32)) -> f64 {
        let started = Instant::now();
        for i in 0..rounds {
            event(std::hint::black_box(i));
        }
        started.elapsed().as_nanos() as f64 / f64::from(rounds)
    }

    /// What a DEBUG event on a shard's hot path costs while DEBUG is off, with the broker's
    /// run-time filter installed as the global subscriber, against no subscriber at all, and
    /// what an enabled INFO line costs for scale. Installs a global subscriber, so it runs
    /// alone: `cargo test --release -p broker --lib log_filter_cost -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn log_filter_cost() {
        const ROUNDS: u32 = 10_000_000;
        const WRITTEN_ROUNDS: u32 = 200_000;
        let debug_event = |i: u32| tracing::debug!(request = i, "request handled");
        let bare = ns_per_event(ROUNDS, debug_event);

        install(LoggerLevels::default());
        let subscriber = tracing_subscriber::registry().with(LevelsFilter).with(
            tracing_subscriber::fmt::layer()
                .with_writer(|| CountingSink)
                .with_ansi(false),
        );
        tracing::subscriber::set_global_default(subscriber).expect("first global subscriber");
        super::control().levels_changed();

        let off = ns_per_event(ROUNDS, debug_event);
        assert_eq!(
            LINES.load(Ordering::Relaxed),
            0,
            "DEBUG is off at the default INFO"
        );
        let written = ns_per_event(WRITTEN_ROUNDS, |i| {
            tracing::info!(request = i, "request handled")
        });
        assert_eq!(LINES.load(Ordering::Relaxed), u64::from(WRITTEN_ROUNDS));
        println!(
            "DEBUG event while off: {off:.2} ns with the broker's filter, {bare:.2} ns without a \
             subscriber; an INFO line formatted and written: {written:.0} ns"
        );
    }
}

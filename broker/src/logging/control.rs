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

use super::levels::{Level, LoggerLevels};

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
pub(super) fn install(levels: LoggerLevels) -> &'static Control {
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
    pub(super) fn levels_changed(&self) {
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

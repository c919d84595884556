//! The broker's logs: structured tracing events, one line each (text `key=value` or one JSON
//! object), filtered by logger levels that change at run time.
//!
//! Modules: `levels` (levels, logger specifications, stepping), `control` (the process's
//! current levels and the tracing filter reading them), `broker_logger` (Kafka's
//! BROKER_LOGGER admin resource: DescribeConfigs / IncrementalAlterConfigs on the levels),
//! `one_line` (the writer that keeps every event on one line), `signals` (SIGUSR1 / SIGUSR2
//! on a thread of their own), `panics` (a panic as one error event).
//!
//! Levels: `log.level` (default INFO; `RUST_LOG` wins when set, same syntax), then at run
//! time SIGUSR1 (every logger one step more verbose), SIGUSR2 (one step less, down to ERROR),
//! or IncrementalAlterConfigs on BROKER_LOGGER (`kafka-configs.sh --entity-type
//! broker-loggers`, `broker log-level`).

pub mod one_line;
pub mod panics;
pub mod signals;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

pub use api::logging::{broker_logger, control, control::Control};
pub use config::log_levels::{Level, LevelsError, LogFormat, LoggerLevels};

/// The levels to start with: `RUST_LOG` when set (it wins, as it always has), else
/// `log.level`.
pub fn starting_levels(configured: &LoggerLevels) -> Result<LoggerLevels, LevelsError> {
    match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => LoggerLevels::parse(&spec),
        _ => Ok(configured.clone()),
    }
}

/// Installs the broker's subscriber (`broker start`): `format` on stderr, filtered by the
/// run-time levels starting at `levels`, panics as events, and the signal thread. Call before
/// any other thread starts (the signal mask is inherited).
pub fn init_broker(format: LogFormat, levels: LoggerLevels) -> anyhow::Result<()> {
    use anyhow::Context;
    let control = control::install(levels);
    let ansi = format == LogFormat::Text && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let registry = tracing_subscriber::registry().with(control::LevelsFilter);
    let installed = match format {
        LogFormat::Text => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(one_line::OneLineStderr)
                    .with_ansi(ansi),
            )
            .try_init(),
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_writer(one_line::OneLineStderr),
            )
            .try_init(),
    };
    installed.context("installing the log subscriber")?;
    control.levels_changed();
    panics::install_hook();
    signals::spawn().context("starting the log-level signal thread")?;
    Ok(())
}

/// The subscriber of the other commands (`tune`, `topics`, ...): text on stderr, `RUST_LOG`
/// or INFO, fixed.
pub fn init_tool() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

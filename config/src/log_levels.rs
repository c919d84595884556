//! Log levels by logger, as Kafka's log4j controller sees them: a `root` level and levels set
//! on loggers, a logger being a tracing target (a module path such as `api::connection`)
//! that covers itself and every module below it (`broker::handlers` covers
//! `broker::handlers::fetch`, not `broker::handlers_x`). The most specific logger set wins.

use std::collections::BTreeMap;

/// `ConfigResource.Type.BROKER_LOGGER`: the config resource the levels are read and changed as.
pub const RESOURCE_BROKER_LOGGER: i8 = 8;

/// The root logger's name (Kafka's `Log4jController.ROOT_LOGGER`).
pub const ROOT: &str = "root";

/// A level, from silent to most verbose (the order is verbosity).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Off,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

/// Kafka's names (`LogLevelConfig.VALID_LOG_LEVELS`), in its sorted order, plus OFF.
pub const KAFKA_LEVEL_NAMES: &str = "DEBUG, ERROR, FATAL, INFO, OFF, TRACE, WARN";

impl Level {
    /// A level by Kafka's name, exactly as Kafka takes it over the wire (upper case). FATAL is
    /// ERROR (tracing has nothing above error); OFF silences the logger.
    pub fn from_kafka_name(name: &str) -> Option<Level> {
        match name {
            "OFF" => Some(Level::Off),
            "FATAL" | "ERROR" => Some(Level::Error),
            "WARN" => Some(Level::Warn),
            "INFO" => Some(Level::Info),
            "DEBUG" => Some(Level::Debug),
            "TRACE" => Some(Level::Trace),
            _ => None,
        }
    }

    /// A level in any case (configuration, `RUST_LOG`, the command line); `warning` too.
    pub fn parse(name: &str) -> Option<Level> {
        let upper = name.trim().to_ascii_uppercase();
        match upper.as_str() {
            "WARNING" => Some(Level::Warn),
            other => Level::from_kafka_name(other),
        }
    }

    /// Kafka's name of the level (what DescribeConfigs answers).
    pub fn kafka_name(self) -> &'static str {
        match self {
            Level::Off => "OFF",
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        }
    }

    /// One step more verbose (TRACE stays TRACE).
    pub fn more_verbose(self) -> Level {
        match self {
            Level::Off => Level::Error,
            Level::Error => Level::Warn,
            Level::Warn => Level::Info,
            Level::Info => Level::Debug,
            Level::Debug | Level::Trace => Level::Trace,
        }
    }

    /// One step less verbose, never below ERROR: a signal may quiet a broker, not blind it
    /// (OFF only by configuration or an explicit request).
    pub fn less_verbose(self) -> Level {
        match self {
            Level::Trace => Level::Debug,
            Level::Debug => Level::Info,
            Level::Info => Level::Warn,
            Level::Warn | Level::Error => Level::Error,
            Level::Off => Level::Off,
        }
    }

    /// Whether an event of `level` passes a logger at this level.
    pub fn enables(self, level: &tracing::Level) -> bool {
        let needed = match *level {
            tracing::Level::ERROR => Level::Error,
            tracing::Level::WARN => Level::Warn,
            tracing::Level::INFO => Level::Info,
            tracing::Level::DEBUG => Level::Debug,
            tracing::Level::TRACE => Level::Trace,
        };
        self >= needed
    }

    pub fn as_filter(self) -> tracing::level_filters::LevelFilter {
        use tracing::level_filters::LevelFilter;
        match self {
            Level::Off => LevelFilter::OFF,
            Level::Error => LevelFilter::ERROR,
            Level::Warn => LevelFilter::WARN,
            Level::Info => LevelFilter::INFO,
            Level::Debug => LevelFilter::DEBUG,
            Level::Trace => LevelFilter::TRACE,
        }
    }
}

/// Why a level specification (`log.level`, `RUST_LOG`) is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LevelsError {
    #[error("`{0}` is not a log level (one of {KAFKA_LEVEL_NAMES})")]
    BadLevel(String),
    #[error("`{0}` is not a logger name (a module path such as api::connection, or root)")]
    BadLogger(String),
}

/// The root level and the levels set on loggers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggerLevels {
    root: Level,
    loggers: BTreeMap<String, Level>,
}

impl Default for LoggerLevels {
    fn default() -> LoggerLevels {
        LoggerLevels::new(Level::Info)
    }
}

/// Whether `name` looks like a tracing target: `::`-separated Rust identifiers.
fn is_logger_name(name: &str) -> bool {
    !name.is_empty()
        && name.split("::").all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
}

impl LoggerLevels {
    pub fn new(root: Level) -> LoggerLevels {
        LoggerLevels {
            root,
            loggers: BTreeMap::new(),
        }
    }

    /// `LEVEL` and `LOGGER=LEVEL` items separated by commas (`INFO,api::connection=DEBUG`),
    /// levels in any case, `root=LEVEL` naming the root; later items win. The simple form of
    /// `RUST_LOG` is the same syntax.
    pub fn parse(spec: &str) -> Result<LoggerLevels, LevelsError> {
        let mut levels = LoggerLevels::default();
        for item in spec.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (logger, level) = match item.split_once('=') {
                Some((logger, level)) => (Some(logger.trim()), level),
                None => (None, item),
            };
            let level = Level::parse(level).ok_or_else(|| LevelsError::BadLevel(level.into()))?;
            match logger {
                None | Some(ROOT) => levels.root = level,
                Some(name) if is_logger_name(name) => {
                    levels.loggers.insert(name.to_string(), level);
                }
                Some(name) => return Err(LevelsError::BadLogger(name.into())),
            }
        }
        Ok(levels)
    }

    pub fn root(&self) -> Level {
        self.root
    }

    /// The loggers with a level of their own (root not included).
    pub fn set_loggers(&self) -> impl Iterator<Item = (&str, Level)> {
        self.loggers
            .iter()
            .map(|(name, level)| (name.as_str(), *level))
    }

    /// The level in force for `target`: that of the most specific logger set on it or on a
    /// module above it, else root's.
    pub fn effective(&self, target: &str) -> Level {
        if target == ROOT {
            return self.root;
        }
        let mut name = target;
        loop {
            if let Some(level) = self.loggers.get(name) {
                return *level;
            }
            match name.rfind("::") {
                Some(end) => name = &name[..end],
                None => return self.root,
            }
        }
    }

    /// The most verbose level any logger has (tracing's global ceiling).
    pub fn most_verbose(&self) -> Level {
        self.loggers.values().copied().fold(self.root, Level::max)
    }

    /// Sets `logger` (or root) to `level`.
    pub fn set(&mut self, logger: &str, level: Level) {
        if logger == ROOT {
            self.root = level;
        } else {
            self.loggers.insert(logger.to_string(), level);
        }
    }

    /// Removes `logger`'s own level: it follows the module above it (or root) again, as
    /// Kafka's `unsetLogLevel` does. Root cannot be unset (the caller refuses it).
    pub fn unset(&mut self, logger: &str) {
        self.loggers.remove(logger);
    }

    /// Every level one step more (or less) verbose (the signals).
    pub fn step(&mut self, more_verbose: bool) {
        let step = |level: Level| {
            if more_verbose {
                level.more_verbose()
            } else {
                level.less_verbose()
            }
        };
        self.root = step(self.root);
        for level in self.loggers.values_mut() {
            *level = step(*level);
        }
    }

    /// One line for the log: `root=INFO api::connection=DEBUG`.
    pub fn summary(&self) -> String {
        let mut out = format!("{ROOT}={}", self.root.kafka_name());
        for (name, level) in &self.loggers {
            out.push_str(&format!(" {name}={}", level.kafka_name()));
        }
        out
    }
}

/// `log.format`: how each event is written to stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// `time LEVEL target: message key=value ...`
    #[default]
    Text,
    /// One JSON object per line: timestamp, level, target, message and fields at top level.
    Json,
}

impl LogFormat {
    pub fn parse(value: &str) -> Option<LogFormat> {
        match value.trim().to_ascii_lowercase().as_str() {
            "text" => Some(LogFormat::Text),
            "json" => Some(LogFormat::Json),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_names_are_exact_and_fatal_is_error() {
        assert_eq!(Level::from_kafka_name("DEBUG"), Some(Level::Debug));
        assert_eq!(Level::from_kafka_name("FATAL"), Some(Level::Error));
        assert_eq!(Level::from_kafka_name("OFF"), Some(Level::Off));
        // Kafka takes only its upper-case names over the wire.
        assert_eq!(Level::from_kafka_name("debug"), None);
        assert_eq!(Level::from_kafka_name("VERBOSE"), None);
        assert_eq!(Level::parse(" debug "), Some(Level::Debug));
        assert_eq!(Level::parse("Warning"), Some(Level::Warn));
        for level in [
            Level::Off,
            Level::Error,
            Level::Warn,
            Level::Info,
            Level::Debug,
            Level::Trace,
        ] {
            assert_eq!(Level::from_kafka_name(level.kafka_name()), Some(level));
        }
    }

    #[test]
    fn steps_saturate_and_signals_never_blind() {
        assert_eq!(Level::Info.more_verbose(), Level::Debug);
        assert_eq!(Level::Debug.more_verbose(), Level::Trace);
        assert_eq!(Level::Trace.more_verbose(), Level::Trace);
        assert_eq!(Level::Off.more_verbose(), Level::Error);
        assert_eq!(Level::Debug.less_verbose(), Level::Info);
        assert_eq!(Level::Warn.less_verbose(), Level::Error);
        assert_eq!(Level::Error.less_verbose(), Level::Error);
        assert_eq!(Level::Off.less_verbose(), Level::Off);
    }

    #[test]
    fn enables_by_verbosity() {
        assert!(Level::Info.enables(&tracing::Level::WARN));
        assert!(Level::Info.enables(&tracing::Level::INFO));
        assert!(!Level::Info.enables(&tracing::Level::DEBUG));
        assert!(!Level::Off.enables(&tracing::Level::ERROR));
        assert!(Level::Trace.enables(&tracing::Level::TRACE));
    }

    #[test]
    fn parse_specs() {
        let levels = LoggerLevels::parse("warn, api::connection=DEBUG,shard=trace").unwrap();
        assert_eq!(levels.root(), Level::Warn);
        assert_eq!(levels.effective("api::connection"), Level::Debug);
        assert_eq!(levels.effective("shard::log::segment"), Level::Trace);
        assert_eq!(levels.effective("broker::server"), Level::Warn);
        assert_eq!(LoggerLevels::parse("").unwrap(), LoggerLevels::default());
        assert_eq!(
            LoggerLevels::parse("root=ERROR").unwrap().root(),
            Level::Error
        );
        assert_eq!(
            LoggerLevels::parse("INFO,broker=LOUD"),
            Err(LevelsError::BadLevel("LOUD".into()))
        );
        assert_eq!(
            LoggerLevels::parse("broker[span]=debug"),
            Err(LevelsError::BadLogger("broker[span]".into()))
        );
        assert_eq!(
            LoggerLevels::parse("broker::=debug"),
            Err(LevelsError::BadLogger("broker::".into()))
        );
    }

    #[test]
    fn the_most_specific_logger_wins_on_module_boundaries() {
        let mut levels = LoggerLevels::new(Level::Info);
        levels.set("broker::handlers", Level::Debug);
        levels.set("broker::handlers::fetch", Level::Error);
        assert_eq!(levels.effective("broker::handlers::fetch"), Level::Error);
        // A logger covers modules below it, not names that merely start the same way.
        assert_eq!(
            levels.effective("broker::handlers::fetch_session"),
            Level::Debug
        );
        assert_eq!(levels.effective("broker::handlers::produce"), Level::Debug);
        assert_eq!(levels.effective("broker::handlersx"), Level::Info);
        assert_eq!(levels.effective("broker"), Level::Info);
        assert_eq!(levels.most_verbose(), Level::Debug);
        levels.unset("broker::handlers::fetch");
        assert_eq!(levels.effective("broker::handlers::fetch"), Level::Debug);
        levels.set(ROOT, Level::Trace);
        assert_eq!(levels.root(), Level::Trace);
        assert_eq!(levels.effective(ROOT), Level::Trace);
    }

    #[test]
    fn step_moves_every_logger() {
        let mut levels = LoggerLevels::parse("INFO,api::connection=WARN").unwrap();
        levels.step(true);
        assert_eq!(levels.summary(), "root=DEBUG api::connection=INFO");
        levels.step(false);
        levels.step(false);
        assert_eq!(levels.summary(), "root=WARN api::connection=ERROR");
    }
}

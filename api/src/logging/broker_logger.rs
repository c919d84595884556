//! Kafka's BROKER_LOGGER admin resource (type 8) on our levels: DescribeConfigs lists every
//! logger with the level in force, IncrementalAlterConfigs SETs a logger's level or DELETEs
//! it (it follows the module above it again), with the checks and messages of Kafka's
//! `RuntimeLoggerManager` and `ConfigHelper`. Legacy AlterConfigs does not take this resource
//! (INVALID_REQUEST, as Kafka).

use std::collections::BTreeSet;

use crate::config::{AlterError, AlterOp};
use config::log_levels::{Level, LoggerLevels, KAFKA_LEVEL_NAMES, ROOT};

pub use config::log_levels::RESOURCE_BROKER_LOGGER;
/// DescribeConfigs `ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG`: the source of every logger.
pub const SOURCE_DYNAMIC_BROKER_LOGGER: i8 = 6;

mod generated {
    include!(concat!(env!("OUT_DIR"), "/loggers.rs"));
}

/// Crates we depend on whose events reach our subscriber (through tracing or the `log`
/// crate), as loggers of their own.
const DEPENDENCY_LOGGERS: &[&str] = &["glommio", "rustls"];

/// Every logger that exists: root, the modules of our crates that log (and the modules above
/// them), the dependency crates, and any other logger a level is set on (`log.level`).
pub fn loggers(levels: &LoggerLevels) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = generated::OUR_LOGGERS
        .iter()
        .chain(DEPENDENCY_LOGGERS)
        .map(|name| name.to_string())
        .collect();
    names.extend(levels.set_loggers().map(|(name, _)| name.to_string()));
    names
}

/// DescribeConfigs on BROKER_LOGGER: (logger, level in force), root first, as Kafka's
/// `Log4jController.loggers` (inherited levels resolved).
pub fn describe(levels: &LoggerLevels) -> Vec<(String, &'static str)> {
    std::iter::once((ROOT.to_string(), levels.root().kafka_name()))
        .chain(loggers(levels).into_iter().map(|name| {
            let level = levels.effective(&name).kafka_name();
            (name, level)
        }))
        .collect()
}

/// DescribeConfigs: the resource name must be this broker's id (ConfigHelper's messages).
pub fn check_describe_name(name: &str, node_id: i32) -> Result<(), String> {
    if name.is_empty() {
        return Err("Broker id must not be empty".into());
    }
    let id: i32 = name
        .parse()
        .map_err(|_| format!("Broker id must be an integer, but it is: {name}"))?;
    if id != node_id {
        return Err(format!(
            "Unexpected broker id, expected {node_id} but received {name}"
        ));
    }
    Ok(())
}

/// IncrementalAlterConfigs: the resource name must be this node's id (RuntimeLoggerManager's
/// messages; Kafka prints its own id twice in the second, we print what was received).
pub fn check_alter_name(name: &str, node_id: i32) -> Result<(), AlterError> {
    let id: i32 = name.parse().map_err(|_| {
        AlterError::InvalidRequest(format!("Node id must be an integer, but it is: {name}"))
    })?;
    if id != node_id {
        return Err(AlterError::InvalidRequest(format!(
            "Unexpected node id. Expected {node_id}, but received {name}"
        )));
    }
    Ok(())
}

/// IncrementalAlterConfigs on BROKER_LOGGER: every operation is checked before any is
/// applied; the new levels are returned (the caller installs them unless validate_only).
pub fn alter(
    levels: &LoggerLevels,
    ops: &[(String, AlterOp, Option<String>)],
) -> Result<LoggerLevels, AlterError> {
    let existing = loggers(levels);
    let exists = |name: &str| {
        if name == ROOT || existing.contains(name) {
            Ok(())
        } else {
            Err(AlterError::InvalidConfig(format!(
                "Logger {name} does not exist!"
            )))
        }
    };
    let mut seen = BTreeSet::new();
    for (name, _, _) in ops {
        if !seen.insert(name.as_str()) {
            return Err(AlterError::InvalidRequest(
                "Error due to duplicate config keys".into(),
            ));
        }
    }
    let nulls: Vec<&str> = ops
        .iter()
        .filter(|(_, op, value)| *op != AlterOp::Delete && value.is_none())
        .map(|(name, _, _)| name.as_str())
        .collect();
    if !nulls.is_empty() {
        return Err(AlterError::InvalidRequest(format!(
            "Null value not supported for : {}",
            nulls.join(", ")
        )));
    }
    let mut new = levels.clone();
    for (name, op, value) in ops {
        match op {
            AlterOp::Set => {
                exists(name)?;
                let value = value.as_deref().unwrap_or_default();
                let level = Level::from_kafka_name(value).ok_or_else(|| {
                    AlterError::InvalidConfig(format!(
                        "Cannot set the log level of {name} to {value} as it is not a supported log level. Valid log levels are {KAFKA_LEVEL_NAMES}"
                    ))
                })?;
                new.set(name, level);
            }
            AlterOp::Delete => {
                exists(name)?;
                if name == ROOT {
                    return Err(AlterError::InvalidRequest(format!(
                        "Removing the log level of the {ROOT} logger is not allowed"
                    )));
                }
                new.unset(name);
            }
            AlterOp::Append => {
                return Err(AlterError::InvalidRequest(
                    "APPEND operation is not allowed for the BROKER_LOGGER resource".into(),
                ))
            }
            AlterOp::Subtract => {
                return Err(AlterError::InvalidRequest(
                    "SUBTRACT operation is not allowed for the BROKER_LOGGER resource".into(),
                ))
            }
        }
    }
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, level: &str) -> (String, AlterOp, Option<String>) {
        (name.into(), AlterOp::Set, Some(level.into()))
    }

    #[test]
    fn our_modules_that_log_are_loggers_with_their_parents() {
        let names = loggers(&LoggerLevels::default());
        for name in [
            "broker",
            "broker::server",
            "api::connection",
            "api::handlers",
            "shard::log",
            "glommio",
        ] {
            assert!(names.contains(name), "{name} missing from {names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("tests")), "{names:?}");
    }

    #[test]
    fn describe_resolves_inherited_levels() {
        let levels = LoggerLevels::parse("WARN,api::handlers=DEBUG").unwrap();
        let described = describe(&levels);
        assert_eq!(described[0], ("root".to_string(), "WARN"));
        let level_of = |name: &str| described.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(level_of("api::handlers"), "DEBUG");
        assert_eq!(level_of("api::handlers::internal_topics"), "DEBUG");
        assert_eq!(level_of("broker::server"), "WARN");
    }

    #[test]
    fn set_and_delete() {
        let levels = LoggerLevels::default();
        let new = alter(
            &levels,
            &[set("api::connection", "DEBUG"), set("root", "WARN")],
        )
        .unwrap();
        assert_eq!(new.summary(), "root=WARN api::connection=DEBUG");
        let back = alter(
            &new,
            &[("api::connection".into(), AlterOp::Delete, Some("".into()))],
        )
        .unwrap();
        assert_eq!(back.effective("api::connection"), Level::Warn);
        // FATAL is Kafka's, ERROR ours.
        let fatal = alter(&levels, &[set("broker", "FATAL")]).unwrap();
        assert_eq!(fatal.effective("broker::server"), Level::Error);
    }

    #[test]
    fn refusals_are_kafkas() {
        let levels = LoggerLevels::default();
        let bad_level = alter(&levels, &[set("root", "debug")]).unwrap_err();
        assert_eq!(bad_level.error_code(), 40);
        assert!(bad_level.to_string().starts_with(
            "Cannot set the log level of root to debug as it is not a supported log level."
        ));
        let unknown = alter(&levels, &[set("broker::nothing", "DEBUG")]).unwrap_err();
        assert_eq!(
            unknown,
            AlterError::InvalidConfig("Logger broker::nothing does not exist!".into())
        );
        let root = alter(&levels, &[("root".into(), AlterOp::Delete, None)]).unwrap_err();
        assert_eq!(root.error_code(), 42);
        for op in [AlterOp::Append, AlterOp::Subtract] {
            let refused = alter(&levels, &[("broker".into(), op, Some("DEBUG".into()))]);
            assert_eq!(refused.unwrap_err().error_code(), 42);
        }
        let null = alter(&levels, &[("broker".into(), AlterOp::Set, None)]).unwrap_err();
        assert_eq!(
            null,
            AlterError::InvalidRequest("Null value not supported for : broker".into())
        );
        let twice = alter(&levels, &[set("broker", "DEBUG"), set("broker", "INFO")]);
        assert_eq!(twice.unwrap_err().error_code(), 42);
        // Nothing is applied when one operation is refused.
        assert!(alter(&levels, &[set("broker", "DEBUG"), set("root", "LOUD")]).is_err());
    }

    #[test]
    fn resource_names_must_be_this_node() {
        assert!(check_describe_name("1", 1).is_ok());
        assert_eq!(
            check_describe_name("", 1).unwrap_err(),
            "Broker id must not be empty"
        );
        assert_eq!(
            check_describe_name("2", 1).unwrap_err(),
            "Unexpected broker id, expected 1 but received 2"
        );
        assert!(check_alter_name("1", 1).is_ok());
        assert_eq!(check_alter_name("", 1).unwrap_err().error_code(), 42);
        assert_eq!(check_alter_name("x", 1).unwrap_err().error_code(), 42);
        assert_eq!(check_alter_name("3", 1).unwrap_err().error_code(), 42);
    }
}

//! Changes to a topic's override set, as Kafka's controller computes them: AlterConfigs
//! replaces the whole set; IncrementalAlterConfigs changes only the keys it names (SET,
//! DELETE, and APPEND / SUBTRACT on list keys). The result is validated by the caller
//! (`resolve` / `BrokerConfig::with_dynamic`) before anything is written. Broker resources
//! take only dynamic broker keys.

use std::collections::{BTreeMap, HashSet};

use super::keys::{find, ConfigType, BROKER_KEYS, TOPIC_KEYS};
use super::properties::list_items;

/// IncrementalAlterConfigs `config_operation` (Kafka's `AlterConfigOp.OpType` ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlterOp {
    Set = 0,
    Delete = 1,
    Append = 2,
    Subtract = 3,
}

impl AlterOp {
    pub fn from_i8(op: i8) -> Option<AlterOp> {
        match op {
            0 => Some(AlterOp::Set),
            1 => Some(AlterOp::Delete),
            2 => Some(AlterOp::Append),
            3 => Some(AlterOp::Subtract),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            AlterOp::Set => "SET",
            AlterOp::Delete => "DELETE",
            AlterOp::Append => "APPEND",
            AlterOp::Subtract => "SUBTRACT",
        }
    }
}

/// Why a change is refused, with Kafka's error code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AlterError {
    /// INVALID_REQUEST (42): the request itself is malformed.
    #[error("{0}")]
    InvalidRequest(String),
    /// INVALID_CONFIG (40): a key or value is not acceptable.
    #[error("{0}")]
    InvalidConfig(String),
}

impl AlterError {
    pub fn error_code(&self) -> i16 {
        match self {
            AlterError::InvalidRequest(_) => 42,
            AlterError::InvalidConfig(_) => 40,
        }
    }
}

fn check_unique<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), AlterError> {
    let mut seen = HashSet::new();
    for name in names {
        if !seen.insert(name) {
            return Err(AlterError::InvalidRequest(
                "Error due to duplicate config keys".into(),
            ));
        }
    }
    Ok(())
}

/// Which key table a change is checked against.
#[derive(Clone, Copy)]
enum Resource {
    Topic,
    Broker,
}

fn known_key(resource: Resource, name: &str) -> Result<&'static super::Spec, AlterError> {
    match resource {
        Resource::Topic => find(TOPIC_KEYS, name)
            .ok_or_else(|| AlterError::InvalidConfig(format!("Unknown topic config name: {name}"))),
        // Kafka's wording for a broker key that cannot change at run time; unknown keys
        // included, since we would not act on them.
        Resource::Broker => find(BROKER_KEYS, name)
            .filter(|spec| spec.dynamic)
            .ok_or_else(|| {
                AlterError::InvalidRequest(format!(
                    "Cannot update these configs dynamically: Set({name})"
                ))
            }),
    }
}

/// AlterConfigs (API 33): the new override set is exactly `configs`; keys not named are
/// removed (Kafka's legacy, non-incremental semantics).
pub fn alter_topic_overrides(
    configs: &[(String, Option<String>)],
) -> Result<BTreeMap<String, String>, AlterError> {
    alter_overrides(Resource::Topic, configs)
}

/// AlterConfigs on a broker resource: the new dynamic set (only dynamic keys).
pub fn alter_broker_overrides(
    configs: &[(String, Option<String>)],
) -> Result<BTreeMap<String, String>, AlterError> {
    alter_overrides(Resource::Broker, configs)
}

fn alter_overrides(
    resource: Resource,
    configs: &[(String, Option<String>)],
) -> Result<BTreeMap<String, String>, AlterError> {
    check_unique(configs.iter().map(|(name, _)| name.as_str()))?;
    let mut out = BTreeMap::new();
    for (name, value) in configs {
        let value = value.as_ref().ok_or_else(|| {
            AlterError::InvalidRequest(format!("Null value not supported for : {name}"))
        })?;
        known_key(resource, name)?;
        out.insert(name.clone(), value.trim().to_string());
    }
    Ok(out)
}

/// IncrementalAlterConfigs (API 44): applies `ops` to `current`. APPEND and SUBTRACT work on
/// list keys only, starting from the key's Kafka default when the topic does not set it.
pub fn incremental_alter_topic_overrides(
    current: &BTreeMap<String, String>,
    ops: &[(String, AlterOp, Option<String>)],
) -> Result<BTreeMap<String, String>, AlterError> {
    incremental_alter_overrides(Resource::Topic, current, ops)
}

/// IncrementalAlterConfigs on a broker resource (only dynamic keys).
pub fn incremental_alter_broker_overrides(
    current: &BTreeMap<String, String>,
    ops: &[(String, AlterOp, Option<String>)],
) -> Result<BTreeMap<String, String>, AlterError> {
    incremental_alter_overrides(Resource::Broker, current, ops)
}

fn incremental_alter_overrides(
    resource: Resource,
    current: &BTreeMap<String, String>,
    ops: &[(String, AlterOp, Option<String>)],
) -> Result<BTreeMap<String, String>, AlterError> {
    check_unique(ops.iter().map(|(name, _, _)| name.as_str()))?;
    let mut out = current.clone();
    for (name, op, value) in ops {
        let spec = known_key(resource, name)?;
        let value = || {
            value.as_deref().map(str::trim).ok_or_else(|| {
                AlterError::InvalidRequest(format!("Null value not supported for : {name}"))
            })
        };
        match op {
            AlterOp::Delete => {
                out.remove(name);
            }
            AlterOp::Set => {
                out.insert(name.clone(), value()?.to_string());
            }
            AlterOp::Append | AlterOp::Subtract => {
                let value = value()?;
                if spec.ty != ConfigType::List {
                    return Err(AlterError::InvalidConfig(format!(
                        "Can't {} to key {name} because its type is not LIST.",
                        op.name()
                    )));
                }
                let old = out
                    .get(name)
                    .map(String::as_str)
                    .or(spec.default)
                    .unwrap_or("");
                let mut items: Vec<String> =
                    list_items(old).into_iter().map(str::to_string).collect();
                for item in list_items(value) {
                    if *op == AlterOp::Append {
                        if !items.iter().any(|i| i == item) {
                            items.push(item.to_string());
                        }
                    } else {
                        items.retain(|i| i != item);
                    }
                }
                out.insert(name.clone(), items.join(","));
            }
        }
    }
    Ok(out)
}

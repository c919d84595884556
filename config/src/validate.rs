//! Checks one value against its key's row: type first (Kafka's parse of the `ConfigType`),
//! then the row's `Check`.

use super::listeners::{parse_endpoints, parse_protocol_map};
use super::properties::list_items;
use super::rows::{Check, ConfigType as T, Spec};
use super::ConfigError;

pub(super) fn invalid(spec: &Spec, value: &str, expected: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        key: spec.name.to_string(),
        value: value.to_string(),
        expected: expected.into(),
    }
}

/// Validates `value` against the spec's type and check.
pub(super) fn check_value(spec: &Spec, value: &str) -> Result<(), ConfigError> {
    let v = value.trim();
    let num: Option<i64> = match spec.ty {
        T::Boolean => {
            if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
                return Err(invalid(spec, value, "true or false"));
            }
            None
        }
        T::Short => Some(
            v.parse::<i16>()
                .map_err(|_| invalid(spec, value, "a 16-bit integer"))? as i64,
        ),
        T::Int => Some(
            v.parse::<i32>()
                .map_err(|_| invalid(spec, value, "a 32-bit integer"))? as i64,
        ),
        T::Long => Some(
            v.parse::<i64>()
                .map_err(|_| invalid(spec, value, "a 64-bit integer"))?,
        ),
        T::Double => {
            let x = v
                .parse::<f64>()
                .map_err(|_| invalid(spec, value, "a number"))?;
            if matches!(spec.check, Check::Ratio) && !(0.0..=1.0).contains(&x) {
                return Err(invalid(spec, value, "a value in [0.0, 1.0]"));
            }
            None
        }
        _ => None,
    };
    match (spec.check, num) {
        (Check::AtLeast(lo), Some(n)) if n < lo => {
            Err(invalid(spec, value, format!("a value >= {lo}")))
        }
        (Check::Between(lo, hi), Some(n)) if n < lo || n > hi => {
            Err(invalid(spec, value, format!("a value in [{lo}, {hi}]")))
        }
        (Check::OneOf(allowed), _) => {
            if allowed.iter().any(|a| a.eq_ignore_ascii_case(v)) {
                Ok(())
            } else {
                Err(invalid(
                    spec,
                    value,
                    format!("one of {}", allowed.join(", ")),
                ))
            }
        }
        (Check::ListOf(allowed), _) => {
            let items = list_items(v);
            if !items.is_empty()
                && items
                    .iter()
                    .all(|i| allowed.iter().any(|a| a.eq_ignore_ascii_case(i)))
            {
                Ok(())
            } else {
                Err(invalid(
                    spec,
                    value,
                    format!("a comma list of {}", allowed.join(", ")),
                ))
            }
        }
        (Check::NonEmptyList, _) if list_items(v).is_empty() => {
            Err(invalid(spec, value, "a non-empty comma list"))
        }
        (Check::Listeners, _) => parse_endpoints(spec.name, v).map(|_| ()),
        (Check::ProtocolMap, _) => parse_protocol_map(spec.name, v).map(|_| ()),
        // Kafka's validators for these run when the value is read, with its messages.
        (Check::ProcessRoles, _) => crate::quorum::parse_roles(v)
            .map(|_| ())
            .map_err(Into::into),
        (Check::Voters, _) => crate::quorum::parse_voters(v)
            .map(|_| ())
            .map_err(Into::into),
        (Check::BootstrapServers, _) => crate::quorum::parse_bootstrap_servers(v)
            .map(|_| ())
            .map_err(Into::into),
        (Check::HttpListener, _) if !v.is_empty() => crate::parse_http_listener(v)
            .map(|_| ())
            .map_err(|expected| invalid(spec, value, expected)),
        _ => Ok(()),
    }
}

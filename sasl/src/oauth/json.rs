//! Reads the named members of a JSON object and skips the rest without building it, so a
//! token's size, not its claims' shape, bounds what a check allocates. Duplicate members
//! keep the last value, as Jackson's `readTree` does. serde_json bounds nesting at 128.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

/// The values of `names` in the JSON object `json`, in the same order; `None` for absent
/// members. An error when `json` is not one JSON object.
pub(crate) fn select(json: &[u8], names: &[&str]) -> Result<Vec<Option<Value>>, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let values = Select { names }.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(values)
}

struct Select<'n> {
    names: &'n [&'n str],
}

impl<'de> DeserializeSeed<'de> for Select<'_> {
    type Value = Vec<Option<Value>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Select<'_> {
    type Value = Vec<Option<Value>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut values = vec![None; self.names.len()];
        while let Some(key) = map.next_key::<String>()? {
            if self.names.contains(&key.as_str()) {
                let value: Value = map.next_value()?;
                // A name may be asked for twice (a scope claim configured as "sub", say).
                for (name, slot) in self.names.iter().zip(values.iter_mut()) {
                    if *name == key {
                        *slot = Some(value.clone());
                    }
                }
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_named_members_only() {
        let json = br#"{"a":1,"skip":[{"deep":[1,2,3]}],"b":"x","a":2}"#;
        let values = select(json, &["a", "b", "c", "a"]).expect("object");
        assert_eq!(
            values,
            vec![Some(2.into()), Some("x".into()), None, Some(2.into())]
        );
        assert!(select(b"[1]", &["a"]).is_err());
        assert!(select(b"{} x", &["a"]).is_err());
        assert!(select(b"{\"a\":", &["a"]).is_err());
    }
}

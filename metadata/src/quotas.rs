//! Client quotas in the metadata (KIP-546, as Kafka 4 keeps them): the image's quotas per
//! client entity ([`QuotaImage`], built from ClientQuotaRecord), DescribeClientQuotas answered
//! from it (Kafka's `ClientQuotasImage.describe`), AlterClientQuotas validated as Kafka's
//! `ClientQuotaControlManager` validates it, and the quota a (user, client id) pair is under,
//! resolved in Kafka's order of precedence (`ClientQuotaManager`'s eight levels).
//!
//! Runs wherever the image is: validation on the metadata core, lookups on every shard.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::records::{MetadataRecord, QuotaRecord};

/// Kafka's entity types (`ClientQuotaEntity`).
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// Kafka's quota keys (`QuotaConfig`).
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// DescribeClientQuotas match types.
pub const MATCH_EXACT: i8 = 0;
pub const MATCH_DEFAULT: i8 = 1;
pub const MATCH_SPECIFIED: i8 = 2;

/// Kafka's error codes these operations answer with.
const INVALID_REQUEST: i16 = 42;
const UNSUPPORTED_VERSION: i16 = 35;

/// Whether a key's values must be whole numbers (Kafka's LONG and INT keys) or may be any
/// number (DOUBLE keys).
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyType {
    Whole,
    Real,
}

/// The keys a user or client-id entity may carry (Kafka's `QuotaConfig.userConfigs` and
/// `clientConfigs`, the same four).
const CLIENT_KEYS: [(&str, KeyType); 4] = [
    (PRODUCER_BYTE_RATE, KeyType::Whole),
    (CONSUMER_BYTE_RATE, KeyType::Whole),
    (REQUEST_PERCENTAGE, KeyType::Real),
    (CONTROLLER_MUTATION_RATE, KeyType::Real),
];
/// The keys an ip entity may carry (`QuotaConfig.ipConfigs`).
const IP_KEYS: [(&str, KeyType); 1] = [(CONNECTION_CREATION_RATE, KeyType::Whole)];

/// A client entity: (entity type, entity name) pairs sorted by type; a `None` name is that
/// type's default entity.
pub type Entity = Vec<(String, Option<String>)>;

/// A refused request: Kafka's error code and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub code: i16,
    pub message: String,
}

fn invalid(message: impl Into<String>) -> Refusal {
    Refusal {
        code: INVALID_REQUEST,
        message: message.into(),
    }
}

/// The quotas of the image, per entity.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuotaImage {
    entities: BTreeMap<Entity, BTreeMap<String, f64>>,
    /// How many entities carry each key (derived from `entities`): whether a kind of quota
    /// applies to anyone is asked per request, and must not walk every entity.
    key_counts: BTreeMap<String, usize>,
}

/// Values come from validated requests (finite numbers), so equality is an equivalence.
impl Eq for QuotaImage {}

/// One filter component of DescribeClientQuotas.
#[derive(Clone, Debug)]
pub struct Component {
    pub entity_type: String,
    pub match_type: i8,
    pub matched: Option<String>,
}

/// One entity of AlterClientQuotas: its (key, value) operations, `None` removing the key.
#[derive(Clone, Debug)]
pub struct Alteration {
    pub entity: Entity,
    pub ops: Vec<(String, Option<f64>)>,
}

/// Which clients share one quota: the entity the quota was found on, with a default name
/// replaced by the client's own (Kafka's metric tags: a default user quota is every user's
/// own allowance, not one shared by all users).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SharedBy {
    pub user: Option<String>,
    pub client_id: Option<String>,
}

impl QuotaImage {
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Whether any entity has a quota of `key`.
    pub fn mentions(&self, key: &str) -> bool {
        self.key_counts.contains_key(key)
    }

    /// The quota `key` of exactly this entity (sorted as [`Entity`] says).
    pub fn get(&self, entity: &Entity, key: &str) -> Option<f64> {
        self.entities.get(entity)?.get(key).copied()
    }

    pub fn apply(&mut self, record: &QuotaRecord) {
        if record.remove {
            if let Some(quotas) = self.entities.get_mut(&record.entity) {
                if quotas.remove(&record.key).is_some() {
                    if let Some(count) = self.key_counts.get_mut(&record.key) {
                        *count -= 1;
                        if *count == 0 {
                            self.key_counts.remove(&record.key);
                        }
                    }
                }
                if quotas.is_empty() {
                    self.entities.remove(&record.entity);
                }
            }
        } else {
            let previous = self
                .entities
                .entry(record.entity.clone())
                .or_default()
                .insert(record.key.clone(), record.value);
            if previous.is_none() {
                *self.key_counts.entry(record.key.clone()).or_default() += 1;
            }
        }
    }

    /// The records that rebuild these quotas (a snapshot).
    pub fn to_records(&self) -> Vec<MetadataRecord> {
        self.entities
            .iter()
            .flat_map(|(entity, quotas)| {
                quotas.iter().map(|(key, value)| {
                    MetadataRecord::ClientQuota(QuotaRecord {
                        entity: entity.clone(),
                        key: key.clone(),
                        value: *value,
                        remove: false,
                    })
                })
            })
            .collect()
    }

    fn value(
        &self,
        user: Option<Option<&str>>,
        client_id: Option<Option<&str>>,
        key: &str,
    ) -> Option<f64> {
        // Sorted by type: "client-id" comes before "user".
        let mut entity: Entity = Vec::with_capacity(2);
        if let Some(name) = client_id {
            entity.push((CLIENT_ID.into(), name.map(str::to_owned)));
        }
        if let Some(name) = user {
            entity.push((USER.into(), name.map(str::to_owned)));
        }
        self.entities.get(&entity)?.get(key).copied()
    }

    /// The quota `key` of a client, in Kafka's order of precedence: user and client id,
    /// user and default client id, user alone, default user and client id, default user and
    /// default client id, default user alone, client id alone, default client id. `user` is
    /// the principal's name (`alice` of `User:alice`). No allocation while the image holds
    /// no quota.
    pub fn resolve(&self, user: &str, client_id: &str, key: &str) -> Option<(f64, SharedBy)> {
        if self.entities.is_empty() {
            return None;
        }
        let shared = |u: bool, c: bool| SharedBy {
            user: u.then(|| user.to_owned()),
            client_id: c.then(|| client_id.to_owned()),
        };
        // (user part, client-id part, shared per user, shared per client id); a part is
        // absent (None), the default entity (Some(None)) or the client's own name.
        type Level<'a> = (Option<Option<&'a str>>, Option<Option<&'a str>>, bool, bool);
        let levels: [Level; 8] = [
            (Some(Some(user)), Some(Some(client_id)), true, true),
            (Some(Some(user)), Some(None), true, true),
            (Some(Some(user)), None, true, false),
            (Some(None), Some(Some(client_id)), true, true),
            (Some(None), Some(None), true, true),
            (Some(None), None, true, false),
            (None, Some(Some(client_id)), false, true),
            (None, Some(None), false, true),
        ];
        levels.into_iter().find_map(|(u, c, by_user, by_client)| {
            self.value(u, c, key)
                .map(|quota| (quota, shared(by_user, by_client)))
        })
    }

    /// The quota `key` of connections from `ip` (its text as an ip entity names it): the
    /// address's own, else the default ip entity's.
    pub fn resolve_ip(&self, ip: &str, key: &str) -> Option<f64> {
        let own: Entity = vec![(IP.into(), Some(ip.to_owned()))];
        let default: Entity = vec![(IP.into(), None)];
        self.get(&own, key).or_else(|| self.get(&default, key))
    }

    /// DescribeClientQuotas: the entities matching the filter, each with its quotas, or the
    /// whole request refused (Kafka's messages).
    #[allow(clippy::type_complexity)]
    pub fn describe(
        &self,
        components: &[Component],
        strict: bool,
    ) -> Result<Vec<(Entity, Vec<(String, f64)>)>, Refusal> {
        // Entity type -> the name it must have (Some(None): the default entity).
        let mut exact: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        let mut specified: Vec<&str> = Vec::new();
        for component in components {
            let entity_type = component.entity_type.as_str();
            if entity_type.is_empty() {
                return Err(invalid("Invalid empty entity type."));
            }
            if exact.contains_key(entity_type) || specified.contains(&entity_type) {
                return Err(invalid(format!(
                    "Entity type {entity_type} cannot appear more than once in the filter."
                )));
            }
            if ![IP, USER, CLIENT_ID].contains(&entity_type) {
                return Err(Refusal {
                    code: UNSUPPORTED_VERSION,
                    message: format!("Unsupported entity type {entity_type}"),
                });
            }
            match component.match_type {
                MATCH_EXACT => match component.matched.as_deref() {
                    None => {
                        return Err(invalid(
                            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                        ))
                    }
                    Some(name) => {
                        exact.insert(entity_type, Some(name));
                    }
                },
                MATCH_DEFAULT => {
                    if component.matched.is_some() {
                        return Err(invalid(
                            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                        ));
                    }
                    exact.insert(entity_type, None);
                }
                MATCH_SPECIFIED => {
                    if component.matched.is_some() {
                        return Err(invalid(
                            "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                        ));
                    }
                    specified.push(entity_type);
                }
                other => return Err(invalid(format!("Unknown match type {other}"))),
            }
        }
        let names = |t: &str| exact.contains_key(t) || specified.contains(&t);
        if names(IP) && (names(USER) || names(CLIENT_ID)) {
            return Err(invalid(
                "Invalid entity filter component combination. IP filter component should not \
                 be used with user or clientId filter component.",
            ));
        }
        let matches = |entity: &Entity| {
            let has = |t: &str| {
                entity
                    .iter()
                    .find(|(et, _)| et == t)
                    .map(|(_, n)| n.as_deref())
            };
            let exact_ok = exact.iter().all(|(t, name)| has(t) == Some(*name));
            let specified_ok = specified.iter().all(|t| has(t).is_some());
            let size_ok = !strict || entity.len() == exact.len() + specified.len();
            exact_ok && specified_ok && size_ok
        };
        Ok(self
            .entities
            .iter()
            .filter(|(entity, _)| matches(entity))
            .map(|(entity, quotas)| {
                let values = quotas.iter().map(|(k, v)| (k.clone(), *v)).collect();
                (entity.clone(), values)
            })
            .collect())
    }

    /// AlterClientQuotas: each entity's result (in request order) and the records of the
    /// entities that passed. An entity with one bad key changes nothing (Kafka 4's
    /// controller also refuses the whole entity).
    pub fn alter(
        &self,
        alterations: &[Alteration],
    ) -> (Vec<MetadataRecord>, Vec<Result<(), Refusal>>) {
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(alterations.len());
        let mut seen: Vec<Entity> = Vec::new();
        for alteration in alterations {
            let mut entity = alteration.entity.clone();
            entity.sort();
            let result = if seen.contains(&entity) {
                Err(invalid(format!(
                    "Ignoring duplicate entity {}",
                    describe_entity(&entity)
                )))
            } else {
                seen.push(entity.clone());
                self.alter_entity(entity, &alteration.ops)
                    .map(|mut new| records.append(&mut new))
            };
            results.push(result);
        }
        (records, results)
    }

    fn alter_entity(
        &self,
        entity: Entity,
        ops: &[(String, Option<f64>)],
    ) -> Result<Vec<MetadataRecord>, Refusal> {
        let keys = keys_for(&entity)?;
        let current = self.entities.get(&entity);
        let mut records = Vec::new();
        for (i, (key, value)) in ops.iter().enumerate() {
            if ops[..i].iter().any(|(k, _)| k == key) {
                return Err(invalid(format!(
                    "Duplicate quota key {key} not updating quota for this entity {}",
                    describe_entity(&entity)
                )));
            }
            let old = current.and_then(|quotas| quotas.get(key)).copied();
            match value {
                None => {
                    if old.is_some() {
                        records.push(record(&entity, key, 0.0, true));
                    }
                }
                Some(value) => {
                    validate_value(keys, key, *value)?;
                    if old.map(f64::to_bits) != Some(value.to_bits()) {
                        records.push(record(&entity, key, *value, false));
                    }
                }
            }
        }
        Ok(records)
    }
}

fn record(entity: &Entity, key: &str, value: f64, remove: bool) -> MetadataRecord {
    MetadataRecord::ClientQuota(QuotaRecord {
        entity: entity.clone(),
        key: key.to_owned(),
        value,
        remove,
    })
}

/// Kafka's `ClientQuotaEntity.toString` shape, for messages.
fn describe_entity(entity: &Entity) -> String {
    let parts: Vec<String> = entity
        .iter()
        .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("<default>")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", parts.join(", "))
}

/// The keys an entity may carry, after Kafka's checks of its types and names.
fn keys_for(entity: &Entity) -> Result<&'static [(&'static str, KeyType)], Refusal> {
    if entity.is_empty() {
        return Err(invalid("Invalid empty client quota entity"));
    }
    for (i, (entity_type, name)) in entity.iter().enumerate() {
        if entity[..i].iter().any(|(t, _)| t == entity_type) {
            return Err(invalid(format!(
                "Invalid empty client quota entity, duplicate entity entry {entity_type}"
            )));
        }
        if ![USER, CLIENT_ID, IP].contains(&entity_type.as_str()) {
            return Err(invalid(format!(
                "Unhandled client quota entity type: {entity_type}"
            )));
        }
        if name.as_deref() == Some("") {
            return Err(invalid(format!("Empty {entity_type} not supported")));
        }
    }
    let name_of = |t: &str| entity.iter().find(|(et, _)| et == t).map(|(_, n)| n);
    match (name_of(USER), name_of(CLIENT_ID), name_of(IP)) {
        (_, _, None) => Ok(&CLIENT_KEYS),
        (None, None, Some(ip)) => match ip {
            // Kafka also accepts a host name it can resolve; we take addresses only (no
            // resolver call on the controller's thread).
            Some(ip) if ip.parse::<IpAddr>().is_err() => Err(invalid(format!(
                "{ip} is not a valid IP or resolvable host."
            ))),
            _ => Ok(&IP_KEYS),
        },
        _ => Err(invalid("Invalid empty client quota entity")),
    }
}

fn validate_value(keys: &[(&str, KeyType)], key: &str, value: f64) -> Result<(), Refusal> {
    let Some((_, key_type)) = keys.iter().find(|(k, _)| *k == key) else {
        return Err(invalid(format!("Invalid configuration key {key}")));
    };
    // Not Kafka's check (a NaN or infinite quota would be stored there): a quota is a rate.
    if !value.is_finite() {
        return Err(invalid(format!(
            "Configuration {key} must be a finite number"
        )));
    }
    if *key_type == KeyType::Whole {
        let epsilon = 1e-6;
        let whole = (value + epsilon) as i64;
        if (whole as f64 - value).abs() > epsilon {
            return Err(invalid(format!("Configuration {key} must be a Long value")));
        }
    }
    Ok(())
}

impl crate::Controller {
    /// AlterClientQuotas (KIP-546), validated against the current image as Kafka's
    /// `ClientQuotaControlManager` validates it (see [`QuotaImage::alter`]); unless
    /// `validate_only`, the records of the valid entities are committed together before this
    /// returns. One result per entity, in request order.
    pub fn alter_client_quotas(
        &mut self,
        alterations: &[Alteration],
        validate_only: bool,
    ) -> Result<Vec<Result<(), Refusal>>, crate::LogError> {
        let (records, results) = self.image.quotas.alter(alterations);
        if !records.is_empty() && !validate_only {
            self.commit(&records)?;
        }
        Ok(results)
    }
}

#[cfg(test)]
#[path = "quotas_tests.rs"]
mod tests;

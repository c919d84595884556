//! SCRAM credentials in the metadata (KIP-554, as Kafka 4 keeps them): the image's
//! per-mechanism, per-user credentials ([`ScramImage`], built from UserScramCredentialRecord
//! and RemoveUserScramCredentialRecord), DescribeUserScramCredentials answered from it
//! (Kafka's `ScramImage.describe`), and AlterUserScramCredentials validated as Kafka's
//! `ScramControlManager.alterCredentials` validates it.
//!
//! The credential kept is what the server needs to authenticate a user (salt, iterations,
//! StoredKey, ServerKey), never the password: the request carries the salted password, which
//! the caller turns into the two keys (`derive`, the `sasl` crate's arithmetic) and drops.
//! Runs wherever the image is: validation on the metadata core, lookups on every shard.

use std::collections::BTreeMap;

use crate::records::{MetadataRecord, ScramCredentialRecord};
use crate::LogError;

/// Kafka's `ScramMechanism` type of SCRAM-SHA-256.
pub const SCRAM_SHA_256: i8 = 1;
/// Kafka's `ScramMechanism` type of SCRAM-SHA-512.
pub const SCRAM_SHA_512: i8 = 2;

/// Fewest iterations a credential may use (Kafka's `ScramMechanism.minIterations`, 4096 for
/// both mechanisms; RFC 7677 asks for at least 4096).
pub const MIN_ITERATIONS: i32 = 4096;
/// Most iterations a credential may use (Kafka's `ScramControlManager.MAX_ITERATIONS`): every
/// authentication makes the client run this many HMACs, and the bound keeps a credential from
/// making that arbitrarily slow.
pub const MAX_ITERATIONS: i32 = 16384;

/// Kafka's messages, verbatim (clients show them).
const DUPLICATE_ALTER: &str = "A user credential cannot be altered twice in the same request";
const EMPTY_USER: &str = "Username must not be empty";
const UNKNOWN_MECHANISM: &str = "Unknown SCRAM mechanism";
const TOO_FEW_ITERATIONS: &str = "Too few iterations";
const TOO_MANY_ITERATIONS: &str = "Too many iterations";
const DELETE_MISSING: &str = "Attempt to delete a user credential that does not exist";
const DESCRIBE_DUPLICATE_USER: &str =
    "Cannot describe SCRAM credentials for the same user twice in a single request: ";
const DESCRIBE_USER_THAT_DOES_NOT_EXIST: &str =
    "Attempt to describe a user credential that does not exist: ";

/// Kafka's error codes these operations answer with.
const RESOURCE_NOT_FOUND: i16 = 91;
const DUPLICATE_RESOURCE: i16 = 92;
const UNACCEPTABLE_CREDENTIAL: i16 = 93;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;

/// Whether `mechanism` is one Kafka knows (`ScramMechanism.fromType` is not UNKNOWN).
pub fn known_mechanism(mechanism: i8) -> bool {
    matches!(mechanism, SCRAM_SHA_256 | SCRAM_SHA_512)
}

/// One user's credential for one mechanism.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramEntry {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl std::fmt::Debug for ScramEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramEntry")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// The credentials of the image: mechanism type, then user name (Kafka's `ScramImage`
/// layout), so a lookup while authenticating is two map probes and no allocation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScramImage {
    mechanisms: BTreeMap<i8, BTreeMap<String, ScramEntry>>,
}

/// One user of a DescribeUserScramCredentials answer: an error, or its (mechanism,
/// iterations) pairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedUser {
    pub user: String,
    pub error_code: i16,
    pub error_message: Option<String>,
    pub credentials: Vec<(i8, i32)>,
}

/// One user's result of an AlterUserScramCredentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterResult {
    pub user: String,
    pub error_code: i16,
    pub error_message: Option<String>,
}

/// One upsertion as the request carries it.
#[derive(Clone)]
pub struct Upsertion {
    pub name: String,
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Vec<u8>,
    pub salted_password: Vec<u8>,
}

impl ScramImage {
    pub fn is_empty(&self) -> bool {
        self.mechanisms.is_empty()
    }

    /// The credential of `user` for `mechanism` (Kafka's type).
    pub fn get(&self, mechanism: i8, user: &str) -> Option<&ScramEntry> {
        self.mechanisms.get(&mechanism)?.get(user)
    }

    /// Applies a UserScramCredentialRecord (creates or replaces).
    pub fn upsert(&mut self, record: &ScramCredentialRecord) {
        self.mechanisms.entry(record.mechanism).or_default().insert(
            record.name.clone(),
            ScramEntry {
                salt: record.salt.clone(),
                stored_key: record.stored_key.clone(),
                server_key: record.server_key.clone(),
                iterations: record.iterations,
            },
        );
    }

    /// Applies a RemoveUserScramCredentialRecord. One for a credential that is not there is
    /// ignored (logged): a valid log never holds one, and refusing would make a damaged log
    /// unrecoverable (Kafka's replay throws).
    pub fn remove(&mut self, mechanism: i8, user: &str) {
        let Some(users) = self.mechanisms.get_mut(&mechanism) else {
            tracing::warn!(
                mechanism,
                "RemoveUserScramCredentialRecord for no credential"
            );
            return;
        };
        if users.remove(user).is_none() {
            tracing::warn!(
                mechanism,
                "RemoveUserScramCredentialRecord for no credential"
            );
        }
        if users.is_empty() {
            self.mechanisms.remove(&mechanism);
        }
    }

    /// Records that rebuild these credentials (a snapshot's share).
    pub fn to_records(&self) -> impl Iterator<Item = MetadataRecord> + '_ {
        self.mechanisms.iter().flat_map(|(mechanism, users)| {
            users.iter().map(move |(name, entry)| {
                MetadataRecord::UserScramCredential(ScramCredentialRecord {
                    name: name.clone(),
                    mechanism: *mechanism,
                    salt: entry.salt.clone(),
                    stored_key: entry.stored_key.clone(),
                    server_key: entry.server_key.clone(),
                    iterations: entry.iterations,
                })
            })
        })
    }

    /// DescribeUserScramCredentials (Kafka's `ScramImage.describe`): `None` or an empty list
    /// describes every user with a credential; a user named twice is DUPLICATE_RESOURCE, one
    /// without any credential RESOURCE_NOT_FOUND. One result per distinct user, sorted by
    /// name (Kafka's order is a hash map's).
    pub fn describe(&self, users: Option<&[String]>) -> Vec<DescribedUser> {
        // user -> named more than once
        let mut unique: BTreeMap<&str, bool> = BTreeMap::new();
        match users {
            Some(users) if !users.is_empty() => {
                for user in users {
                    unique
                        .entry(user.as_str())
                        .and_modify(|twice| *twice = true)
                        .or_insert(false);
                }
            }
            _ => {
                for users in self.mechanisms.values() {
                    for user in users.keys() {
                        unique.insert(user.as_str(), false);
                    }
                }
            }
        }
        unique
            .into_iter()
            .map(|(user, twice)| {
                let refused = |code, prefix: &str| DescribedUser {
                    user: user.to_string(),
                    error_code: code,
                    error_message: Some(format!("{prefix}{user}")),
                    credentials: Vec::new(),
                };
                if twice {
                    return refused(DUPLICATE_RESOURCE, DESCRIBE_DUPLICATE_USER);
                }
                let credentials: Vec<(i8, i32)> = self
                    .mechanisms
                    .iter()
                    .filter_map(|(mechanism, users)| {
                        users.get(user).map(|entry| (*mechanism, entry.iterations))
                    })
                    .collect();
                if credentials.is_empty() {
                    return refused(RESOURCE_NOT_FOUND, DESCRIBE_USER_THAT_DOES_NOT_EXIST);
                }
                DescribedUser {
                    user: user.to_string(),
                    error_code: 0,
                    error_message: None,
                    credentials,
                }
            })
            .collect()
    }

    /// AlterUserScramCredentials against these credentials, in Kafka's order
    /// (`ScramControlManager.alterCredentials`): deletions, then upsertions; a user altered
    /// twice in one request (whatever the mechanisms) is DUPLICATE_RESOURCE and none of its
    /// alterations happen; each alteration is validated on its own (an empty user name or too
    /// few or many iterations UNACCEPTABLE_CREDENTIAL, an unknown mechanism
    /// UNSUPPORTED_SASL_MECHANISM, deleting a credential that does not exist
    /// RESOURCE_NOT_FOUND). `derive` turns (mechanism, salted password) into (StoredKey,
    /// ServerKey). Returns the records of the valid alterations, to be committed together,
    /// and one result per distinct user: deletions, upsertions, then refusals (Kafka's order;
    /// its maps are hash maps, ours keep request order).
    pub fn alter(
        &self,
        deletions: &[(String, i8)],
        upsertions: &[Upsertion],
        derive: impl Fn(i8, &[u8]) -> (Vec<u8>, Vec<u8>),
    ) -> (Vec<MetadataRecord>, Vec<AlterResult>) {
        // Insertion-ordered maps, by user name, of what Kafka keeps in hash maps.
        let mut to_delete: Vec<(&str, i8)> = Vec::new();
        let mut to_upsert: Vec<&Upsertion> = Vec::new();
        let mut refused: Vec<(&str, i16, &'static str)> = Vec::new();
        let is_refused = |refused: &[(&str, i16, &str)], name: &str| {
            refused.iter().any(|(user, _, _)| *user == name)
        };
        for (name, mechanism) in deletions {
            if is_refused(&refused, name) {
                continue;
            }
            if let Some(at) = to_delete.iter().position(|(user, _)| user == name) {
                to_delete.remove(at);
                refused.push((name, DUPLICATE_RESOURCE, DUPLICATE_ALTER));
            } else if let Err((code, message)) = self.validate_deletion(name, *mechanism) {
                refused.push((name, code, message));
            } else {
                to_delete.push((name, *mechanism));
            }
        }
        for upsertion in upsertions {
            let name = upsertion.name.as_str();
            if is_refused(&refused, name) {
                continue;
            }
            let deleted = to_delete.iter().position(|(user, _)| *user == name);
            let upserted = to_upsert.iter().position(|u| u.name == name);
            if deleted.is_some() || upserted.is_some() {
                if let Some(at) = deleted {
                    to_delete.remove(at);
                }
                if let Some(at) = upserted {
                    to_upsert.remove(at);
                }
                refused.push((name, DUPLICATE_RESOURCE, DUPLICATE_ALTER));
            } else if let Err((code, message)) = validate_upsertion(upsertion) {
                refused.push((name, code, message));
            } else {
                to_upsert.push(upsertion);
            }
        }
        let ok = |user: &str| AlterResult {
            user: user.to_string(),
            error_code: 0,
            error_message: None,
        };
        let mut records = Vec::with_capacity(to_delete.len() + to_upsert.len());
        let mut results = Vec::with_capacity(to_delete.len() + to_upsert.len() + refused.len());
        for (name, mechanism) in to_delete {
            records.push(MetadataRecord::RemoveUserScramCredential {
                name: name.to_string(),
                mechanism,
            });
            results.push(ok(name));
        }
        for upsertion in to_upsert {
            let (stored_key, server_key) = derive(upsertion.mechanism, &upsertion.salted_password);
            records.push(MetadataRecord::UserScramCredential(ScramCredentialRecord {
                name: upsertion.name.clone(),
                mechanism: upsertion.mechanism,
                salt: upsertion.salt.clone(),
                stored_key,
                server_key,
                iterations: upsertion.iterations,
            }));
            results.push(ok(&upsertion.name));
        }
        results.extend(
            refused
                .into_iter()
                .map(|(user, code, message)| AlterResult {
                    user: user.to_string(),
                    error_code: code,
                    error_message: Some(message.to_string()),
                }),
        );
        (records, results)
    }

    /// Kafka's `validateDeletion`: a valid name and mechanism, and a credential to delete.
    fn validate_deletion(&self, name: &str, mechanism: i8) -> Result<(), (i16, &'static str)> {
        validate_name_and_mechanism(name, mechanism)?;
        match self.get(mechanism, name) {
            Some(_) => Ok(()),
            None => Err((RESOURCE_NOT_FOUND, DELETE_MISSING)),
        }
    }
}

impl crate::Controller {
    /// AlterUserScramCredentials (KIP-554), validated against the current image as Kafka's
    /// `ScramControlManager` validates it (see [`ScramImage::alter`]); the records of
    /// the valid alterations are committed together before this returns. One result per
    /// distinct user.
    pub fn alter_scram_credentials(
        &mut self,
        deletions: &[(String, i8)],
        upsertions: &[Upsertion],
        derive: impl Fn(i8, &[u8]) -> (Vec<u8>, Vec<u8>),
    ) -> Result<Vec<AlterResult>, LogError> {
        let (records, results) = self.image.scram.alter(deletions, upsertions, derive);
        if !records.is_empty() {
            self.commit(&records)?;
        }
        Ok(results)
    }
}

/// Kafka's `validateScramUsernameAndMechanism`.
fn validate_name_and_mechanism(name: &str, mechanism: i8) -> Result<(), (i16, &'static str)> {
    if name.is_empty() {
        return Err((UNACCEPTABLE_CREDENTIAL, EMPTY_USER));
    }
    if !known_mechanism(mechanism) {
        return Err((UNSUPPORTED_SASL_MECHANISM, UNKNOWN_MECHANISM));
    }
    Ok(())
}

/// Kafka's `validateUpsertion`: a valid name and mechanism, and iterations within bounds.
fn validate_upsertion(upsertion: &Upsertion) -> Result<(), (i16, &'static str)> {
    validate_name_and_mechanism(&upsertion.name, upsertion.mechanism)?;
    if upsertion.iterations < MIN_ITERATIONS {
        return Err((UNACCEPTABLE_CREDENTIAL, TOO_FEW_ITERATIONS));
    }
    if upsertion.iterations > MAX_ITERATIONS {
        return Err((UNACCEPTABLE_CREDENTIAL, TOO_MANY_ITERATIONS));
    }
    Ok(())
}

#[cfg(test)]
#[path = "scram_tests.rs"]
mod tests;

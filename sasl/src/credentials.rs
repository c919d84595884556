//! Where a server session looks credentials up. The broker implements [`Credentials`] over
//! its metadata image (SCRAM) and its JAAS `user_` options (PLAIN); [`StaticCredentials`] is
//! a map for tests and tools.

use std::collections::HashMap;

use crate::scram::{ScramCredential, ScramMechanism};
use crate::PlainUsers;

/// Credential lookup for a server session. Called at most once per token, on the caller's
/// thread; an implementation must not block.
pub trait Credentials {
    /// The user's SCRAM credential for this mechanism, if there is one.
    fn scram(&self, mechanism: ScramMechanism, user: &str) -> Option<ScramCredential>;
    /// The user's PLAIN password, if there is one.
    fn plain_password(&self, user: &str) -> Option<String>;
}

/// Credentials held in memory.
#[derive(Clone, Default)]
pub struct StaticCredentials {
    pub plain: PlainUsers,
    scram: HashMap<(ScramMechanism, String), ScramCredential>,
}

impl StaticCredentials {
    pub fn new() -> StaticCredentials {
        StaticCredentials::default()
    }

    /// Adds or replaces the user's credential for `credential.mechanism`.
    pub fn insert_scram(&mut self, user: &str, credential: ScramCredential) {
        self.scram
            .insert((credential.mechanism, user.to_owned()), credential);
    }

    /// Adds or replaces the user's PLAIN password.
    pub fn insert_plain(&mut self, user: &str, password: &str) {
        self.plain.insert(user, password);
    }
}

impl Credentials for StaticCredentials {
    fn scram(&self, mechanism: ScramMechanism, user: &str) -> Option<ScramCredential> {
        self.scram.get(&(mechanism, user.to_owned())).cloned()
    }

    fn plain_password(&self, user: &str) -> Option<String> {
        self.plain.password(user).map(str::to_owned)
    }
}

impl std::fmt::Debug for StaticCredentials {
    /// Names only: credentials stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut scram: Vec<_> = self.scram.keys().collect();
        scram.sort_by(|a, b| (a.0.kafka_type(), &a.1).cmp(&(b.0.kafka_type(), &b.1)));
        f.debug_struct("StaticCredentials")
            .field("plain", &self.plain)
            .field("scram", &scram)
            .finish()
    }
}

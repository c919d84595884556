//! PLAIN (RFC 4616) as Kafka's `PlainSaslServer` serves it, and the JAAS `user_<name>`
//! passwords its default callback handler checks against.
//!
//! One token, `[authzid] NUL authcid NUL passwd`, answered with an empty token. Kafka reports
//! each failure in its own words (these texts reach the client as they are): a wrong token
//! count, an empty user name or password, an unknown user or wrong password (one text for
//! both), and an authorization id naming someone else. Passwords compare in constant time,
//! as Kafka's `Utils.isEqualConstantTime` does. Invalid UTF-8 is replaced, not refused, as
//! Java's `new String(bytes, UTF_8)` does.

use std::collections::BTreeMap;

use subtle::ConstantTimeEq;

use crate::jaas::JaasEntry;
use crate::{Credentials, SaslError};

/// The login module whose `user_<name>` options hold PLAIN passwords.
pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

/// The option prefix Kafka's `PlainServerCallbackHandler` looks up (`JAAS_USER_PREFIX`).
const USER_OPTION_PREFIX: &str = "user_";

/// User name to PLAIN password.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PlainUsers {
    passwords: BTreeMap<String, String>,
}

impl PlainUsers {
    pub fn new() -> PlainUsers {
        PlainUsers::default()
    }

    /// The `user_<name>="<password>"` options of the PlainLoginModule entries. Where several
    /// entries name a user, the first wins, as Kafka's `JaasContext.configEntryOption` finds
    /// the first.
    pub fn from_jaas(entries: &[JaasEntry]) -> PlainUsers {
        let mut users = PlainUsers::new();
        for entry in entries
            .iter()
            .filter(|e| e.login_module == PLAIN_LOGIN_MODULE)
        {
            for (key, value) in &entry.options {
                if let Some(name) = key.strip_prefix(USER_OPTION_PREFIX) {
                    users
                        .passwords
                        .entry(name.to_owned())
                        .or_insert_with(|| value.clone());
                }
            }
        }
        users
    }

    /// Adds or replaces a user.
    pub fn insert(&mut self, user: &str, password: &str) {
        self.passwords.insert(user.to_owned(), password.to_owned());
    }

    pub fn password(&self, user: &str) -> Option<&str> {
        self.passwords.get(user).map(String::as_str)
    }

    pub fn users(&self) -> impl Iterator<Item = &str> {
        self.passwords.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.passwords.len()
    }

    pub fn is_empty(&self) -> bool {
        self.passwords.is_empty()
    }
}

impl Credentials for PlainUsers {
    fn scram(
        &self,
        _: crate::scram::ScramMechanism,
        _: &str,
    ) -> Option<crate::scram::ScramCredential> {
        None
    }

    fn plain_password(&self, user: &str) -> Option<String> {
        self.password(user).map(str::to_owned)
    }
}

impl std::fmt::Debug for PlainUsers {
    /// Names only: passwords stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.users()).finish()
    }
}

/// Checks one PLAIN token; the authenticated user name on success.
pub(crate) fn authenticate(
    token: &[u8],
    credentials: &dyn Credentials,
) -> Result<String, SaslError> {
    let failed = |why: &str| SaslError::AuthenticationFailed(why.to_owned());
    let message = String::from_utf8_lossy(token);
    // Kafka's extractTokens stops splitting after the fourth field, so it reports at most 4.
    let fields: Vec<&str> = message.splitn(4, '\0').collect();
    let [authzid, user, password] = fields[..] else {
        return Err(SaslError::AuthenticationFailed(format!(
            "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
            fields.len()
        )));
    };
    if user.is_empty() {
        return Err(failed("Authentication failed: username not specified"));
    }
    if password.is_empty() {
        return Err(failed("Authentication failed: password not specified"));
    }
    let matches = credentials
        .plain_password(user)
        .is_some_and(|expected| bool::from(expected.as_bytes().ct_eq(password.as_bytes())));
    if !matches {
        return Err(failed(
            "Authentication failed: Invalid username or password",
        ));
    }
    if !authzid.is_empty() && authzid != user {
        return Err(failed(
            "Authentication failed: Client requested an authorization id that is different from \
             username",
        ));
    }
    Ok(user.to_owned())
}

/// The client's one PLAIN token.
pub(crate) fn client_message(authzid: &str, user: &str, password: &str) -> Vec<u8> {
    format!("{authzid}\0{user}\0{password}").into_bytes()
}

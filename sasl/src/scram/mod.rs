//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): the mechanisms, the stored
//! credential Kafka keeps per user (salt, iterations, StoredKey, ServerKey) and the key
//! derivations, with the message syntax in `messages`, the server in `server` and the client
//! in `client`.
//!
//! Passwords are not SASLprep-normalised: Kafka's `ScramFormatter.normalize` takes the UTF-8
//! bytes as they are, and a credential must derive the same keys here as there.

pub(crate) mod client;
pub(crate) mod messages;
pub(crate) mod server;

use std::num::NonZeroU32;

use ring::{digest, hmac, pbkdf2};

use crate::Mechanism;

/// A SCRAM hash, as Kafka's `org.apache.kafka.clients.admin.ScramMechanism` numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The `mechanism` byte of DescribeUserScramCredentials, AlterUserScramCredentials and the
    /// UserScramCredentialRecord: 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512 (0 is UNKNOWN).
    pub fn kafka_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_kafka_type(kafka_type: i8) -> Option<ScramMechanism> {
        ScramMechanism::ALL
            .into_iter()
            .find(|m| m.kafka_type() == kafka_type)
    }

    /// The fewest iterations a credential may use (Kafka's `ScramMechanism.minIterations`,
    /// RFC 7677's recommended minimum).
    pub fn min_iterations(self) -> u32 {
        4096
    }

    /// The most iterations AlterUserScramCredentials accepts (Kafka's `maxIterations`). Our
    /// clients also refuse a server-first message asking for more, so that a hostile server
    /// cannot make them spin.
    pub fn max_iterations(self) -> u32 {
        16384
    }

    pub fn mechanism(self) -> Mechanism {
        match self {
            ScramMechanism::Sha256 => Mechanism::ScramSha256,
            ScramMechanism::Sha512 => Mechanism::ScramSha512,
        }
    }

    /// "SCRAM-SHA-256" or "SCRAM-SHA-512".
    pub fn name(self) -> &'static str {
        self.mechanism().name()
    }

    /// Bytes of the hash output, which is also the length of every key and proof.
    pub fn digest_bytes(self) -> usize {
        self.digest_algorithm().output_len()
    }

    fn digest_algorithm(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }

    fn hmac_algorithm(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn pbkdf2_algorithm(self) -> pbkdf2::Algorithm {
        match self {
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    pub(crate) fn hmac(self, key: &[u8], message: &[u8]) -> Vec<u8> {
        let key = hmac::Key::new(self.hmac_algorithm(), key);
        hmac::sign(&key, message).as_ref().to_vec()
    }

    pub(crate) fn hash(self, bytes: &[u8]) -> Vec<u8> {
        digest::digest(self.digest_algorithm(), bytes)
            .as_ref()
            .to_vec()
    }
}

/// What the broker stores per user and mechanism; never the password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramCredential {
    pub mechanism: ScramMechanism,
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl ScramCredential {
    /// From SaltedPassword, which is what AlterUserScramCredentials carries (the client
    /// hashes the password so that it never crosses the wire).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: u32,
    ) -> ScramCredential {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        ScramCredential {
            mechanism,
            salt: salt.to_vec(),
            iterations,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
        }
    }

    /// From the password: `Hi` (PBKDF2), then [`ScramCredential::from_salted_password`].
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> ScramCredential {
        let salted = salted_password(mechanism, password, salt, iterations);
        ScramCredential::from_salted_password(mechanism, salt, &salted, iterations)
    }
}

/// RFC 5802's `Hi(Normalize(password), salt, i)`, which is PBKDF2 with one output block.
/// Zero iterations derive what one does, as Kafka's `ScramFormatter.hi` loop does.
pub fn salted_password(
    mechanism: ScramMechanism,
    password: &str,
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    let iterations = NonZeroU32::new(iterations).unwrap_or(NonZeroU32::MIN);
    let mut out = vec![0u8; mechanism.digest_bytes()];
    pbkdf2::derive(
        mechanism.pbkdf2_algorithm(),
        iterations,
        salt,
        password.as_bytes(),
        &mut out,
    );
    out
}

/// A SCRAM nonce: printable ASCII without ',' (RFC 5802's `c-nonce`/`s-nonce`), never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nonce(String);

impl Nonce {
    /// Bytes of entropy in a random nonce: 144 bits, more than Kafka's 130, and a multiple
    /// of three so its Base64 has no padding.
    pub const RANDOM_BYTES: usize = 18;

    /// A nonce from the operating system's CSPRNG.
    pub fn random() -> Nonce {
        let mut bytes = [0u8; Nonce::RANDOM_BYTES];
        // getrandom(2) does not fail on the Linux kernels the broker supports once the pool
        // is initialised (it blocks until then); a failure here is a broken host.
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
            .expect("the system CSPRNG failed");
        Nonce::from(bytes)
    }

    /// The nonce text as given, for test vectors and interop; `None` unless it is non-empty
    /// printable ASCII without ','.
    pub fn from_printable(text: &str) -> Option<Nonce> {
        messages::is_printable(text).then(|| Nonce(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<[u8; Nonce::RANDOM_BYTES]> for Nonce {
    /// Base64 of the bytes: 24 printable characters with no ','.
    fn from(bytes: [u8; Nonce::RANDOM_BYTES]) -> Nonce {
        Nonce(crate::b64::encode(&bytes))
    }
}

/// `a XOR b`; the callers have checked that the lengths match.
pub(crate) fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    assert_eq!(a.len(), b.len(), "xor of keys of different lengths");
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_types() {
        assert_eq!(ScramMechanism::Sha256.kafka_type(), 1);
        assert_eq!(ScramMechanism::Sha512.kafka_type(), 2);
        assert_eq!(
            ScramMechanism::from_kafka_type(2),
            Some(ScramMechanism::Sha512)
        );
        assert_eq!(ScramMechanism::from_kafka_type(0), None);
        assert_eq!(ScramMechanism::Sha512.name(), "SCRAM-SHA-512");
    }

    #[test]
    fn nonce_from_bytes_is_printable() {
        let nonce = Nonce::from([0xffu8; 18]);
        assert_eq!(nonce.as_str().len(), 24);
        assert!(messages::is_printable(nonce.as_str()));
        assert_ne!(Nonce::random(), Nonce::random());
        assert!(Nonce::from_printable("a,b").is_none());
        assert!(Nonce::from_printable("").is_none());
    }

    #[test]
    fn zero_iterations_derive_as_one() {
        let m = ScramMechanism::Sha256;
        assert_eq!(
            salted_password(m, "p", b"s", 0),
            salted_password(m, "p", b"s", 1)
        );
    }
}

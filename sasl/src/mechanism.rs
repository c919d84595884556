//! The SASL mechanism names a SaslHandshake request carries.

use crate::scram::ScramMechanism;

/// A SASL mechanism this crate can serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
}

impl Mechanism {
    /// Every mechanism, in the order a broker lists them when it enables all of them.
    pub const ALL: [Mechanism; 4] = [
        Mechanism::Plain,
        Mechanism::ScramSha256,
        Mechanism::ScramSha512,
        Mechanism::OAuthBearer,
    ];

    /// The IANA name, as SaslHandshake and `sasl.enabled.mechanisms` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// The mechanism with exactly this name. Case-sensitive, as Kafka's server factories
    /// compare with `String.equals`: "plain" is not PLAIN.
    pub fn parse(name: &str) -> Option<Mechanism> {
        Mechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The SCRAM variant, when this is a SCRAM mechanism.
    pub fn scram(self) -> Option<ScramMechanism> {
        match self {
            Mechanism::ScramSha256 => Some(ScramMechanism::Sha256),
            Mechanism::ScramSha512 => Some(ScramMechanism::Sha512),
            Mechanism::Plain | Mechanism::OAuthBearer => None,
        }
    }
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_case_sensitive() {
        for m in Mechanism::ALL {
            assert_eq!(Mechanism::parse(m.name()), Some(m));
        }
        assert_eq!(Mechanism::parse("plain"), None);
        assert_eq!(Mechanism::parse("SCRAM-SHA-1"), None);
        assert_eq!(Mechanism::parse("GSSAPI"), None);
    }
}

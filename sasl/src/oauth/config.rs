//! What an operator sets for OAUTHBEARER: which tokens are acceptable and how their claims
//! are read. Field names follow the Kafka keys they stand for.
//!
//! Kafka chooses one validator per listener: the unsecured one (the default) or the JWKS one.
//! Here one config can allow both: a token whose header says `alg: none` is checked by the
//! unsecured rules when `allow_unsecured` is set, and an RS256/ES256 token by the JWKS rules
//! when `jwks` holds a fitting key. `required_scope` applies to both (Kafka's JWKS validator
//! has no such option); audience and issuer apply to signed tokens only, as in Kafka.

use crate::jaas::JaasEntry;

use super::jwks::{self, Jwk};

/// The login module whose `unsecuredValidator*` options configure the unsecured validator.
pub const OAUTHBEARER_LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

/// Kafka's default for `sasl.oauthbearer.clock.skew.seconds`.
const CLOCK_SKEW_SECONDS_DEFAULT: i64 = 30;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthConfig {
    /// The claim holding the principal name: `sasl.oauthbearer.sub.claim.name` for signed
    /// tokens, `unsecuredValidatorPrincipalClaimName` for unsecured ones. Default "sub".
    pub sub_claim_name: String,
    /// The claim holding the scope: `sasl.oauthbearer.scope.claim.name` or
    /// `unsecuredValidatorScopeClaimName`. Default "scope".
    pub scope_claim_name: String,
    /// Scope values every token must hold (`unsecuredValidatorRequiredScope`); a token
    /// missing one is answered `insufficient_scope`.
    pub required_scope: Vec<String>,

    pub clock_skew_seconds: i64,
    /// `unsecuredValidatorAllowableClockSkewMs`, for unsecured tokens' `exp` and `iat`.
    /// Default 0.
    pub unsecured_clock_skew_ms: u32,
    /// `sasl.oauthbearer.expected.audience`: a signed token's `aud` must name one of these.
    /// When empty, a signed token carrying any `aud` fails, as jose4j's default audience check
    /// makes it fail in Kafka.
    pub expected_audience: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer`: a signed token's `iss` must equal it.
    pub expected_issuer: Option<String>,
    /// Keys for signed tokens (`sasl.oauthbearer.jwks.endpoint.url` pointing at a file).
    pub jwks: Vec<Jwk>,
    /// Accept unsecured (`alg: none`) tokens. Only for tests and development, as Kafka warns.
    pub allow_unsecured: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OAuthConfigError {
    #[error("invalid JWKS document: {0}")]
    JwksJson(String),
    #[error("invalid key at index {index} of the JWKS: {reason}")]
    InvalidKey { index: usize, reason: String },
    #[error("Invalid scope value: {0}")]
    InvalidScope(String),
    #[error("invalid value for {key}: {value}")]
    InvalidOption { key: String, value: String },
}

impl Default for OAuthConfig {
    /// Accepts no token at all: neither unsecured tokens nor any key.
    fn default() -> OAuthConfig {
        OAuthConfig {
            sub_claim_name: "sub".to_owned(),
            scope_claim_name: "scope".to_owned(),
            required_scope: Vec::new(),
            clock_skew_seconds: CLOCK_SKEW_SECONDS_DEFAULT,
            unsecured_clock_skew_ms: 0,
            expected_audience: Vec::new(),
            expected_issuer: None,
            jwks: Vec::new(),
            allow_unsecured: false,
        }
    }
}

impl OAuthConfig {
    /// Kafka's default broker setup: unsecured tokens, no keys.
    pub fn unsecured() -> OAuthConfig {
        OAuthConfig {
            allow_unsecured: true,
            ..OAuthConfig::default()
        }
    }

    /// Signed tokens checked against the keys of this JWKS document; no unsecured tokens.
    pub fn with_jwks_json(json: &str) -> Result<OAuthConfig, OAuthConfigError> {
        Ok(OAuthConfig {
            jwks: jwks::parse(json)?,
            ..OAuthConfig::default()
        })
    }

    /// The unsecured validator as Kafka configures it from the OAuthBearerLoginModule entry
    /// of `sasl.jaas.config`; defaults when there is no such entry.
    pub fn unsecured_from_jaas(entries: &[JaasEntry]) -> Result<OAuthConfig, OAuthConfigError> {
        let mut config = OAuthConfig::unsecured();
        if let Some(entry) = entries
            .iter()
            .find(|e| e.login_module == OAUTHBEARER_LOGIN_MODULE)
        {
            config.apply_unsecured_validator_options(&entry.options)?;
        }
        Ok(config)
    }

    /// Reads the `unsecuredValidator*` options Kafka's unsecured validator reads; blank
    /// values keep the defaults, as there.
    pub fn apply_unsecured_validator_options(
        &mut self,
        options: &[(String, String)],
    ) -> Result<(), OAuthConfigError> {
        for (key, value) in options {
            let value = value.trim();
            if value.is_empty() {
                continue;
            }
            match key.as_str() {
                "unsecuredValidatorPrincipalClaimName" => self.sub_claim_name = value.to_owned(),
                "unsecuredValidatorScopeClaimName" => self.scope_claim_name = value.to_owned(),
                "unsecuredValidatorRequiredScope" => self.required_scope = parse_scope(value)?,
                "unsecuredValidatorAllowableClockSkewMs" => {
                    self.unsecured_clock_skew_ms =
                        value.parse().map_err(|_| OAuthConfigError::InvalidOption {
                            key: key.clone(),
                            value: value.into(),
                        })?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// A space-separated scope list, each item RFC 6749 `scope-token` characters (Kafka's
/// `OAuthBearerScopeUtils.parseScope`).
pub(crate) fn parse_scope(text: &str) -> Result<Vec<String>, OAuthConfigError> {
    let valid = |c: u8| c == 0x21 || (0x23..=0x5b).contains(&c) || (0x5d..=0x7e).contains(&c);
    let mut scope = Vec::new();
    for item in text.split(' ').filter(|item| !item.is_empty()) {
        if !item.bytes().all(valid) {
            return Err(OAuthConfigError::InvalidScope(item.to_owned()));
        }
        scope.push(item.to_owned());
    }
    Ok(scope)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsecured_options_from_jaas() {
        let entries = crate::jaas::parse(
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             unsecuredValidatorRequiredScope=\"LOGIN  KAFKA\" \
             unsecuredValidatorAllowableClockSkewMs=\"3000\" \
             unsecuredValidatorPrincipalClaimName=\" \";",
        )
        .expect("parses");
        let config = OAuthConfig::unsecured_from_jaas(&entries).expect("valid");
        assert_eq!(config.required_scope, vec!["LOGIN", "KAFKA"]);
        assert_eq!(config.unsecured_clock_skew_ms, 3000);
        assert_eq!(config.sub_claim_name, "sub");
        assert!(config.allow_unsecured);

        let mut config = OAuthConfig::unsecured();
        let bad = [(
            "unsecuredValidatorAllowableClockSkewMs".to_owned(),
            "-1".to_owned(),
        )];
        assert!(config.apply_unsecured_validator_options(&bad).is_err());
        let bad = [(
            "unsecuredValidatorRequiredScope".to_owned(),
            "a\"b".to_owned(),
        )];
        assert!(config.apply_unsecured_validator_options(&bad).is_err());
    }
}

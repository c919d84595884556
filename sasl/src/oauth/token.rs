//! The claim rules for a bearer token: Kafka's unsecured validator for `alg: none` tokens,
//! its JWKS validator (jose4j plus `ClaimValidationUtils`) for RS256/ES256 tokens.
//!
//! Unsecured (`OAuthBearerUnsecuredJws` and `OAuthBearerValidationUtils`), times in ms:
//! three segments, the last empty; `exp` a number; the principal claim a non-blank string;
//! `iat`, when present, a number no later than now plus skew; now minus skew before `exp`;
//! `exp` after `iat`; the scope claim (a string is one item, as Kafka reads it; an array of
//! strings is a list) holding every required value.
//!
//! Signed, times in whole seconds as jose4j's `NumericDate`: the signature verifies under the
//! one fitting JWKS key; `exp` and `iat` present and not negative; now minus skew before
//! `exp`; `nbf`, when present, no later than now plus skew; issuer and audience as
//! configured; the subject claim a string not blank (trimmed); scope items not blank and not
//! repeated.
//!
//! Every refusal is `invalid_token` except a missing required scope (`insufficient_scope`,
//! with the required list as Java prints it, `[a, b]`). The reason is kept for tests and
//! never sent: RFC 7628's error challenge carries only the status.

use serde_json::Value;

use super::config::OAuthConfig;
use super::json;
use super::jwks::{self, ES256, RS256};
use crate::b64;

/// A token that passed: whom it names and when it stops being valid.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ValidToken {
    pub principal: String,
    pub expires_at_ms: i64,
}

/// A token that did not, as RFC 7628 §3.2.2 reports it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Rejection {
    pub status: &'static str,
    pub scope: Option<String>,
    pub reason: String,
}

impl Rejection {
    fn invalid(reason: impl Into<String>) -> Rejection {
        Rejection {
            status: "invalid_token",
            scope: None,
            reason: reason.into(),
        }
    }

    /// The server's error challenge, byte for byte as Kafka's `jsonErrorResponse` writes it.
    pub(crate) fn challenge(&self) -> String {
        let mut json = format!("{{\"status\":\"{}\"", self.status);
        if let Some(scope) = &self.scope {
            json.push_str(", \"scope\":");
            json.push_str(&Value::String(scope.clone()).to_string());
        }
        json.push('}');
        json
    }
}

/// The claims any rule reads, looked up once.
struct Claims {
    exp: Option<Value>,
    iat: Option<Value>,
    nbf: Option<Value>,
    iss: Option<Value>,
    aud: Option<Value>,
    sub: Option<Value>,
    scope: Option<Value>,
}

pub(crate) fn validate(
    token: &str,
    config: &OAuthConfig,
    now_ms: i64,
) -> Result<ValidToken, Rejection> {
    let mut segments = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) = (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) else {
        return Err(Rejection::invalid(
            "a JWS compact serialization has three segments",
        ));
    };
    let decode = |segment: &str, what: &str| {
        b64::decode_url_or_standard(segment)
            .ok_or_else(|| Rejection::invalid(format!("malformed Base64 URL encoded {what}")))
    };
    let header_json = decode(header, "header")?;
    let fields = json::select(&header_json, &["alg", "kid"])
        .map_err(|_| Rejection::invalid("malformed JSON header"))?;
    let [alg, kid] =
        <[Option<Value>; 2]>::try_from(fields).map_err(|_| Rejection::invalid("header"))?;
    let (Some(Value::String(alg)), kid) = (alg, kid) else {
        return Err(Rejection::invalid(
            "JWS header must have an Algorithm value",
        ));
    };
    let kid = match kid {
        None | Some(Value::Null) => None,
        Some(Value::String(kid)) => Some(kid),
        Some(_) => return Err(Rejection::invalid("kid is not a string")),
    };

    let claims_json = decode(payload, "payload")?;
    let claims = read_claims(&claims_json, config)?;
    match alg.as_str() {
        "none" if config.allow_unsecured => unsecured(&claims, signature, config, now_ms),
        RS256 | ES256 => {
            let key = jwks::select(&config.jwks, &alg, kid.as_deref())
                .ok_or_else(|| Rejection::invalid("no single key fits the token"))?;
            let signature = b64::decode_url(signature)
                .ok_or_else(|| Rejection::invalid("malformed Base64 URL encoded signature"))?;
            let signed_part = &token[..header.len() + 1 + payload.len()];
            if !key.verify(signed_part.as_bytes(), &signature) {
                return Err(Rejection::invalid("invalid signature"));
            }
            signed(&claims, config, now_ms)
        }
        other => Err(Rejection::invalid(format!(
            "algorithm {other} not accepted"
        ))),
    }
}

fn read_claims(json: &[u8], config: &OAuthConfig) -> Result<Claims, Rejection> {
    let names = [
        "exp",
        "iat",
        "nbf",
        "iss",
        "aud",
        &config.sub_claim_name,
        &config.scope_claim_name,
    ];
    let values = json::select(json, &names).map_err(|_| Rejection::invalid("malformed JSON"))?;
    let [exp, iat, nbf, iss, aud, sub, scope] =
        <[Option<Value>; 7]>::try_from(values).map_err(|_| Rejection::invalid("claims"))?;
    Ok(Claims {
        exp,
        iat,
        nbf,
        iss,
        aud,
        sub,
        scope,
    })
}

fn unsecured(
    claims: &Claims,
    signature: &str,
    config: &OAuthConfig,
    now_ms: i64,
) -> Result<ValidToken, Rejection> {
    if !signature.is_empty() {
        return Err(Rejection::invalid(
            "Unsecured JWS must not contain a digital signature",
        ));
    }
    let scope = match &claims.scope {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(item)) => non_blank(item).into_iter().collect(),
        Some(Value::Array(items)) => {
            let mut scope = Vec::with_capacity(items.len());
            for item in items {
                let Value::String(item) = item else {
                    return Err(Rejection::invalid("scope items must be strings"));
                };
                scope.extend(non_blank(item));
            }
            scope
        }
        Some(_) => {
            return Err(Rejection::invalid(
                "scope claim is neither a string nor a list",
            ))
        }
    };
    let seconds = |value: &Option<Value>, name: &str| match value {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(_) => Err(Rejection::invalid(format!(
            "The '{name}' claim was not of type Number"
        ))),
    };
    let exp = seconds(&claims.exp, "exp")?
        .ok_or_else(|| Rejection::invalid("No expiration time in JWT"))?;
    let iat = seconds(&claims.iat, "iat")?;
    let principal = match &claims.sub {
        Some(Value::String(name)) if !name.trim().is_empty() => name.clone(),
        _ => return Err(Rejection::invalid("No principal name in JWT claim")),
    };

    // Kafka compares in doubles; so do we, so that fractional seconds agree.
    let now = now_ms as f64;
    let skew = f64::from(config.unsecured_clock_skew_ms);
    if iat.is_some_and(|iat| 1000.0 * iat > now + skew) {
        return Err(Rejection::invalid(
            "The Issued At value was after now plus clock skew",
        ));
    }
    if now - skew >= 1000.0 * exp {
        return Err(Rejection::invalid(
            "now minus clock skew is on or after the Expiration Time",
        ));
    }
    if iat.is_some_and(|iat| exp <= iat) {
        return Err(Rejection::invalid(
            "The Expiration Time was not after the Issued At time",
        ));
    }
    check_required_scope(&scope, config)?;
    // `as` saturates: an absurd `exp` becomes i64::MAX, which is what it means.
    Ok(ValidToken {
        principal,
        expires_at_ms: (exp * 1000.0).round() as i64,
    })
}

fn signed(claims: &Claims, config: &OAuthConfig, now_ms: i64) -> Result<ValidToken, Rejection> {
    let now_s = now_ms.div_euclid(1000);
    // A negative skew would only make tokens expire early; Kafka refuses one, we ignore it.
    let skew_s = config.clock_skew_seconds.max(0);
    let exp =
        numeric_date(&claims.exp, "exp")?.ok_or_else(|| Rejection::invalid("exp required"))?;
    let iat =
        numeric_date(&claims.iat, "iat")?.ok_or_else(|| Rejection::invalid("iat required"))?;
    let nbf = numeric_date(&claims.nbf, "nbf")?;
    if now_s.saturating_sub(skew_s) >= exp {
        return Err(Rejection::invalid("The JWT is no longer valid"));
    }
    if nbf.is_some_and(|nbf| nbf > now_s.saturating_add(skew_s)) {
        return Err(Rejection::invalid("The JWT is not yet valid"));
    }
    if let Some(expected) = &config.expected_issuer {
        if claims.iss.as_ref().and_then(Value::as_str) != Some(expected.as_str()) {
            return Err(Rejection::invalid("Issuer (iss) claim does not match"));
        }
    }
    check_audience(&claims.aud, &config.expected_audience)?;
    let principal = match &claims.sub {
        Some(Value::String(name)) => non_blank(name),
        _ => None,
    }
    .ok_or_else(|| {
        Rejection::invalid(format!(
            "{} value must be a non-blank string",
            config.sub_claim_name
        ))
    })?;

    let items: Vec<&Value> = match &claims.scope {
        Some(Value::String(_)) => claims.scope.iter().collect(),
        Some(Value::Array(items)) => items.iter().collect(),
        _ => Vec::new(),
    };
    let mut scope: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let item = item
            .as_str()
            .and_then(non_blank)
            .ok_or_else(|| Rejection::invalid("scope value must be non-blank"))?;
        if scope.contains(&item) {
            return Err(Rejection::invalid(format!(
                "scope value must not contain duplicates - {item}"
            )));
        }
        scope.push(item);
    }
    if exp < 0 || iat < 0 {
        return Err(Rejection::invalid("exp and iat must be non-negative"));
    }
    check_required_scope(&scope, config)?;
    Ok(ValidToken {
        principal,
        expires_at_ms: exp.saturating_mul(1000),
    })
}

/// jose4j's NumericDate: whole seconds of a JSON number (fractions truncated); JSON null
/// counts as absent.
fn numeric_date(value: &Option<Value>, name: &str) -> Result<Option<i64>, Rejection> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_i64().or_else(|| n.as_f64().map(|f| f.trunc() as i64))),
        Some(_) => Err(Rejection::invalid(format!(
            "The value of the '{name}' claim is not numeric"
        ))),
    }
}

/// jose4j's default audience rule: with expected audiences the token's `aud` (a string or a
/// list of strings) must name one; without, a token that names any audience fails.
fn check_audience(aud: &Option<Value>, expected: &[String]) -> Result<(), Rejection> {
    let named: Vec<&str> = match aud {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(list)) => {
            let all: Option<Vec<&str>> = list.iter().map(Value::as_str).collect();
            all.ok_or_else(|| Rejection::invalid("aud items must be strings"))?
        }
        Some(_) => return Err(Rejection::invalid("aud must be a string or a list")),
    };
    let present = aud.as_ref().is_some_and(|a| !a.is_null());
    match (present, expected.is_empty()) {
        (false, true) => Ok(()),
        (false, false) => Err(Rejection::invalid("No Audience (aud) claim present")),
        (true, _) if named.iter().any(|a| expected.iter().any(|e| e == a)) => Ok(()),
        (true, _) => Err(Rejection::invalid(
            "Audience (aud) claim doesn't contain an acceptable identifier",
        )),
    }
}

fn check_required_scope(scope: &[String], config: &OAuthConfig) -> Result<(), Rejection> {
    match config
        .required_scope
        .iter()
        .find(|required| !scope.contains(required))
    {
        None => Ok(()),
        Some(missing) => Err(Rejection {
            status: "insufficient_scope",
            // Java's List.toString, which Kafka puts in the challenge.
            scope: Some(format!("[{}]", config.required_scope.join(", "))),
            reason: format!("The provided scope was missing a required scope ({missing})"),
        }),
    }
}

/// The trimmed text, unless it is blank.
fn non_blank(text: &str) -> Option<String> {
    let trimmed = text.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

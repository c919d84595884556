//! JSON Web Keys (RFC 7517) for checking signed tokens: RSA keys for RS256 and P-256 keys
//! for ES256, the two algorithms this crate verifies (with ring).
//!
//! Key choice follows jose4j's `JwksVerificationKeyResolver`, which Kafka uses: the keys that
//! fit the token's algorithm (key type, and `alg`/`use` when the key states them) and, when
//! the token names a `kid`, carry that `kid`; exactly one must remain, else the token fails.
//! Keys of other types or curves in the set are skipped, not refused, so one JWKS can serve
//! several kinds of client.

use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde::Deserialize;

use super::config::OAuthConfigError;
use crate::b64;

/// A verification key from a JWKS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jwk {
    /// `kid`: which key a token's header names.
    pub kid: Option<String>,
    /// `alg`, when the key restricts itself to one algorithm.
    pub alg: Option<String>,
    /// `use`, when the key restricts itself to signatures ("sig") or encryption ("enc").
    pub usage: Option<String>,
    pub key: JwkKey,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JwkKey {
    /// Modulus and public exponent, big-endian without leading zeros.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// The affine coordinates of a P-256 point, big-endian.
    EcP256 { x: [u8; 32], y: [u8; 32] },
}

/// RFC 7518 names of the algorithms each key type verifies here.
pub(crate) const RS256: &str = "RS256";
pub(crate) const ES256: &str = "ES256";

impl Jwk {
    /// The one JWS algorithm this key verifies.
    pub fn algorithm(&self) -> &'static str {
        match self.key {
            JwkKey::Rsa { .. } => RS256,
            JwkKey::EcP256 { .. } => ES256,
        }
    }

    /// Whether `signature` signs `message` under this key. RSA keys shorter than 2048 bits
    /// never verify (ring's `RSA_PKCS1_2048_8192_SHA256`).
    pub(crate) fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        match &self.key {
            JwkKey::Rsa { n, e } => RsaPublicKeyComponents { n, e }
                .verify(&signature::RSA_PKCS1_2048_8192_SHA256, message, signature)
                .is_ok(),
            JwkKey::EcP256 { x, y } => {
                // SEC 1 uncompressed point: 0x04 || x || y. ring checks it is on the curve.
                let mut point = [0u8; 65];
                point[0] = 0x04;
                point[1..33].copy_from_slice(x);
                point[33..].copy_from_slice(y);
                UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &point[..])
                    .verify(message, signature)
                    .is_ok()
            }
        }
    }

    fn fits(&self, alg: &str, kid: Option<&str>) -> bool {
        let alg_ok = self.algorithm() == alg && self.alg.as_deref().unwrap_or(alg) == alg;
        let use_ok = self.usage.as_deref().unwrap_or("sig") == "sig";
        let kid_ok = match kid {
            Some(kid) => self.kid.as_deref() == Some(kid),
            None => true,
        };
        alg_ok && use_ok && kid_ok
    }
}

/// The single key that fits a token's `alg` and `kid`, if exactly one does.
pub(crate) fn select<'k>(keys: &'k [Jwk], alg: &str, kid: Option<&str>) -> Option<&'k Jwk> {
    let mut fitting = keys.iter().filter(|k| k.fits(alg, kid));
    let first = fitting.next()?;
    fitting.next().is_none().then_some(first)
}

#[derive(Deserialize)]
struct RawSet {
    keys: Vec<RawKey>,
}

#[derive(Deserialize)]
struct RawKey {
    kty: String,
    kid: Option<String>,
    alg: Option<String>,
    #[serde(rename = "use")]
    usage: Option<String>,
    crv: Option<String>,
    n: Option<String>,
    e: Option<String>,
    x: Option<String>,
    y: Option<String>,
}

/// The keys of a JWKS document (`{"keys":[...]}`), skipping types this crate cannot use.
pub(crate) fn parse(json: &str) -> Result<Vec<Jwk>, OAuthConfigError> {
    let set: RawSet =
        serde_json::from_str(json).map_err(|e| OAuthConfigError::JwksJson(e.to_string()))?;
    let mut keys = Vec::with_capacity(set.keys.len());
    for (index, raw) in set.keys.into_iter().enumerate() {
        let invalid = |reason: &str| OAuthConfigError::InvalidKey {
            index,
            reason: reason.into(),
        };
        let key = match (raw.kty.as_str(), raw.crv.as_deref()) {
            ("RSA", _) => {
                let n = raw
                    .n
                    .as_deref()
                    .and_then(b64::decode_url)
                    .ok_or_else(|| invalid("n"))?;
                let e = raw
                    .e
                    .as_deref()
                    .and_then(b64::decode_url)
                    .ok_or_else(|| invalid("e"))?;
                let (n, e) = (without_leading_zeros(&n), without_leading_zeros(&e));
                if n.is_empty() || e.is_empty() {
                    return Err(invalid("empty n or e"));
                }
                JwkKey::Rsa {
                    n: n.to_vec(),
                    e: e.to_vec(),
                }
            }
            ("EC", Some("P-256")) => {
                let coordinate = |c: Option<&str>, name: &str| {
                    c.and_then(b64::decode_url)
                        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
                        .ok_or_else(|| invalid(name))
                };
                JwkKey::EcP256 {
                    x: coordinate(raw.x.as_deref(), "x: 32 bytes expected")?,
                    y: coordinate(raw.y.as_deref(), "y: 32 bytes expected")?,
                }
            }
            _ => continue,
        };
        keys.push(Jwk {
            kid: raw.kid,
            alg: raw.alg,
            usage: raw.usage,
            key,
        });
    }
    Ok(keys)
}

fn without_leading_zeros(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    &bytes[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_supported_keys_and_skips_others() {
        let json = r#"{"keys":[
            {"kty":"RSA","kid":"r","n":"AAEAAQ","e":"AQAB","use":"sig"},
            {"kty":"oct","k":"c2VjcmV0"},
            {"kty":"EC","crv":"P-384","x":"AA","y":"AA"},
            {"kty":"EC","crv":"P-256","kid":"e",
             "x":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
             "y":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}"#;
        let keys = parse(json).expect("valid");
        assert_eq!(keys.len(), 2);
        assert_eq!(
            keys[0].key,
            JwkKey::Rsa {
                n: vec![1, 0, 1],
                e: vec![1, 0, 1]
            }
        );
        assert_eq!(keys[1].algorithm(), ES256);
        assert_eq!(
            select(&keys, RS256, None).map(|k| k.kid.as_deref()),
            Some(Some("r"))
        );
        assert!(select(&keys, RS256, Some("e")).is_none());
        assert!(select(&keys, "HS256", None).is_none());
    }

    #[test]
    fn refuses_broken_keys_and_documents() {
        assert!(matches!(parse("{}"), Err(OAuthConfigError::JwksJson(_))));
        assert!(matches!(parse("[]"), Err(OAuthConfigError::JwksJson(_))));
        let short = r#"{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}"#;
        assert!(matches!(
            parse(short),
            Err(OAuthConfigError::InvalidKey { index: 0, .. })
        ));
        let no_n = r#"{"keys":[{"kty":"RSA","e":"AQAB"}]}"#;
        assert!(matches!(
            parse(no_n),
            Err(OAuthConfigError::InvalidKey { index: 0, .. })
        ));
    }

    #[test]
    fn two_fitting_keys_without_kid_select_none() {
        let key = Jwk {
            kid: None,
            alg: None,
            usage: None,
            key: JwkKey::Rsa {
                n: vec![1],
                e: vec![3],
            },
        };
        let keys = [
            key.clone(),
            Jwk {
                kid: Some("b".into()),
                ..key
            },
        ];
        assert!(select(&keys, RS256, None).is_none());
        assert!(select(&keys, RS256, Some("b")).is_some());
    }
}

//! Base64 as the mechanisms need it: strict, padded standard Base64 for SCRAM attributes
//! (Kafka's `BASE64` pattern accepts nothing else), and unpadded URL-safe Base64 for JWT
//! segments.

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine;

/// URL-safe, padding optional, as JWS compact serialization writes it (RFC 7515 §2 omits the
/// padding; accepting it costs nothing).
const URL_SAFE_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Standard alphabet, padding optional: Kafka decodes unsecured JWS segments with Java's
/// basic decoder, so tokens written with `+` and `/` work there and must work here too.
const STANDARD_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

pub(crate) fn encode(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Standard Base64 with canonical padding; `None` for anything else.
pub(crate) fn decode_strict(text: &str) -> Option<Vec<u8>> {
    STANDARD.decode(text).ok()
}

/// Unpadded URL-safe Base64, as a signed JWT's segments must be.
pub(crate) fn decode_url(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_LENIENT.decode(text).ok()
}

/// Either alphabet, for unsecured tokens.
pub(crate) fn decode_url_or_standard(text: &str) -> Option<Vec<u8>> {
    decode_url(text).or_else(|| STANDARD_LENIENT.decode(text).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_rejects_unpadded_and_url_alphabet() {
        assert_eq!(decode_strict("biws"), Some(b"n,,".to_vec()));
        assert_eq!(decode_strict("bg=="), Some(b"n".to_vec()));
        assert_eq!(decode_strict("bg"), None);
        assert_eq!(decode_strict("-_-_"), None);
        assert_eq!(decode_strict("bh=="), None, "non-canonical trailing bits");
    }

    #[test]
    fn url_accepts_both_paddings() {
        assert_eq!(decode_url("bg"), Some(b"n".to_vec()));
        assert_eq!(decode_url("bg=="), Some(b"n".to_vec()));
        assert_eq!(decode_url("-_-_"), Some(vec![0xfb, 0xff, 0xbf]));
        assert_eq!(decode_url("+/+/"), None);
        assert_eq!(decode_url_or_standard("+/+/"), Some(vec![0xfb, 0xff, 0xbf]));
    }
}

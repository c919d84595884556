//! The principal of a TLS connection, as Kafka's `DefaultKafkaPrincipalBuilder` makes it:
//! `User:` and the client certificate's subject DN in RFC 2253 form (Java's
//! `X500Principal.getName()`: most specific RDN first, `CN=client,OU=eng,O=Example,C=US`)
//! mapped by `ssl.principal.mapping.rules` (`acl::PrincipalMapper`; the default rule
//! `DEFAULT` keeps the DN), or `User:ANONYMOUS` without a client certificate.
//!
//! The subject is read with a small DER walker (the certificate was verified by rustls before
//! we look at it): Certificate → tbsCertificate → subject, skipping version, serial,
//! signature algorithm, issuer and validity.

/// Kafka's principal of a connection without a client certificate.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// `User:<subject DN>` of a DER certificate; `None` if its subject cannot be read.
pub fn principal_of(cert_der: &[u8]) -> Option<String> {
    subject_dn(cert_der).map(|dn| format!("User:{dn}"))
}

/// `User:` and the name `mapper` makes of a DER certificate's subject DN, as Kafka's
/// `DefaultKafkaPrincipalBuilder` does; `Ok(None)` if its subject cannot be read. A DN no rule
/// maps is an error: Kafka fails the authentication, and the connection closes.
pub fn mapped_principal_of(
    cert_der: &[u8],
    mapper: &acl::PrincipalMapper,
) -> Result<Option<String>, acl::AclError> {
    let Some(dn) = subject_dn(cert_der) else {
        return Ok(None);
    };
    Ok(Some(format!("User:{}", mapper.map(&dn)?)))
}

/// The subject DN of a DER certificate in RFC 2253 form.
pub fn subject_dn(cert_der: &[u8]) -> Option<String> {
    let (tag, cert, _) = tlv(cert_der)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, mut tbs, _) = tlv(cert)?;
    if tag != SEQUENCE {
        return None;
    }
    // [0] EXPLICIT version, optional.
    if tbs.first() == Some(&0xA0) {
        tbs = tlv(tbs)?.2;
    }
    // serialNumber, signature, issuer, validity.
    for _ in 0..4 {
        tbs = tlv(tbs)?.2;
    }
    let (tag, subject, _) = tlv(tbs)?;
    if tag != SEQUENCE {
        return None;
    }
    format_name(subject)
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;

/// Formats the contents of an X.501 `Name` (a sequence of RDN sets) as RFC 2253.
pub fn format_name(mut name: &[u8]) -> Option<String> {
    let mut rdns: Vec<String> = Vec::new();
    while !name.is_empty() {
        let (tag, mut set, rest) = tlv(name)?;
        name = rest;
        if tag != SET {
            return None;
        }
        let mut parts: Vec<String> = Vec::new();
        while !set.is_empty() {
            let (tag, attribute, rest) = tlv(set)?;
            set = rest;
            if tag != SEQUENCE {
                return None;
            }
            let (tag, oid, value) = tlv(attribute)?;
            if tag != OID {
                return None;
            }
            let oid = oid_string(oid)?;
            let keyword = keyword(&oid);
            let text = match keyword {
                Some(_) => string_value(value).map(|s| escape(&s)),
                None => None,
            };
            let text = match text {
                Some(text) => text,
                // RFC 2253: an attribute without a keyword, or not a string, as #hex of its DER.
                None => format!("#{}", hex(tlv_whole(value)?)),
            };
            parts.push(format!("{}={}", keyword.unwrap_or(&oid), text));
        }
        rdns.push(parts.join("+"));
    }
    // RFC 2253 writes the last RDN of the sequence first.
    rdns.reverse();
    Some(rdns.join(","))
}

/// RFC 2253's keywords (those Java's `X500Principal.getName()` prints by name).
fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

/// The text of a directory string (UTF8, Printable, IA5, Teletex, BMP, Universal).
fn string_value(der: &[u8]) -> Option<String> {
    let (tag, content, _) = tlv(der)?;
    match tag {
        0x0C | 0x13 | 0x16 | 0x12 | 0x1A => String::from_utf8(content.to_vec()).ok(),
        // Teletex: Latin-1 in practice.
        0x14 => Some(content.iter().map(|&b| b as char).collect()),
        0x1E => {
            let units: Vec<u16> = content
                .chunks_exact(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]))
                .collect();
            String::from_utf16(&units).ok()
        }
        0x1C => content
            .chunks_exact(4)
            .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        _ => None,
    }
}

/// RFC 2253 escaping, as Java does it: `,+"\<>;` anywhere, `#` or a space first, a space last.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let count = value.chars().count();
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i + 1 == count && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn oid_string(der: &[u8]) -> Option<String> {
    let (&first, rest) = der.split_first()?;
    let mut parts = vec![u64::from(first / 40).min(2), 0];
    parts[1] = u64::from(first) - parts[0] * 40;
    let mut value: u64 = 0;
    for &byte in rest {
        value = value.checked_mul(128)? | u64::from(byte & 0x7F);
        if byte & 0x80 == 0 {
            parts.push(value);
            value = 0;
        }
    }
    Some(
        parts
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("."),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One DER element: (tag, contents, what follows). Low tag numbers only (all X.509 needs).
fn tlv(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7F);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |len, &b| (len << 8) | usize::from(b));
        rest = &rest[count..];
        len
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The bytes of the first DER element of `der`, header included.
fn tlv_whole(der: &[u8]) -> Option<&[u8]> {
    let (_, _, rest) = tlv(der)?;
    Some(&der[..der.len() - rest.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn der(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if content.len() < 0x80 {
            out.push(content.len() as u8);
        } else {
            out.extend([0x82, (content.len() >> 8) as u8, content.len() as u8]);
        }
        out.extend_from_slice(content);
        out
    }

    fn attribute(oid: &[u8], tag: u8, value: &str) -> Vec<u8> {
        let mut content = der(OID, oid);
        content.extend(der(tag, value.as_bytes()));
        der(SET, &der(SEQUENCE, &content))
    }

    const CN: &[u8] = &[0x55, 0x04, 0x03];
    const OU: &[u8] = &[0x55, 0x04, 0x0B];
    const O: &[u8] = &[0x55, 0x04, 0x0A];
    const C: &[u8] = &[0x55, 0x04, 0x06];
    const EMAIL: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x01];

    #[test]
    fn most_specific_first_with_keywords() {
        let mut name = attribute(C, 0x13, "US");
        name.extend(attribute(O, 0x0C, "Example"));
        name.extend(attribute(OU, 0x0C, "eng"));
        name.extend(attribute(CN, 0x0C, "client"));
        assert_eq!(
            format_name(&name).unwrap(),
            "CN=client,OU=eng,O=Example,C=US"
        );
    }

    #[test]
    fn escapes_and_unknown_attributes_as_hex() {
        let mut name = attribute(EMAIL, 0x16, "a@b");
        name.extend(attribute(CN, 0x0C, "Smith, John"));
        assert_eq!(
            format_name(&name).unwrap(),
            "CN=Smith\\, John,1.2.840.113549.1.9.1=#1603614062"
        );
        assert_eq!(escape(" #x "), "\\ #x\\ ");
        assert_eq!(escape("#a"), "\\#a");
    }

    #[test]
    fn subject_of_a_certificate_skips_to_the_sixth_field() {
        let mut tbs = der(0xA0, &der(0x02, &[2]));
        tbs.extend(der(0x02, &[1, 2, 3]));
        tbs.extend(der(SEQUENCE, &der(OID, &[0x2A, 0x86, 0x48])));
        tbs.extend(der(SEQUENCE, &attribute(CN, 0x0C, "issuer CA")));
        tbs.extend(der(SEQUENCE, &[]));
        let mut subject = attribute(O, 0x0C, "Org");
        subject.extend(attribute(CN, 0x0C, "alice"));
        tbs.extend(der(SEQUENCE, &subject));
        tbs.extend(der(SEQUENCE, &[0; 200]));
        let cert = der(SEQUENCE, &der(SEQUENCE, &tbs));
        assert_eq!(principal_of(&cert).unwrap(), "User:CN=alice,O=Org");
        assert_eq!(principal_of(&cert[..10]), None);
        assert_eq!(principal_of(&[]), None);
        let default = acl::PrincipalMapper::parse("DEFAULT").unwrap();
        assert_eq!(
            mapped_principal_of(&cert, &default).unwrap().as_deref(),
            Some("User:CN=alice,O=Org")
        );
        let rules = acl::PrincipalMapper::parse("RULE:^CN=(.*?),O=.*$/$1/U").unwrap();
        assert_eq!(
            mapped_principal_of(&cert, &rules).unwrap().as_deref(),
            Some("User:ALICE")
        );
        let none = acl::PrincipalMapper::parse("RULE:^CN=bob,.*$/bob/").unwrap();
        assert!(mapped_principal_of(&cert, &none).is_err());
        assert_eq!(mapped_principal_of(&[], &default).unwrap(), None);
    }
}

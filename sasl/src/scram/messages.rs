//! SCRAM message syntax (RFC 5802 §7): parsing the four messages and the saslname escapes.
//!
//! Parsers borrow from the token and allocate at most its length again (a decoded name, a
//! decoded proof, one slice pair per extension). Every message must be UTF-8 without NUL.
//! Where Kafka's regular expressions and the RFC differ we take the RFC's side when that is
//! stricter or harmless: `m=` (a mandatory extension) fails as RFC 5802 requires, names and
//! extension values may be any UTF-8 rather than only ASCII, and the client-first `y` flag
//! (client could bind but thinks we cannot, which is true) is accepted alongside `n`.

use crate::b64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ParseError {
    #[error("message is not UTF-8 text without NUL")]
    NotText,
    #[error("invalid gs2 header")]
    Gs2Header,
    #[error("channel binding requested, but this server offers none")]
    ChannelBinding,
    #[error("mandatory extension (m=) not supported")]
    MandatoryExtension,
    #[error("expected attribute '{0}='")]
    MissingAttribute(char),
    #[error("invalid saslname")]
    SaslName,
    #[error("invalid nonce")]
    Nonce,
    #[error("invalid extension")]
    Extension,
    #[error("invalid base64 in attribute '{0}='")]
    Base64(char),
    #[error("invalid iteration count")]
    Iterations,
}

/// RFC 5802 `client-first-message`.
#[derive(Debug)]
pub(crate) struct ClientFirst<'a> {
    /// `gs2-header` exactly as sent, "n,," for instance: `c=` must echo it.
    pub gs2_header: &'a str,
    /// The decoded `a=` authorization id, when present.
    pub authzid: Option<String>,
    /// The decoded `n=` user name.
    pub user: String,
    pub nonce: &'a str,
    /// `client-first-message-bare` exactly as sent: the first part of the AuthMessage.
    pub bare: &'a str,
    pub extensions: Vec<(&'a str, &'a str)>,
}

/// RFC 5802 `server-first-message`, as a client reads it.
#[derive(Debug)]
pub(crate) struct ServerFirst<'a> {
    pub nonce: &'a str,
    pub salt: Vec<u8>,
    pub iterations: u32,
}

/// RFC 5802 `client-final-message`.
#[derive(Debug)]
pub(crate) struct ClientFinal<'a> {
    /// The `c=` value, still in Base64.
    pub channel_binding: &'a str,
    pub nonce: &'a str,
    /// `client-final-message-without-proof` exactly as sent: the last part of the AuthMessage.
    pub without_proof: &'a str,
    pub proof: Vec<u8>,
}

/// RFC 5802 `server-final-message`, as a client reads it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ServerFinal {
    Verifier(Vec<u8>),
    Error(String),
}

impl<'a> ClientFirst<'a> {
    pub(crate) fn parse(token: &'a [u8]) -> Result<ClientFirst<'a>, ParseError> {
        let message = text(token)?;
        let after_flag = if let Some(rest) = message.strip_prefix("n,") {
            rest
        } else if let Some(rest) = message.strip_prefix("y,") {
            rest
        } else if message.starts_with("p=") {
            return Err(ParseError::ChannelBinding);
        } else {
            return Err(ParseError::Gs2Header);
        };
        let (authzid_field, bare) = after_flag.split_once(',').ok_or(ParseError::Gs2Header)?;
        let authzid = match authzid_field {
            "" => None,
            field => {
                let name = field.strip_prefix("a=").ok_or(ParseError::Gs2Header)?;
                Some(decode_saslname(name)?)
            }
        };
        let gs2_header = &message[..message.len() - bare.len()];

        let mut parts = bare.split(',');
        let first = parts.next().unwrap_or_default();
        if first.starts_with("m=") {
            return Err(ParseError::MandatoryExtension);
        }
        let user = decode_saslname(attribute(first, 'n')?)?;
        let nonce = attribute(parts.next().unwrap_or_default(), 'r')?;
        if !is_printable(nonce) {
            return Err(ParseError::Nonce);
        }
        let extensions = parts.map(extension).collect::<Result<Vec<_>, _>>()?;
        Ok(ClientFirst {
            gs2_header,
            authzid,
            user,
            nonce,
            bare,
            extensions,
        })
    }
}

impl<'a> ServerFirst<'a> {
    pub(crate) fn parse(token: &'a [u8]) -> Result<ServerFirst<'a>, ParseError> {
        let message = text(token)?;
        let mut parts = message.split(',');
        let first = parts.next().unwrap_or_default();
        if first.starts_with("m=") {
            return Err(ParseError::MandatoryExtension);
        }
        let nonce = attribute(first, 'r')?;
        if !is_printable(nonce) {
            return Err(ParseError::Nonce);
        }
        let salt = attribute(parts.next().unwrap_or_default(), 's')?;
        let salt = b64::decode_strict(salt).ok_or(ParseError::Base64('s'))?;
        let iterations = attribute(parts.next().unwrap_or_default(), 'i')?;
        let iterations = parse_iterations(iterations)?;
        for part in parts {
            extension(part)?;
        }
        Ok(ServerFirst {
            nonce,
            salt,
            iterations,
        })
    }
}

impl<'a> ClientFinal<'a> {
    pub(crate) fn parse(token: &'a [u8]) -> Result<ClientFinal<'a>, ParseError> {
        let message = text(token)?;
        // The proof is the last attribute and Base64 has no ',', so the last ",p=" splits it.
        let (without_proof, proof) = message
            .rsplit_once(",p=")
            .ok_or(ParseError::MissingAttribute('p'))?;
        let proof = b64::decode_strict(proof).ok_or(ParseError::Base64('p'))?;
        let mut parts = without_proof.split(',');
        let channel_binding = attribute(parts.next().unwrap_or_default(), 'c')?;
        if b64::decode_strict(channel_binding).is_none() {
            return Err(ParseError::Base64('c'));
        }
        let nonce = attribute(parts.next().unwrap_or_default(), 'r')?;
        if !is_printable(nonce) {
            return Err(ParseError::Nonce);
        }
        for part in parts {
            extension(part)?;
        }
        Ok(ClientFinal {
            channel_binding,
            nonce,
            without_proof,
            proof,
        })
    }
}

impl ServerFinal {
    pub(crate) fn parse(token: &[u8]) -> Result<ServerFinal, ParseError> {
        let message = text(token)?;
        if let Some(error) = message.strip_prefix("e=") {
            if error.is_empty() || error.contains(',') || error.contains('=') {
                return Err(ParseError::MissingAttribute('e'));
            }
            return Ok(ServerFinal::Error(error.to_owned()));
        }
        let mut parts = message.split(',');
        let verifier = attribute(parts.next().unwrap_or_default(), 'v')?;
        let verifier = b64::decode_strict(verifier).ok_or(ParseError::Base64('v'))?;
        for part in parts {
            extension(part)?;
        }
        Ok(ServerFinal::Verifier(verifier))
    }
}

/// RFC 5802 `printable` without ',' (a nonce), at least one character.
pub(crate) fn is_printable(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// RFC 5802 `saslname` to a user name: "=2C" is ',', "=3D" is '=', and any other '=' is an
/// error (Kafka's `ScramFormatter.username`). Empty names are refused (`1*(...)`).
pub(crate) fn decode_saslname(saslname: &str) -> Result<String, ParseError> {
    if saslname.is_empty() || saslname.contains(',') {
        return Err(ParseError::SaslName);
    }
    let mut name = String::with_capacity(saslname.len());
    let mut rest = saslname;
    while let Some(at) = rest.find('=') {
        name.push_str(&rest[..at]);
        let escape = rest.get(at..at + 3);
        match escape {
            Some("=2C") => name.push(','),
            Some("=3D") => name.push('='),
            _ => return Err(ParseError::SaslName),
        }
        rest = &rest[at + 3..];
    }
    name.push_str(rest);
    Ok(name)
}

/// A user name to RFC 5802 `saslname` (Kafka's `ScramFormatter.saslName`).
pub(crate) fn encode_saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

fn text(token: &[u8]) -> Result<&str, ParseError> {
    let message = std::str::from_utf8(token).map_err(|_| ParseError::NotText)?;
    if message.contains('\0') {
        return Err(ParseError::NotText);
    }
    Ok(message)
}

/// The value of `<name>=<value>`.
fn attribute(part: &str, name: char) -> Result<&str, ParseError> {
    let mut chars = part.chars();
    match (chars.next(), chars.next()) {
        (Some(n), Some('=')) if n == name => Ok(chars.as_str()),
        _ => Err(ParseError::MissingAttribute(name)),
    }
}

/// An extension `key=value`: Kafka allows a key of one or more ASCII letters (RFC 5802 says
/// one; Kafka's own `tokenauth` needs more) and a non-empty value.
fn extension(part: &str) -> Result<(&str, &str), ParseError> {
    let (key, value) = part.split_once('=').ok_or(ParseError::Extension)?;
    let key_ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic());
    if !key_ok || value.is_empty() {
        return Err(ParseError::Extension);
    }
    Ok((key, value))
}

/// `i=`: decimal digits only (`str::parse` would also take a '+'), positive, within u32.
fn parse_iterations(text: &str) -> Result<u32, ParseError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::Iterations);
    }
    match text.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ParseError::Iterations),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saslname_escapes() {
        assert_eq!(decode_saslname("a=2Cb=3Dc").as_deref(), Ok("a,b=c"));
        assert_eq!(decode_saslname("=3D2C").as_deref(), Ok("=2C"));
        assert_eq!(decode_saslname("a=2c"), Err(ParseError::SaslName));
        assert_eq!(decode_saslname("a="), Err(ParseError::SaslName));
        assert_eq!(decode_saslname("a=4"), Err(ParseError::SaslName));
        assert_eq!(decode_saslname(""), Err(ParseError::SaslName));
        assert_eq!(encode_saslname("a,b=c"), "a=2Cb=3Dc");
        assert_eq!(
            decode_saslname(&encode_saslname("x=2C,y")).as_deref(),
            Ok("x=2C,y")
        );
    }

    #[test]
    fn client_first_fields() {
        let m = ClientFirst::parse(b"n,a=bob,n=bob,r=abc,ext=1,tokenauth=true").expect("parses");
        assert_eq!(m.gs2_header, "n,a=bob,");
        assert_eq!(m.authzid.as_deref(), Some("bob"));
        assert_eq!(m.user, "bob");
        assert_eq!(m.nonce, "abc");
        assert_eq!(m.bare, "n=bob,r=abc,ext=1,tokenauth=true");
        assert_eq!(m.extensions, vec![("ext", "1"), ("tokenauth", "true")]);
        assert!(ClientFirst::parse(b"y,,n=u,r=x").is_ok());
    }

    #[test]
    fn client_first_refusals() {
        let cases: [(&[u8], ParseError); 9] = [
            (b"p=tls-unique,,n=u,r=x", ParseError::ChannelBinding),
            (b"x,,n=u,r=x", ParseError::Gs2Header),
            (b"n,b=u,n=u,r=x", ParseError::Gs2Header),
            (b"n,,m=ext,n=u,r=x", ParseError::MandatoryExtension),
            (b"n,,n=u", ParseError::MissingAttribute('r')),
            (b"n,,n=u,r=a b", ParseError::Nonce),
            (b"n,,n=u=,r=x", ParseError::SaslName),
            (b"n,,n=u,r=x,=v", ParseError::Extension),
            (b"n,,n=u\0,r=x", ParseError::NotText),
        ];
        for (message, expected) in cases {
            assert_eq!(
                ClientFirst::parse(message).err(),
                Some(expected),
                "{message:?}"
            );
        }
    }

    #[test]
    fn client_final_and_server_messages() {
        let m = ClientFinal::parse(b"c=biws,r=abc,p=AAAA").expect("parses");
        assert_eq!(
            (m.channel_binding, m.nonce, m.without_proof),
            ("biws", "abc", "c=biws,r=abc")
        );
        assert_eq!(m.proof, vec![0, 0, 0]);
        assert!(ClientFinal::parse(b"c=biws,r=abc,p=AAA").is_err());
        assert!(ClientFinal::parse(b"r=abc,c=biws,p=AAAA").is_err());
        let s = ServerFirst::parse(b"r=abc,s=AAAA,i=4096").expect("parses");
        assert_eq!((s.nonce, s.iterations), ("abc", 4096));
        assert!(ServerFirst::parse(b"r=abc,s=AAAA,i=+4096").is_err());
        assert!(ServerFirst::parse(b"r=abc,s=AAAA,i=0").is_err());
        assert!(ServerFirst::parse(b"r=abc,s=AAAA,i=99999999999").is_err());
        assert_eq!(
            ServerFinal::parse(b"v=AAAA"),
            Ok(ServerFinal::Verifier(vec![0, 0, 0]))
        );
        assert_eq!(
            ServerFinal::parse(b"e=invalid-proof"),
            Ok(ServerFinal::Error("invalid-proof".into()))
        );
    }
}

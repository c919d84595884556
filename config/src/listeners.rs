//! `listeners` / `advertised.listeners`: comma lists of `NAME://host:port`, and
//! `listener.security.protocol.map`, which gives each listener name its security protocol
//! (Kafka's default map names the protocols after themselves: `SSL://...` is an SSL listener).

use super::properties::list_items;
use super::ConfigError;

/// Kafka's default `listener.security.protocol.map`.
pub const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// What a listener speaks (Kafka's `SecurityProtocol`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Kafka's `SecurityProtocol` id (in BrokerRegistration records and DescribeCluster).
    pub fn id(self) -> i16 {
        match self {
            SecurityProtocol::Plaintext => 0,
            SecurityProtocol::Ssl => 1,
            SecurityProtocol::SaslPlaintext => 2,
            SecurityProtocol::SaslSsl => 3,
        }
    }

    /// Whether connections are encrypted with TLS before anything else.
    pub fn is_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether a client must authenticate with SASL before any other request.
    pub fn is_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// A parsed `NAME://host:port` listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// Listener name, upper case (Kafka's `ListenerName.normalised`).
    pub name: String,
    /// Host to bind / advertise; empty in the config means `0.0.0.0`. IPv6 without brackets.
    pub host: String,
    pub port: u16,
    /// From `listener.security.protocol.map`.
    pub protocol: SecurityProtocol,
}

impl Listener {
    /// `host:port`, bracketing IPv6, suitable for `TcpListener::bind`.
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// `NAME://host:port` before its name is given a protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// Parses the syntax of a comma list of listeners for `key`: names unique, ports valid.
pub fn parse_endpoints(key: &str, value: &str) -> Result<Vec<Endpoint>, ConfigError> {
    let bad = |expected: String| ConfigError::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        expected,
    };
    let mut out: Vec<Endpoint> = Vec::new();
    for item in list_items(value) {
        let (name, rest) = item
            .split_once("://")
            .ok_or_else(|| bad("NAME://host:port, e.g. PLAINTEXT://127.0.0.1:9092".into()))?;
        let name = name.trim().to_ascii_uppercase();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        {
            return Err(bad(format!(
                "a listener name of letters, digits, _ - . (not `{name}`)"
            )));
        }
        let (host, port) = if let Some(r) = rest.strip_prefix('[') {
            let (h, p) = r
                .split_once("]:")
                .ok_or_else(|| bad("[ipv6]:port".into()))?;
            (h.to_string(), p)
        } else {
            let (h, p) = rest
                .rsplit_once(':')
                .ok_or_else(|| bad("NAME://host:port".into()))?;
            if h.contains(':') {
                return Err(bad("IPv6 hosts in brackets: PLAINTEXT://[::1]:9092".into()));
            }
            (h.to_string(), p)
        };
        let port: u16 = port
            .parse()
            .map_err(|_| bad("a port in 0..=65535".into()))?;
        let host = if host.is_empty() {
            "0.0.0.0".to_string()
        } else {
            host
        };
        if out.iter().any(|l| l.name == name) {
            return Err(bad(format!("unique listener names ({name} appears twice)")));
        }
        out.push(Endpoint { name, host, port });
    }
    if out.is_empty() {
        return Err(bad("at least one NAME://host:port".into()));
    }
    Ok(out)
}

/// Parses `listener.security.protocol.map` (`NAME:PROTOCOL,...`) into (name, protocol) pairs.
pub fn parse_protocol_map(
    key: &str,
    value: &str,
) -> Result<Vec<(String, SecurityProtocol)>, ConfigError> {
    let bad = |expected: String| ConfigError::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        expected,
    };
    let mut out: Vec<(String, SecurityProtocol)> = Vec::new();
    for item in list_items(value) {
        let (name, protocol) = item
            .split_once(':')
            .ok_or_else(|| bad("NAME:PROTOCOL pairs, e.g. PLAINTEXT:PLAINTEXT,SSL:SSL".into()))?;
        let name = name.trim().to_ascii_uppercase();
        let protocol = match protocol.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => SecurityProtocol::Plaintext,
            "SSL" => SecurityProtocol::Ssl,
            "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
            "SASL_SSL" => SecurityProtocol::SaslSsl,
            other => {
                return Err(bad(format!(
                    "protocols PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (not `{other}`)"
                )))
            }
        };
        if out.iter().any(|(n, _)| *n == name) {
            return Err(bad(format!("unique listener names ({name} appears twice)")));
        }
        out.push((name, protocol));
    }
    Ok(out)
}

/// Parses a comma list of listeners for `key`, each named in `protocol_map` (the value of
/// `listener.security.protocol.map`).
pub fn parse_listeners(
    key: &str,
    value: &str,
    protocol_map: &str,
) -> Result<Vec<Listener>, ConfigError> {
    let map = parse_protocol_map("listener.security.protocol.map", protocol_map)?;
    let endpoints = parse_endpoints(key, value)?;
    let bad = |expected: String| ConfigError::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        expected,
    };
    let mut out = Vec::with_capacity(endpoints.len());
    for Endpoint { name, host, port } in endpoints {
        let protocol = match map.iter().find(|(n, _)| *n == name) {
            Some((_, protocol)) => *protocol,
            None => {
                return Err(bad(format!(
                    "listener names that listener.security.protocol.map gives a protocol \
                     ({name} is not in it)"
                )))
            }
        };
        if port != 0 && out.iter().any(|l: &Listener| l.port == port) && key == "listeners" {
            return Err(bad(format!(
                "a different port for each listener ({port} is used twice)"
            )));
        }
        out.push(Listener {
            name,
            host,
            port,
            protocol,
        });
    }
    Ok(out)
}

/// Parses `http://host:port` into `host:port` (the host may be a name, an IPv4 address or a
/// bracketed IPv6 address; no path).
pub fn parse_http_listener(value: &str) -> Result<String, String> {
    let Some(rest) = value.strip_prefix("http://") else {
        return Err("an address of the form http://host:port (only http is served)".into());
    };
    let address = rest.strip_suffix('/').unwrap_or(rest);
    let Some((host, port)) = address.rsplit_once(':') else {
        return Err("an address of the form http://host:port (the port is missing)".into());
    };
    let bracketed = host.starts_with('[') && host.ends_with(']') && host.len() > 2;
    if host.is_empty() || host.contains('/') || (host.contains(':') && !bracketed) {
        return Err("an address of the form http://host:port (bad host)".into());
    }
    if port.parse::<u16>().is_err() {
        return Err("an address of the form http://host:port (the port is 0-65535)".into());
    }
    Ok(address.to_string())
}

//! `listeners` / `advertised.listeners`: comma lists of `NAME://host:port`.

use super::validate::list_items;
use super::ConfigError;

/// A parsed `NAME://host:port` listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// Listener name (also the security protocol: only PLAINTEXT for now).
    pub name: String,
    /// Host to bind / advertise; empty in the config means `0.0.0.0`. IPv6 without brackets.
    pub host: String,
    pub port: u16,
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

/// Parses a comma list of listeners for `key`.
pub fn parse_listeners(key: &str, value: &str) -> Result<Vec<Listener>, ConfigError> {
    let bad = |expected: String| ConfigError::InvalidValue {
        key: key.to_string(),
        value: value.to_string(),
        expected,
    };
    let mut out: Vec<Listener> = Vec::new();
    for item in list_items(value) {
        let (name, rest) = item
            .split_once("://")
            .ok_or_else(|| bad("NAME://host:port, e.g. PLAINTEXT://127.0.0.1:9092".into()))?;
        let name = name.trim().to_ascii_uppercase();
        match name.as_str() {
            "PLAINTEXT" => {}
            "SSL" | "SASL_PLAINTEXT" | "SASL_SSL" => {
                return Err(bad(format!(
                    "PLAINTEXT listeners (security protocol {name} is not supported yet)"
                )))
            }
            _ => {
                return Err(bad(format!(
                    "PLAINTEXT listeners (listener name {name} is not supported: \
                     listener.security.protocol.map is ignored, name the listener PLAINTEXT)"
                )))
            }
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
        out.push(Listener { name, host, port });
    }
    if out.is_empty() {
        return Err(bad("at least one NAME://host:port".into()));
    }
    Ok(out)
}

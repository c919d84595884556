//! The client's errors, one type for the connection layer and the routing above it. Each
//! variant's message carries what it wraps (an I/O error, a codec error), so `{}` and
//! anyhow's `{:#}` both print the whole story once.

use std::io;

use wire::primitives::{DecodeError, EncodeError};
use wire::ErrorCode;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O error outside a request (a bare frame read, a socket option).
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("resolving {addr}: {error}")]
    Resolve { addr: String, error: io::Error },
    #[error("{addr} resolves to no address")]
    NoAddress { addr: String },
    #[error("connecting to {addr}: {error}")]
    Connect { addr: String, error: io::Error },
    /// The TLS session could not be set up (bad server name, refused certificate).
    #[error("TLS with {addr}: {message}")]
    Tls {
        addr: String,
        kind: io::ErrorKind,
        message: String,
    },
    #[error("sending {api}: {error}")]
    Send { api: &'static str, error: io::Error },
    #[error("reading the {api} response: {error}")]
    Receive { api: &'static str, error: io::Error },
    #[error("bad response frame size {size} (at most {max})")]
    FrameSize { size: i32, max: usize },
    #[error("encoding {api} v{version}: {error}")]
    Encode {
        api: &'static str,
        version: i16,
        error: EncodeError,
    },
    #[error("{api} response header: {error}")]
    Header {
        api: &'static str,
        error: DecodeError,
    },
    #[error("{api} v{version} response: {error}")]
    Decode {
        api: &'static str,
        version: i16,
        error: DecodeError,
    },
    #[error("{api} response has correlation id {got}, expected {expected}")]
    CorrelationId {
        api: &'static str,
        got: i32,
        expected: i32,
    },
    /// No version of `api` in `floor..=cap` is spoken by both sides.
    #[error("{}", unsupported_message(api, *floor, *cap))]
    UnsupportedVersion {
        api: &'static str,
        floor: i16,
        cap: i16,
    },
    /// ApiVersions answered an error code.
    #[error("ApiVersions: {}", error_name(*code))]
    ApiVersions { code: i16 },
    /// A TLS connection is one state machine for both directions: it cannot be split.
    #[error("a TLS connection cannot be split into a writer and a reader")]
    SplitTls,
    #[error("no address known for broker {node} (not in the Metadata answer)")]
    UnknownBroker { node: i32 },
    #[error("connecting to broker {node}: {error}")]
    Broker { node: i32, error: Box<Error> },
    #[error("FindCoordinator answered no coordinator for group {group}")]
    NoCoordinator { group: String },
    #[error("ListOffsets answered nothing for {topic}-{partition}")]
    MissingOffset { topic: String, partition: i32 },
    /// A Kafka error code a broker answered.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
}

fn unsupported_message(api: &str, floor: i16, cap: i16) -> String {
    if cap == i16::MAX {
        format!("the broker does not support {api} v{floor} or later")
    } else {
        format!("the broker does not support {api} v{floor}..v{cap}")
    }
}

impl Error {
    /// The `io::ErrorKind` closest to this error (I/O errors keep their own).
    pub fn io_kind(&self) -> io::ErrorKind {
        match self {
            Error::Io(e)
            | Error::Resolve { error: e, .. }
            | Error::Connect { error: e, .. }
            | Error::Send { error: e, .. }
            | Error::Receive { error: e, .. } => e.kind(),
            Error::Tls { kind, .. } => *kind,
            Error::NoAddress { .. } | Error::UnknownBroker { .. } => io::ErrorKind::NotFound,
            Error::SplitTls => io::ErrorKind::Unsupported,
            Error::Broker { error, .. } => error.io_kind(),
            _ => io::ErrorKind::InvalidData,
        }
    }
}

/// For callers that speak `io::Result` (the bench's native client): a bare I/O error comes
/// back as it was, anything else wrapped with [`Error::io_kind`].
impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        match e {
            Error::Io(e) => e,
            other => io::Error::new(other.io_kind(), other),
        }
    }
}

/// Kafka's name for an error code (`TOPIC_ALREADY_EXISTS`), as its tools print it.
pub fn error_name(code: i16) -> String {
    ErrorCode::from_code(code).map_or_else(
        || format!("UNKNOWN_ERROR_CODE_{code}"),
        ErrorCode::kafka_name,
    )
}

/// Kafka's default message for an error code.
pub fn error_message(code: i16) -> &'static str {
    ErrorCode::from_code(code).map_or("Unknown error code.", |e| e.message())
}

/// A refusal as Kafka's tools print it: `NAME: message` (the code's default message when the
/// broker sent none).
pub fn refusal(code: i16, message: Option<&str>) -> String {
    format!(
        "{}: {}",
        error_name(code),
        message.unwrap_or_else(|| error_message(code))
    )
}

/// A Kafka error code a broker answered, printed by name as Kafka's tools do.
#[derive(Debug, thiserror::Error)]
#[error("{name}: {message} ({what})")]
pub struct KafkaError {
    /// What the error is about: a topic-partition, a group.
    pub what: String,
    pub name: String,
    pub message: String,
}

/// The error for `code` about `what`, with the broker's message where it sent one.
pub fn kafka_error(what: impl Into<String>, code: i16, message: Option<&str>) -> KafkaError {
    KafkaError {
        what: what.into(),
        name: error_name(code),
        message: message.unwrap_or_else(|| error_message(code)).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(36), "TOPIC_ALREADY_EXISTS");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
    }

    #[test]
    fn io_errors_keep_their_kind_through_io_error() {
        let bare = io::Error::new(io::ErrorKind::UnexpectedEof, "closed mid-frame");
        let e: io::Error = Error::Io(bare).into();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(e.to_string(), "closed mid-frame");
        let e: io::Error = Error::Receive {
            api: "Fetch",
            error: io::Error::new(io::ErrorKind::TimedOut, "timed out"),
        }
        .into();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(e.to_string(), "reading the Fetch response: timed out");
        let e: io::Error = Error::FrameSize { size: -1, max: 10 }.into();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn unsupported_versions_name_the_range() {
        let e = Error::UnsupportedVersion {
            api: "Fetch",
            floor: 4,
            cap: 12,
        };
        assert_eq!(e.to_string(), "the broker does not support Fetch v4..v12");
        let e = Error::UnsupportedVersion {
            api: "Fetch",
            floor: 4,
            cap: i16::MAX,
        };
        assert_eq!(
            e.to_string(),
            "the broker does not support Fetch v4 or later"
        );
    }
}

//! What a row of the key tables is: a key's [`Spec`] (Kafka's name, `ConfigType`, default,
//! validator, documentation, whether it is dynamic), the row constructors the tables are
//! written with, and the value lists several rows share. A leaf: the tables (`keys`,
//! `topic_keys`) and the validator (`validate`) build on it.

use ConfigType as T;

/// Kafka's DescribeConfigsResponse `ConfigType` ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i8)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    Class = 8,
    Password = 9,
}

impl ConfigType {
    /// Kafka's name of the type (documentation).
    pub fn name(self) -> &'static str {
        match self {
            T::Boolean => "boolean",
            T::String => "string",
            T::Int => "int",
            T::Short => "short",
            T::Long => "long",
            T::Double => "double",
            T::List => "list",
            T::Class => "class",
            T::Password => "password",
        }
    }
}

/// Value validators used by the tables.
#[derive(Clone, Copy, Debug)]
pub enum Check {
    None,
    /// Numeric value >= n.
    AtLeast(i64),
    /// Numeric value in [lo, hi].
    Between(i64, i64),
    /// One of (case-insensitive).
    OneOf(&'static [&'static str]),
    /// Non-empty comma list whose items are each one of (case-insensitive).
    ListOf(&'static [&'static str]),
    /// Comma list of `NAME://host:port`.
    Listeners,
    /// Comma list of `NAME:PROTOCOL`.
    ProtocolMap,
    /// Non-empty comma list.
    NonEmptyList,
    /// A double in [0, 1].
    Ratio,
    /// Empty, or `http://host:port` (see `metrics::parse_listener`).
    HttpListener,
    /// `broker`, `controller` or both (`quorum::parse_roles`).
    ProcessRoles,
    /// Comma list of `id@host:port` (`quorum::parse_voters`).
    Voters,
    /// Comma list of `host:port` (`quorum::parse_bootstrap_servers`).
    BootstrapServers,
}

/// One row of a key table.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    pub name: &'static str,
    pub ty: ConfigType,
    /// `None` = Kafka's `null` default.
    pub default: Option<&'static str>,
    pub check: Check,
    /// Topic keys only: the broker key supplying the default (Kafka's synonym).
    pub broker_key: Option<&'static str>,
    pub doc: &'static str,
    /// Can be changed at run time (AlterConfigs). Every topic key can; of the broker keys,
    /// those supplying topic defaults (`dspec` rows); the others are read-only in
    /// DescribeConfigs, as Kafka's static broker keys are.
    pub dynamic: bool,
}

/// A broker key row (static).
pub(super) const fn spec(
    name: &'static str,
    ty: ConfigType,
    default: Option<&'static str>,
    check: Check,
    doc: &'static str,
) -> Spec {
    Spec {
        name,
        ty,
        default,
        check,
        broker_key: None,
        doc,
        dynamic: false,
    }
}

/// A broker key row that can change at run time (AlterConfigs on the broker resource:
/// per broker or cluster-wide default). These are the broker keys that supply topic defaults,
/// as in Kafka's `DynamicLogConfig`; a change reaches every topic that does not override it.
pub(super) const fn dspec(
    name: &'static str,
    ty: ConfigType,
    default: Option<&'static str>,
    check: Check,
    doc: &'static str,
) -> Spec {
    Spec {
        dynamic: true,
        ..spec(name, ty, default, check, doc)
    }
}

/// A topic key row (dynamic), `broker_key` supplying its default.
pub(super) const fn tspec(
    name: &'static str,
    ty: ConfigType,
    default: Option<&'static str>,
    check: Check,
    broker_key: Option<&'static str>,
    doc: &'static str,
) -> Spec {
    Spec {
        name,
        ty,
        default,
        check,
        broker_key,
        doc,
        dynamic: true,
    }
}

pub(super) const LONG_MAX: &str = "9223372036854775807";
pub(super) const COMPRESSION: &[&str] =
    &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
pub(super) const CLEANUP: &[&str] = &["delete", "compact"];
pub(super) const TS_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];
pub(super) const FLUSH: &[&str] = &["ack", "replication"];

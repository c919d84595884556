//! The admin commands' client: one [`Connection`] with the admin's settings (ApiVersions v0,
//! which every broker answers; 30 s timeouts) and the requests they share.

use std::time::Duration;

use wire::generated::api::ApiKey;
use wire::generated::metadata_request::MetadataRequestTopic;
use wire::generated::{MetadataRequest, MetadataResponse};

use crate::conn::{Connection, Options};
use crate::error::Result;
pub use crate::error::{error_message, error_name};

/// How long to wait to connect and for each response.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response frame accepted (a Metadata answer for many topics is large).
const MAX_RESPONSE_BYTES: usize = 256 << 20;
const CLIENT_ID: &str = "broker-admin";

/// One connection to one broker, with the versions both sides speak; requests go through
/// the [`Connection`] it derefs to (`request`, `send`, `recv`).
pub struct Client {
    conn: Connection,
}

impl Client {
    /// The admin commands' connection options.
    pub fn options() -> Options {
        Options {
            write_timeout: Some(IO_TIMEOUT),
            max_response_bytes: MAX_RESPONSE_BYTES,
            api_versions_version: 0,
            ..Options::new(CLIENT_ID, IO_TIMEOUT)
        }
    }

    /// Connects to `addr` (HOST:PORT) and asks it for its API versions (ApiVersions v0, which
    /// every broker answers).
    pub fn connect(addr: &str) -> Result<Client> {
        Client::connect_with(addr, &Client::options())
    }

    /// Connects to `addr` with `options`. `addr` may be a comma-separated list, as Kafka's
    /// `--bootstrap-server` takes: the first that answers is used (the last one's error when
    /// none does).
    pub fn connect_with(addr: &str, options: &Options) -> Result<Client> {
        let mut last = None;
        for one in addr.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            match Connection::connect(one, options) {
                Ok(conn) => return Ok(Client { conn }),
                Err(error) => last = Some(error),
            }
        }
        match last {
            Some(error) => Err(error),
            None => Ok(Client {
                conn: Connection::connect(addr, options)?,
            }),
        }
    }

    /// Metadata of `topics` (`None`: every topic; empty: none, only brokers), never creating
    /// one (`auto_create`: missing `topics` are created where the broker's
    /// `auto.create.topics.enable` allows, as Kafka's producer and consumer ask by default). v1 is the first with a controller id and where a null list means "every topic" (v0
    /// used an empty one); `allow_auto_topic_creation` exists from v4, and below it the field must keep its
    /// default to be encodable (such a broker follows its own `auto.create.topics.enable`).
    pub fn metadata(
        &mut self,
        topics: Option<&[String]>,
        auto_create: bool,
    ) -> Result<MetadataResponse> {
        const METADATA_MIN_VERSION: i16 = 1;
        let version = self.version(ApiKey::Metadata, METADATA_MIN_VERSION, i16::MAX)?;
        let request = MetadataRequest {
            topics: topics.map(|names| {
                names
                    .iter()
                    .map(|name| MetadataRequestTopic {
                        name: Some(name.clone()),
                        ..Default::default()
                    })
                    .collect()
            }),
            allow_auto_topic_creation: auto_create || version < 4,
            ..Default::default()
        };
        self.request(ApiKey::Metadata, version, &request)
    }

    /// The version to use for `key`: the highest both sides speak, at most `cap`, at
    /// least `floor`.
    pub fn version(&self, key: ApiKey, floor: i16, cap: i16) -> Result<i16> {
        self.conn.versions().pick(key, floor, cap)
    }

    /// How long to wait for each response from now on (a JoinGroup is answered only when
    /// its rebalance completes, which may take longer than [`IO_TIMEOUT`]).
    pub fn set_response_timeout(&mut self, timeout: Duration) -> Result<()> {
        self.conn.set_read_timeout(Some(timeout))
    }

    /// Whether the broker answers `key` at any version this client speaks.
    pub fn supports(&self, key: ApiKey) -> bool {
        self.conn.versions().supports(key)
    }
}

impl std::ops::Deref for Client {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.conn
    }
}

impl std::ops::DerefMut for Client {
    fn deref_mut(&mut self) -> &mut Connection {
        &mut self.conn
    }
}

//! A small blocking Kafka client for the admin commands: one TCP connection, the generated
//! codecs for every request and response, and ApiVersions to pick each API's version.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bytes::{Bytes, BytesMut};
use wire::generated::api::{request_header_version, response_header_version, ApiKey};
use wire::generated::metadata_request::MetadataRequestTopic;
use wire::generated::{
    ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse, RequestHeader,
    ResponseHeader,
};
use wire::primitives::{Decodable, Encodable};
use wire::ErrorCode;

/// How long to wait to connect and for each response.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response frame accepted (a Metadata answer for many topics is large).
const MAX_RESPONSE_BYTES: usize = 256 << 20;
const CLIENT_ID: &str = "broker-admin";

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

/// One connection to one broker, with the versions both sides speak.
pub struct Client {
    stream: TcpStream,
    correlation_id: i32,
    /// Highest common version per API key; -1 where there is none.
    versions: Vec<i16>,
    out: BytesMut,
}

impl Client {
    /// Connects to `addr` (HOST:PORT) and asks it for its API versions (ApiVersions v0, which
    /// every broker answers).
    pub fn connect(addr: &str) -> anyhow::Result<Client> {
        let mut last = None;
        let mut stream = None;
        for sa in addr
            .to_socket_addrs()
            .with_context(|| format!("resolving {addr}"))?
        {
            match TcpStream::connect_timeout(&sa, IO_TIMEOUT) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let stream = match (stream, last) {
            (Some(s), _) => s,
            (None, Some(e)) => return Err(e).with_context(|| format!("connecting to {addr}")),
            (None, None) => bail!("{addr} resolves to no address"),
        };
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        let mut client = Client {
            stream,
            correlation_id: 0,
            versions: Vec::new(),
            out: BytesMut::new(),
        };
        let resp: ApiVersionsResponse =
            client.request(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())?;
        if resp.error_code != 0 {
            bail!("ApiVersions: {}", error_name(resp.error_code));
        }
        let mut versions = vec![-1i16; 128];
        for k in &resp.api_keys {
            let Some(key) = ApiKey::from_i16(k.api_key) else {
                continue;
            };
            let (our_min, our_max) = key.supported_range();
            let (lo, hi) = (our_min.max(k.min_version), our_max.min(k.max_version));
            if hi >= lo {
                if let Some(slot) = versions.get_mut(k.api_key as usize) {
                    *slot = hi;
                }
            }
        }
        client.versions = versions;
        Ok(client)
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
    ) -> anyhow::Result<MetadataResponse> {
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
    pub fn version(&self, key: ApiKey, floor: i16, cap: i16) -> anyhow::Result<i16> {
        let v = self
            .versions
            .get(key as usize)
            .copied()
            .unwrap_or(-1)
            .min(cap);
        if v < floor {
            bail!(
                "the broker does not support {} v{floor} or later",
                key.name()
            );
        }
        Ok(v)
    }

    /// How long to wait for each response from now on (a JoinGroup is answered only when
    /// its rebalance completes, which may take longer than [`IO_TIMEOUT`]).
    pub fn set_response_timeout(&mut self, timeout: Duration) -> anyhow::Result<()> {
        self.stream
            .set_read_timeout(Some(timeout))
            .context("setting the response timeout")
    }

    /// Whether the broker answers `key` at any version this client speaks.
    pub fn supports(&self, key: ApiKey) -> bool {
        self.versions.get(key as usize).is_some_and(|&v| v >= 0)
    }

    /// Sends one request and reads its response.
    pub fn request<Q: Encodable, R: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        body: &Q,
    ) -> anyhow::Result<R> {
        let correlation_id = self.send(key, version, body)?;
        self.receive(key, version, correlation_id)
    }

    /// Sends one request without reading a response (a Produce with acks=0 gets none);
    /// returns its correlation id for [`Client::receive`].
    pub fn send<Q: Encodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        body: &Q,
    ) -> anyhow::Result<i32> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let out = &mut self.out;
        out.clear();
        out.extend_from_slice(&[0; 4]);
        let header = RequestHeader {
            request_api_key: key as i16,
            request_api_version: version,
            correlation_id,
            client_id: Some(CLIENT_ID.to_owned()),
            unknown_tagged_fields: Vec::new(),
        };
        header
            .encode(out, request_header_version(key as i16, version))
            .map_err(|e| anyhow!("encoding {} request header: {e}", key.name()))?;
        body.encode(out, version)
            .map_err(|e| anyhow!("encoding {} v{version}: {e}", key.name()))?;
        let len = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&len.to_be_bytes());
        self.stream
            .write_all(out)
            .with_context(|| format!("sending {}", key.name()))?;
        Ok(correlation_id)
    }

    /// Reads the response to the request [`Client::send`] sent as `correlation_id`.
    pub fn receive<R: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        correlation_id: i32,
    ) -> anyhow::Result<R> {
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .with_context(|| format!("reading the {} response", key.name()))?;
        let size = i32::from_be_bytes(size);
        if size < 0 || size as usize > MAX_RESPONSE_BYTES {
            bail!("{} response: bad frame size {size}", key.name());
        }
        let mut frame = vec![0u8; size as usize];
        self.stream
            .read_exact(&mut frame)
            .with_context(|| format!("reading the {} response", key.name()))?;
        let mut frame = Bytes::from(frame);
        let header =
            ResponseHeader::decode(&mut frame, response_header_version(key as i16, version))
                .map_err(|e| anyhow!("{} response header: {e}", key.name()))?;
        if header.correlation_id != correlation_id {
            bail!(
                "{} response has correlation id {}, expected {correlation_id}",
                key.name(),
                header.correlation_id
            );
        }
        R::decode(&mut frame, version)
            .map_err(|e| anyhow!("{} v{version} response: {e}", key.name()))
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
}

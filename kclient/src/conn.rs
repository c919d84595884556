//! One blocking Kafka connection: framing (response frames bounded in size), request and
//! response headers, correlation ids, ApiVersions negotiation, and optional TLS (rustls,
//! feature `tls`). One TCP socket, no runtime.
//!
//! Requests may be pipelined: [`Connection::send`] several, then [`Connection::recv`] their
//! responses in order. A plain connection can also be split ([`Connection::into_parts`]) into
//! a writer and a buffered reader for two threads, which then frame their own requests and
//! read responses with [`read_frame`] and [`decode_response`] (the bench's producer does).

use std::io::{self, BufReader, IoSlice, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
#[cfg(feature = "tls")]
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use wire::generated::api::{request_header_version, response_header_version, ApiKey};
use wire::generated::{ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader};
use wire::primitives::{Decodable, Encodable};
use wire::ErrorCode;

use crate::error::{Error, Result};

/// The default bound on a response frame's size.
pub const MAX_RESPONSE_BYTES: usize = 1 << 30;
/// The socket buffer under a plain connection's reads.
const READ_BUFFER: usize = 64 * 1024;
/// The socket buffer under a TLS session (rustls pulls ciphertext a few KiB at a time).
#[cfg(feature = "tls")]
const TLS_READ_BUFFER: usize = 256 * 1024;

/// How to open a connection.
#[derive(Clone, Debug)]
pub struct Options {
    /// The request header's client id.
    pub client_id: String,
    /// ApiVersions' `client_software_name` (v3 and later).
    pub software_name: String,
    /// The connect timeout, and the read timeout (at least one second).
    pub timeout: Duration,
    /// The socket's write timeout (None: writes may block).
    pub write_timeout: Option<Duration>,
    /// The largest response frame accepted.
    pub max_response_bytes: usize,
    /// The ApiVersions version asked first: 3 falls back to 0 on a new socket where the
    /// broker answers UNSUPPORTED_VERSION, as Kafka's clients do; 0 is answered by every
    /// broker.
    pub api_versions_version: i16,
    /// TLS (None: plain); the server's certificate must name the address's host.
    #[cfg(feature = "tls")]
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl Options {
    /// `client_id`, `timeout`, ApiVersions v3 first, frames up to [`MAX_RESPONSE_BYTES`],
    /// no write timeout, plain.
    pub fn new(client_id: impl Into<String>, timeout: Duration) -> Options {
        Options {
            client_id: client_id.into(),
            software_name: "kclient".to_owned(),
            timeout,
            write_timeout: None,
            max_response_bytes: MAX_RESPONSE_BYTES,
            api_versions_version: 3,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

/// The highest version of each API both sides speak (-1: none).
#[derive(Clone, Debug)]
pub struct Versions {
    max: Vec<i16>,
}

impl Versions {
    /// From a broker's ApiVersions answer and the versions `wire` speaks.
    pub fn from_response(resp: &ApiVersionsResponse) -> Versions {
        let mut max = vec![-1i16; 128];
        for k in &resp.api_keys {
            let Some(key) = ApiKey::from_i16(k.api_key) else {
                continue;
            };
            let (our_min, our_max) = key.supported_range();
            let hi = our_max.min(k.max_version);
            let lo = our_min.max(k.min_version);
            if hi >= lo {
                if let Some(slot) = max.get_mut(k.api_key as usize) {
                    *slot = hi;
                }
            }
        }
        Versions { max }
    }

    /// The version to use for `key`: the highest both sides speak, at most `cap`, at least
    /// `floor`.
    pub fn pick(&self, key: ApiKey, floor: i16, cap: i16) -> Result<i16> {
        let v = self.max.get(key as usize).copied().unwrap_or(-1).min(cap);
        if v < floor {
            return Err(Error::UnsupportedVersion {
                api: key.name(),
                floor,
                cap,
            });
        }
        Ok(v)
    }

    /// Whether the broker answers `key` at any version this client speaks.
    pub fn supports(&self, key: ApiKey) -> bool {
        self.max.get(key as usize).is_some_and(|&v| v >= 0)
    }
}

/// Resolves and connects with a timeout, TCP_NODELAY on.
pub fn connect_tcp(addr: &str, timeout: Duration) -> Result<TcpStream> {
    let resolved = addr.to_socket_addrs().map_err(|error| Error::Resolve {
        addr: addr.to_owned(),
        error,
    })?;
    let mut last = None;
    for sa in resolved {
        match TcpStream::connect_timeout(&sa, timeout).and_then(|s| {
            s.set_nodelay(true)?;
            Ok(s)
        }) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(error) => Error::Connect {
            addr: addr.to_owned(),
            error,
        },
        None => Error::NoAddress {
            addr: addr.to_owned(),
        },
    })
}

/// Encodes a whole request frame (size prefix, header, body) into `out` (cleared first).
pub fn encode_request<R: Encodable>(
    out: &mut BytesMut,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    body: &R,
) -> Result<()> {
    out.clear();
    out.extend_from_slice(&[0, 0, 0, 0]);
    let header = RequestHeader {
        request_api_key: key as i16,
        request_api_version: version,
        correlation_id,
        client_id: Some(client_id.to_owned()),
        unknown_tagged_fields: Vec::new(),
    };
    let encode = |error| Error::Encode {
        api: key.name(),
        version,
        error,
    };
    header
        .encode(out, request_header_version(key as i16, version))
        .map_err(encode)?;
    body.encode(out, version).map_err(encode)?;
    let len = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// Reads one response frame's body (without the size prefix), at most `max` bytes. The
/// body is read without zero-filling the buffer first.
pub fn read_frame(r: &mut impl Read, max: usize) -> Result<Bytes> {
    let mut size = [0u8; 4];
    r.read_exact(&mut size)?;
    let size = i32::from_be_bytes(size);
    if size < 0 || size as usize > max {
        return Err(Error::FrameSize { size, max });
    }
    let size = size as usize;
    let mut body = Vec::with_capacity(size);
    r.take(size as u64).read_to_end(&mut body)?;
    if body.len() != size {
        return Err(
            io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed mid-frame").into(),
        );
    }
    Ok(Bytes::from(body))
}

/// Strips the response header, checking the correlation id, and decodes the body.
pub fn decode_response<R: Decodable>(
    mut frame: Bytes,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
) -> Result<R> {
    let header = ResponseHeader::decode(&mut frame, response_header_version(key as i16, version))
        .map_err(|error| Error::Header {
        api: key.name(),
        error,
    })?;
    if header.correlation_id != correlation_id {
        return Err(Error::CorrelationId {
            api: key.name(),
            got: header.correlation_id,
            expected: correlation_id,
        });
    }
    R::decode(&mut frame, version).map_err(|error| Error::Decode {
        api: key.name(),
        version,
        error,
    })
}

/// Writes every byte of `bufs` with as few `writev` calls as the socket allows.
pub fn write_all_vectored(w: &mut impl Write, bufs: &[&[u8]]) -> io::Result<()> {
    const MAX_IOV: usize = 1024;
    let mut idx = 0;
    let mut off = 0;
    let mut iov: Vec<IoSlice<'_>> = Vec::with_capacity(bufs.len().min(MAX_IOV));
    while idx < bufs.len() {
        if off >= bufs[idx].len() {
            idx += 1;
            off = 0;
            continue;
        }
        iov.clear();
        iov.push(IoSlice::new(&bufs[idx][off..]));
        for b in bufs[idx + 1..]
            .iter()
            .filter(|b| !b.is_empty())
            .take(MAX_IOV - 1)
        {
            iov.push(IoSlice::new(b));
        }
        let mut n = match w.write_vectored(&iov) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "socket closed")),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        while n > 0 && idx < bufs.len() {
            let left = bufs[idx].len() - off;
            if n >= left {
                n -= left;
                idx += 1;
                off = 0;
            } else {
                off += n;
                n = 0;
            }
        }
    }
    Ok(())
}

/// The bytes under a connection: a plain socket (read through a buffer) or a TLS session.
enum Io {
    Plain {
        writer: TcpStream,
        reader: BufReader<TcpStream>,
    },
    #[cfg(feature = "tls")]
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, crate::tls::BufferedSocket>>),
}

impl Io {
    /// Connects (TCP, then the TLS handshake when asked for, named by the address's host).
    fn open(addr: &str, options: &Options) -> Result<Io> {
        let stream = connect_tcp(addr, options.timeout)?;
        stream.set_read_timeout(Some(options.timeout.max(Duration::from_secs(1))))?;
        stream.set_write_timeout(options.write_timeout)?;
        #[cfg(feature = "tls")]
        if let Some(config) = &options.tls {
            let socket = crate::tls::BufferedSocket {
                reader: BufReader::with_capacity(TLS_READ_BUFFER, stream.try_clone()?),
                writer: stream,
            };
            return Ok(Io::Tls(Box::new(crate::tls::handshake(
                addr, config, socket,
            )?)));
        }
        Ok(Io::Plain {
            reader: BufReader::with_capacity(READ_BUFFER, stream.try_clone()?),
            writer: stream,
        })
    }

    fn socket(&self) -> &TcpStream {
        match self {
            Io::Plain { writer, .. } => writer,
            #[cfg(feature = "tls")]
            Io::Tls(tls) => &tls.sock.writer,
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Io::Plain { writer, .. } => writer.write_all(bytes),
            #[cfg(feature = "tls")]
            Io::Tls(tls) => {
                tls.write_all(bytes)?;
                tls.flush()
            }
        }
    }

    fn read_frame(&mut self, max: usize) -> Result<Bytes> {
        match self {
            Io::Plain { reader, .. } => read_frame(reader, max),
            // rustls buffers the decrypted plaintext itself: no BufReader on top.
            #[cfg(feature = "tls")]
            Io::Tls(tls) => read_frame(tls.as_mut(), max),
        }
    }
}

/// A plain connection taken apart for a writer thread and a reader thread.
pub struct Parts {
    pub writer: TcpStream,
    pub reader: BufReader<TcpStream>,
    pub versions: Versions,
    pub client_id: String,
    /// The bound on a response frame's size, for [`read_frame`].
    pub max_response_bytes: usize,
}

/// A request/response connection to one broker, with the versions both sides speak.
pub struct Connection {
    addr: String,
    io: Io,
    versions: Versions,
    client_id: String,
    max_response_bytes: usize,
    next_correlation: i32,
    out: BytesMut,
}

impl Connection {
    /// Connects and negotiates versions with ApiVersions (see
    /// [`Options::api_versions_version`]).
    pub fn connect(addr: &str, options: &Options) -> Result<Connection> {
        let mut conn = Connection::connect_raw(addr, options)?;
        let request = ApiVersionsRequest {
            client_software_name: options.software_name.clone(),
            client_software_version: env!("CARGO_PKG_VERSION").into(),
            unknown_tagged_fields: Vec::new(),
        };
        let first = options.api_versions_version;
        let resp =
            match conn.request::<_, ApiVersionsResponse>(ApiKey::ApiVersions, first, &request) {
                Ok(r) if r.error_code == 0 => r,
                Ok(r) if first == 0 || r.error_code != ErrorCode::UnsupportedVersion.code() => {
                    return Err(Error::ApiVersions { code: r.error_code })
                }
                Err(e) if first == 0 => return Err(e),
                // UNSUPPORTED_VERSION comes back encoded as v0; retry at v0 on a new socket,
                // state-free (the v0 answer above may have failed to decode as a later version).
                _ => {
                    let mut again = Connection::connect_raw(addr, options)?;
                    let r: ApiVersionsResponse = again.request(ApiKey::ApiVersions, 0, &request)?;
                    if r.error_code != 0 {
                        return Err(Error::ApiVersions { code: r.error_code });
                    }
                    conn = again;
                    r
                }
            };
        conn.versions = Versions::from_response(&resp);
        Ok(conn)
    }

    fn connect_raw(addr: &str, options: &Options) -> Result<Connection> {
        Ok(Connection {
            addr: addr.to_owned(),
            io: Io::open(addr, options)?,
            versions: Versions { max: Vec::new() },
            client_id: options.client_id.clone(),
            max_response_bytes: options.max_response_bytes,
            next_correlation: 1,
            out: BytesMut::with_capacity(4096),
        })
    }

    /// The address connected to, as given.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The versions both sides speak.
    pub fn versions(&self) -> &Versions {
        &self.versions
    }

    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// Another handle on the socket (to shut it down from another thread).
    pub fn try_clone_stream(&self) -> Result<TcpStream> {
        Ok(self.io.socket().try_clone()?)
    }

    /// How long each read waits from now on (a response may be due only after a long wait
    /// on the broker: a Fetch's max wait, a JoinGroup's rebalance).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> Result<()> {
        Ok(self.io.socket().set_read_timeout(timeout)?)
    }

    /// The negotiated TLS version and cipher suite, None on a plain connection.
    pub fn tls_description(&self) -> Option<String> {
        match &self.io {
            Io::Plain { .. } => None,
            #[cfg(feature = "tls")]
            Io::Tls(tls) => Some(format!(
                "{:?} {:?}",
                tls.conn.protocol_version()?,
                tls.conn.negotiated_cipher_suite()?.suite()
            )),
        }
    }

    /// Sends a request without reading its response (a Produce with acks=0 gets none);
    /// returns its correlation id for [`Connection::recv`].
    pub fn send<R: Encodable>(&mut self, key: ApiKey, version: i16, body: &R) -> Result<i32> {
        let corr = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1) & 0x7fff_ffff;
        encode_request(&mut self.out, key, version, corr, &self.client_id, body)?;
        self.io.write_all(&self.out).map_err(|error| Error::Send {
            api: key.name(),
            error,
        })?;
        Ok(corr)
    }

    /// Reads the response to `corr` (responses come in request order).
    pub fn recv<R: Decodable>(&mut self, key: ApiKey, version: i16, corr: i32) -> Result<R> {
        let frame = self
            .io
            .read_frame(self.max_response_bytes)
            .map_err(|e| match e {
                Error::Io(error) => Error::Receive {
                    api: key.name(),
                    error,
                },
                other => other,
            })?;
        decode_response(frame, key, version, corr)
    }

    /// Sends one request and reads its response.
    pub fn request<Q: Encodable, R: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        body: &Q,
    ) -> Result<R> {
        let corr = self.send(key, version, body)?;
        self.recv(key, version, corr)
    }

    /// Takes the socket apart for a writer thread and a reader thread (plain connections
    /// only: a TLS session is one state machine for both directions).
    pub fn into_parts(self) -> Result<Parts> {
        match self.io {
            Io::Plain { writer, reader } => Ok(Parts {
                writer,
                reader,
                versions: self.versions,
                client_id: self.client_id,
                max_response_bytes: self.max_response_bytes,
            }),
            #[cfg(feature = "tls")]
            Io::Tls(_) => Err(Error::SplitTls),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that accepts at most `step` bytes per call.
    struct Trickle {
        out: Vec<u8>,
        step: usize,
    }
    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.step);
            self.out.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let mut left = self.step;
            let mut n = 0;
            for b in bufs {
                let k = b.len().min(left);
                self.out.extend_from_slice(&b[..k]);
                n += k;
                left -= k;
                if left == 0 {
                    break;
                }
            }
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn vectored_writes_survive_partial_writes() {
        let parts: Vec<Vec<u8>> = (0..20).map(|i| vec![i as u8; i * 3]).collect();
        let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let expect: Vec<u8> = parts.concat();
        for step in [1, 2, 7, 64, 10_000] {
            let mut w = Trickle {
                out: Vec::new(),
                step,
            };
            write_all_vectored(&mut w, &slices).unwrap();
            assert_eq!(w.out, expect, "step {step}");
        }
    }

    #[test]
    fn frames_are_bounded_and_complete() {
        let mut ok: &[u8] = &[0, 0, 0, 3, 1, 2, 3];
        assert_eq!(&read_frame(&mut ok, 3).unwrap()[..], &[1, 2, 3]);
        let mut big: &[u8] = &[0, 0, 0, 4, 1, 2, 3, 4];
        assert!(matches!(
            read_frame(&mut big, 3),
            Err(Error::FrameSize { size: 4, max: 3 })
        ));
        let mut negative: &[u8] = &[0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            read_frame(&mut negative, 3),
            Err(Error::FrameSize { size: -1, .. })
        ));
        let mut short: &[u8] = &[0, 0, 0, 3, 1, 2];
        match read_frame(&mut short, 3) {
            Err(Error::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn responses_are_matched_by_correlation_id() {
        use wire::generated::ApiVersionsResponse;
        let mut out = BytesMut::new();
        let header = wire::generated::ResponseHeader {
            correlation_id: 7,
            ..Default::default()
        };
        header
            .encode(
                &mut out,
                response_header_version(ApiKey::ApiVersions as i16, 0),
            )
            .unwrap();
        ApiVersionsResponse::default().encode(&mut out, 0).unwrap();
        let frame = out.freeze();
        let r: Result<ApiVersionsResponse> =
            decode_response(frame.clone(), ApiKey::ApiVersions, 0, 7);
        assert!(r.is_ok());
        let r: Result<ApiVersionsResponse> = decode_response(frame, ApiKey::ApiVersions, 0, 8);
        assert!(matches!(
            r,
            Err(Error::CorrelationId {
                got: 7,
                expected: 8,
                ..
            })
        ));
    }
}

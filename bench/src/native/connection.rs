//! A blocking Kafka connection: framing, request/response headers and ApiVersions
//! negotiation. One TCP socket, no runtime; the producer splits it into a writer half and
//! a reader half, each on its own thread. A connection may run over TLS (rustls with the
//! ring provider, [`super::tls`]); a TLS connection cannot be split, so only the
//! request/response users (metadata, admin, the consumer's fetchers) take one.

use std::io::{self, BufReader, IoSlice, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use wire::generated::api::{request_header_version, response_header_version, ApiKey};
use wire::generated::{ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader};
use wire::primitives::{Decodable, Encodable};

/// The largest response frame we accept.
const MAX_RESPONSE_BYTES: usize = 1 << 30;
/// UNSUPPORTED_VERSION.
const UNSUPPORTED_VERSION: i16 = 35;

pub fn protocol_error(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// The highest version of each API both sides speak (-1: none).
#[derive(Clone, Debug)]
pub struct Versions {
    max: Vec<i16>,
}

impl Versions {
    fn from_response(resp: &ApiVersionsResponse) -> Versions {
        let mut max = vec![-1i16; 128];
        for k in &resp.api_keys {
            let Some(key) = ApiKey::from_i16(k.api_key) else {
                continue;
            };
            let (our_min, our_max) = key.supported_range();
            let hi = our_max.min(k.max_version);
            let lo = our_min.max(k.min_version);
            if hi >= lo && (k.api_key as usize) < max.len() {
                max[k.api_key as usize] = hi;
            }
        }
        Versions { max }
    }

    /// The version to use for `key`, at most `cap` and at least `floor`.
    pub fn pick(&self, key: ApiKey, floor: i16, cap: i16) -> io::Result<i16> {
        let v = self.max.get(key as usize).copied().unwrap_or(-1).min(cap);
        if v < floor {
            return Err(protocol_error(format!(
                "broker does not support {} v{floor}..v{cap}",
                key.name()
            )));
        }
        Ok(v)
    }
}

/// Resolves and connects with a timeout, TCP_NODELAY on.
pub fn connect_tcp(addr: &str, timeout: Duration) -> io::Result<TcpStream> {
    let mut last = None;
    for sa in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&sa, timeout) {
            Ok(s) => {
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(io::ErrorKind::NotFound, format!("cannot resolve {addr}"))
    }))
}

/// Encodes a whole request frame (size prefix, header, body) into `out` (cleared first).
pub fn encode_request<R: Encodable>(
    out: &mut BytesMut,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    body: &R,
) -> io::Result<()> {
    out.clear();
    out.extend_from_slice(&[0, 0, 0, 0]);
    let header = RequestHeader {
        request_api_key: key as i16,
        request_api_version: version,
        correlation_id,
        client_id: Some(client_id.to_string()),
        unknown_tagged_fields: Vec::new(),
    };
    header
        .encode(out, request_header_version(key as i16, version))
        .map_err(|e| protocol_error(e.to_string()))?;
    body.encode(out, version)
        .map_err(|e| protocol_error(e.to_string()))?;
    let len = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// Reads one response frame's body (without the size prefix). The body is read without
/// zero-filling the buffer first.
pub fn read_frame(r: &mut impl Read) -> io::Result<Bytes> {
    let mut size = [0u8; 4];
    r.read_exact(&mut size)?;
    let size = i32::from_be_bytes(size);
    if size < 0 || size as usize > MAX_RESPONSE_BYTES {
        return Err(protocol_error(format!("bad response frame size {size}")));
    }
    let size = size as usize;
    let mut body = Vec::with_capacity(size);
    r.take(size as u64).read_to_end(&mut body)?;
    if body.len() != size {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed mid-frame",
        ));
    }
    Ok(Bytes::from(body))
}

/// Strips the response header, checking the correlation id, and decodes the body.
pub fn decode_response<R: Decodable>(
    mut frame: Bytes,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
) -> io::Result<R> {
    let header = ResponseHeader::decode(&mut frame, response_header_version(key as i16, version))
        .map_err(|e| protocol_error(format!("{} response header: {e}", key.name())))?;
    if header.correlation_id != correlation_id {
        return Err(protocol_error(format!(
            "{} response: correlation id {} where {} was expected",
            key.name(),
            header.correlation_id,
            correlation_id
        )));
    }
    R::decode(&mut frame, version)
        .map_err(|e| protocol_error(format!("{} v{version} response: {e}", key.name())))
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
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, BufferedSocket>>),
}

/// The socket under a TLS session, its reads buffered: rustls pulls ciphertext a few KiB
/// at a time, which would otherwise be a system call each.
struct BufferedSocket {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Read for BufferedSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.read(buf)
    }
}

impl Write for BufferedSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer.write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.writer.write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

impl Io {
    fn socket(&self) -> &TcpStream {
        match self {
            Io::Plain { writer, .. } => writer,
            Io::Tls(tls) => &tls.sock.writer,
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Io::Plain { writer, .. } => writer.write_all(bytes),
            Io::Tls(tls) => {
                tls.write_all(bytes)?;
                tls.flush()
            }
        }
    }

    fn read_frame(&mut self) -> io::Result<Bytes> {
        match self {
            Io::Plain { reader, .. } => read_frame(reader),
            // rustls buffers the decrypted plaintext itself: no BufReader on top.
            Io::Tls(tls) => read_frame(tls.as_mut()),
        }
    }
}

/// Connects (TCP, then the TLS handshake when `tls` is given, named by the address's host).
fn open(addr: &str, timeout: Duration, tls: Option<&Arc<rustls::ClientConfig>>) -> io::Result<Io> {
    let stream = connect_tcp(addr, timeout)?;
    stream.set_read_timeout(Some(timeout.max(Duration::from_secs(1))))?;
    match tls {
        None => Ok(Io::Plain {
            reader: BufReader::with_capacity(64 * 1024, stream.try_clone()?),
            writer: stream,
        }),
        Some(config) => {
            let name = super::tls::server_name(addr)?;
            let session = rustls::ClientConnection::new(config.clone(), name)
                .map_err(|e| io::Error::other(format!("TLS to {addr}: {e}")))?;
            let socket = BufferedSocket {
                reader: BufReader::with_capacity(256 * 1024, stream.try_clone()?),
                writer: stream,
            };
            let mut tls = rustls::StreamOwned::new(session, socket);
            // Finish the handshake now, so that a refused certificate is an error of connect.
            while tls.conn.is_handshaking() {
                tls.conn.complete_io(&mut tls.sock).map_err(|e| {
                    io::Error::new(e.kind(), format!("TLS handshake with {addr}: {e}"))
                })?;
            }
            Ok(Io::Tls(Box::new(tls)))
        }
    }
}

/// A request/response connection (used for metadata, offsets, topic creation and fetch).
pub struct Connection {
    pub addr: String,
    io: Io,
    pub versions: Versions,
    pub client_id: String,
    next_correlation: i32,
    out: BytesMut,
}

impl Connection {
    /// Connects and negotiates versions with ApiVersions (v3, falling back to v0 when
    /// the broker answers UNSUPPORTED_VERSION, as Kafka clients do).
    pub fn connect(addr: &str, client_id: &str, timeout: Duration) -> io::Result<Connection> {
        Connection::connect_with(addr, client_id, timeout, None)
    }

    /// [`Connection::connect`], over TLS when `tls` is given.
    pub fn connect_with(
        addr: &str,
        client_id: &str,
        timeout: Duration,
        tls: Option<&Arc<rustls::ClientConfig>>,
    ) -> io::Result<Connection> {
        let mut conn = Connection {
            addr: addr.to_string(),
            io: open(addr, timeout, tls)?,
            versions: Versions { max: Vec::new() },
            client_id: client_id.to_string(),
            next_correlation: 1,
            out: BytesMut::with_capacity(4096),
        };
        let request = ApiVersionsRequest {
            client_software_name: "bench-native".into(),
            client_software_version: env!("CARGO_PKG_VERSION").into(),
            unknown_tagged_fields: Vec::new(),
        };
        let resp = match conn.request::<_, ApiVersionsResponse>(ApiKey::ApiVersions, 3, &request) {
            Ok(r) if r.error_code == 0 => r,
            Ok(r) if r.error_code != UNSUPPORTED_VERSION => {
                return Err(protocol_error(format!(
                    "ApiVersions error {}",
                    r.error_code
                )))
            }
            // UNSUPPORTED_VERSION comes back encoded as v0; retry at v0 on a new socket
            // state-free (the v0 answer above may have failed to decode as v3).
            _ => {
                let mut again = Connection::connect_raw(addr, client_id, timeout, tls)?;
                let r: ApiVersionsResponse = again.request(ApiKey::ApiVersions, 0, &request)?;
                if r.error_code != 0 {
                    return Err(protocol_error(format!(
                        "ApiVersions error {}",
                        r.error_code
                    )));
                }
                conn = again;
                r
            }
        };
        conn.versions = Versions::from_response(&resp);
        Ok(conn)
    }

    fn connect_raw(
        addr: &str,
        client_id: &str,
        timeout: Duration,
        tls: Option<&Arc<rustls::ClientConfig>>,
    ) -> io::Result<Connection> {
        Ok(Connection {
            addr: addr.to_string(),
            io: open(addr, timeout, tls)?,
            versions: Versions { max: Vec::new() },
            client_id: client_id.to_string(),
            next_correlation: 1,
            out: BytesMut::with_capacity(4096),
        })
    }

    /// Another handle on the socket (to shut it down from another thread).
    pub fn try_clone_stream(&self) -> io::Result<TcpStream> {
        self.io.socket().try_clone()
    }

    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.io.socket().set_read_timeout(timeout)
    }

    /// The negotiated TLS version and cipher suite, None on a plain connection.
    pub fn tls_description(&self) -> Option<String> {
        match &self.io {
            Io::Plain { .. } => None,
            Io::Tls(tls) => Some(format!(
                "{:?} {:?}",
                tls.conn.protocol_version()?,
                tls.conn.negotiated_cipher_suite()?.suite()
            )),
        }
    }

    /// Sends a request; returns its correlation id.
    pub fn send<R: Encodable>(&mut self, key: ApiKey, version: i16, body: &R) -> io::Result<i32> {
        let corr = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1) & 0x7fff_ffff;
        encode_request(&mut self.out, key, version, corr, &self.client_id, body)?;
        self.io.write_all(&self.out)?;
        Ok(corr)
    }

    /// Reads the response to `corr` (responses come in request order).
    pub fn recv<R: Decodable>(&mut self, key: ApiKey, version: i16, corr: i32) -> io::Result<R> {
        let frame = self.io.read_frame()?;
        decode_response(frame, key, version, corr)
    }

    pub fn request<Q: Encodable, R: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        body: &Q,
    ) -> io::Result<R> {
        let corr = self.send(key, version, body)?;
        self.recv(key, version, corr)
    }

    /// Takes the socket apart for the producer's writer and reader threads (plain
    /// connections only: a TLS session is one state machine for both directions).
    pub fn into_parts(self) -> io::Result<(TcpStream, BufReader<TcpStream>, Versions, String)> {
        match self.io {
            Io::Plain { writer, reader } => Ok((writer, reader, self.versions, self.client_id)),
            Io::Tls(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the native producer runs over plain connections only",
            )),
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
}

//! How a connection's bytes travel: a `Reader` and a `Writer` per connection, so that
//! `connection` stays the same whatever carries them (plain TCP, user-space TLS, kernel TLS:
//! see `tls`). A response is a [`Frame`]: encoded bytes, and for a fetch the record bytes
//! of each partition as [`FileRange`]s that stay in the segment files until they are sent
//! (sendfile from the page cache on the plain path; see `plain`).

mod pagecache;
pub use pagecache::residency_method;
mod plain;
#[cfg(test)]
mod tests;
mod tls;

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;

use bytes::Bytes;
use glommio::net::TcpStream;

pub use plain::{PlainReader, PlainWriter};
pub use shard::storage::FileRange;
use shard::storage::Piece;
pub use tls::{KtlsReader, KtlsWriter};

/// What a response is made of, in order: encoded bytes, then for a fetch the record bytes of
/// each partition either as bytes (copy path, simulated disk) or as file ranges (zero-copy).
#[derive(Clone, Debug)]
pub enum Chunk {
    Bytes(Bytes),
    File(FileRange),
}

impl Chunk {
    pub fn len(&self) -> usize {
        match self {
            Chunk::Bytes(bytes) => bytes.len(),
            Chunk::File(range) => range.len() as usize,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Piece> for Chunk {
    fn from(piece: Piece) -> Chunk {
        match piece {
            Piece::File(range) => Chunk::File(range),
            Piece::Bytes(bytes) => Chunk::Bytes(bytes),
        }
    }
}

/// The record bytes of one partition of a fetch: whole batches, as file ranges (zero-copy)
/// or bytes (`fetch.path=copy`, simulated disk), in log order.
#[derive(Clone, Debug, Default)]
pub struct Records {
    chunks: Vec<Chunk>,
    len: usize,
}

impl Records {
    pub fn from_pieces(pieces: Vec<Piece>) -> Records {
        Records::from_chunks(pieces.into_iter().map(Chunk::from).collect())
    }
    pub fn from_chunks(chunks: Vec<Chunk>) -> Records {
        let len = chunks.iter().map(Chunk::len).sum();
        Records { chunks, len }
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }
    pub fn into_chunks(self) -> Vec<Chunk> {
        self.chunks
    }
    /// Whether any of the bytes are still in a file (to be sent from it).
    pub fn has_file(&self) -> bool {
        self.chunks
            .iter()
            .any(|chunk| matches!(chunk, Chunk::File(_)))
    }
    /// Bytes of file ranges.
    pub fn file_bytes(&self) -> usize {
        self.chunks
            .iter()
            .filter(|chunk| matches!(chunk, Chunk::File(_)))
            .map(Chunk::len)
            .sum()
    }
    /// The bytes in one buffer: free for records held as one `Bytes` (the copy path); file
    /// ranges are read (a copy, which the zero-copy path avoids by sending them as chunks).
    pub fn to_bytes(&self) -> io::Result<Bytes> {
        match self.chunks.as_slice() {
            [] => Ok(Bytes::new()),
            [Chunk::Bytes(bytes)] => Ok(bytes.clone()),
            _ => Ok(Bytes::from(Frame::new(self.chunks.clone()).to_vec()?)),
        }
    }
}

impl From<Bytes> for Records {
    fn from(bytes: Bytes) -> Records {
        if bytes.is_empty() {
            return Records::default();
        }
        Records::from_chunks(vec![Chunk::Bytes(bytes)])
    }
}

/// One whole response frame (size prefix included) as chunks written back to back.
#[derive(Debug, Default)]
pub struct Frame {
    chunks: Vec<Chunk>,
    len: usize,
}

impl Frame {
    pub fn new(chunks: Vec<Chunk>) -> Frame {
        let len = chunks.iter().map(Chunk::len).sum();
        Frame { chunks, len }
    }
    /// Bytes on the wire, file ranges included (what the frame holds against the bounds of
    /// `limits` while it waits to be sent).
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }
    /// Whether every chunk is bytes (no file range to send from a file).
    pub fn is_bytes_only(&self) -> bool {
        self.chunks
            .iter()
            .all(|chunk| matches!(chunk, Chunk::Bytes(_)))
    }
    /// Raises the big-endian i32 at `offset` of the frame's first chunk to at least `value`
    /// (a response's `throttle_time_ms`, known only once the request's time is). False when
    /// those bytes are not in a first chunk of bytes. Copies that chunk if it is shared.
    pub fn raise_i32(&mut self, offset: usize, value: i32) -> bool {
        let Some(Chunk::Bytes(bytes)) = self.chunks.first_mut() else {
            return false;
        };
        let Some(field) = bytes.get(offset..offset + 4) else {
            return false;
        };
        let old = i32::from_be_bytes([field[0], field[1], field[2], field[3]]);
        if old >= value {
            return true;
        }
        let mut owned = bytes::BytesMut::from(&bytes[..]);
        owned[offset..offset + 4].copy_from_slice(&value.to_be_bytes());
        *bytes = owned.freeze();
        true
    }
    /// The frame's bytes in one buffer (copied from the files if need be): tests only.
    pub fn to_vec(&self) -> io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len);
        for chunk in &self.chunks {
            match chunk {
                Chunk::Bytes(bytes) => out.extend_from_slice(bytes),
                Chunk::File(range) => {
                    let start = out.len();
                    out.resize(start + range.len() as usize, 0);
                    plain::pread_exact(range.fd(), &mut out[start..], range.pos())?;
                }
            }
        }
        Ok(out)
    }
}

impl From<bytes::BytesMut> for Frame {
    fn from(bytes: bytes::BytesMut) -> Frame {
        let len = bytes.len();
        Frame {
            chunks: vec![Chunk::Bytes(bytes.freeze())],
            len,
        }
    }
}

/// Per-shard counts of how record bytes of file ranges reached sockets.
#[derive(Default, Debug)]
pub struct SendStats {
    /// Ranges found resident in the page cache before sending.
    pub hot_ranges: Cell<u64>,
    /// Ranges (some window of which was) not resident: read in asynchronously first.
    pub cold_ranges: Cell<u64>,
    /// Bytes read in ahead of sending because they were not resident.
    pub cold_bytes: Cell<u64>,
    /// Record bytes sent by sendfile (page cache to socket, no user-space copy).
    pub sendfile_bytes: Cell<u64>,
    /// Record bytes of file ranges that went through a user-space buffer instead (the plain
    /// writer's wait for a full socket: one page per wait; or a TLS path that encrypts).
    pub copied_bytes: Cell<u64>,
}

impl SendStats {
    pub fn add(cell: &Cell<u64>, n: u64) {
        cell.set(cell.get() + n);
    }
    /// Counts one range sent, by whether it had to be read in first.
    pub fn count_range(&self, cold: bool) {
        let count = if cold {
            &self.cold_ranges
        } else {
            &self.hot_ranges
        };
        SendStats::add(count, 1);
    }
}

/// Reads a connection's bytes.
pub enum Reader {
    Plain(PlainReader),
    /// User-space TLS (rustls opens the records).
    Tls(crate::tls::TlsReader),
    /// Kernel TLS: plaintext from the socket.
    Ktls(KtlsReader),
}

impl Reader {
    /// Plaintext only: the bytes the socket holds now, without waiting, into `spare`
    /// (uninitialised memory is fine; see `PlainReader::read_ready`). `None`: nothing there
    /// yet, or a TLS connection; `read` then waits.
    pub fn read_ready(
        &mut self,
        spare: &mut [std::mem::MaybeUninit<u8>],
    ) -> Option<io::Result<usize>> {
        match self {
            Reader::Plain(reader) => reader.read_ready(spare),
            Reader::Tls(_) | Reader::Ktls(_) => None,
        }
    }

    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Reader::Plain(reader) => reader.read(buf).await,
            Reader::Tls(reader) => reader.read(buf).await,
            Reader::Ktls(reader) => reader.read(buf).await,
        }
    }
}

/// Writes a connection's responses.
pub enum Writer {
    Plain(PlainWriter),
    /// User-space TLS (rustls seals the records, file ranges from a mapping).
    Tls(crate::tls::TlsWriter),
    /// Kernel TLS: the plain writer on a socket the kernel seals (sendfile kept).
    Ktls(KtlsWriter),
}

impl Writer {
    pub async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Writer::Plain(writer) => writer.write_all(bytes).await,
            Writer::Tls(writer) => writer.write_all(bytes).await,
            Writer::Ktls(writer) => writer.write_all(bytes).await,
        }
    }
    /// Sends `range`'s bytes from the file (sendfile from the page cache on the plain path),
    /// reading non-resident parts in asynchronously first; counts in `stats`.
    pub async fn send_file(&mut self, range: &FileRange, stats: &SendStats) -> io::Result<()> {
        match self {
            Writer::Plain(writer) => writer.send_file(range, stats).await,
            Writer::Tls(writer) => tls::send_file_user_space(writer, range, stats).await,
            Writer::Ktls(writer) => writer.send_file(range, stats).await,
        }
    }
    /// Writes the chunks of `frame` in order.
    pub async fn write_frame(&mut self, frame: &Frame, stats: &SendStats) -> io::Result<()> {
        let ranged = frame.chunks().len() > 1;
        if ranged {
            self.cork(true);
        }
        let outcome = self.write_chunks(frame, stats).await;
        if ranged {
            self.cork(false);
        }
        outcome
    }
    async fn write_chunks(&mut self, frame: &Frame, stats: &SendStats) -> io::Result<()> {
        for chunk in frame.chunks() {
            match (chunk, &mut *self) {
                // User-space TLS seals the small header chunks into records that go out with
                // the following ones (one sendmsg, not one per chunk); flushed below.
                (Chunk::Bytes(bytes), Writer::Tls(writer)) => writer.seal(bytes).await?,
                (Chunk::Bytes(bytes), _) => self.write_all(bytes).await?,
                (Chunk::File(range), _) => self.send_file(range, stats).await?,
            }
        }
        if let Writer::Tls(writer) = self {
            writer.flush().await?;
        }
        Ok(())
    }
    /// Writes whole frames in order. Runs of frames made of bytes only go out together: one
    /// `sendmsg` of all their chunks on plain and kernel TLS sockets, sealed together and
    /// flushed once on user-space TLS. A frame with file ranges is written as by
    /// [`Writer::write_frame`] (sendfile kept).
    ///
    /// Generic over what holds the frames (`&Frame`, a connection's held responses), so that a
    /// caller needs no list of references made per write.
    pub async fn write_frames<F: std::borrow::Borrow<Frame>>(
        &mut self,
        frames: &[F],
        stats: &SendStats,
    ) -> io::Result<()> {
        let mut rest = frames;
        while let Some(first) = rest.first() {
            let first = first.borrow();
            let run = rest
                .iter()
                .take_while(|frame| frame.borrow().is_bytes_only())
                .count();
            let single_piece = run == 1 && first.chunks().len() == 1;
            if run == 0 || single_piece {
                self.write_frame(first, stats).await?;
                rest = &rest[1..];
                continue;
            }
            let pieces: Vec<&[u8]> = rest[..run]
                .iter()
                .flat_map(|frame| frame.borrow().chunks())
                .filter_map(|chunk| match chunk {
                    Chunk::Bytes(bytes) => Some(&bytes[..]),
                    Chunk::File(_) => None,
                })
                .collect();
            match self {
                Writer::Plain(writer) => writer.write_all_vectored(&pieces).await?,
                Writer::Ktls(writer) => writer.write_all_vectored(&pieces).await?,
                Writer::Tls(writer) => {
                    for piece in pieces {
                        writer.seal(piece).await?;
                    }
                    writer.flush().await?;
                }
            }
            rest = &rest[run..];
        }
        Ok(())
    }
    /// Holds partial segments while a frame of several chunks is written (TCP_CORK), so the
    /// header bytes, ranges and tail go out in full segments (see `plain`). User-space TLS
    /// batches its records itself.
    fn cork(&mut self, on: bool) {
        match self {
            Writer::Plain(writer) => writer.cork(on),
            Writer::Ktls(writer) => writer.cork(on),
            Writer::Tls(_) => {}
        }
    }
    pub async fn close(&mut self) {
        match self {
            Writer::Plain(writer) => writer.close().await,
            Writer::Tls(writer) => writer.close().await,
            Writer::Ktls(writer) => writer.close().await,
        }
    }
}

/// An accepted connection, ready to serve: its two halves, the peer's address, and the
/// socket's fd (looked at, never read, while reading pauses: see `connection`).
pub struct Transport {
    pub reader: Reader,
    pub writer: Writer,
    pub peer: String,
    pub fd: RawFd,
    /// The listener it came through (upper case name): Metadata answers with its address.
    pub listener: Rc<str>,
    /// Kafka's principal: `User:ANONYMOUS`, or `User:<subject DN>` of a client certificate.
    pub principal: Rc<str>,
}

impl Transport {
    /// Plain TCP (PLAINTEXT listeners).
    pub fn plain(stream: TcpStream) -> Transport {
        let peer = stream
            .peer_addr()
            .map(|addr| addr.to_string())
            .unwrap_or_else(|_| "unknown".into());
        let _ = stream.set_nodelay(true);
        let fd = stream.as_raw_fd();
        let (reader, writer) = plain::split(stream);
        Transport {
            reader: Reader::Plain(reader),
            writer: Writer::Plain(writer),
            peer,
            fd,
            listener: Rc::from("PLAINTEXT"),
            principal: Rc::from(crate::tls::principal::ANONYMOUS),
        }
    }

    /// A TLS connection after its handshake (SSL listeners), on the path it was given.
    pub fn tls(accepted: crate::tls::Accepted, peer: String) -> Transport {
        use crate::tls::Accepted;
        match accepted {
            Accepted::Kernel { stream, principal } => {
                let _ = stream.set_nodelay(true);
                let fd = stream.as_raw_fd();
                let (reader, writer) = plain::split(stream);
                Transport {
                    reader: Reader::Ktls(KtlsReader::new(reader, fd)),
                    writer: Writer::Ktls(KtlsWriter::new(writer, fd)),
                    peer,
                    fd,
                    listener: Rc::from("SSL"),
                    principal: Rc::from(principal),
                }
            }
            Accepted::UserSpace {
                reader,
                writer,
                principal,
                fd,
            } => Transport {
                reader: Reader::Tls(reader),
                writer: Writer::Tls(writer),
                peer,
                fd,
                listener: Rc::from("SSL"),
                principal: Rc::from(principal),
            },
        }
    }

    /// Names the listener the connection came through.
    pub fn on_listener(mut self, name: &str) -> Transport {
        self.listener = Rc::from(name);
        self
    }
}

//! Plain TCP: glommio's stream for bytes, sendfile(2) for file ranges.
//!
//! sendfile needs a socket that does not block the shard when its send buffer is full, so the
//! socket is made `O_NONBLOCK` (glommio itself reads and writes with `MSG_DONTWAIT` and polls
//! for readiness, which the flag does not change). glommio 0.9 has no public "wait until
//! writable": when sendfile reports EAGAIN, the next page of the range (at most
//! [`STALL_PIECE_BYTES`]) is read with pread (resident: the window was just checked) and
//! written through glommio's own write, which waits for the socket to take it; then
//! sendfile resumes where it stopped. Those bytes are counted in `SendStats::copied_bytes`.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, RawFd};

use futures::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use glommio::net::TcpStream;

use super::{pagecache, FileRange, SendStats};

/// Bytes of a range copied through user space each time the socket is full (one page): the
/// price of waiting for writability with glommio's public API.
const STALL_PIECE_BYTES: usize = 4096;

/// A range is checked for residency and sent in windows of this many bytes, so that a cold
/// part is read in just before it is sent (and a long range does not hold the check's answer
/// for long).
pub(super) const SEND_WINDOW_BYTES: u64 = 1 << 20;

pub struct PlainReader {
    half: ReadHalf<TcpStream>,
    fd: RawFd,
}

pub struct PlainWriter {
    half: WriteHalf<TcpStream>,
    fd: RawFd,
    /// Whether the socket could be made non-blocking; without it, ranges are copied.
    nonblocking: bool,
}

pub(super) fn split(stream: TcpStream) -> (PlainReader, PlainWriter) {
    let fd = stream.as_raw_fd();
    let nonblocking = set_nonblocking(fd).is_ok();
    let (read, write) = stream.split();
    (
        PlainReader { half: read, fd },
        PlainWriter {
            half: write,
            fd,
            nonblocking,
        },
    )
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a live fd.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes of `fd` at `pos` (page cache reads).
pub(super) fn pread_exact(fd: RawFd, buf: &mut [u8], pos: u64) -> io::Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `buf`.
        let n = unsafe {
            libc::pread(
                fd,
                buf[done..].as_mut_ptr().cast(),
                buf.len() - done,
                (pos + done as u64) as libc::off_t,
            )
        };
        match n {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "segment file ends inside a fetched range",
                ))
            }
            n if n > 0 => done += n as usize,
            _ => {
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
        }
    }
    Ok(())
}

impl PlainReader {
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.half.read(buf).await
    }

    /// What the socket holds now, read without waiting into `spare`, which may be
    /// uninitialised: the kernel writes it through a pointer, and no Rust slice of bytes is
    /// made over it. `None` when nothing is there yet (then `read` waits). glommio's stream is
    /// unbuffered (its own read is this same non-blocking `recv` first), so reading the fd
    /// here and through glommio never reorders bytes.
    pub fn read_ready(&mut self, spare: &mut [MaybeUninit<u8>]) -> Option<io::Result<usize>> {
        if spare.is_empty() {
            return None;
        }
        loop {
            // SAFETY: the pointer and length describe `spare`, writable memory borrowed for
            // the call; recv writes at most that many bytes and makes no reference to them.
            let n = unsafe {
                libc::recv(
                    self.fd,
                    spare.as_mut_ptr().cast(),
                    spare.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n >= 0 {
                return Some(Ok(n as usize));
            }
            let error = io::Error::last_os_error();
            match error.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return None,
                _ => return Some(Err(error)),
            }
        }
    }
}

impl PlainWriter {
    pub async fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            match self.half.write(bytes).await? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                wrote => bytes = &bytes[wrote..],
            }
        }
        Ok(())
    }

    /// Writes `pieces` back to back with as few `sendmsg` calls as the socket allows (one
    /// when its buffer has room): the responses of a connection that are ready together. A
    /// full socket hands the rest of the current piece to glommio's write, which waits until
    /// the socket is writable, then gathering resumes.
    pub async fn write_all_vectored(&mut self, pieces: &[&[u8]]) -> io::Result<()> {
        let mut cursor = Gather::new(pieces);
        while !cursor.is_done() {
            match send_gathered(self.fd, &cursor.iovecs()) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(sent) => cursor.advance(sent),
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    let piece = cursor.current();
                    self.write_all(piece).await?;
                    cursor.advance(piece.len());
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    pub async fn send_file(&mut self, range: &FileRange, stats: &SendStats) -> io::Result<()> {
        let end = range.pos() + range.len();
        let mut pos = range.pos();
        let mut cold = false;
        while pos < end {
            let window_end = end.min(pos + SEND_WINDOW_BYTES);
            if !pagecache::resident(range.fd(), pos, window_end - pos) {
                cold = true;
                pagecache::read_in(range, pos, window_end - pos).await?;
                SendStats::add(&stats.cold_bytes, window_end - pos);
            }
            while pos < window_end {
                match self.sendfile(range.fd(), pos, window_end - pos) {
                    Ok(0) => {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "segment file ends inside a fetched range",
                        ))
                    }
                    Ok(sent) => {
                        pos += sent as u64;
                        SendStats::add(&stats.sendfile_bytes, sent as u64);
                    }
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                        // Full socket: hand glommio one page, which it sends once writable.
                        let piece = STALL_PIECE_BYTES.min((window_end - pos) as usize);
                        let mut buf = [0u8; STALL_PIECE_BYTES];
                        pread_exact(range.fd(), &mut buf[..piece], pos)?;
                        self.write_all(&buf[..piece]).await?;
                        pos += piece as u64;
                        SendStats::add(&stats.copied_bytes, piece as u64);
                    }
                    Err(error) => return Err(error),
                }
            }
        }
        stats.count_range(cold);
        Ok(())
    }

    /// One sendfile call of at most `len` bytes at `pos`; a socket that could not be made
    /// non-blocking gets WouldBlock at once (every byte then takes the copying way).
    fn sendfile(&self, file: RawFd, pos: u64, len: u64) -> io::Result<usize> {
        if !self.nonblocking {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let mut offset = pos as libc::off_t;
        // SAFETY: sendfile between two live fds; `offset` is a local it updates.
        let sent = unsafe { libc::sendfile(self.fd, file, &mut offset, len as usize) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sent as usize)
    }

    /// TCP_CORK on or off (off sends what is held). Errors are ignored: corking only merges
    /// segments.
    pub fn cork(&self, on: bool) {
        let value: libc::c_int = on.into();
        // SAFETY: setsockopt on a live fd with a local int.
        unsafe {
            libc::setsockopt(
                self.fd,
                libc::IPPROTO_TCP,
                libc::TCP_CORK,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }

    pub async fn close(&mut self) {
        let _ = self.half.close().await;
    }
}

/// Most pieces handed to one `sendmsg` (Linux's IOV_MAX is 1024).
const MAX_IOVECS: usize = 1024;

/// One non-blocking `sendmsg` of `iovecs` (no SIGPIPE: a peer gone is an error).
fn send_gathered(fd: RawFd, iovecs: &[libc::iovec]) -> io::Result<usize> {
    // SAFETY: a zeroed msghdr is valid (no name, no control data).
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = iovecs.as_ptr().cast_mut();
    message.msg_iovlen = iovecs.len() as _;
    // SAFETY: sendmsg on a live fd; the iovecs point into buffers borrowed for this call.
    let sent = unsafe { libc::sendmsg(fd, &message, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

/// Where a gathered write stands in its pieces: the first piece not wholly sent and how much
/// of it was.
pub(super) struct Gather<'a> {
    pieces: &'a [&'a [u8]],
    index: usize,
    offset: usize,
}

impl<'a> Gather<'a> {
    pub(super) fn new(pieces: &'a [&'a [u8]]) -> Gather<'a> {
        let mut gather = Gather {
            pieces,
            index: 0,
            offset: 0,
        };
        gather.skip_empty();
        gather
    }
    pub(super) fn is_done(&self) -> bool {
        self.index >= self.pieces.len()
    }
    /// The unsent rest of the current piece.
    pub(super) fn current(&self) -> &'a [u8] {
        &self.pieces[self.index][self.offset..]
    }
    /// The unsent bytes as iovecs (at most [`MAX_IOVECS`]).
    pub(super) fn iovecs(&self) -> Vec<libc::iovec> {
        let first = std::iter::once(self.current());
        let rest = self.pieces[self.index + 1..].iter().copied();
        first
            .chain(rest)
            .filter(|piece| !piece.is_empty())
            .take(MAX_IOVECS)
            .map(|piece| libc::iovec {
                iov_base: piece.as_ptr().cast_mut().cast(),
                iov_len: piece.len(),
            })
            .collect()
    }
    /// Marks `sent` more bytes as sent.
    pub(super) fn advance(&mut self, mut sent: usize) {
        while sent > 0 && !self.is_done() {
            let left = self.pieces[self.index].len() - self.offset;
            if sent < left {
                self.offset += sent;
                return;
            }
            sent -= left;
            self.index += 1;
            self.offset = 0;
        }
        self.skip_empty();
    }
    fn skip_empty(&mut self) {
        while !self.is_done() && self.pieces[self.index].len() == self.offset {
            self.index += 1;
            self.offset = 0;
        }
    }
}

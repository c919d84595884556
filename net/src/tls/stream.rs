//! The rustls handshake and the user-space TLS halves of a connection.
//!
//! The handshake reads exactly one TLS record at a time, so that no byte past the client's
//! Finished (its first request follows at once in TLS 1.3) is taken from the socket: if the
//! keys then go to the kernel, the kernel decrypts everything that follows.
//!
//! After it, [`TlsReader`] and [`TlsWriter`] share the rustls session (one shard, one task
//! each: a `RefCell` that is never borrowed across an await). Only the writer writes to the
//! socket; what the reader makes rustls queue (a TLS 1.3 KeyUpdate answer) goes out before
//! the next response's records, as RFC 8446 asks.
//!
//! Writing: rustls copies the plaintext into its record buffer and seals it in place (the
//! one copy the cipher needs), and the sealed records go from rustls' buffers straight to the
//! socket with a non-blocking `sendmsg`; only when the socket is full are they staged in a
//! buffer for glommio's asynchronous write.

use std::cell::RefCell;
use std::io::{self, IoSlice, Write};
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::Arc;

use futures::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use glommio::net::TcpStream;
use rustls::{ServerConfig, ServerConnection};

/// Largest TLS record on the wire: 5-byte header, 2^14 bytes of plaintext, and the most any
/// cipher adds (RFC 8446 allows 2^14 + 256 for the encrypted body).
const MAX_RECORD_BODY_BYTES: usize = 16 * 1024 + 256;
const RECORD_HEADER_BYTES: usize = 5;

/// Ciphertext read from the socket at once on the user-space path.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Sealed records rustls may hold before they are written out: each write of plaintext is
/// sealed in pieces of this size, then sent.
const SEND_BUFFER_BYTES: usize = 256 * 1024;

/// Why a handshake failed (the connection is closed after it).
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("socket: {0}")]
    Io(#[from] io::Error),
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    #[error("a TLS record of {0} bytes is larger than TLS allows")]
    RecordTooLarge(usize),
    #[error("the peer closed the connection during the handshake")]
    Closed,
    /// `ssl.principal.mapping.rules` has no rule for the client certificate's subject.
    #[error("no principal for the client certificate: {0}")]
    Principal(String),
}

/// Runs the server side of the handshake on `stream`.
pub async fn handshake(
    stream: &mut TcpStream,
    config: Arc<ServerConfig>,
) -> Result<ServerConnection, HandshakeError> {
    let mut conn = ServerConnection::new(config)?;
    let mut record = vec![0u8; RECORD_HEADER_BYTES + MAX_RECORD_BODY_BYTES];
    loop {
        while conn.wants_write() {
            let mut out = Vec::new();
            conn.write_tls(&mut out)?;
            stream.write_all(&out).await?;
        }
        if !conn.is_handshaking() {
            return Ok(conn);
        }
        let header = &mut record[..RECORD_HEADER_BYTES];
        if let Err(error) = stream.read_exact(header).await {
            return Err(if error.kind() == io::ErrorKind::UnexpectedEof {
                HandshakeError::Closed
            } else {
                error.into()
            });
        }
        let body = usize::from(u16::from_be_bytes([record[3], record[4]]));
        if body > MAX_RECORD_BODY_BYTES {
            return Err(HandshakeError::RecordTooLarge(body));
        }
        let whole = RECORD_HEADER_BYTES + body;
        stream
            .read_exact(&mut record[RECORD_HEADER_BYTES..whole])
            .await
            .map_err(|error| match error.kind() {
                io::ErrorKind::UnexpectedEof => HandshakeError::Closed,
                _ => error.into(),
            })?;
        let mut input = &record[..whole];
        while !input.is_empty() {
            conn.read_tls(&mut input)?;
            if let Err(error) = conn.process_new_packets() {
                // Tell the peer why (rustls queued the alert), then give up.
                let mut out = Vec::new();
                let _ = conn.write_tls(&mut out);
                let _ = stream.write_all(&out).await;
                return Err(error.into());
            }
        }
    }
}

/// Splits a handshaken connection into its user-space TLS halves.
pub fn user_space(
    stream: TcpStream,
    fd: RawFd,
    mut conn: ServerConnection,
) -> (TlsReader, TlsWriter) {
    conn.set_buffer_limit(Some(SEND_BUFFER_BYTES));
    let session = Rc::new(RefCell::new(conn));
    let (read_half, write_half) = stream.split();
    (
        TlsReader {
            session: session.clone(),
            socket: read_half,
            incoming: vec![0u8; READ_BUFFER_BYTES].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
        },
        TlsWriter {
            session,
            socket: write_half,
            fd,
            staging: Vec::new(),
        },
    )
}

/// Reading half: decrypts with rustls.
pub struct TlsReader {
    session: Rc<RefCell<ServerConnection>>,
    socket: ReadHalf<TcpStream>,
    /// Ciphertext read and not yet given to rustls: `incoming[start..end]`.
    incoming: Box<[u8]>,
    start: usize,
    end: usize,
    eof: bool,
}

impl TlsReader {
    /// Reads plaintext; 0 once the peer has closed (close_notify, or the TCP connection).
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            {
                let mut session = self.session.borrow_mut();
                match io::Read::read(&mut session.reader(), buf) {
                    // 0: close_notify received.
                    Ok(read) => return Ok(read),
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                    // Closed without close_notify: a client going away, as on plaintext.
                    Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                    Err(error) => return Err(error),
                }
                if self.start < self.end {
                    let mut input = &self.incoming[self.start..self.end];
                    let taken = session.read_tls(&mut input)?;
                    self.start += taken;
                    session
                        .process_new_packets()
                        .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
                    continue;
                }
                if self.eof {
                    return Ok(0);
                }
            }
            let read = self.socket.read(&mut self.incoming).await?;
            self.start = 0;
            self.end = read;
            if read == 0 {
                self.eof = true;
                let mut session = self.session.borrow_mut();
                let _ = session.read_tls(&mut &[][..]);
                let _ = session.process_new_packets();
            }
        }
    }
}

/// Writing half: encrypts with rustls and writes the records.
pub struct TlsWriter {
    session: Rc<RefCell<ServerConnection>>,
    socket: WriteHalf<TcpStream>,
    fd: RawFd,
    /// Sealed records the socket did not take at once (glommio writes them when it can).
    staging: Vec<u8>,
}

impl TlsWriter {
    /// Encrypts and sends `bytes`.
    pub async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.seal(bytes).await?;
        self.flush().await
    }

    /// Encrypts `bytes` into rustls' record buffer, sending records only when it is full: the
    /// rest goes out with the next [`TlsWriter::flush`].
    pub async fn seal(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let sealed = self.session.borrow_mut().writer().write(bytes)?;
            bytes = &bytes[sealed..];
            if !bytes.is_empty() {
                self.flush().await?;
            }
        }
        Ok(())
    }

    /// Sends every record rustls holds.
    pub async fn flush(&mut self) -> io::Result<()> {
        loop {
            {
                let mut session = self.session.borrow_mut();
                if !session.wants_write() {
                    return Ok(());
                }
                match session.write_tls(&mut DirectSocket(self.fd)) {
                    Ok(_) => continue,
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                    Err(error) => return Err(error),
                }
                self.staging.clear();
                while session.wants_write() {
                    session.write_tls(&mut self.staging)?;
                }
            }
            self.socket.write_all(&self.staging).await?;
        }
    }

    /// Sends close_notify, then closes the socket's writing side.
    pub async fn close(&mut self) {
        self.session.borrow_mut().send_close_notify();
        let _ = self.flush().await;
        let _ = self.socket.close().await;
    }
}

/// The socket as a non-blocking `io::Write` for rustls' `write_tls`: the sealed records go
/// from rustls' buffers to the kernel with no copy of ours; WouldBlock when it is full.
struct DirectSocket(RawFd);

impl Write for DirectSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        // SAFETY: IoSlice is ABI-compatible with iovec (std guarantees it on Unix); the
        // slices outlive the call; msghdr is otherwise zeroed (no address, no control).
        let sent = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
            msg.msg_iovlen = bufs.len().min(libc::UIO_MAXIOV as usize);
            libc::sendmsg(self.0, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
        };
        if sent < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(sent as usize)
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

//! The TLS variants of the transport: user-space TLS (rustls seals every record) and kernel
//! TLS (the socket carries plaintext, the kernel seals: the plain writer's sendfile works
//! unchanged, only close_notify and incoming control records need care).
//!
//! User-space `send_file`: each window of the range is checked for residency (and read in
//! asynchronously when cold, as on the plain path), then mapped and handed to rustls, which
//! copies it into its record buffer and seals it in place: the page cache is read once, by the
//! copy the cipher needs, with no staging buffer of ours in between. The mapping is of the
//! segment file through the range's own descriptor; a segment is never truncated below a
//! range that was handed out (the range holds the file open, and the log only truncates on
//! recovery, before anything is served).

use std::io;
use std::os::fd::RawFd;

use super::plain::{PlainReader, PlainWriter, SEND_WINDOW_BYTES};
use super::{pagecache, FileRange, SendStats};
use crate::tls::ktls::{self, ControlRecord};
use crate::tls::TlsWriter;

/// Reading half of a kernel TLS connection: plain reads, and the records that are not
/// application data (alerts, TLS 1.3 handshake messages) taken aside.
pub struct KtlsReader {
    plain: PlainReader,
    fd: RawFd,
}

impl KtlsReader {
    pub fn new(plain: PlainReader, fd: RawFd) -> KtlsReader {
        KtlsReader { plain, fd }
    }

    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.plain.read(buf).await {
                // The kernel refuses a plain read of a record that is not application data.
                Err(error) if error.raw_os_error() == Some(libc::EIO) => {}
                other => return other,
            }
            match ktls::read_control_record(self.fd)? {
                // close_notify, or a fatal alert: the peer is closing either way.
                ControlRecord::Alert { .. } => return Ok(0),
                ControlRecord::Handshake { message_type } => {
                    return Err(io::Error::other(format!(
                        "TLS handshake message {message_type} (a TLS 1.3 KeyUpdate or ticket) on \
                         a kernel TLS connection: the key schedule stayed in rustls, so the \
                         connection is closed and the client reconnects"
                    )))
                }
                ControlRecord::WouldBlock => continue,
                ControlRecord::Other(record_type) => {
                    return Err(io::Error::other(format!(
                        "unexpected TLS record type {record_type} on a kernel TLS connection"
                    )))
                }
            }
        }
    }
}

/// Writing half of a kernel TLS connection: the plain writer (sendfile included).
pub struct KtlsWriter {
    plain: PlainWriter,
    fd: RawFd,
}

impl KtlsWriter {
    pub fn new(plain: PlainWriter, fd: RawFd) -> KtlsWriter {
        KtlsWriter { plain, fd }
    }
    /// TCP_CORK as on the plain path: kernel TLS then also fills whole records.
    pub fn cork(&self, on: bool) {
        self.plain.cork(on);
    }

    pub async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.plain.write_all(bytes).await
    }

    pub async fn send_file(&mut self, range: &FileRange, stats: &SendStats) -> io::Result<()> {
        self.plain.send_file(range, stats).await
    }

    pub async fn write_all_vectored(&mut self, pieces: &[&[u8]]) -> io::Result<()> {
        self.plain.write_all_vectored(pieces).await
    }

    pub async fn close(&mut self) {
        // An alert record, sealed by the kernel like the rest.
        if let Err(error) = ktls::send_close_notify(self.fd) {
            tracing::debug!(%error, "kernel TLS close_notify not sent");
        }
        self.plain.close().await;
    }
}

/// Sends `range` through user-space TLS: encrypted straight from a mapping of the page cache
/// (the last records go out with the frame's flush).
pub async fn send_file_user_space(
    writer: &mut TlsWriter,
    range: &FileRange,
    stats: &SendStats,
) -> io::Result<()> {
    let end = range.pos() + range.len();
    let mut pos = range.pos();
    let mut cold = false;
    while pos < end {
        let window_end = end.min(pos + SEND_WINDOW_BYTES);
        let len = window_end - pos;
        if !pagecache::resident(range.fd(), pos, len) {
            cold = true;
            pagecache::read_in(range, pos, len).await?;
            SendStats::add(&stats.cold_bytes, len);
        }
        let window = MappedWindow::new(range.fd(), pos, len as usize)?;
        writer.seal(window.bytes()).await?;
        SendStats::add(&stats.copied_bytes, len);
        pos = window_end;
    }
    stats.count_range(cold);
    Ok(())
}

/// A read-only mapping of `len` bytes of a file at `pos` (page-aligned underneath).
struct MappedWindow {
    map: memmap2::Mmap,
    skip: usize,
    len: usize,
}

impl MappedWindow {
    fn new(fd: RawFd, pos: u64, len: usize) -> io::Result<MappedWindow> {
        let page = page_size();
        let aligned = pos - pos % page;
        let skip = (pos - aligned) as usize;
        // SAFETY: a read-only private mapping of a segment file through the range's own
        // descriptor; the bytes below a range's end are never rewritten or truncated while
        // the range is alive (see the module documentation). The window was just found
        // resident (or read in), so `populate` does not block on the disk.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(aligned)
                .len(skip + len)
                .populate()
                .map(fd)?
        };
        Ok(MappedWindow { map, skip, len })
    }

    fn bytes(&self) -> &[u8] {
        &self.map[self.skip..self.skip + self.len]
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

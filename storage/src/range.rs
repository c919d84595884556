//! Record bytes handed out by reference: a byte range of a segment file, held open by its own
//! file descriptor so that the bytes stay readable until they are sent, whatever happens to
//! the segment meanwhile (see ARCHITECTURE.md, "Zero-copy fetch").

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use bytes::Bytes;

/// `len` bytes at `pos` of an open file. `Send`: a range read on one shard is sent by the
/// shard that holds the client's connection. The fd is shared (`Arc`) by every range of the
/// same segment file read while it was open; the file closes when the last range goes.
#[derive(Clone, Debug)]
pub struct FileRange {
    fd: Arc<OwnedFd>,
    pos: u64,
    len: u64,
}

impl FileRange {
    pub fn new(fd: Arc<OwnedFd>, pos: u64, len: u64) -> FileRange {
        FileRange { fd, pos, len }
    }
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
    pub fn shared_fd(&self) -> &Arc<OwnedFd> {
        &self.fd
    }
    pub fn pos(&self) -> u64 {
        self.pos
    }
    pub fn len(&self) -> u64 {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A piece of a read's result: a file range (real disk) or bytes (the simulated disk, whose
/// files have no descriptor; or a read that copies).
#[derive(Clone, Debug)]
pub enum Piece {
    File(FileRange),
    Bytes(Bytes),
}

impl Piece {
    pub fn len(&self) -> usize {
        match self {
            Piece::File(range) => range.len() as usize,
            Piece::Bytes(bytes) => bytes.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

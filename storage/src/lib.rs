//! The seam between the logs and the world: every file, directory and clock access of the
//! partition log (`shard::log`) and of the metadata quorum's log goes through the types here, so the same code runs on the real disk in
//! production and on `sim::SimDisk` (in memory, deterministic, able to lose power) in tests.
//!
//! Dispatch is by enum (`Disk::Real | Disk::Sim`, `File::Real | File::Sim`), not `dyn`: a call
//! costs one predictable branch, async methods are plain `async fn`s whose futures live on the
//! caller's stack (no boxed future, no allocation per append or read), and the production
//! path is the same code as before the seam: one `pwritev` of the patched prefix plus the
//! frame slice for an append, glommio (io_uring) reads and fdatasyncs.
//!
//! Synchronous vs async: calls that were synchronous before the seam stay synchronous
//! (page-cache writes, metadata calls, small whole-file reads at open); reads of log data and
//! every sync (file or directory) are async (io_uring on the real disk).
//!
//! - `blocking`: `BlockingFile`, the control plane's files (the metadata log): blocking calls
//!   that work outside an executor; never on a request's data path.
//! - `real`: the production implementation (std + libc + glommio).
//! - `sim`: the simulated disk (unsynced bytes kept apart, crash, power loss, torn writes,
//!   reordered metadata, injected EIO/ENOSPC, fdatasyncs that take virtual time).
//! - `clock` / `sim_clock`: time (wall, monotonic, timers) and the tasks that wait on it;
//!   `SimClock` is virtual time with a deterministic executor.

mod blocking;
mod clock;
pub mod fsyncs;
mod range;
mod real;
pub mod sim;
pub mod sim_clock;

use std::io;
use std::path::Path;
use std::rc::Rc;

pub use blocking::BlockingFile;
pub use clock::Clock;
pub use range::{FileRange, Piece};
pub use sim::SimDisk;
pub use sim_clock::SimClock;

/// A file system: the real one, or a simulated one. Cloning is cheap (nothing, or an `Rc`).
#[derive(Clone, Default)]
pub enum Disk {
    #[default]
    Real,
    Sim(Rc<SimDisk>),
}

/// An open file, read and written at explicit positions.
pub enum File {
    Real(glommio::io::BufferedFile),
    Sim(sim::SimFile),
}

/// A file opened only for small synchronous reads (an inactive segment's index lookups: a few
/// page-cache `pread`s).
pub enum Reader {
    Real(std::fs::File),
    Sim(sim::SimFile),
}

impl Reader {
    pub fn read_exact_at(&self, buf: &mut [u8], pos: u64) -> io::Result<()> {
        match self {
            Reader::Real(f) => std::os::unix::fs::FileExt::read_exact_at(f, buf, pos),
            Reader::Sim(f) => {
                let mut out = Vec::with_capacity(buf.len());
                if f.read_into(pos, buf.len(), &mut out)? < buf.len() {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                buf.copy_from_slice(&out);
                Ok(())
            }
        }
    }
}

/// One name in a directory listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub is_dir: bool,
}

impl Disk {
    /// Opens `path` for reading and writing, creating it (empty) if `create` and missing.
    /// Returns the file and its length.
    pub fn open(&self, path: &Path, create: bool) -> io::Result<(File, u64)> {
        match self {
            Disk::Real => real::open(path, create),
            Disk::Sim(d) => d.open(path, create).map(|(f, n)| (File::Sim(f), n)),
        }
    }
    /// Opens `path` for `Reader`'s synchronous reads.
    pub fn open_reader(&self, path: &Path) -> io::Result<Reader> {
        match self {
            Disk::Real => std::fs::File::open(path).map(Reader::Real),
            Disk::Sim(d) => d.open(path, false).map(|(f, _)| Reader::Sim(f)),
        }
    }
    /// Length of the file at `path`.
    pub fn file_len(&self, path: &Path) -> io::Result<u64> {
        match self {
            Disk::Real => std::fs::metadata(path).map(|m| m.len()),
            Disk::Sim(d) => d.open(path, false).map(|(_, n)| n),
        }
    }
    pub fn exists(&self, path: &Path) -> bool {
        match self {
            Disk::Real => path.exists(),
            Disk::Sim(d) => d.exists(path),
        }
    }
    /// Whole-file read (small files: checkpoints, metadata, indexes, snapshots).
    pub fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        match self {
            Disk::Real => read_without_stat(path),
            Disk::Sim(d) => d.read_file(path),
        }
    }
    /// Creates or replaces the contents of `path` (page cache only: not synced).
    pub fn write_file(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        match self {
            Disk::Real => std::fs::write(path, bytes),
            Disk::Sim(d) => d.write_file(path, bytes),
        }
    }
    pub fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        match self {
            Disk::Real => std::fs::create_dir_all(path),
            Disk::Sim(d) => d.create_dir_all(path),
        }
    }
    pub fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        match self {
            Disk::Real => real::read_dir(path),
            Disk::Sim(d) => d.read_dir(path),
        }
    }
    pub fn remove_file(&self, path: &Path) -> io::Result<()> {
        match self {
            Disk::Real => std::fs::remove_file(path),
            Disk::Sim(d) => d.remove_file(path),
        }
    }
    pub fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        match self {
            Disk::Real => std::fs::remove_dir_all(path),
            Disk::Sim(d) => d.remove_dir_all(path),
        }
    }
    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        match self {
            Disk::Real => std::fs::rename(from, to),
            Disk::Sim(d) => d.rename(from, to),
        }
    }
    /// fsync of the directory itself: makes creations, renames and removals of its entries
    /// durable (through io_uring on the real disk).
    pub async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        crate::fsyncs::syscall();
        match self {
            Disk::Real => real::sync_dir(path).await,
            Disk::Sim(d) => d.sync_dir(path),
        }
    }

    /// Which file system holds `path` (its device number; one for the whole simulated disk).
    pub fn file_system_of(&self, path: &Path) -> io::Result<u64> {
        match self {
            Disk::Real => {
                use std::os::unix::fs::MetadataExt;
                std::fs::metadata(path).map(|m| m.dev())
            }
            Disk::Sim(_) => Ok(0),
        }
    }

    /// syncfs(2) of the file system holding `path`: every file's written data and every
    /// directory's entries there become durable at once (in glommio's blocking thread on the
    /// real disk: io_uring has no syncfs). For closing a shard's logs: two of these instead
    /// of a few fdatasyncs and a directory fsync per log.
    pub async fn sync_fs(&self, path: &Path) -> io::Result<()> {
        crate::fsyncs::syscall();
        match self {
            Disk::Real => real::sync_fs(path).await,
            Disk::Sim(d) => d.sync_fs(),
        }
    }

    /// Writes `path` durably: temporary file, fdatasync, rename over `path`, fsync of the
    /// directory. A crash at any point leaves either the old contents or the new ones.
    pub async fn write_file_durable(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        {
            let (file, _) = self.open(&tmp, true)?;
            file.truncate(0)?;
            file.write_at(bytes, 0)?;
            file.fdatasync().await?;
        }
        self.rename(&tmp, path)?;
        self.sync_dir(path.parent().unwrap_or(Path::new("."))).await
    }
}

impl Disk {
    /// `sync_dir` that blocks the thread (real disk: `fsync(2)`); for the rare metadata
    /// barriers taken inside synchronous calls (a retention deletion), never per request.
    pub fn sync_dir_blocking(&self, path: &Path) -> io::Result<()> {
        crate::fsyncs::syscall();
        match self {
            Disk::Real => std::fs::File::open(path)?.sync_all(),
            Disk::Sim(d) => d.sync_dir(path),
        }
    }

    /// `write_file_durable` that blocks the thread (see `sync_dir_blocking`). Needs no
    /// executor (a `BlockingFile`), so the control plane can use it before any shard runs.
    pub fn write_file_durable_blocking(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        {
            let (file, _) = self.open_blocking(&tmp, true)?;
            file.truncate(0)?;
            file.write_at(bytes, 0)?;
            file.sync_blocking()?;
        }
        self.rename(&tmp, path)?;
        self.sync_dir_blocking(path.parent().unwrap_or(Path::new(".")))
    }
}

impl File {
    /// fdatasync that blocks the thread (see `Disk::sync_dir_blocking`).
    pub fn sync_blocking(&self) -> io::Result<()> {
        crate::fsyncs::syscall();
        match self {
            File::Real(f) => real::fdatasync_blocking(f),
            File::Sim(f) => f.fdatasync(),
        }
    }

    /// Writes every byte of `bufs`, back to back, at `pos` (one pwritev on the real disk: the
    /// append path's zero-copy write). A short write is retried; an error may leave a prefix
    /// written (the caller truncates).
    #[inline]
    pub fn write_vectored_at(&self, bufs: &[&[u8]; 2], pos: u64) -> io::Result<()> {
        match self {
            File::Real(f) => real::pwritev_all(f, bufs, pos),
            File::Sim(f) => f.write_vectored_at(bufs, pos),
        }
    }
    pub fn write_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        self.write_vectored_at(&[buf, &[]], pos)
    }
    /// Appends to `out` up to `len` bytes read at `pos`; returns how many (0 at end of file).
    pub async fn read_into(&self, pos: u64, len: usize, out: &mut Vec<u8>) -> io::Result<usize> {
        match self {
            File::Real(f) => {
                let r = f.read_at(pos, len).await?;
                out.extend_from_slice(&r);
                Ok(r.len())
            }
            File::Sim(f) => f.read_into(pos, len, out),
        }
    }
    pub async fn fdatasync(&self) -> io::Result<()> {
        crate::fsyncs::syscall();
        match self {
            File::Real(f) => f.fdatasync().await.map_err(Into::into),
            File::Sim(f) => f.fdatasync_timed().await,
        }
    }
    pub fn truncate(&self, len: u64) -> io::Result<()> {
        match self {
            File::Real(f) => real::ftruncate(f, len),
            File::Sim(f) => f.truncate(len),
        }
    }
    /// Reserves `[pos, pos + len)` and extends the file to cover it (`fallocate(2)`, mode 0:
    /// the new length reads as zeros). Fails with `EOPNOTSUPP` where the file system cannot.
    pub fn allocate(&self, pos: u64, len: u64) -> io::Result<()> {
        match self {
            File::Real(f) => real::fallocate(f, pos, len),
            File::Sim(f) => f.allocate(pos, len),
        }
    }
    pub fn len(&self) -> io::Result<u64> {
        match self {
            File::Real(f) => real::len(f),
            File::Sim(f) => f.len(),
        }
    }
    pub fn is_empty(&self) -> io::Result<bool> {
        self.len().map(|n| n == 0)
    }
    /// A descriptor of its own for the same open file (`dup`), for [`FileRange`]s that
    /// outlive this handle; `None` on the simulated disk (no descriptors there).
    pub fn dup_fd(&self) -> io::Result<Option<std::os::fd::OwnedFd>> {
        match self {
            File::Real(f) => real::dup(f).map(Some),
            File::Sim(_) => Ok(None),
        }
    }
}

/// What a log reaches the world through: its disk and its clock.
#[derive(Clone, Default)]
pub struct Env {
    pub disk: Disk,
    pub clock: Clock,
}

impl Env {
    /// Production: the real file system and the system clock.
    pub fn real() -> Env {
        Env::default()
    }
}

/// `std::fs::read` without its `statx` for a size hint: most files read whole are a few
/// bytes (checkpoints, markers, `partition.metadata`), and a restart reads several per
/// partition, so the hint costs more than the buffer growing for the rare large one.
fn read_without_stat(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    /// First buffer: every small file in one `read`.
    const FIRST_READ: usize = 4096;
    let mut file = std::fs::File::open(path)?;
    let mut buf = vec![0u8; FIRST_READ];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(len * 2, 0);
        }
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len);
    Ok(buf)
}

#[cfg(test)]
mod read_tests {
    #[test]
    fn reads_whole_files_of_any_length() {
        let dir = tempfile::tempdir().expect("tempdir");
        for len in [0usize, 1, 40, 4095, 4096, 4097, 3 * 4096 + 5, 1 << 20] {
            let path = dir.path().join(format!("f{len}"));
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            std::fs::write(&path, &bytes).expect("write");
            assert_eq!(
                super::read_without_stat(&path).expect("read"),
                bytes,
                "{len}"
            );
        }
        let missing = super::read_without_stat(&dir.path().join("missing")).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }
}

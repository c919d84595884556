//! Files for the control plane: opened, written and synced by blocking calls on the calling
//! thread, never through glommio.
//!
//! The metadata log (a few records per CreateTopics, fdatasync per append) is opened before
//! any executor runs and then moved onto the metadata core; a glommio `BufferedFile` can
//! only be made inside an executor (it registers with that thread's reactor), so the real
//! side here is a plain `std::fs::File`. Never use these on a request's data path: every
//! call blocks the whole shard.

use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::{sim, Disk};

/// An open file for blocking positional writes, truncation and fdatasync (control plane
/// only; see the module comment).
pub enum BlockingFile {
    Real(std::fs::File),
    Sim(sim::SimFile),
}

impl Disk {
    /// Opens `path` for blocking reads and writes, creating it (empty) if `create` and
    /// missing. Returns the file and its length. Works outside any executor.
    pub fn open_blocking(&self, path: &Path, create: bool) -> io::Result<(BlockingFile, u64)> {
        match self {
            Disk::Real => {
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(create)
                    .truncate(false)
                    .open(path)?;
                let len = f.metadata()?.len();
                Ok((BlockingFile::Real(f), len))
            }
            Disk::Sim(d) => d.open(path, create).map(|(f, n)| (BlockingFile::Sim(f), n)),
        }
    }
}

impl BlockingFile {
    /// Writes every byte of `buf` at `pos`. An error may leave a prefix written (the caller
    /// truncates).
    pub fn write_at(&self, buf: &[u8], pos: u64) -> io::Result<()> {
        match self {
            BlockingFile::Real(f) => f.write_all_at(buf, pos),
            BlockingFile::Sim(f) => f.write_vectored_at(&[buf, &[]], pos),
        }
    }

    /// fdatasync, blocking. Also makes a changed length durable (the size is metadata a read
    /// of the data needs, which fdatasync flushes).
    pub fn sync_blocking(&self) -> io::Result<()> {
        crate::fsyncs::syscall();
        match self {
            BlockingFile::Real(f) => f.sync_data(),
            BlockingFile::Sim(f) => f.fdatasync(),
        }
    }

    /// Sets the length (cut or zero-extended), in the page cache until synced.
    pub fn truncate(&self, len: u64) -> io::Result<()> {
        match self {
            BlockingFile::Real(f) => f.set_len(len),
            BlockingFile::Sim(f) => f.truncate(len),
        }
    }

    pub fn len(&self) -> io::Result<u64> {
        match self {
            BlockingFile::Real(f) => f.metadata().map(|m| m.len()),
            BlockingFile::Sim(f) => f.len(),
        }
    }

    pub fn is_empty(&self) -> io::Result<bool> {
        self.len().map(|n| n == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_file_outside_an_executor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let (f, len) = Disk::Real.open_blocking(&path, true).unwrap();
        assert_eq!(len, 0);
        f.write_at(b"hello", 0).unwrap();
        f.sync_blocking().unwrap();
        f.truncate(4).unwrap();
        assert_eq!(f.len().unwrap(), 4);
        drop(f);
        assert_eq!(std::fs::read(&path).unwrap(), b"hell");
        assert!(Disk::Real
            .open_blocking(&dir.path().join("g"), false)
            .is_err());
        // The durable whole-file write needs no executor either.
        Disk::Real
            .write_file_durable_blocking(&dir.path().join("h"), b"x")
            .unwrap();
        assert_eq!(std::fs::read(dir.path().join("h")).unwrap(), b"x");
    }

    #[test]
    fn sim_file_loses_only_unsynced_bytes() {
        let sim = sim::SimDisk::new(7);
        let disk = Disk::Sim(sim.clone());
        disk.create_dir_all("/d".as_ref()).unwrap();
        disk.sync_dir_blocking("/".as_ref()).unwrap();
        let (f, _) = disk.open_blocking("/d/f".as_ref(), true).unwrap();
        disk.sync_dir_blocking("/d".as_ref()).unwrap();
        f.write_at(b"abc", 0).unwrap();
        f.sync_blocking().unwrap();
        f.write_at(b"def", 3).unwrap();
        sim.power_loss();
        let got = disk.read_file("/d/f".as_ref()).unwrap();
        assert!(got.starts_with(b"abc") && got.len() <= 6, "{got:?}");
    }
}

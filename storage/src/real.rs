//! The production side of the seam: std / libc calls for what is synchronous, glommio's
//! `BufferedFile` (io_uring) for reads and fdatasync.

use std::io;
use std::os::unix::io::{AsRawFd, FromRawFd, IntoRawFd};
use std::path::Path;

use glommio::io::BufferedFile;

use super::{DirEntry, File};

pub(super) fn open(path: &Path, create: bool) -> io::Result<(File, u64)> {
    let std_file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(create)
        .truncate(false)
        .open(path)?;
    let size = std_file.metadata()?.len();
    // SAFETY: the fd was just opened and is owned by nothing else.
    let file = unsafe { BufferedFile::from_raw_fd(std_file.into_raw_fd()) };
    Ok((File::Real(file), size))
}

pub(super) fn read_dir(path: &Path) -> io::Result<Vec<DirEntry>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue; // not a name this broker writes
        };
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        out.push(DirEntry { name, is_dir });
    }
    Ok(out)
}

pub(super) async fn sync_dir(dir: &Path) -> io::Result<()> {
    let d = glommio::io::Directory::open(dir).await?;
    let r = d.sync().await;
    let _ = d.close().await;
    r.map_err(Into::into)
}

pub(super) async fn sync_fs(path: &Path) -> io::Result<()> {
    let dir = std::fs::File::open(path)?;
    glommio::executor()
        .spawn_blocking(move || {
            // SAFETY: plain syscall on a live fd, owned by `dir` for the call.
            if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })
        .await
}

pub(super) fn ftruncate(f: &BufferedFile, len: u64) -> io::Result<()> {
    // SAFETY: plain syscall on a live fd.
    if unsafe { libc::ftruncate(f.as_raw_fd(), len as libc::off_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub(super) fn fallocate(f: &BufferedFile, pos: u64, len: u64) -> io::Result<()> {
    // SAFETY: plain syscall on a live fd.
    let rc = unsafe { libc::fallocate(f.as_raw_fd(), 0, pos as libc::off_t, len as libc::off_t) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub(super) fn fdatasync_blocking(f: &BufferedFile) -> io::Result<()> {
    // SAFETY: plain syscall on a live fd.
    if unsafe { libc::fdatasync(f.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub(super) fn dup(f: &BufferedFile) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsFd, BorrowedFd};
    // SAFETY: the fd is live for as long as `f` is borrowed.
    let fd: BorrowedFd<'_> = unsafe { BorrowedFd::borrow_raw(f.as_raw_fd()) };
    fd.as_fd().try_clone_to_owned()
}

pub(super) fn len(f: &BufferedFile) -> io::Result<u64> {
    // SAFETY: an all-zero `stat` is a valid value of the plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat fills `st`, which lives across the call; the fd is live.
    if unsafe { libc::fstat(f.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.st_size as u64)
}

pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// pwritev until every byte of `bufs` is written at `pos` (a short write only happens on
/// ENOSPC-like conditions; retrying makes the error surface on the next call).
#[inline]
pub(super) fn pwritev_all(f: &BufferedFile, bufs: &[&[u8]; 2], pos: u64) -> io::Result<()> {
    let fd = f.as_raw_fd();
    let total: usize = bufs.iter().map(|b| b.len()).sum();
    let mut done = 0usize;
    while done < total {
        // On the stack: the append path allocates nothing.
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        let mut iov = [empty; 2];
        let mut count = 0usize;
        let mut skip = done;
        for b in bufs {
            if skip >= b.len() {
                skip -= b.len();
                continue;
            }
            let s = &b[skip..];
            skip = 0;
            iov[count] = libc::iovec {
                iov_base: s.as_ptr() as *mut libc::c_void,
                iov_len: s.len(),
            };
            count += 1;
        }
        // SAFETY: every iovec points into a live slice of `bufs` for the duration of the call.
        let n = unsafe {
            libc::pwritev(
                fd,
                iov.as_ptr(),
                count as libc::c_int,
                (pos + done as u64) as libc::off_t,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwritev wrote nothing",
            ));
        }
        done += n as usize;
    }
    Ok(())
}

//! Whether a file range is in the page cache, and bringing it in without blocking the shard.
//!
//! Residency: cachestat(2) (Linux 6.5+: one call counts the cached pages of a range); where
//! it is missing, mincore(2) on a temporary mapping of the range. A range found cold is read
//! with glommio's `BufferedFile::read_at` (io_uring: the shard's thread never waits for the
//! disk; io_uring hands a read that would block to its own workers) in pieces of at most
//! [`COLD_READ_CHUNK_BYTES`], so the pages are resident when sendfile runs. Pages evicted
//! again between the read and the send would make sendfile read them synchronously: rare,
//! and bounded by one window (`plain::SEND_WINDOW_BYTES`).

use std::io;
use std::os::fd::{IntoRawFd, RawFd};
use std::os::unix::io::FromRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

use glommio::io::BufferedFile;

use super::FileRange;

/// Most bytes one read of a cold range takes at a time (the scratch buffer glommio allocates
/// for it; what is read is dropped once it is in the page cache).
pub(super) const COLD_READ_CHUNK_BYTES: usize = 256 << 10;

const PAGE: u64 = 4096;
const SYS_CACHESTAT: libc::c_long = 451;

/// Cleared when the kernel has no cachestat (ENOSYS): mincore from then on.
static CACHESTAT: AtomicBool = AtomicBool::new(true);

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

fn pages(pos: u64, len: u64) -> u64 {
    (pos + len).div_ceil(PAGE) - pos / PAGE
}

/// Whether every page of `[pos, pos + len)` of `fd` is in the page cache. An error of the
/// checks counts as resident (the send then just reads synchronously, as before).
pub fn resident(fd: RawFd, pos: u64, len: u64) -> bool {
    if len == 0 {
        return true;
    }
    #[cfg(test)]
    if let Some(cold) = tests::forced_cold() {
        return fd != cold;
    }
    #[cfg(target_arch = "x86_64")]
    if CACHESTAT.load(Ordering::Relaxed) {
        match cachestat(fd, pos, len) {
            Ok(stat) => return stat.nr_cache >= pages(pos, len),
            Err(error) if error.raw_os_error() == Some(libc::ENOSYS) => {
                CACHESTAT.store(false, Ordering::Relaxed);
            }
            Err(_) => return true,
        }
    }
    resident_by_mincore(fd, pos, len).unwrap_or(true)
}

/// Which residency check this kernel gives fetches (start-up log), trying cachestat(2) once on
/// `fd` (any open regular file).
pub fn residency_method(fd: RawFd) -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        match cachestat(fd, 0, PAGE) {
            Ok(_) => return "cachestat",
            Err(error) if error.raw_os_error() == Some(libc::ENOSYS) => {
                CACHESTAT.store(false, Ordering::Relaxed);
                return "mincore (no cachestat(2): kernel before 6.5)";
            }
            Err(_) => {}
        }
        "cachestat (its probe failed: a range it cannot check counts as resident)"
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = fd;
        "mincore (cachestat only on x86_64)"
    }
}

/// cachestat(2) of `[pos, pos + len)` of `fd`: one syscall, the page counts of the range.
#[cfg(target_arch = "x86_64")]
fn cachestat(fd: RawFd, pos: u64, len: u64) -> io::Result<Cachestat> {
    let range = CachestatRange { off: pos, len };
    let mut stat = Cachestat::default();
    // SAFETY: cachestat reads `range` and fills `stat`, both locals of the right layout.
    let rc = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd,
            &range as *const CachestatRange,
            &mut stat as *mut Cachestat,
            0u32,
        )
    };
    if rc == 0 {
        Ok(stat)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn resident_by_mincore(fd: RawFd, pos: u64, len: u64) -> io::Result<bool> {
    let start = pos / PAGE * PAGE;
    let map_len = (pos + len - start) as usize;
    // SAFETY: a fresh read-only shared mapping of the range, unmapped below; nothing reads
    // through it (mincore only looks at which pages are resident).
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            start as libc::off_t,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let mut vec = vec![0u8; pages(pos, len) as usize];
    // SAFETY: `vec` has one byte per page of the mapping.
    let rc = unsafe { libc::mincore(addr, map_len, vec.as_mut_ptr()) };
    let error = io::Error::last_os_error();
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(addr, map_len) };
    if rc != 0 {
        return Err(error);
    }
    Ok(vec.iter().all(|page| page & 1 == 1))
}

/// Reads `[pos, pos + len)` of `range`'s file through io_uring so that it is in the page
/// cache, without blocking the shard.
pub async fn read_in(range: &FileRange, pos: u64, len: u64) -> io::Result<()> {
    #[cfg(test)]
    tests::gate().await;
    let fd = range.shared_fd().try_clone()?;
    // SAFETY: a fresh dup owned by nothing else; closed below.
    let file = unsafe { BufferedFile::from_raw_fd(fd.into_raw_fd()) };
    let end = pos + len;
    let mut at = pos;
    let mut outcome = Ok(());
    while at < end {
        let want = (COLD_READ_CHUNK_BYTES as u64).min(end - at) as usize;
        match file.read_at(at, want).await {
            Ok(read) if read.is_empty() => break,
            Ok(read) => at += read.len() as u64,
            Err(error) => {
                outcome = Err(error.into());
                break;
            }
        }
    }
    let _ = file.close().await;
    outcome
}

#[cfg(test)]
pub(super) mod tests {
    //! Hooks for tests: force the residency answer, and hold cold reads until released.

    use std::cell::{Cell, RefCell};
    use std::os::fd::RawFd;
    use std::rc::Rc;

    thread_local! {
        static FORCED: Cell<Option<RawFd>> = const { Cell::new(None) };
        static GATE: RefCell<Option<Rc<event_listener::Event>>> = const { RefCell::new(None) };
        static OPEN: Cell<bool> = const { Cell::new(true) };
    }

    pub(in crate::transport) fn forced_cold() -> Option<RawFd> {
        FORCED.with(Cell::get)
    }

    /// From now on, ranges of `fd` are cold and every other range is hot (None: ask the
    /// kernel again).
    pub fn force_cold(fd: Option<RawFd>) {
        FORCED.with(|forced| forced.set(fd));
    }

    /// Cold reads wait until `open_gate` (a slow disk).
    pub fn close_gate() {
        OPEN.with(|open| open.set(false));
        GATE.with(|gate| *gate.borrow_mut() = Some(Rc::new(event_listener::Event::new())));
    }

    pub fn open_gate() {
        OPEN.with(|open| open.set(true));
        GATE.with(|gate| {
            if let Some(event) = gate.borrow().as_ref() {
                event.notify(usize::MAX);
            }
        });
    }

    pub(in crate::transport) async fn gate() {
        loop {
            if OPEN.with(Cell::get) {
                return;
            }
            let Some(event) = GATE.with(|gate| gate.borrow().clone()) else {
                return;
            };
            let listener = event.listen();
            if OPEN.with(Cell::get) {
                return;
            }
            listener.await;
        }
    }
}

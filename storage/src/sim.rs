//! A simulated disk: an in-memory file system that behaves like a real one across crashes
//! and power losses, deterministically from a seed.
//!
//! Model (per file, an inode): `cache` is what reads see (the page cache), `durable` what a
//! power loss keeps, and `pending` the data operations (writes, truncations) done since the
//! last fdatasync, in order. fdatasync applies `pending` to `durable`. The namespace (which
//! name points to which inode, which directories exist) is kept the same way: the current
//! view, the durable view, and the pending metadata operations (create, rename, remove); a
//! directory sync makes durable every pending operation on that directory's entries.
//!
//! - `crash()` (kill -9): the process dies, the kernel keeps its page cache: nothing is lost;
//!   only handles opened before become invalid (EBADF).
//! - `power_loss()`: each pending data write independently survives, is lost, or is torn at a
//!   random byte (page write-back order is not file order: a later write may survive an
//!   earlier lost one, leaving a hole of zeros); each pending truncation and metadata
//!   operation independently survives or is lost (reordering as a file system may), applied
//!   in order where still possible. Then the current view becomes the durable one.
//! - Faults: `fail_nth(op, n, errno)` fails the n-th next call of `op`; `set_fault_rate`
//!   fails calls at random (EIO, or ENOSPC for writes). A failed write may leave a prefix of
//!   its bytes written (as a short write then ENOSPC does). A failed fdatasync leaves the data
//!   pending (not made durable, not dropped): the stricter Linux behaviour of dropping dirty
//!   pages after a write-back error is not modelled (the log stops at the first failed sync
//!   and recovers from what is on disk).
//!
//! - Sync latency (`set_sync_latency`): off by default (an fdatasync completes at once);
//!   when set, each `File::fdatasync` takes a drawn virtual time on a `SimClock` and makes
//!   durable only the data operations issued before it started (as Linux writes back the pages
//!   dirty at the call; later writes may or may not be included, so the model includes none).
//!
//! Everything random draws from one seeded generator, so a run is reproducible from its seed.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::rc::{Rc, Weak};
use std::time::Duration;

use super::sim_clock::SimClock;
use super::DirEntry;

/// SplitMix64: tiny, seedable, good enough for choosing faults (no dependency needed).
#[derive(Clone, Debug)]
pub struct SimRng(u64);

impl SimRng {
    pub fn new(seed: u64) -> SimRng {
        SimRng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

/// The calls faults can be injected into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultOp {
    Open,
    Write,
    Read,
    Sync,
    SyncDir,
    Truncate,
    Rename,
    Remove,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    File(u64),
    Dir,
}

#[derive(Clone, Debug)]
enum DataOp {
    Write { pos: u64, bytes: Vec<u8> },
    Truncate(u64),
}

#[derive(Clone, Debug)]
enum MetaOp {
    Create { path: PathBuf, node: Node },
    Remove { path: PathBuf },
    Rename { from: PathBuf, to: PathBuf },
}

impl MetaOp {
    fn touches_dir(&self, dir: &Path) -> bool {
        let parent_is = |p: &PathBuf| p.parent() == Some(dir);
        match self {
            MetaOp::Create { path, .. } | MetaOp::Remove { path } => parent_is(path),
            MetaOp::Rename { from, to } => parent_is(from) || parent_is(to),
        }
    }
}

#[derive(Default)]
struct Inode {
    cache: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<DataOp>,
    /// Data operations ever taken off `pending` (made durable, or decided by a power loss):
    /// with `pending.len()`, where an fdatasync issued earlier must stop.
    retired: u64,
}

fn apply_data(buf: &mut Vec<u8>, op: &DataOp) {
    match op {
        DataOp::Write { pos, bytes } => write_into(buf, *pos, bytes),
        DataOp::Truncate(len) => buf.resize(*len as usize, 0),
    }
}

fn write_into(buf: &mut Vec<u8>, pos: u64, bytes: &[u8]) {
    let pos = pos as usize;
    if buf.len() < pos + bytes.len() {
        buf.resize(pos + bytes.len(), 0);
    }
    buf[pos..pos + bytes.len()].copy_from_slice(bytes);
}

/// Applies a metadata op to a namespace; false (nothing changed) where it no longer makes
/// sense there (its source or parent is missing in that view).
fn apply_meta(names: &mut BTreeMap<PathBuf, Node>, op: &MetaOp) -> bool {
    let parent_ok = |names: &BTreeMap<PathBuf, Node>, p: &Path| match p.parent() {
        None => true,
        Some(d) if d.parent().is_none() || d.as_os_str().is_empty() => true,
        Some(d) => names.get(d) == Some(&Node::Dir),
    };
    match op {
        MetaOp::Create { path, node } => {
            if !parent_ok(names, path) {
                return false;
            }
            remove_tree(names, path);
            names.insert(path.clone(), *node);
            true
        }
        MetaOp::Remove { path } => remove_tree(names, path),
        MetaOp::Rename { from, to } => {
            if !names.contains_key(from) || !parent_ok(names, to) {
                return false;
            }
            remove_tree(names, to);
            let moved: Vec<(PathBuf, Node)> = names
                .range(from.clone()..)
                .take_while(|(p, _)| p.starts_with(from))
                .map(|(p, n)| (p.clone(), *n))
                .collect();
            for (p, n) in moved {
                names.remove(&p);
                let rest = p.strip_prefix(from).expect("under from");
                let dest = if rest.as_os_str().is_empty() {
                    to.clone()
                } else {
                    to.join(rest)
                };
                names.insert(dest, n);
            }
            true
        }
    }
}

/// Removes `path` and everything under it; false if it was not there.
fn remove_tree(names: &mut BTreeMap<PathBuf, Node>, path: &Path) -> bool {
    let doomed: Vec<PathBuf> = names
        .range(path.to_path_buf()..)
        .take_while(|(p, _)| p.starts_with(path))
        .map(|(p, _)| p.clone())
        .collect();
    for p in &doomed {
        names.remove(p);
    }
    !doomed.is_empty()
}

struct Inner {
    rng: SimRng,
    /// Bumped by `crash` / `power_loss`: handles of a dead process stop working.
    epoch: u64,
    inodes: HashMap<u64, Inode>,
    next_ino: u64,
    names: BTreeMap<PathBuf, Node>,
    durable_names: BTreeMap<PathBuf, Node>,
    pending_meta: Vec<MetaOp>,
    /// (op, calls still to pass before failing, errno).
    scheduled: Vec<(FaultOp, u64, i32)>,
    /// Random faults per million calls (0: none).
    fault_rate_ppm: u64,
    faults_injected: u64,
    /// Print every metadata operation and power-loss decision (debugging a simulation).
    trace: bool,
    /// Virtual time an fdatasync takes, drawn in `[min, max]` µs (see the module comment).
    sync_latency: Option<(Weak<SimClock>, u64, u64)>,
}

impl Inner {
    fn fault(&mut self, op: FaultOp) -> Option<io::Error> {
        let mut hit = None;
        self.scheduled.retain_mut(|(o, n, errno)| {
            if *o != op || hit.is_some() {
                return true;
            }
            if *n == 0 {
                hit = Some(*errno);
                false
            } else {
                *n -= 1;
                true
            }
        });
        if hit.is_none()
            && self.fault_rate_ppm > 0
            && self.rng.below(1_000_000) < self.fault_rate_ppm
        {
            let enospc = matches!(op, FaultOp::Write) && self.rng.chance(1, 2);
            hit = Some(if enospc { libc::ENOSPC } else { libc::EIO });
        }
        hit.map(|errno| {
            if self.trace {
                eprintln!("sim: {op:?} fault errno {errno}");
            }
            self.faults_injected += 1;
            io::Error::from_raw_os_error(errno)
        })
    }

    fn parent_exists(&self, path: &Path) -> bool {
        match path.parent() {
            None => true,
            Some(d) if d.parent().is_none() || d.as_os_str().is_empty() => true,
            Some(d) => self.names.get(d) == Some(&Node::Dir),
        }
    }

    fn meta(&mut self, op: MetaOp) {
        if self.trace {
            eprintln!("sim: {op:?}");
        }
        let applied = apply_meta(&mut self.names, &op);
        debug_assert!(applied, "caller checked {op:?}");
        self.pending_meta.push(op);
    }

    fn file_ino(&self, path: &Path) -> io::Result<u64> {
        match self.names.get(path) {
            Some(Node::File(ino)) => Ok(*ino),
            Some(Node::Dir) => Err(io::Error::from_raw_os_error(libc::EISDIR)),
            None => Err(io::ErrorKind::NotFound.into()),
        }
    }
}

/// The simulated file system (single-threaded, like a shard).
pub struct SimDisk {
    inner: RefCell<Inner>,
}

/// An open file of a `SimDisk`.
pub struct SimFile {
    disk: Rc<SimDisk>,
    ino: u64,
    epoch: u64,
}

impl SimDisk {
    pub fn new(seed: u64) -> Rc<SimDisk> {
        Rc::new(SimDisk {
            inner: RefCell::new(Inner {
                rng: SimRng::new(seed),
                epoch: 0,
                inodes: HashMap::new(),
                next_ino: 1,
                names: BTreeMap::new(),
                durable_names: BTreeMap::new(),
                pending_meta: Vec::new(),
                scheduled: Vec::new(),
                fault_rate_ppm: 0,
                faults_injected: 0,
                trace: false,
                sync_latency: None,
            }),
        })
    }

    /// The `n`-th next call of `op` (0: the next one) fails with `errno`.
    pub fn fail_nth(&self, op: FaultOp, n: u64, errno: i32) {
        self.inner.borrow_mut().scheduled.push((op, n, errno));
    }

    /// Fails calls at random, `ppm` per million (0 stops it).
    pub fn set_fault_rate(&self, ppm: u64) {
        self.inner.borrow_mut().fault_rate_ppm = ppm;
    }

    /// Prints every metadata operation and power-loss decision to stderr.
    pub fn set_trace(&self, on: bool) {
        self.inner.borrow_mut().trace = on;
    }

    /// Every `File::fdatasync` from now on takes a virtual time drawn in `[min, max]` on
    /// `clock` (a synchronous sync, `sync_blocking`, stays instant).
    pub fn set_sync_latency(&self, clock: &Rc<SimClock>, min: Duration, max: Duration) {
        assert!(min <= max);
        self.inner.borrow_mut().sync_latency = Some((
            Rc::downgrade(clock),
            min.as_micros() as u64,
            max.as_micros() as u64,
        ));
    }

    pub fn faults_injected(&self) -> u64 {
        self.inner.borrow().faults_injected
    }

    /// kill -9: the page cache survives; open handles die.
    pub fn crash(&self) {
        let mut s = self.inner.borrow_mut();
        s.epoch += 1;
        s.scheduled.clear();
    }

    /// Power loss: unsynced data and metadata are kept, lost or torn at random (see the
    /// module comment); open handles die.
    pub fn power_loss(&self) {
        let mut s = self.inner.borrow_mut();
        let s = &mut *s;
        s.epoch += 1;
        s.scheduled.clear();
        for op in std::mem::take(&mut s.pending_meta) {
            let keep = s.rng.chance(1, 2);
            if s.trace {
                eprintln!(
                    "sim: power loss {} {op:?}",
                    if keep { "keeps" } else { "loses" }
                );
            }
            if keep {
                apply_meta(&mut s.durable_names, &op);
            }
        }
        s.names = s.durable_names.clone();
        let mut inos: Vec<u64> = s.inodes.keys().copied().collect();
        inos.sort_unstable(); // HashMap order is not deterministic
        for ino in inos {
            let inode = s.inodes.get_mut(&ino).expect("listed");
            inode.retired += inode.pending.len() as u64;
            for op in std::mem::take(&mut inode.pending) {
                match (op, s.rng.below(3)) {
                    (_, 0) => {} // lost
                    (DataOp::Write { pos, bytes }, 1) if !bytes.is_empty() => {
                        let keep = s.rng.below(bytes.len() as u64) as usize;
                        write_into(&mut inode.durable, pos, &bytes[..keep]);
                    }
                    (op, _) => apply_data(&mut inode.durable, &op),
                }
            }
            inode.cache = inode.durable.clone();
        }
    }

    /// The namespace with each file's cached / durable length and pending operations, and the
    /// pending metadata operations (for debugging a failed simulation).
    pub fn dump(&self) -> String {
        let s = self.inner.borrow();
        let mut out = String::new();
        for (p, n) in &s.names {
            match n {
                Node::Dir => out.push_str(&format!("{}/\n", p.display())),
                Node::File(ino) => {
                    let i = &s.inodes[ino];
                    out.push_str(&format!(
                        "{} ino {ino} cache {} durable {} pending {}\n",
                        p.display(),
                        i.cache.len(),
                        i.durable.len(),
                        i.pending.len()
                    ));
                }
            }
        }
        for op in &s.pending_meta {
            out.push_str(&format!("pending {op:?}\n"));
        }
        let durable: Vec<String> = s
            .durable_names
            .keys()
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        out.push_str(&format!("durable names: {}\n", durable.join(" ")));
        out
    }

    /// Data operations (writes, truncations) on `path` not yet synced (tests).
    pub fn unsynced_ops(&self, path: &Path) -> usize {
        let s = self.inner.borrow();
        match s.names.get(path) {
            Some(Node::File(ino)) => s.inodes[ino].pending.len(),
            _ => 0,
        }
    }

    pub fn open(self: &Rc<Self>, path: &Path, create: bool) -> io::Result<(SimFile, u64)> {
        let mut s = self.inner.borrow_mut();
        if let Some(e) = s.fault(FaultOp::Open) {
            return Err(e);
        }
        let ino = match s.file_ino(path) {
            Ok(ino) => ino,
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                if !s.parent_exists(path) {
                    return Err(io::ErrorKind::NotFound.into());
                }
                let ino = s.next_ino;
                s.next_ino += 1;
                s.inodes.insert(ino, Inode::default());
                s.meta(MetaOp::Create {
                    path: path.to_path_buf(),
                    node: Node::File(ino),
                });
                ino
            }
            Err(e) => return Err(e),
        };
        let len = s.inodes[&ino].cache.len() as u64;
        let file = SimFile {
            disk: self.clone(),
            ino,
            epoch: s.epoch,
        };
        Ok((file, len))
    }

    pub fn exists(&self, path: &Path) -> bool {
        self.inner.borrow().names.contains_key(path)
    }

    pub fn read_file(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut s = self.inner.borrow_mut();
        if let Some(e) = s.fault(FaultOp::Read) {
            return Err(e);
        }
        let ino = s.file_ino(path)?;
        Ok(s.inodes[&ino].cache.clone())
    }

    pub fn write_file(self: &Rc<Self>, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let (f, _) = self.open(path, true)?;
        f.truncate(0)?;
        f.write_vectored_at(&[bytes, &[]], 0)
    }

    pub fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut s = self.inner.borrow_mut();
        let mut todo: Vec<PathBuf> = path
            .ancestors()
            .take_while(|p| p.parent().is_some() && !p.as_os_str().is_empty())
            .map(Path::to_path_buf)
            .collect();
        todo.reverse();
        for p in todo {
            match s.names.get(&p) {
                Some(Node::Dir) => {}
                Some(Node::File(_)) => return Err(io::ErrorKind::AlreadyExists.into()),
                None => s.meta(MetaOp::Create {
                    path: p,
                    node: Node::Dir,
                }),
            }
        }
        Ok(())
    }

    pub fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let s = self.inner.borrow();
        if s.names.get(path) != Some(&Node::Dir) {
            return Err(io::ErrorKind::NotFound.into());
        }
        Ok(s.names
            .range(path.to_path_buf()..)
            .take_while(|(p, _)| p.starts_with(path))
            .filter(|(p, _)| p.parent() == Some(path))
            .map(|(p, n)| DirEntry {
                name: p
                    .file_name()
                    .expect("an entry below a directory has a name")
                    .to_string_lossy()
                    .into_owned(),
                is_dir: *n == Node::Dir,
            })
            .collect())
    }

    pub fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.inner.borrow_mut();
        if let Some(e) = s.fault(FaultOp::Remove) {
            return Err(e);
        }
        s.file_ino(path)?;
        s.meta(MetaOp::Remove {
            path: path.to_path_buf(),
        });
        Ok(())
    }

    pub fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut s = self.inner.borrow_mut();
        if let Some(e) = s.fault(FaultOp::Remove) {
            return Err(e);
        }
        if s.names.get(path) != Some(&Node::Dir) {
            return Err(io::ErrorKind::NotFound.into());
        }
        s.meta(MetaOp::Remove {
            path: path.to_path_buf(),
        });
        Ok(())
    }

    pub fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.inner.borrow_mut();
        if let Some(e) = s.fault(FaultOp::Rename) {
            return Err(e);
        }
        if !s.names.contains_key(from) || !s.parent_exists(to) {
            return Err(io::ErrorKind::NotFound.into());
        }
        s.meta(MetaOp::Rename {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
        });
        Ok(())
    }

    pub fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.inner.borrow_mut();
        let s = &mut *s;
        if let Some(e) = s.fault(FaultOp::SyncDir) {
            return Err(e);
        }
        if s.names.get(dir) != Some(&Node::Dir) && dir.parent().is_some() {
            return Err(io::ErrorKind::NotFound.into());
        }
        let (now, later): (Vec<MetaOp>, Vec<MetaOp>) = std::mem::take(&mut s.pending_meta)
            .into_iter()
            .partition(|op| op.touches_dir(dir));
        if s.trace {
            eprintln!(
                "sim: sync_dir {} makes {} operations durable",
                dir.display(),
                now.len()
            );
        }
        for op in &now {
            apply_meta(&mut s.durable_names, op);
        }
        s.pending_meta = later;
        Ok(())
    }

    /// syncfs: every pending data and metadata operation of the disk becomes durable.
    pub fn sync_fs(&self) -> io::Result<()> {
        let mut s = self.inner.borrow_mut();
        let s = &mut *s;
        if let Some(e) = s.fault(FaultOp::Sync) {
            return Err(e);
        }
        if s.trace {
            eprintln!(
                "sim: sync_fs makes {} operations durable",
                s.pending_meta.len()
            );
        }
        for inode in s.inodes.values_mut() {
            inode.retired += inode.pending.len() as u64;
            for op in std::mem::take(&mut inode.pending) {
                apply_data(&mut inode.durable, &op);
            }
        }
        for op in std::mem::take(&mut s.pending_meta) {
            apply_meta(&mut s.durable_names, &op);
        }
        Ok(())
    }
}

impl SimFile {
    fn live(&self, s: &Inner) -> io::Result<()> {
        if s.epoch != self.epoch {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        Ok(())
    }

    pub fn write_vectored_at(&self, bufs: &[&[u8]; 2], pos: u64) -> io::Result<()> {
        let mut s = self.disk.inner.borrow_mut();
        self.live(&s)?;
        let mut bytes = Vec::with_capacity(bufs[0].len() + bufs[1].len());
        bytes.extend_from_slice(bufs[0]);
        bytes.extend_from_slice(bufs[1]);
        let fault = s.fault(FaultOp::Write);
        if s.trace && fault.is_some() {
            eprintln!("sim: write fault {fault:?}");
        }
        if let Some(e) = &fault {
            // A short write before the error: some prefix may be in the page cache.
            let keep = s.rng.below(bytes.len() as u64 + 1) as usize;
            bytes.truncate(keep);
            if e.raw_os_error() == Some(libc::EIO) {
                bytes.clear();
            }
        }
        if !bytes.is_empty() {
            let inode = s.inodes.get_mut(&self.ino).expect("open inode");
            write_into(&mut inode.cache, pos, &bytes);
            inode.pending.push(DataOp::Write { pos, bytes });
        }
        fault.map_or(Ok(()), Err)
    }

    pub fn read_into(&self, pos: u64, len: usize, out: &mut Vec<u8>) -> io::Result<usize> {
        let mut s = self.disk.inner.borrow_mut();
        self.live(&s)?;
        if let Some(e) = s.fault(FaultOp::Read) {
            return Err(e);
        }
        let data = &s.inodes[&self.ino].cache;
        let start = (pos as usize).min(data.len());
        let end = (start + len).min(data.len());
        out.extend_from_slice(&data[start..end]);
        Ok(end - start)
    }

    pub fn fdatasync(&self) -> io::Result<()> {
        let mut s = self.disk.inner.borrow_mut();
        self.live(&s)?;
        if let Some(e) = s.fault(FaultOp::Sync) {
            return Err(e);
        }
        let inode = s.inodes.get_mut(&self.ino).expect("open inode");
        inode.retired += inode.pending.len() as u64;
        for op in std::mem::take(&mut inode.pending) {
            apply_data(&mut inode.durable, &op);
        }
        debug_assert_eq!(inode.durable, inode.cache);
        Ok(())
    }

    /// `File::fdatasync`: instant without a sync latency; with one, the data operations
    /// issued before the call become durable once the drawn virtual time has passed (a
    /// crash meanwhile fails it with EBADF, like any dead handle).
    pub(crate) async fn fdatasync_timed(&self) -> io::Result<()> {
        let (wait, upto) = {
            let mut s = self.disk.inner.borrow_mut();
            let Some((clock, min, max)) = s.sync_latency.clone() else {
                drop(s);
                return self.fdatasync();
            };
            let Some(clock) = clock.upgrade() else {
                drop(s);
                return self.fdatasync();
            };
            self.live(&s)?;
            if let Some(e) = s.fault(FaultOp::Sync) {
                return Err(e);
            }
            let latency = min + s.rng.below(max - min + 1);
            let inode = &s.inodes[&self.ino];
            let upto = inode.retired + inode.pending.len() as u64;
            (clock.sleep(Duration::from_micros(latency)), upto)
        };
        wait.await;
        let mut s = self.disk.inner.borrow_mut();
        self.live(&s)?;
        let inode = s.inodes.get_mut(&self.ino).expect("open inode");
        let count = upto.saturating_sub(inode.retired) as usize;
        inode.retired += count as u64;
        for op in inode.pending.drain(..count).collect::<Vec<_>>() {
            apply_data(&mut inode.durable, &op);
        }
        Ok(())
    }

    pub fn truncate(&self, len: u64) -> io::Result<()> {
        let mut s = self.disk.inner.borrow_mut();
        self.live(&s)?;
        if let Some(e) = s.fault(FaultOp::Truncate) {
            return Err(e);
        }
        let inode = s.inodes.get_mut(&self.ino).expect("open inode");
        inode.cache.resize(len as usize, 0);
        inode.pending.push(DataOp::Truncate(len));
        Ok(())
    }

    /// `fallocate` (mode 0): extends the file with zeros to `pos + len` if shorter. The new
    /// length is a pending size change like a truncation (a power loss keeps it or not).
    pub fn allocate(&self, pos: u64, len: u64) -> io::Result<()> {
        let mut s = self.disk.inner.borrow_mut();
        self.live(&s)?;
        if let Some(e) = s.fault(FaultOp::Truncate) {
            return Err(e);
        }
        let inode = s.inodes.get_mut(&self.ino).expect("open inode");
        let end = (pos + len) as usize;
        if inode.cache.len() < end {
            inode.cache.resize(end, 0);
            inode.pending.push(DataOp::Truncate(end as u64));
        }
        Ok(())
    }

    /// Whether the file (as the page cache sees it) holds no bytes.
    pub fn is_empty(&self) -> io::Result<bool> {
        self.len().map(|n| n == 0)
    }

    pub fn len(&self) -> io::Result<u64> {
        let s = self.disk.inner.borrow();
        self.live(&s)?;
        Ok(s.inodes[&self.ino].cache.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn content(d: &Rc<SimDisk>, path: &str) -> Option<Vec<u8>> {
        d.read_file(&p(path)).ok()
    }

    /// A disk with `/d/f` created, its data synced and its name durable.
    fn disk_with_file(seed: u64, data: &[u8]) -> (Rc<SimDisk>, SimFile) {
        let d = SimDisk::new(seed);
        d.create_dir_all(&p("/d")).unwrap();
        let (f, _) = d.open(&p("/d/f"), true).unwrap();
        f.write_vectored_at(&[data, &[]], 0).unwrap();
        f.fdatasync().unwrap();
        d.sync_dir(&p("/")).unwrap();
        d.sync_dir(&p("/d")).unwrap();
        (d, f)
    }

    #[test]
    fn synced_data_survives_power_loss_and_crash_keeps_the_cache() {
        for seed in 0..50 {
            let (d, f) = disk_with_file(seed, b"durable");
            f.write_vectored_at(&[b"+more", b"!"], 7).unwrap();
            d.crash();
            assert_eq!(content(&d, "/d/f").unwrap(), b"durable+more!");
            assert!(f.len().is_err(), "a dead process's handle is invalid");
            d.power_loss();
            let after = content(&d, "/d/f").unwrap();
            assert!(after.starts_with(b"durable"), "seed {seed}: {after:?}");
            assert!(
                b"durable+more!".starts_with(&after),
                "seed {seed}: {after:?}"
            );
        }
    }

    #[test]
    fn unsynced_writes_are_kept_lost_or_torn_each() {
        let (mut kept, mut lost, mut torn, mut holes) = (0, 0, 0, 0);
        for seed in 0..300 {
            let (d, f) = disk_with_file(seed, b"0123");
            f.write_vectored_at(&[b"4567", b"89"], 4).unwrap();
            f.write_vectored_at(&[b"abcdef", b""], 10).unwrap();
            d.power_loss();
            let after = content(&d, "/d/f").unwrap();
            assert!(after.starts_with(b"0123"));
            match after.len() {
                4 => lost += 1,
                16 if after == b"0123456789abcdef" => kept += 1,
                _ if after[4..].contains(&0) => holes += 1,
                _ => torn += 1,
            }
        }
        assert!(
            kept > 0 && lost > 0 && torn > 0 && holes > 0,
            "{kept} {lost} {torn} {holes}"
        );
    }

    #[test]
    fn metadata_needs_a_directory_sync() {
        let (mut created_lost, mut removal_lost, mut rename_lost) = (0, 0, 0);
        for seed in 0..100 {
            let (d, f) = disk_with_file(seed, b"x");
            drop(f);
            let (g, _) = d.open(&p("/d/new"), true).unwrap();
            g.write_vectored_at(&[b"y", b""], 0).unwrap();
            g.fdatasync().unwrap(); // data synced, name not
            d.write_file(&p("/d/tmp"), b"z").unwrap();
            d.rename(&p("/d/tmp"), &p("/d/renamed")).unwrap();
            d.remove_file(&p("/d/f")).unwrap();
            assert!(!d.exists(&p("/d/f")) && d.exists(&p("/d/renamed")));
            d.power_loss();
            created_lost += usize::from(!d.exists(&p("/d/new")));
            removal_lost += usize::from(d.exists(&p("/d/f")));
            rename_lost += usize::from(!d.exists(&p("/d/renamed")));
            if d.exists(&p("/d/new")) {
                assert_eq!(content(&d, "/d/new").unwrap(), b"y");
            }
        }
        assert!(created_lost > 0 && removal_lost > 0 && rename_lost > 0);
        // With the directory synced, every one of them is durable.
        for seed in 0..20 {
            let (d, f) = disk_with_file(seed, b"x");
            drop(f);
            d.write_file(&p("/d/tmp"), b"z").unwrap();
            d.open(&p("/d/tmp"), false).unwrap().0.fdatasync().unwrap();
            d.rename(&p("/d/tmp"), &p("/d/renamed")).unwrap();
            d.remove_file(&p("/d/f")).unwrap();
            d.sync_dir(&p("/d")).unwrap();
            d.power_loss();
            assert!(!d.exists(&p("/d/f")) && !d.exists(&p("/d/tmp")));
            assert_eq!(content(&d, "/d/renamed").unwrap(), b"z");
        }
    }

    #[test]
    fn injected_faults() {
        let (d, f) = disk_with_file(1, b"abc");
        d.fail_nth(FaultOp::Sync, 1, libc::EIO);
        f.fdatasync().unwrap();
        let e = f.fdatasync().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        f.fdatasync().unwrap();
        d.fail_nth(FaultOp::Write, 0, libc::ENOSPC);
        let e = f.write_vectored_at(&[b"defgh", b""], 3).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        let len = f.len().unwrap();
        assert!(
            (3..=8).contains(&len),
            "a short write may leave a prefix: {len}"
        );
        d.fail_nth(FaultOp::Rename, 0, libc::EIO);
        assert!(d.rename(&p("/d/f"), &p("/d/g")).is_err());
        assert!(d.exists(&p("/d/f")));
        d.set_fault_rate(1_000_000);
        assert!(f.fdatasync().is_err());
        assert!(d.faults_injected() >= 4);
    }

    /// With a sync latency, an fdatasync takes virtual time and makes durable only what was
    /// written before it started; a crash while it is in flight fails it.
    #[test]
    fn timed_fdatasync_covers_writes_issued_before_it() {
        use std::time::Duration;
        let clock = SimClock::new(0);
        let (d, f) = disk_with_file(3, b"base");
        d.set_sync_latency(&clock, Duration::from_millis(1), Duration::from_millis(1));
        let f = Rc::new(f);
        f.write_vectored_at(&[b"+one", b""], 4).unwrap();
        let done = Rc::new(std::cell::Cell::new(false));
        let (g, flag) = (f.clone(), done.clone());
        clock.spawn(async move {
            g.fdatasync_timed().await.unwrap();
            flag.set(true);
        });
        clock.run_until_stalled();
        f.write_vectored_at(&[b"+two", b""], 8).unwrap();
        clock.run_for(Duration::from_micros(999));
        assert!(!done.get(), "a sync takes its latency");
        clock.run_for(Duration::from_micros(1));
        assert!(done.get());
        assert_eq!(
            d.unsynced_ops(&p("/d/f")),
            1,
            "the later write is still pending"
        );
        d.power_loss();
        let after = content(&d, "/d/f").unwrap();
        assert!(after.starts_with(b"base+one"), "{after:?}");
        // In flight across a crash: EBADF, nothing made durable by it.
        let (f, _) = d.open(&p("/d/f"), false).unwrap();
        f.write_vectored_at(&[b"+three", b""], 8).unwrap();
        let result = Rc::new(RefCell::new(None));
        let r = result.clone();
        clock.spawn(async move { *r.borrow_mut() = Some(f.fdatasync_timed().await) });
        clock.run_until_stalled();
        d.crash();
        clock.run_for(Duration::from_millis(2));
        let e = result.borrow_mut().take().unwrap().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        assert_eq!(d.unsynced_ops(&p("/d/f")), 1);
    }

    #[test]
    fn same_seed_same_outcome() {
        let run = |seed| {
            let (d, f) = disk_with_file(seed, b"0123");
            for i in 0..20u8 {
                f.write_vectored_at(&[&[i; 7], &[i; 3]], 4 + i as u64 * 10)
                    .unwrap();
            }
            d.power_loss();
            content(&d, "/d/f").unwrap()
        };
        for seed in 0..20 {
            assert_eq!(run(seed), run(seed));
        }
    }
}

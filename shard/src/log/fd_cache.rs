//! The shard's cache of open log files: every descriptor a partition log keeps between
//! requests (a segment's `.log`, the recovery-point file, a transaction index being written)
//! is opened on demand and held here, at most `capacity` of them per shard, so an idle
//! partition holds no descriptor at all and a broker's descriptors are bounded by
//! `log.fd.cache.size` however many partitions it has.
//!
//! Runs on one shard's thread (a thread-local: each glommio executor owns its thread, so one
//! cache per shard without threading a handle through every open of a log; the broker sets its
//! size with `set_shard_capacity` before opening any log).
//!
//! Eviction is CLOCK (second chance): an entry comes in unreferenced, every hit sets its
//! referenced bit, the hand clears bits until it finds an unreferenced entry. O(1) amortized, no list to relink on a
//! hit (an append touches its segment's entry every time).
//!
//! Eviction only drops the cache's reference (an `Rc<File>`): whoever else holds the file (a
//! sync job waiting on its fdatasync, a fetch's read, a `Walker`) keeps using it, and the
//! descriptor closes when the last holder lets go. A holder's file is found again by the next
//! `get` (the handle keeps a `Weak`) and goes back into the cache without an `open`.
//!
//! Why a reopened file is safe to fdatasync: Linux syncs the inode's dirty pages whichever
//! descriptor wrote them, and since 4.16 a writeback error not yet seen by any descriptor is
//! reported to the next one opened (errseq), so evicting a file with unsynced writes loses no
//! error the group commit must see.
//!
//! Bounds: `capacity` entries (at least `FD_CACHE_MIN_PER_SHARD`); descriptors held outside
//! the cache are bounded by what holds them (in-flight syncs, fetches).

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::{Rc, Weak};

use crate::storage::File;

/// `log.fd.cache.size`'s default: descriptors of log files held open, all shards together.
/// A tenth of the 100,000 partitions one node is meant to hold; well under the usual
/// 20,000-65,536 fd limits, leaving room for connections and in-flight fetches.
pub const DEFAULT_FD_CACHE_SIZE: usize = 10_000;

/// A shard's cache never holds fewer entries than this, whatever the split of
/// `log.fd.cache.size` across shards: below it the active segments of the partitions a
/// shard writes at once would evict each other on every append.
pub const FD_CACHE_MIN_PER_SHARD: usize = 16;

/// The capacity of each shard's cache when `total` is shared by `shards` shards.
pub fn per_shard_capacity(total: usize, shards: usize) -> usize {
    (total / shards.max(1)).max(FD_CACHE_MIN_PER_SHARD)
}

thread_local! {
    static SHARD_CACHE: Rc<FdCache> =
        FdCache::new(per_shard_capacity(DEFAULT_FD_CACHE_SIZE, 1));
}

/// This shard's cache.
pub(crate) fn shard_cache() -> Rc<FdCache> {
    SHARD_CACHE.with(Rc::clone)
}

/// Sets this shard's (this thread's) cache capacity, evicting down to it. The broker calls it
/// once per shard before opening logs; tests call it to run with a small cache.
pub fn set_shard_capacity(capacity: usize) {
    SHARD_CACHE.with(|c| c.set_capacity(capacity));
}

/// Counters of this shard's cache (tests, metrics).
pub fn shard_stats() -> FdCacheStats {
    SHARD_CACHE.with(|c| c.stats())
}

/// What a cache did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FdCacheStats {
    /// Files held now.
    pub cached: usize,
    pub capacity: usize,
    /// Files opened because they were not open (a miss).
    pub opened: u64,
    /// Files dropped to make room.
    pub evicted: u64,
}

struct Slot {
    file: Rc<File>,
    referenced: bool,
}

struct Clock {
    /// Never longer than `capacity` (shrinking truncates it).
    slots: Vec<Option<Slot>>,
    /// Indexes of `None` slots.
    free: Vec<usize>,
    hand: usize,
    capacity: usize,
    cached: usize,
    opened: u64,
    evicted: u64,
}

/// A bounded set of open files with CLOCK eviction (see the module doc).
pub struct FdCache {
    clock: RefCell<Clock>,
}

impl FdCache {
    pub fn new(capacity: usize) -> Rc<FdCache> {
        Rc::new(FdCache {
            clock: RefCell::new(Clock {
                slots: Vec::new(),
                free: Vec::new(),
                hand: 0,
                capacity: capacity.max(1),
                cached: 0,
                opened: 0,
                evicted: 0,
            }),
        })
    }

    pub fn stats(&self) -> FdCacheStats {
        let c = self.clock.borrow();
        FdCacheStats {
            cached: c.cached,
            capacity: c.capacity,
            opened: c.opened,
            evicted: c.evicted,
        }
    }

    /// New capacity (at least 1); entries past it are evicted now.
    pub fn set_capacity(&self, capacity: usize) {
        let mut dropped = Vec::new();
        {
            let mut guard = self.clock.borrow_mut();
            let c = &mut *guard;
            c.capacity = capacity.max(1);
            if c.slots.len() > c.capacity {
                let cap = c.capacity;
                dropped.extend(c.slots.drain(cap..).flatten().map(|s| s.file));
                c.cached -= dropped.len();
                c.evicted += dropped.len() as u64;
                c.free.retain(|&i| i < cap);
                c.hand = 0;
            }
            assert!(c.cached <= c.capacity);
        }
        drop(dropped); // closes outside the borrow
    }

    /// Puts `file` in a slot, evicting one if full; returns the slot.
    fn insert(&self, file: Rc<File>) -> usize {
        let mut evicted = None;
        let slot = {
            let mut guard = self.clock.borrow_mut();
            let c = &mut *guard;
            let slot = if let Some(i) = c.free.pop() {
                i
            } else if c.slots.len() < c.capacity {
                c.slots.push(None);
                c.slots.len() - 1
            } else {
                // Full: every slot holds a file. Each turn clears one referenced bit, so the
                // hand finds a victim within two sweeps.
                let n = c.slots.len();
                loop {
                    let i = c.hand;
                    c.hand = (i + 1) % n;
                    let s = c.slots[i].as_mut().expect("a full cache has no empty slot");
                    if s.referenced {
                        s.referenced = false;
                    } else {
                        evicted = c.slots[i].take().map(|s| s.file);
                        c.cached -= 1;
                        c.evicted += 1;
                        break i;
                    }
                }
            };
            // Not referenced yet: a file opened once (a restart reading each partition, a
            // consumer catching up through old segments) goes before one used again since.
            c.slots[slot] = Some(Slot {
                file,
                referenced: false,
            });
            c.cached += 1;
            assert!(c.cached <= c.capacity);
            slot
        };
        drop(evicted); // closes (when no one else holds it) outside the borrow
        slot
    }

    /// Whether `slot` holds `file`; if so its referenced bit is set.
    fn touch(&self, slot: usize, file: &Rc<File>) -> bool {
        let mut c = self.clock.borrow_mut();
        match c.slots.get_mut(slot) {
            Some(Some(s)) if Rc::ptr_eq(&s.file, file) => {
                s.referenced = true;
                true
            }
            _ => false,
        }
    }

    /// Drops `slot` if it holds the file `file` points to.
    fn remove(&self, slot: usize, file: &Weak<File>) {
        let removed = {
            let mut c = self.clock.borrow_mut();
            let holds = matches!(c.slots.get(slot), Some(Some(s)) if Weak::ptr_eq(&Rc::downgrade(&s.file), file));
            if !holds {
                return;
            }
            c.cached -= 1;
            c.free.push(slot);
            c.slots[slot].take()
        };
        drop(removed);
    }
}

/// One file a log opens through the cache: its `Weak` (alive while the cache or a user
/// holds it) and the slot it was last cached in. Dropping the handle (the segment is
/// deleted, replaced or its log closed) takes the file out of the cache.
pub(crate) struct CachedFd {
    cache: Rc<FdCache>,
    file: RefCell<Weak<File>>,
    slot: Cell<usize>,
}

impl CachedFd {
    /// A handle of this shard's cache, not open yet.
    pub(crate) fn new() -> CachedFd {
        CachedFd {
            cache: shard_cache(),
            file: RefCell::new(Weak::new()),
            slot: Cell::new(usize::MAX),
        }
    }

    /// The file: the cached one, one a user still holds (cached again), or `open()`'s.
    pub(crate) fn get(&self, open: impl FnOnce() -> io::Result<File>) -> io::Result<Rc<File>> {
        let live = self.file.borrow().upgrade();
        if let Some(file) = live {
            if !self.cache.touch(self.slot.get(), &file) {
                self.slot.set(self.cache.insert(file.clone()));
            }
            return Ok(file);
        }
        let file = Rc::new(open()?);
        self.cache.clock.borrow_mut().opened += 1;
        self.adopt(file.clone());
        Ok(file)
    }

    /// Caches `file`, just opened by the caller (a file created with the segment).
    pub(crate) fn adopt(&self, file: Rc<File>) {
        self.release();
        *self.file.borrow_mut() = Rc::downgrade(&file);
        self.slot.set(self.cache.insert(file));
    }

    /// Whether the file is open now (cached or held by a user).
    #[cfg(test)]
    pub(crate) fn is_open(&self) -> bool {
        self.file.borrow().strong_count() > 0
    }

    /// Takes the file out of the cache (users keep theirs).
    pub(crate) fn release(&self) {
        let weak = std::mem::take(&mut *self.file.borrow_mut());
        self.cache.remove(self.slot.get(), &weak);
    }
}

impl Drop for CachedFd {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{Disk, SimDisk};
    use std::path::PathBuf;

    fn opener(disk: &Disk, name: &str) -> impl FnOnce() -> io::Result<File> {
        let disk = disk.clone();
        let path = PathBuf::from(format!("/d/{name}"));
        move || disk.open(&path, true).map(|(f, _)| f)
    }

    fn handle(cache: &Rc<FdCache>) -> CachedFd {
        CachedFd {
            cache: cache.clone(),
            file: RefCell::new(Weak::new()),
            slot: Cell::new(usize::MAX),
        }
    }

    #[test]
    fn bounded_and_hits_do_not_reopen() {
        let disk = Disk::Sim(SimDisk::new(1));
        disk.create_dir_all(std::path::Path::new("/d")).unwrap();
        let cache = FdCache::new(4);
        let handles: Vec<CachedFd> = (0..10).map(|_| handle(&cache)).collect();
        for (i, h) in handles.iter().enumerate() {
            h.get(opener(&disk, &i.to_string())).unwrap();
            assert!(cache.stats().cached <= 4);
        }
        let s = cache.stats();
        assert_eq!((s.cached, s.opened, s.evicted), (4, 10, 6));
        // The last four are cached: no open.
        for (i, h) in handles.iter().enumerate().skip(6) {
            assert!(h.is_open());
            h.get(|| panic!("file {i} reopened")).unwrap();
        }
        assert!(!handles[0].is_open());
        assert_eq!(cache.stats().opened, 10);
    }

    #[test]
    fn second_chance_keeps_the_hot_entry() {
        let disk = Disk::Sim(SimDisk::new(2));
        disk.create_dir_all(std::path::Path::new("/d")).unwrap();
        let cache = FdCache::new(3);
        let hot = handle(&cache);
        hot.get(opener(&disk, "hot")).unwrap();
        let cold: Vec<CachedFd> = (0..20).map(|_| handle(&cache)).collect();
        for (i, h) in cold.iter().enumerate() {
            h.get(opener(&disk, &format!("c{i}"))).unwrap();
            // The hot file is used between every two cold opens (an append per request).
            hot.get(|| panic!("the hot file was evicted")).unwrap();
        }
        assert_eq!(cache.stats().cached, 3);
    }

    #[test]
    fn an_evicted_file_in_use_stays_valid_and_comes_back_without_open() {
        let disk = Disk::Sim(SimDisk::new(3));
        disk.create_dir_all(std::path::Path::new("/d")).unwrap();
        let cache = FdCache::new(1);
        let a = handle(&cache);
        let held = a.get(opener(&disk, "a")).unwrap();
        held.write_at(b"kept", 0).unwrap();
        let b = handle(&cache);
        b.get(opener(&disk, "b")).unwrap(); // evicts a from the cache
        assert_eq!(cache.stats().evicted, 1);
        assert!(a.is_open(), "the user's reference keeps it open");
        let mut out = Vec::new();
        assert_eq!(
            crate::log::test_util::run(held.read_into(0, 4, &mut out)).unwrap(),
            4
        );
        assert_eq!(out, b"kept");
        let again = a.get(|| panic!("reopened a file still held")).unwrap();
        assert!(Rc::ptr_eq(&again, &held));
        assert_eq!(cache.stats().cached, 1);
    }

    #[test]
    fn dropping_a_handle_frees_its_slot_and_shrinking_evicts() {
        let disk = Disk::Sim(SimDisk::new(4));
        disk.create_dir_all(std::path::Path::new("/d")).unwrap();
        let cache = FdCache::new(8);
        let hs: Vec<CachedFd> = (0..8).map(|_| handle(&cache)).collect();
        for (i, h) in hs.iter().enumerate() {
            h.get(opener(&disk, &i.to_string())).unwrap();
        }
        let mut hs = hs;
        hs.truncate(5);
        assert_eq!(cache.stats().cached, 5);
        cache.set_capacity(2);
        let s = cache.stats();
        assert_eq!((s.cached, s.capacity), (2, 2));
        for (i, h) in hs.iter().enumerate() {
            h.get(opener(&disk, &i.to_string())).unwrap();
            assert!(cache.stats().cached <= 2);
        }
    }
}

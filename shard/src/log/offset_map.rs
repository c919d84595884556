//! The log cleaner's key map (Kafka's `SkimpyOffsetMap`): key hash -> latest offset, in a
//! fixed block of memory (`log.cleaner.dedupe.buffer.size` split across the shards).
//!
//! Each slot holds a 128-bit hash of the key (two SipHash values; Kafka uses MD5) and the
//! offset, 24 bytes. Open addressing with linear probing; the map counts itself full at
//! `LOAD_FACTOR` of its slots (Kafka's `log.cleaner.io.buffer.load.factor`, 0.9), and the
//! cleaner then stops reading the dirty region: that pass covers the prefix that fit and the
//! rest waits for the next pass. A hash collision between two keys would make the older one
//! look superseded; at 128 bits that is as unlikely as Kafka's MD5 collision.

use std::hash::{DefaultHasher, Hasher};

/// Fraction of the slots used before the map reports itself full.
const LOAD_FACTOR: f64 = 0.9;

/// Bytes of one slot: two u64 hash halves and the offset.
pub(crate) const SLOT_BYTES: usize = 24;

#[derive(Clone, Copy)]
struct Slot {
    h1: u64,
    h2: u64,
    /// -1: empty.
    offset: i64,
}

const EMPTY: Slot = Slot {
    h1: 0,
    h2: 0,
    offset: -1,
};

pub(crate) struct OffsetMap {
    slots: Vec<Slot>,
    used: usize,
    max_used: usize,
    /// Largest offset put since the last `clear` (-1: none).
    latest_offset: i64,
}

fn hash(key: &[u8]) -> (u64, u64) {
    let mut a = DefaultHasher::new();
    a.write(key);
    let mut b = DefaultHasher::new();
    b.write_u8(0x5a);
    b.write(key);
    (a.finish(), b.finish())
}

impl OffsetMap {
    /// A map in `memory_bytes` (at least one slot).
    pub(crate) fn new(memory_bytes: usize) -> OffsetMap {
        let n = (memory_bytes / SLOT_BYTES).max(1);
        OffsetMap {
            slots: vec![EMPTY; n],
            used: 0,
            max_used: ((n as f64 * LOAD_FACTOR) as usize).max(1),
            latest_offset: -1,
        }
    }

    /// Keys the map takes before it is full.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.max_used
    }
    pub(crate) fn len(&self) -> usize {
        self.used
    }
    pub(crate) fn is_full(&self) -> bool {
        self.used >= self.max_used
    }
    pub(crate) fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    pub(crate) fn clear(&mut self) {
        self.slots.fill(EMPTY);
        self.used = 0;
        self.latest_offset = -1;
    }

    fn find(&self, h1: u64, h2: u64) -> usize {
        let n = self.slots.len();
        let mut i = (h1 % n as u64) as usize;
        loop {
            let s = &self.slots[i];
            if s.offset < 0 || (s.h1 == h1 && s.h2 == h2) {
                return i;
            }
            i = (i + 1) % n;
        }
    }

    /// Records `offset` as the latest for `key`. False (nothing stored) when the map is full
    /// and the key is new.
    pub(crate) fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let (h1, h2) = hash(key);
        let i = self.find(h1, h2);
        if self.slots[i].offset < 0 {
            if self.is_full() {
                return false;
            }
            self.used += 1;
        }
        self.slots[i] = Slot { h1, h2, offset };
        self.latest_offset = self.latest_offset.max(offset);
        true
    }

    pub(crate) fn get(&self, key: &[u8]) -> Option<i64> {
        let (h1, h2) = hash(key);
        let s = self.slots[self.find(h1, h2)];
        (s.offset >= 0).then_some(s.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_offset_wins_and_fills_at_load_factor() {
        let mut m = OffsetMap::new(SLOT_BYTES * 10);
        assert_eq!(m.capacity(), 9);
        for i in 0..9i64 {
            assert!(m.put(format!("k{i}").as_bytes(), i));
        }
        assert!(m.is_full());
        assert!(!m.put(b"new", 100), "full map refuses a new key");
        assert!(m.put(b"k3", 50), "an existing key still updates");
        assert_eq!(m.get(b"k3"), Some(50));
        assert_eq!(m.get(b"k4"), Some(4));
        assert_eq!(m.get(b"new"), None);
        assert_eq!(m.latest_offset(), 50);
        m.clear();
        assert_eq!((m.len(), m.get(b"k3"), m.latest_offset()), (0, None, -1));
    }
}

//! The active segment's newest batch boundaries, kept in memory so that a read at the tail of
//! the log (a consumer caught up with its producers, a follower fetching what the leader just
//! appended) knows where its batches start and end without reading their headers again.
//!
//! Why: the offset index is sparse (one entry per `index.interval.bytes`), so a read finds its
//! first batch by walking the headers after the index entry below it, and the end of its range
//! by walking from the floor of its bounds: one to eight io_uring reads of 512 bytes per
//! partition fetched, for batches this shard wrote moments before and knew the boundaries of.
//!
//! The boundaries are remembered only while they are certainly the file's: each append checks
//! that it continues the remembered run (same end position, same next offset), else the run
//! starts again, so a truncation (follower, recovery) followed by new appends never mixes old
//! and new boundaries. A read uses the run only when it ends exactly at the segment's current
//! size and next offset; anything else walks headers as before.

use std::collections::VecDeque;

/// Batches remembered per active segment: enough for what a caught-up consumer finds between
/// two fetches (8 bytes each, 512 bytes at most per appended partition). Reads further back
/// walk headers from the offset index.
pub(crate) const TAIL_BATCHES: usize = 64;

/// See the module doc. Offsets are kept relative to the segment's base offset (they fit in
/// u32: the log rolls before a relative offset passes i32), positions as u32 (segments stay
/// below 2 GiB).
pub(crate) struct TailBatches {
    /// The segment's base offset.
    base: i64,
    /// (last offset - base, start position) of each remembered batch, oldest first.
    /// Allocated at the first append: an idle segment holds nothing.
    batches: VecDeque<(u32, u32)>,
    /// Last offset of the batch just before the oldest remembered one: every batch before the
    /// run ends at or below it.
    before_last: i64,
    /// Where the run ends (the segment's size after its newest batch); None: no run yet.
    end: Option<u64>,
}

/// What a read asks of the run: the range of whole batches it takes, found in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TailRange {
    /// Start of the batch containing the read's offset.
    pub start: u64,
    /// End of the last batch taken (= `start` when none is).
    pub end: u64,
}

impl TailBatches {
    pub(crate) fn new(base: i64) -> TailBatches {
        TailBatches {
            base,
            batches: VecDeque::new(),
            before_last: base - 1,
            end: None,
        }
    }

    /// Remembers the batch just written at `position..end`, ending at `last_offset`; the
    /// segment's next offset before the append was `next_before`.
    pub(crate) fn push(&mut self, position: u64, end: u64, last_offset: i64, next_before: i64) {
        if self.end != Some(position) || self.last_offset() != next_before - 1 {
            self.batches.clear();
            self.before_last = next_before - 1;
        }
        if self.batches.len() == TAIL_BATCHES {
            if let Some((last, _)) = self.batches.pop_front() {
                self.before_last = self.base + i64::from(last);
            }
        }
        self.batches
            .push_back(((last_offset - self.base) as u32, position as u32));
        self.end = Some(end);
    }

    /// Last offset of the newest remembered batch (`before_last` when none).
    fn last_offset(&self) -> i64 {
        self.batches
            .back()
            .map_or(self.before_last, |&(last, _)| self.base + i64::from(last))
    }

    /// End of remembered batch `i` (the next one's start, or the run's end).
    fn end_of(&self, i: usize, run_end: u64) -> u64 {
        self.batches
            .get(i + 1)
            .map_or(run_end, |&(_, start)| u64::from(start))
    }

    /// The range a read of this segment (now `size` bytes, next offset `next_offset`) takes
    /// from `offset`: whole batches from the one containing `offset`, none reaching
    /// `limit_offset`, at most `max_bytes` of them, or with `min_one` the first one whole
    /// however large (KIP-74). None when the run cannot answer: it does not end at the
    /// segment's end, or `offset` is before it. The caller has checked `offset` is below
    /// both `next_offset` and `limit_offset`.
    pub(crate) fn range(
        &self,
        size: u64,
        next_offset: i64,
        offset: i64,
        limit_offset: i64,
        max_bytes: u64,
        min_one: bool,
    ) -> Option<TailRange> {
        if self.end != Some(size)
            || self.last_offset() != next_offset - 1
            || offset <= self.before_last
        {
            return None;
        }
        let rel = |o: i64| (o - self.base).clamp(0, i64::from(u32::MAX)) as u32;
        // The first batch ending at or after `offset` holds it.
        let first = self
            .batches
            .partition_point(|&(last, _)| last < rel(offset));
        let &(_, start) = self.batches.get(first)?;
        let start = u64::from(start);
        // Batches from `first` up to (not including) `limit` end below the limit offset.
        let limit = if limit_offset > self.last_offset() {
            self.batches.len()
        } else {
            self.batches
                .partition_point(|&(last, _)| last < rel(limit_offset))
        };
        // Of those, the ones ending within the budget (their ends increase).
        let budget_end = start.saturating_add(max_bytes);
        let mut taken = first;
        let (mut lo, mut hi) = (first, limit);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.end_of(mid, size) <= budget_end {
                taken = mid + 1;
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if taken == first && min_one && first < limit {
            taken = first + 1; // the first batch alone is larger than the budget
        }
        let end = if taken == first {
            start
        } else {
            self.end_of(taken - 1, size)
        };
        Some(TailRange { start, end })
    }
}

#[cfg(test)]
mod tests {
    use rand::{rngs::StdRng, Rng, SeedableRng};

    use super::*;

    /// A segment's batches as (base offset, last offset, start, end), and the range a header
    /// walk over all of them finds (what `read_planned_ranges` computes from the file).
    fn walk(
        batches: &[(i64, i64, u64, u64)],
        offset: i64,
        limit: i64,
        max_bytes: u64,
        min_one: bool,
    ) -> TailRange {
        let first = batches
            .iter()
            .position(|b| b.1 >= offset)
            .expect("offset in segment");
        let start = batches[first].2;
        let mut end = start;
        for b in &batches[first..] {
            if b.1 >= limit || b.3 - start > max_bytes {
                break;
            }
            end = b.3;
        }
        if end == start && min_one && batches[first].1 < limit {
            end = batches[first].3;
        }
        TailRange { start, end }
    }

    #[test]
    fn ranges_match_a_header_walk() {
        for seed in 0..200u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let base = rng.gen_range(0..1_000_000i64);
            let mut tail = TailBatches::new(base);
            let mut batches = Vec::new();
            let (mut next, mut size) = (base, 0u64);
            for _ in 0..rng.gen_range(1..3 * TAIL_BATCHES) {
                // Compacted followers' batches leave offset gaps.
                let first = next
                    + if rng.gen_bool(0.1) {
                        rng.gen_range(1..5)
                    } else {
                        0
                    };
                let last = first + rng.gen_range(0..10);
                let len = rng.gen_range(61..3000u64);
                tail.push(size, size + len, last, next);
                batches.push((first, last, size, size + len));
                next = last + 1;
                size += len;
            }
            for _ in 0..200 {
                let offset = rng.gen_range(base..next);
                let limit = rng.gen_range(offset + 1..=next + 1);
                let max_bytes = rng.gen_range(0..20_000u64);
                let min_one = rng.gen_bool(0.5);
                let want = walk(&batches, offset, limit, max_bytes, min_one);
                match tail.range(size, next, offset, limit, max_bytes, min_one) {
                    Some(got) => assert_eq!(
                        got, want,
                        "seed {seed} offset {offset} limit {limit} max {max_bytes}"
                    ),
                    // Only reads before the remembered run fall back to the walk.
                    None => assert!(
                        batches.len() > TAIL_BATCHES
                            && offset <= batches[batches.len() - TAIL_BATCHES - 1].1,
                        "seed {seed}: offset {offset} is in the run but was not answered"
                    ),
                }
            }
        }
    }

    #[test]
    fn a_run_broken_by_a_truncation_starts_again() {
        let mut tail = TailBatches::new(100);
        tail.push(0, 100, 104, 100);
        tail.push(100, 200, 109, 105);
        // Truncated to the first batch, then a different batch appended at its end.
        assert_eq!(tail.range(100, 105, 100, 105, 1 << 20, true), None);
        tail.push(100, 150, 107, 105);
        let r = tail
            .range(150, 108, 105, 108, 1 << 20, true)
            .expect("new run");
        assert_eq!((r.start, r.end), (100, 150));
        // The first batch is before the new run: the walk answers.
        assert_eq!(tail.range(150, 108, 102, 108, 1 << 20, true), None);
        // An append not at the run's end (the segment was cut and refilled elsewhere).
        tail.push(120, 180, 112, 108);
        assert_eq!(tail.range(150, 108, 105, 108, 1 << 20, true), None);
        assert!(tail.range(180, 113, 108, 113, 1 << 20, true).is_some());
    }

    #[test]
    fn stale_when_the_segment_moved_on_without_it() {
        let mut tail = TailBatches::new(0);
        tail.push(0, 100, 9, 0);
        assert!(tail.range(100, 10, 0, 10, 1000, false).is_some());
        assert_eq!(
            tail.range(120, 10, 0, 10, 1000, false),
            None,
            "size changed"
        );
        assert_eq!(
            tail.range(100, 11, 0, 10, 1000, false),
            None,
            "next offset changed"
        );
    }
}

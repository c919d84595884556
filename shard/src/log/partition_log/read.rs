//! Read plans: fetch reads (offset -> segment -> offset index -> short header scan), as
//! copied bytes or as file ranges sent from the file, and lookups by timestamp. The index
//! lookups run while the log is borrowed; the returned futures own what they need.

use std::future::Future;
use std::path::Path;
use std::rc::Rc;

use bytes::Bytes;

use super::{corrupt, PartitionLog};
use crate::log::batch::{self, PEEK_BYTES, PEEK_TS_BYTES};
use crate::log::segment::{range_fd, read_exact_at, RangeFd, Walker};
use crate::log::tail_batches::TailRange;
use crate::log::LogError;
use crate::storage::{File, FileRange, Piece};

/// What a read needs of one segment, cloned out of the log.
struct SegRef {
    file: Rc<File>,
    path: Rc<Path>,
    size: u64,
    start: u64,
}

/// What a range read needs of one segment (see [`PartitionLog::read_ranges`]): the segment,
/// and index positions found while the log was borrowed, from which the end of the range is
/// found by reading a few batch headers.
struct RangeSeg {
    seg: SegRef,
    range_fd: RangeFd,
    /// A batch boundary at or before where the read's budget can end in this segment.
    budget_floor: u64,
    /// When the segment holds batches reaching the limit offset: a batch boundary at or
    /// before the first of them.
    limit_floor: Option<u64>,
    /// The read's exact range, when the active segment's newest boundaries answered it (a
    /// read at the tail): no header is read.
    exact: Option<TailRange>,
}

/// Bytes of one batch-header read of a range read: one page, the default index interval, so a
/// walk from an index entry to the batch it looks for is mostly one read (512 bytes took up to
/// eight for small batches, each an io_uring read awaited, with two allocations of glommio's).
/// Never the bulk of large batches' records (those stay in the file and go out by sendfile).
const HEADER_READ_BYTES: usize = 4096;

impl PartitionLog {
    // ---------------------------------------------------------------------------------
    // Reads
    // ---------------------------------------------------------------------------------

    /// Reads whole batches starting with the one containing `offset`, up to `max_bytes` but
    /// at least one whole batch, never including a batch that reaches `limit_offset` (the
    /// high watermark, exclusive). Continues into later segments while bytes remain.
    /// `offset == log end` (or >= limit) gives empty bytes; outside [log start, log end] is
    /// `OffsetOutOfRange`. The returned future borrows nothing from `self` (see module doc).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        limit_offset: i64,
    ) -> impl Future<Output = Result<Bytes, LogError>> + 'static {
        self.read_bounded(offset, max_bytes, limit_offset, true)
    }

    /// As [`read`](Self::read); with `min_one` false a first batch larger than `max_bytes`
    /// is not returned (empty bytes), so the result never exceeds `max_bytes`. Kafka's fetch
    /// gives that exception (KIP-74) only to the first non-empty partition of a response.
    pub fn read_bounded(
        &self,
        offset: i64,
        max_bytes: usize,
        limit_offset: i64,
        min_one: bool,
    ) -> impl Future<Output = Result<Bytes, LogError>> + 'static {
        let plan = self.plan_read(offset, max_bytes, limit_offset);
        let chunk = (self.config.index_interval_bytes as usize * 2).clamp(4096, 1 << 20);
        async move {
            match plan? {
                None => Ok(Bytes::new()),
                Some(segs) => {
                    read_planned(segs, offset, max_bytes, limit_offset, chunk, min_one).await
                }
            }
        }
    }

    /// As [`read_bounded`](Self::read_bounded), but the records stay in the segment files:
    /// the result is the byte ranges of the same whole batches ([`Piece::File`], each holding
    /// its segment's file open: see ARCHITECTURE.md, "Zero-copy fetch"), one per segment
    /// touched. Batch boundaries come from the offset index and batch headers read around
    /// the range's two ends (at most about two index intervals of headers); the records in
    /// between are never read here. On the simulated disk (no descriptors) the pieces are
    /// bytes read from it.
    pub fn read_ranges(
        &self,
        offset: i64,
        max_bytes: usize,
        limit_offset: i64,
        min_one: bool,
    ) -> impl Future<Output = Result<Vec<Piece>, LogError>> + 'static {
        let plan = self.plan_ranges(offset, max_bytes, limit_offset, min_one);
        async move {
            match plan? {
                None => Ok(Vec::new()),
                Some(segs) => {
                    read_planned_ranges(segs, offset, max_bytes, limit_offset, min_one).await
                }
            }
        }
    }

    fn plan_ranges(
        &self,
        offset: i64,
        max_bytes: usize,
        limit_offset: i64,
        min_one: bool,
    ) -> Result<Option<Vec<RangeSeg>>, LogError> {
        if !self.check_read(offset, limit_offset)? {
            return Ok(None);
        }
        // A read from the active segment: its newest boundaries may answer it whole.
        let active = self.segments.last().expect("never empty");
        if offset >= active.base_offset {
            if let Some(exact) = active.tail_range(offset, limit_offset, max_bytes as u64, min_one)
            {
                return Ok(Some(vec![RangeSeg {
                    range_fd: active.range_fd.clone(),
                    seg: SegRef {
                        file: active.file()?,
                        path: active.log_path.clone(),
                        size: active.size,
                        start: exact.start,
                    },
                    budget_floor: exact.end,
                    limit_floor: None,
                    exact: Some(exact),
                }]));
            }
        }
        // The boundaries in memory did not answer (they answer any budget or none), so the
        // plan starts from the index.
        let segs = self.plan_segments(offset, max_bytes, limit_offset, false)?;
        let first = self
            .segments
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1);
        // Bytes before segment k that the read may take at most: the budget left in segment
        // k is at least `max_bytes` minus them.
        let mut before = 0u64;
        let mut out = Vec::with_capacity(segs.len());
        for (seg, s) in segs.into_iter().zip(&self.segments[first..]) {
            let budget_left = (max_bytes as u64).saturating_sub(before);
            let budget_floor = u64::from(s.index.floor_position(seg.start + budget_left));
            let limit_floor =
                (s.next_offset > limit_offset).then(|| u64::from(s.index.lookup(limit_offset)));
            before += seg.size - seg.start;
            out.push(RangeSeg {
                range_fd: s.range_fd.clone(),
                seg,
                budget_floor,
                limit_floor,
                exact: None,
            });
        }
        Ok(Some(out))
    }

    fn plan_read(
        &self,
        offset: i64,
        max_bytes: usize,
        limit_offset: i64,
    ) -> Result<Option<Vec<SegRef>>, LogError> {
        if !self.check_read(offset, limit_offset)? {
            return Ok(None);
        }
        Ok(Some(self.plan_segments(
            offset,
            max_bytes,
            limit_offset,
            true,
        )?))
    }

    /// Whether a read from `offset` has anything to return (false: at the log end or the
    /// limit); an offset outside the log is OffsetOutOfRange.
    fn check_read(&self, offset: i64, limit_offset: i64) -> Result<bool, LogError> {
        let log_end = self.log_end_offset();
        if offset < self.log_start_offset || offset > log_end {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start: self.log_start_offset,
                log_end,
            });
        }
        Ok(offset != log_end && offset < limit_offset)
    }

    /// The segments a read from `offset` (checked by `check_read`) touches, the first one
    /// from the batch holding
    /// `offset`: found in the active segment's boundaries in memory when `use_tail` and they
    /// know it, else from the offset index (a position at or before the batch).
    fn plan_segments(
        &self,
        offset: i64,
        max_bytes: usize,
        limit_offset: i64,
        use_tail: bool,
    ) -> Result<Vec<SegRef>, LogError> {
        let idx = self
            .segments
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1);
        let first = &self.segments[idx];
        // In the active segment the newest boundaries may know the batch's exact start.
        let tail_start = (use_tail && idx + 1 == self.segments.len())
            .then(|| first.tail_range(offset, limit_offset, 0, false))
            .flatten();
        let mut segs = vec![SegRef {
            file: first.file()?,
            path: first.log_path.clone(),
            size: first.size,
            start: tail_start.map_or_else(|| u64::from(first.index.lookup(offset)), |r| r.start),
        }];
        // A later segment can only contribute if the ones between used less than max_bytes.
        let mut between = 0u64;
        for s in &self.segments[idx + 1..] {
            if between >= max_bytes as u64 || s.base_offset >= limit_offset {
                break;
            }
            segs.push(SegRef {
                file: s.file()?,
                path: s.log_path.clone(),
                size: s.size,
                start: 0,
            });
            between += s.size;
        }
        Ok(segs)
    }

    /// ListOffsets by timestamp, batch-level: the first batch whose max timestamp is >= `ts`,
    /// as (its base offset, its max timestamp); None if no batch reaches `ts`. (Kafka answers
    /// with the exact record inside that batch; a consumer seeking to the base offset may see
    /// a few earlier records of the same batch.)
    pub fn offset_for_timestamp(
        &self,
        ts: i64,
    ) -> impl Future<Output = Result<Option<(i64, i64)>, LogError>> + 'static {
        let log_start = self.log_start_offset;
        let plan = self
            .segments
            .iter()
            .find(|s| s.max_timestamp >= ts)
            .map(|s| {
                // Batches before the floor entry's offset all have max timestamps below it (and so
                // below `ts`); start at the indexed position at or before that batch.
                let start = s
                    .time_index
                    .lookup(ts)
                    .map_or(0, |(_, o)| s.index.lookup(o)) as u64;
                s.file()
                    .map(|file| (file, s.log_path.clone(), s.size, start))
            });
        async move {
            let Some((file, path, size, mut pos)) = plan.transpose()? else {
                return Ok(None);
            };
            let mut walker = Walker::new(file, size, 64 << 10);
            while pos < size {
                let b = walker
                    .bytes(pos, PEEK_TS_BYTES)
                    .await
                    .map_err(|e| LogError::io("read", &path, e))?
                    .ok_or_else(|| corrupt(&path, pos, "partial batch header"))?;
                let p = batch::peek(b).map_err(|r| corrupt(&path, pos, r))?;
                let max_ts = batch::max_timestamp(b);
                if max_ts >= ts {
                    return Ok(Some((p.base_offset.max(log_start), max_ts)));
                }
                pos += p.total as u64;
            }
            Ok(None)
        }
    }

    /// The end (next offset) of the segment a lookup by `ts` searches: Kafka's
    /// `fetchOffsetByTimestamp` picks the first segment whose largest timestamp is >= `ts`
    /// and answers from that segment only. None when no segment reaches `ts`.
    pub fn timestamp_segment_end(&self, ts: i64) -> Option<i64> {
        self.segments
            .iter()
            .find(|s| s.max_timestamp >= ts)
            .map(|s| s.next_offset)
    }

    /// Every time-index entry of every segment, as (timestamp, offset) (tests, tools).
    pub fn time_index_entries(&self) -> Vec<(i64, i64)> {
        self.segments
            .iter()
            .flat_map(|s| {
                (0..s.time_index.inner.entries()).filter_map(move |i| s.time_index.get(i))
            })
            .collect()
    }

    /// ListOffsets MAX_TIMESTAMP: (offset, timestamp) of the largest batch max timestamp,
    /// earliest batch on ties. The offset is that batch's LAST offset (Kafka's "shallow"
    /// offset of max timestamp, as before KIP-734's exact-record answer). None when no batch
    /// carries a timestamp (empty log, or only -1 timestamps).
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        let mut best: Option<(i64, i64)> = None;
        for s in &self.segments {
            let better = match best {
                Some((_, t)) => s.max_timestamp > t,
                None => true,
            };
            if s.offset_of_max_timestamp >= 0 && better {
                best = Some((s.offset_of_max_timestamp, s.max_timestamp));
            }
        }
        best
    }
}

/// The async half of `read`: locate the batch containing `offset` in the first segment (walk
/// headers from the index floor), then take whole batches while they fit.
async fn read_planned(
    segs: Vec<SegRef>,
    offset: i64,
    max_bytes: usize,
    limit_offset: i64,
    chunk: usize,
    min_one: bool,
) -> Result<Bytes, LogError> {
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    let mut taken = 0usize;
    for seg in segs {
        let path = &seg.path;
        let ioe = |e| LogError::io("read", path, e);
        // Locate: first batch whose last offset is >= `offset` (later segments: their first).
        let mut pos = seg.start;
        let mut walker = Walker::new(seg.file.clone(), seg.size, chunk);
        while pos < seg.size {
            let b = walker
                .bytes(pos, PEEK_BYTES)
                .await
                .map_err(ioe)?
                .ok_or_else(|| corrupt(path, pos, "partial batch header"))?;
            let p = batch::peek(b).map_err(|r| corrupt(path, pos, r))?;
            if p.last_offset >= offset {
                break;
            }
            pos += p.total as u64;
        }
        if pos >= seg.size {
            continue; // `offset` is past this segment's last batch (only possible in the first)
        }
        drop(walker);
        // Collect: one read of the budget, cut at the last whole batch.
        let first = taken == 0;
        let budget = max_bytes.saturating_sub(taken);
        let left = seg.size - pos;
        let want = (if first && min_one {
            budget.max(PEEK_BYTES)
        } else {
            budget
        } as u64)
            .min(left) as usize;
        if want < PEEK_BYTES {
            break;
        }
        let budget_limited = (want as u64) < left;
        let mut buf = Vec::with_capacity(want);
        read_exact_at(&seg.file, pos, want, &mut buf)
            .await
            .map_err(ioe)?;
        let mut end = 0usize;
        let mut stop = budget_limited;
        while end + PEEK_BYTES <= buf.len() {
            let p = batch::peek(&buf[end..]).map_err(|r| corrupt(path, pos + end as u64, r))?;
            if p.last_offset >= limit_offset {
                stop = true;
                break;
            }
            if end + p.total <= buf.len() {
                end += p.total;
                continue;
            }
            if taken == 0 && end == 0 && min_one {
                // The first batch is larger than max_bytes: return it whole anyway.
                let more = p.total - buf.len();
                if (p.total as u64) > left {
                    return Err(corrupt(path, pos, "batch runs past the end of the segment"));
                }
                read_exact_at(&seg.file, pos + buf.len() as u64, more, &mut buf)
                    .await
                    .map_err(ioe)?;
                end = p.total;
            }
            stop = true;
            break;
        }
        if end < buf.len() {
            stop = true;
        }
        buf.truncate(end);
        if end > 0 {
            taken += end;
            pieces.push(buf);
        }
        if stop {
            break;
        }
    }
    Ok(match pieces.len() {
        0 => Bytes::new(),
        1 => Bytes::from(pieces.pop().expect("one piece")),
        _ => Bytes::from(pieces.concat()),
    })
}

/// The range read of [`PartitionLog::read_ranges`]: the same batches as `read_planned`.
async fn read_planned_ranges(
    segs: Vec<RangeSeg>,
    offset: i64,
    max_bytes: usize,
    limit_offset: i64,
    min_one: bool,
) -> Result<Vec<Piece>, LogError> {
    let mut pieces = Vec::new();
    let mut taken = 0u64;
    for (index, range_seg) in segs.into_iter().enumerate() {
        let RangeSeg {
            seg,
            range_fd: fd_cache,
            budget_floor,
            limit_floor,
            exact,
        } = range_seg;
        let path = &seg.path;
        if let Some(TailRange { start, end }) = exact {
            if end > start {
                pieces.push(range_piece(&fd_cache, &seg, start, end).await?);
            }
            break; // a tail read is the active segment's alone
        }
        let mut walker = Walker::new(seg.file.clone(), seg.size, HEADER_READ_BYTES);
        // Locate: first batch whose last offset is >= `offset` (later segments: their first).
        let mut pos = seg.start;
        if index == 0 {
            while pos < seg.size {
                let p = peek_at(&mut walker, path, pos).await?;
                if p.last_offset >= offset {
                    break;
                }
                pos += p.total as u64;
            }
        }
        if pos >= seg.size {
            continue; // `offset` is past this segment's last batch (only possible in the first)
        }
        // End: the last batch boundary within the budget and before the limit. Every batch
        // before both floors fits both (the floors are boundaries at or below the bounds), so
        // the walk starts at the lower one.
        let budget_end = pos.saturating_add((max_bytes as u64).saturating_sub(taken));
        let mut end = pos;
        if limit_floor.is_none() && budget_end >= seg.size {
            end = seg.size;
        } else {
            let mut at = budget_floor.min(limit_floor.unwrap_or(u64::MAX)).max(pos);
            while at < seg.size {
                let p = peek_at(&mut walker, path, at).await?;
                if p.last_offset >= limit_offset || at + p.total as u64 > budget_end {
                    break;
                }
                at += p.total as u64;
            }
            end = end.max(at);
        }
        if end == pos && taken == 0 && min_one {
            // The first batch is larger than max_bytes: it is returned whole anyway (KIP-74).
            let p = peek_at(&mut walker, path, pos).await?;
            if p.last_offset < limit_offset {
                if pos + p.total as u64 > seg.size {
                    return Err(corrupt(path, pos, "batch runs past the end of the segment"));
                }
                end = pos + p.total as u64;
            }
        }
        drop(walker);
        if end > pos {
            pieces.push(range_piece(&fd_cache, &seg, pos, end).await?);
            taken += end - pos;
        }
        if end < seg.size {
            break; // something did not fit, or reached the limit
        }
    }
    Ok(pieces)
}

/// The bytes `start..end` of a segment as a file range (or, on the simulated disk, read).
async fn range_piece(
    fd_cache: &RangeFd,
    seg: &SegRef,
    start: u64,
    end: u64,
) -> Result<Piece, LogError> {
    let ioe = |e| LogError::io("read", &seg.path, e);
    Ok(match range_fd(fd_cache, &seg.file).map_err(ioe)? {
        Some(fd) => Piece::File(FileRange::new(fd, start, end - start)),
        None => {
            let mut buf = Vec::with_capacity((end - start) as usize);
            read_exact_at(&seg.file, start, (end - start) as usize, &mut buf)
                .await
                .map_err(ioe)?;
            Piece::Bytes(Bytes::from(buf))
        }
    })
}

/// The chain fields of the batch at `pos`.
async fn peek_at(walker: &mut Walker, path: &Path, pos: u64) -> Result<batch::Peek, LogError> {
    let b = walker
        .bytes(pos, PEEK_BYTES)
        .await
        .map_err(|e| LogError::io("read", path, e))?
        .ok_or_else(|| corrupt(path, pos, "partial batch header"))?;
    batch::peek(b).map_err(|r| corrupt(path, pos, r))
}

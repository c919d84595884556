//! Durability bookkeeping: what must be fdatasynced (`SyncJob`), the durable offset and
//! recovery point, the shard's dirty-log list, `flush.ms` / `flush.messages`, and close.

use std::cell::RefCell;
use std::io;
use std::mem;
use std::path::PathBuf;
use std::rc::{Rc, Weak};

use super::{DirtyLogs, DirtyWatch, PartitionLog};
use crate::fsyncs::{self, SyncReason};
use crate::log::checkpoint::{self, Checkpoint, CleanState};
use crate::log::{join_all, snapshot_path, LogError};
use crate::storage::{Disk, File};

/// The fdatasyncs that make a log durable up to `target`: cloned fds, no borrow of the log.
pub struct SyncJob {
    files: Vec<Rc<File>>,
    /// The first `rolled` of `files` are those of segments rolled (or recovered) since the
    /// last sync; the rest is the active segment's.
    rolled: usize,
    /// Why the active segment's data is synced (`fsyncs`); rolled files and the directory
    /// count as `SegmentRoll` when this is `GroupCommit`.
    reason: SyncReason,
    disk: Disk,
    dir: Option<PathBuf>,
    target: i64,
    checkpoint: Checkpoint,
    /// `PartitionLog::truncations` when the job was taken.
    truncations: u64,
}

impl SyncJob {
    /// fdatasync of every file concurrently through io_uring, then of the directory if a
    /// segment was created. Never blocks the thread.
    pub async fn run(&self) -> io::Result<()> {
        let roll_reason = match self.reason {
            SyncReason::GroupCommit => SyncReason::SegmentRoll,
            other => other,
        };
        fsyncs::attribute(roll_reason, self.rolled as u64);
        fsyncs::attribute(self.reason, (self.files.len() - self.rolled) as u64);
        let results = join_all(self.files.iter().map(|f| f.fdatasync()).collect()).await;
        for r in results {
            r?;
        }
        if let Some(dir) = &self.dir {
            fsyncs::attribute(roll_reason, 1);
            self.disk.sync_dir(dir).await?;
        }
        Ok(())
    }

    /// The log end offset this job makes durable.
    pub fn target(&self) -> i64 {
        self.target
    }
}

/// Logs `close_all` takes through each of its steps between two turns of the reactor (which
/// closes the files they dropped).
const CLOSES_PER_REACTOR_TURN: usize = 32;

/// Before the `n`th log of a `close_all` step: every `CLOSES_PER_REACTOR_TURN` logs, a turn
/// of glommio's reactor, which closes the files dropped since (it closes a dropped file
/// through io_uring at its next turn, and a step that never awaits would keep every file its
/// logs opened and dropped, the fd cache's evictions included, open to its end: past the fd
/// limit with thousands of logs). A timer, because a plain yield may not reach the reactor.
async fn let_dropped_files_close(n: usize) {
    if n % CLOSES_PER_REACTOR_TURN == CLOSES_PER_REACTOR_TURN - 1 {
        glommio::timer::sleep(REACTOR_TURN_SLEEP).await;
    }
}

/// How long `let_dropped_files_close` sleeps: a timer not yet due when first polled makes the
/// executor go through its reactor (a zero one is ready at once); at 32 logs a turn, 10,000
/// logs wait about 16 ms in all.
const REACTOR_TURN_SLEEP: std::time::Duration = std::time::Duration::from_micros(50);

impl PartitionLog {
    // ---------------------------------------------------------------------------------
    // Durability
    // ---------------------------------------------------------------------------------

    /// Bytes were appended (or a segment rolled) since the last sync was started.
    pub fn is_dirty(&self) -> bool {
        self.active_dirty || self.dir_dirty || !self.unsynced.is_empty()
    }

    /// From now on this log (`me`) adds itself to `logs` when it has unsynced writes (see
    /// `DirtyLogs`); at once if it has some already.
    pub fn watch_dirty(&mut self, logs: DirtyLogs, me: Weak<RefCell<PartitionLog>>) {
        self.watch = Some(DirtyWatch {
            logs,
            me,
            listed: false,
        });
        if self.is_dirty() {
            self.list_dirty();
        }
    }

    /// Joins the dirty logs if not there yet. Appends are the only writes after open (rolls
    /// happen inside them; open and close sync themselves), so every dirty log is listed.
    pub(super) fn list_dirty(&mut self) {
        if let Some(watch) = &mut self.watch {
            if !watch.listed {
                watch.listed = true;
                watch.logs.borrow_mut().push(watch.me.clone());
            }
        }
    }

    /// Whether this log stays in the dirty logs: false (and it is no longer listed) once
    /// everything written has been handed to a sync.
    pub fn keep_listed(&mut self) -> bool {
        if self.is_dirty() {
            return true;
        }
        if let Some(watch) = &mut self.watch {
            watch.listed = false;
        }
        false
    }

    /// The highest log end offset that a completed or in-flight sync covers.
    pub fn sync_requested_offset(&self) -> i64 {
        self.sync_requested_offset
    }

    /// Whether `flush.messages` / `flush.ms` ask for a sync now.
    pub fn flush_due(&self, now: i64) -> bool {
        self.is_dirty()
            && (self.messages_since_sync >= self.config.flush_messages
                || self.first_unsynced_ms.is_some_and(|t| {
                    now.saturating_sub(t) >= self.config.flush_ms.min(i64::MAX as u64) as i64
                }))
    }

    /// Takes everything written since the last sync into a job (None if nothing is).
    /// Run it with `SyncJob::run` (no borrow of the log needed), then `finish_sync`.
    pub fn begin_sync(&mut self) -> Option<SyncJob> {
        if !self.is_dirty() || self.failed.is_some() {
            return None;
        }
        let mut files = mem::take(&mut self.unsynced);
        let rolled = files.len();
        if self.active_dirty {
            match self.active().file() {
                Ok(file) => files.push(file),
                Err(e) => {
                    // Not expected: the active segment holds its fd.
                    self.failed = Some(e.to_string());
                    return None;
                }
            }
        }
        let target = self.log_end_offset();
        let job = SyncJob {
            files,
            rolled,
            reason: SyncReason::GroupCommit,
            disk: self.env.disk.clone(),
            dir: self.dir_dirty.then(|| self.dir.clone()),
            target,
            checkpoint: Checkpoint {
                next_offset: target,
                segment_base: self.active().base_offset,
                position: self.active().size,
            },
            truncations: self.truncations,
        };
        self.active_dirty = false;
        self.dir_dirty = false;
        self.sync_requested_offset = self.sync_requested_offset.max(target);
        self.messages_since_sync = 0;
        self.first_unsynced_ms = None;
        Some(job)
    }

    /// Records the outcome of a job from `begin_sync`: moves the durable offset and the
    /// recovery point, or marks the log failed (after a failed fdatasync the kernel may have
    /// dropped the dirty pages, so nothing written before can be trusted to be on disk).
    pub fn finish_sync(&mut self, job: SyncJob, result: io::Result<()>) -> Result<(), LogError> {
        match result {
            Ok(()) => {
                self.syncs_completed += 1;
                if job.truncations != self.truncations {
                    // The log was truncated meanwhile: the job's target and recovery point
                    // may name records that are gone (the truncation set both itself).
                    return Ok(());
                }
                if job.target > self.durable_offset {
                    self.durable_offset = job.target;
                }
                if self
                    .segments
                    .iter()
                    .any(|s| s.base_offset == job.checkpoint.segment_base)
                {
                    self.write_checkpoint(job.checkpoint)?;
                }
                Ok(())
            }
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), error = %e, "fdatasync failed; log marked failed");
                self.failed = Some(format!("fdatasync: {e}"));
                Err(LogError::io("fdatasync", &self.dir, e))
            }
        }
    }

    pub(super) fn write_checkpoint(&mut self, cp: Checkpoint) -> Result<(), LogError> {
        if self
            .last_checkpoint
            .is_some_and(|old| old.next_offset > cp.next_offset)
        {
            return Ok(()); // a later sync already moved it further
        }
        self.checkpoint
            .write(&cp)
            .map_err(|e| LogError::io("write", self.checkpoint.path(), e))?;
        self.last_checkpoint = Some(cp);
        Ok(())
    }

    /// fdatasync of everything written so far (every segment written since the last sync,
    /// rolled ones included, and their indexes), then the recovery point.
    pub async fn sync(&mut self) -> Result<(), LogError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        self.sync_for(SyncReason::GroupCommit).await
    }

    /// `sync`, its fsyncs counted for `reason`.
    pub(super) async fn sync_for(&mut self, reason: SyncReason) -> Result<(), LogError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        match self.begin_sync() {
            None => Ok(()),
            Some(mut job) => {
                job.reason = reason;
                let r = job.run().await;
                self.finish_sync(job, r)
            }
        }
    }

    /// What a clean close would write in `.clean_shutdown` now.
    fn clean_state(&self) -> CleanState {
        let active = self.active();
        CleanState {
            active_base: active.base_offset,
            active_size: active.size,
            next_offset: active.next_offset,
            first_timestamp: self.active_first_timestamp,
            max_timestamp: active.max_timestamp,
            offset_of_max_timestamp: active.offset_of_max_timestamp,
            segment_count: self.segments.len() as u64,
            bases_hash: checkpoint::bases_hash(self.segments.iter().map(|s| s.base_offset)),
        }
    }

    /// Clean shutdown: final time-index entry and trimmed indexes on the active segment,
    /// everything synced, recovery point at the end, then the clean-shutdown marker (durable).
    /// A log opened clean and left as it was (an idle partition) does nothing: its marker
    /// still says it all.
    pub async fn close(self) -> Result<(), LogError> {
        let Some(mut log) = self.close_begin()? else {
            return Ok(());
        };
        log.sync_for(SyncReason::OpenClose).await?;
        log.close_end()?;
        fsyncs::attribute(SyncReason::OpenClose, 1);
        log.env
            .disk
            .sync_dir(&log.dir)
            .await
            .map_err(|e| LogError::io("sync dir", &log.dir, e))
    }

    /// A shard's clean shutdown: `close` of every log in `logs`, with each log's fdatasyncs
    /// and directory fsync replaced by two syncs of the file system (`Disk::sync_fs`): one
    /// after every log's final writes (trimmed indexes and `.log`), before any recovery point
    /// or marker names them, and one after the markers. 100,000 logs written once closed in
    /// 15 s this way against 34-69 s one by one with their own syncs (four to five per log;
    /// ARCHITECTURE.md, "Idle partitions"). A log that fails to close is logged and left to
    /// recovery at the next start; a failed file-system sync leaves every log without its
    /// marker (all recover).
    pub async fn close_all(logs: Vec<PartitionLog>) {
        let started = std::time::Instant::now();
        let mut closing = Vec::with_capacity(logs.len());
        for (n, log) in logs.into_iter().enumerate() {
            let_dropped_files_close(n).await;
            let dir = log.dir.clone();
            match log.close_begin() {
                Ok(Some(mut log)) => {
                    // The file-system syncs make its writes durable, so the files need not
                    // stay open until then: a shard's logs holding them together passed the
                    // fd limit (10,000 logs written once, under 20,000 fds).
                    log.unsynced.clear();
                    closing.push(log);
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(dir = %dir.display(), %error, "closing a log failed")
                }
            }
        }
        let Some(first) = closing.first() else {
            return;
        };
        let disk = first.env.disk.clone();
        // The file systems holding the logs (the data directory's, unless a partition
        // directory is linked elsewhere), each with a directory on it to name it by.
        let mut roots: Vec<(u64, PathBuf)> = Vec::new();
        for log in &closing {
            match disk.file_system_of(&log.dir) {
                Ok(id) if !roots.iter().any(|(known, _)| *known == id) => {
                    roots.push((id, log.dir.clone()))
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(dir = %log.dir.display(), %error, "syncing the file system at shutdown failed; its logs are recovered at the next start");
                    return;
                }
            }
        }
        let roots: Vec<PathBuf> = roots.into_iter().map(|(_, dir)| dir).collect();
        let sync_all = |step: &'static str| {
            let disk = disk.clone();
            let roots = roots.clone();
            async move {
                for root in &roots {
                    fsyncs::attribute(SyncReason::OpenClose, 1);
                    if let Err(error) = disk.sync_fs(root).await {
                        tracing::warn!(root = %root.display(), %error, step, "syncing the file system at shutdown failed; its logs are recovered at the next start");
                        return false;
                    }
                }
                true
            }
        };
        let written = started.elapsed();
        if !sync_all("before the recovery points").await {
            return;
        }
        let synced = started.elapsed();
        let count = closing.len();
        for (n, mut log) in closing.into_iter().enumerate() {
            let_dropped_files_close(n).await;
            // Everything written is durable now (the file system sync above).
            log.active_dirty = false;
            log.dir_dirty = false;
            log.durable_offset = log.log_end_offset();
            if let Err(error) = log.close_end() {
                tracing::warn!(dir = %log.dir.display(), %error, "closing a log failed");
            }
        }
        let marked = started.elapsed();
        sync_all("after the clean-shutdown markers").await;
        tracing::info!(
            logs = count,
            final_writes_ms = written.as_millis(),
            first_sync_ms = (synced - written).as_millis(),
            markers_ms = (marked - synced).as_millis(),
            second_sync_ms = (started.elapsed() - marked).as_millis(),
            "closed logs together"
        );
    }

    /// `close` up to its syncs: the active segment made inactive (final time-index entry,
    /// trimmed indexes, the preallocation cut) and every file to sync listed. None: nothing
    /// to write (a log opened clean and left as it was).
    fn close_begin(mut self) -> Result<Option<PartitionLog>, LogError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        if !self.is_dirty() && self.clean_on_disk == Some(self.clean_state()) {
            return Ok(None);
        }
        let disk = self.env.disk.clone();
        let active = self.active_mut();
        active.make_inactive()?;
        let txn_path = active.txn_index.path().to_path_buf();
        let saved = [
            active.index.inner.take_saved(),
            active.time_index.inner.take_saved(),
            active
                .txn_index
                .take_unsynced(&disk)
                .map_err(|e| LogError::io("open", &txn_path, e))?,
        ];
        self.unsynced.extend(saved.into_iter().flatten());
        self.active_dirty = true;
        Ok(Some(self))
    }

    /// `close` after its syncs (everything written is durable): the recovery point at the
    /// end, the producer state, and the clean-shutdown marker, none synced here.
    fn close_end(&mut self) -> Result<(), LogError> {
        let cp = Checkpoint {
            next_offset: self.log_end_offset(),
            segment_base: self.active().base_offset,
            position: self.active().size,
        };
        self.write_checkpoint(cp)?;
        // The state at the log end, so the next open walks no batch headers.
        self.write_producer_snapshot(self.log_end_offset());
        let marker = checkpoint::clean_marker(&self.dir);
        self.env
            .disk
            .write_file(&marker, &self.clean_state().encode())
            .map_err(|e| LogError::io("create", &marker, e))?;
        Ok(())
    }

    /// Writes `<offset>.snapshot` (the state after every batch below `offset`): tmp file, then
    /// rename. Not fdatasynced: a snapshot torn by a power loss fails its CRC and the next open
    /// falls back to an older snapshot or the log itself, so a failure here only costs time at
    /// the next start and is logged, not returned.
    pub(super) fn write_producer_snapshot(&self, offset: i64) {
        let path = snapshot_path(&self.dir, offset);
        let tmp = path.with_extension("snapshot.tmp");
        let bytes = self.producers.to_snapshot();
        let disk = &self.env.disk;
        let written = disk
            .write_file(&tmp, &bytes)
            .and_then(|()| disk.rename(&tmp, &path));
        if let Err(error) = written {
            tracing::warn!(path = %path.display(), %error, "producer state snapshot not written");
        }
    }
}

//! The durable Raft log of one quorum voter, on `storage::Disk` (the real disk in production,
//! `SimDisk` in the simulation).
//!
//! What it holds: the entries (term, index, type, data), the `HardState` (term, vote,
//! commit), the `ConfState`, and the latest snapshot (metadata and the state machine's opaque
//! bytes). `raft::Storage` is answered from an in-memory mirror of all of it: the metadata
//! log is small, and snapshots bound it (the node compacts every N applied entries).
//!
//! On disk: one file, `raft.log`, a sequence of frames
//! `magic "RQ" | payload length u32 LE | CRC-32C u32 LE | kind u8 | payload`, the CRC over
//! the length, kind and payload. The payload is the protobuf encoding of an `Entry`,
//! `HardState`, `ConfState` or `Snapshot` (raft's own types, so nothing is lost between
//! raft and the disk). Replay applies frames in order:
//! - an entry at index `i` replaces the suffix from `i` on (raft's truncation of a conflicting
//!   suffix is logical: the file is only ever appended to, never overwritten in place, so a
//!   power loss can never mix a new entry's bytes with an old one's);
//! - a snapshot frame (a snapshot received from the leader) discards every entry and starts
//!   the log after the snapshot, as raft's `MemStorage::apply_snapshot` does;
//! - hard state and conf state frames replace the current ones.
//!
//! Compaction (the node's own snapshot) rewrites the file as `snapshot | conf state | hard
//! state | entries after the snapshot` through `Disk::write_file_durable` (temporary file,
//! fdatasync, rename, directory fsync), so a crash leaves the old file or the new one.
//!
//! Durability: every call that changes the log writes its frames with ONE write and
//! fdatasyncs before returning. So at any moment at most one write is unsynced, and a power
//! loss can only tear or drop the tail that write covered. Recovery relies on that: the first
//! invalid frame is a torn tail (truncated, then synced) only if no valid frame follows it;
//! a valid frame after an invalid one is corruption in the middle of synced data, reported as
//! `LogStoreError::Corrupt` (never silently dropped). Recovery also fdatasyncs the whole file
//! at open: after a kill -9 the page cache may hold a written-but-unsynced append, and raft
//! will treat everything it reads back as persisted (and ack it), so it must be durable
//! before raft sees it. Last check: the recovered log must reach the hard state's commit
//! index, else committed entries are missing (`CommitBeyondLog`).
//!
//! The commit index that raft's light ready moves is kept in memory (`set_commit`) and
//! reaches the disk with the next write: losing it only makes a restarted voter re-learn the
//! commit from the leader; raft itself never needs it durable for safety.

use std::path::{Path, PathBuf};

use protobuf::Message as _;
use raft::eraftpb::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, StorageError};
use storage::{Disk, File};

/// The largest entry (data plus context): a metadata record batch, never a bulk payload.
pub const MAX_ENTRY_BYTES: usize = 1 << 20;
/// The largest state-machine snapshot: the whole metadata image.
pub const MAX_SNAPSHOT_BYTES: usize = 64 << 20;
/// The largest frame payload: a snapshot with its metadata (the conf state's voter list).
pub const MAX_FRAME_PAYLOAD_BYTES: usize = MAX_SNAPSHOT_BYTES + 64 * 1024;
/// The largest log file: a snapshot and the entries between two compactions, with room for
/// superseded suffixes. Writes that would pass it are refused (`LogFull`), so a reopen never
/// meets a file it refuses to read.
pub const MAX_LOG_FILE_BYTES: u64 = 1 << 30;
/// The node compacts as soon as the file passes this, whatever `snapshot_every` says.
pub const COMPACT_AT_FILE_BYTES: u64 = MAX_LOG_FILE_BYTES / 4;

/// The file's name in the store's directory.
pub const LOG_FILE: &str = "raft.log";
const MAGIC: [u8; 2] = *b"RQ";
/// magic (2) + length (4) + CRC (4) + kind (1).
const HEADER_BYTES: usize = 11;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum FrameKind {
    Entry = 1,
    HardState = 2,
    ConfState = 3,
    Snapshot = 4,
}

impl FrameKind {
    fn from_u8(b: u8) -> Option<FrameKind> {
        Some(match b {
            1 => FrameKind::Entry,
            2 => FrameKind::HardState,
            3 => FrameKind::ConfState,
            4 => FrameKind::Snapshot,
            _ => return None,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LogStoreError {
    #[error("raft log i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("raft log {path} is corrupt at byte {offset}: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("raft log {path} is {len} bytes, over the {max} byte bound")]
    FileTooLarge { path: PathBuf, len: u64, max: u64 },
    #[error("hard state commit {commit} is past the recovered log's last index {last_index}: committed entries are missing")]
    CommitBeyondLog { commit: u64, last_index: u64 },
    #[error("entry {index} is {bytes} bytes, over the {max} byte bound")]
    EntryTooLarge {
        index: u64,
        bytes: usize,
        max: usize,
    },
    #[error("snapshot is {bytes} bytes, over the {max} byte bound")]
    SnapshotTooLarge { bytes: usize, max: usize },
    #[error("entries from index {first} do not continue a log of [{first_index}, {last_index}] (or are not consecutive)")]
    NotContiguous {
        first: u64,
        first_index: u64,
        last_index: u64,
    },
    #[error("snapshot at index {index} is older than the one held at {held}")]
    SnapshotOutOfDate { index: u64, held: u64 },
    #[error("cannot compact to index {index} term {term}: the log holds [{first_index}, {last_index}] with another term there")]
    BadCompaction {
        index: u64,
        term: u64,
        first_index: u64,
        last_index: u64,
    },
    #[error(
        "raft log would grow to {len} bytes, over the {max} byte bound (compaction is behind)"
    )]
    LogFull { len: u64, max: u64 },
    #[error("cannot encode a raft record: {0}")]
    Encode(String),
    #[error("a previous write to the raft log failed; reopen the store")]
    Poisoned,
}

pub type Result<T> = std::result::Result<T, LogStoreError>;

/// The in-memory mirror (what a replay of the file yields).
#[derive(Default, Clone, Debug, PartialEq)]
struct Mirror {
    hard_state: HardState,
    conf_state: ConfState,
    /// The latest snapshot; index 0 before the first one.
    snapshot: Snapshot,
    /// Entries from `snapshot index + 1` on, consecutive.
    entries: Vec<Entry>,
}

impl Mirror {
    fn snap_meta(&self) -> &SnapshotMetadata {
        self.snapshot.get_metadata()
    }
    fn first_index(&self) -> u64 {
        self.snap_meta().index + 1
    }
    fn last_index(&self) -> u64 {
        self.snap_meta().index + self.entries.len() as u64
    }
    fn term(&self, idx: u64) -> Option<u64> {
        let snap = self.snap_meta();
        if idx == snap.index {
            return Some(snap.term);
        }
        if idx < snap.index || idx > self.last_index() {
            return None;
        }
        Some(self.entries[(idx - snap.index - 1) as usize].term)
    }

    /// Entries replacing the suffix from their first index (checked by the caller).
    fn splice(&mut self, ents: &[Entry]) {
        if let Some(first) = ents.first() {
            let keep = (first.index - self.first_index()) as usize;
            self.entries.truncate(keep);
            self.entries.extend_from_slice(ents);
        }
    }

    /// Checks that `ents` may be spliced: consecutive, starting inside or right after the
    /// log (never below the snapshot), each within its size bound.
    fn check_append(&self, ents: &[Entry]) -> Result<()> {
        let Some(first) = ents.first() else {
            return Ok(());
        };
        let contiguous = first.index >= self.first_index()
            && first.index <= self.last_index() + 1
            && ents.windows(2).all(|w| w[1].index == w[0].index + 1);
        if !contiguous {
            return Err(LogStoreError::NotContiguous {
                first: first.index,
                first_index: self.first_index(),
                last_index: self.last_index(),
            });
        }
        for e in ents {
            let bytes = e.data.len() + e.context.len();
            if bytes > MAX_ENTRY_BYTES {
                return Err(LogStoreError::EntryTooLarge {
                    index: e.index,
                    bytes,
                    max: MAX_ENTRY_BYTES,
                });
            }
        }
        Ok(())
    }

    /// A snapshot received from the leader: the log restarts after it.
    fn install_snapshot(&mut self, snap: Snapshot) {
        let meta = snap.get_metadata();
        self.hard_state.term = self.hard_state.term.max(meta.term);
        self.hard_state.commit = self.hard_state.commit.max(meta.index);
        self.conf_state = meta.get_conf_state().clone();
        self.entries.clear();
        self.snapshot = snap;
    }
}

/// The durable Raft log (see the module comment). Owned by one `QuorumNode` (inside its
/// `RawNode`); single-threaded like a shard.
pub struct LogStore {
    disk: Disk,
    dir: PathBuf,
    path: PathBuf,
    file: File,
    /// Bytes of valid frames in the file: where the next write goes.
    len: u64,
    mirror: Mirror,
    /// The mirror's hard state differs from the last one written (`set_commit`).
    hard_state_dirty: bool,
    /// A write or sync failed: what is on disk is unknown, nothing more may be written.
    poisoned: bool,
}

/// The outcome of reading the file: the mirror and the length of its valid frames.
struct Replay {
    mirror: Mirror,
    valid_len: u64,
}

impl LogStore {
    /// Opens (or creates) the log in `dir`. A new log starts with `voters` as its conf state
    /// (written and synced before this returns); an existing one ignores `voters`.
    pub async fn open(disk: &Disk, dir: &Path, voters: &[u64]) -> Result<LogStore> {
        // The directory and every ancestor are made durable in their parents, top down, at
        // every open, not only when this open created them: an earlier open may have created
        // them (or the file, or renamed a compaction into place) and failed before its sync,
        // and the page cache now shows them as if they were durable.
        disk.create_dir_all(dir)?;
        let ancestors: Vec<&Path> = dir
            .ancestors()
            .skip(1)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        for (i, parent) in ancestors.iter().enumerate().rev() {
            match disk.sync_dir(parent).await {
                Ok(()) => {}
                // A directory far above the log may not be ours to open (a home directory
                // with mode 711); only the log's own parent must be synced.
                Err(e) if i > 0 && e.kind() == std::io::ErrorKind::PermissionDenied => {
                    tracing::warn!(dir = %parent.display(), "raft log: cannot sync an ancestor directory: {e}");
                }
                Err(e) => return Err(e.into()),
            }
        }
        let path = dir.join(LOG_FILE);
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        if disk.exists(&tmp) {
            // A compaction that did not reach its rename: the old file is the log.
            disk.remove_file(&tmp)?;
        }
        let (file, file_len) = disk.open(&path, true)?;
        if file_len > MAX_LOG_FILE_BYTES {
            return Err(LogStoreError::FileTooLarge {
                path,
                len: file_len,
                max: MAX_LOG_FILE_BYTES,
            });
        }
        let bytes = disk.read_file(&path)?;
        let replay = replay(&path, &bytes)?;
        if replay.valid_len < bytes.len() as u64 {
            tracing::warn!(
                path = %path.display(),
                valid = replay.valid_len,
                len = bytes.len(),
                "raft log: truncating a torn tail"
            );
            file.truncate(replay.valid_len)?;
        }
        // Whatever raft reads back counts as persisted: make it so (see the module comment).
        file.fdatasync().await?;
        disk.sync_dir(dir).await?;
        let mut store = LogStore {
            disk: disk.clone(),
            dir: dir.to_path_buf(),
            path,
            file,
            len: replay.valid_len,
            mirror: replay.mirror,
            hard_state_dirty: false,
            poisoned: false,
        };
        if store.len == 0 {
            let cs = ConfState {
                voters: voters.to_vec(),
                ..Default::default()
            };
            let mut buf = Vec::new();
            push_frame(&mut buf, FrameKind::ConfState, &encode(&cs)?)?;
            store.write_synced(&buf).await?;
            store.mirror.conf_state = cs;
        }
        Ok(store)
    }

    pub fn hard_state(&self) -> &HardState {
        &self.mirror.hard_state
    }
    pub fn conf_state(&self) -> &ConfState {
        &self.mirror.conf_state
    }
    /// The latest snapshot (index 0: none yet).
    pub fn snapshot_ref(&self) -> &Snapshot {
        &self.mirror.snapshot
    }
    pub fn first_index(&self) -> u64 {
        self.mirror.first_index()
    }
    pub fn last_index(&self) -> u64 {
        self.mirror.last_index()
    }
    /// The term of entry `idx` (or of the snapshot's last entry), if held.
    pub fn term_of(&self, idx: u64) -> Option<u64> {
        self.mirror.term(idx)
    }
    /// The entries held, from `first_index()` on.
    pub fn entries_held(&self) -> &[Entry] {
        &self.mirror.entries
    }
    /// Bytes of valid frames in the file.
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// Appends `entries` (replacing a conflicting suffix from their first index on) and
    /// `hard_state` if given, with one write and one fdatasync.
    pub async fn persist(
        &mut self,
        entries: &[Entry],
        hard_state: Option<&HardState>,
    ) -> Result<()> {
        self.check_live()?;
        self.mirror.check_append(entries)?;
        // Validated above, so the mirror is only changed once the write is durable (and the
        // mirror is never cloned: it holds the snapshot and every entry since).
        let mut buf = Vec::new();
        for e in entries {
            push_frame(&mut buf, FrameKind::Entry, &encode(e)?)?;
        }
        let hs = hard_state.unwrap_or(&self.mirror.hard_state);
        if hard_state.is_some() || self.hard_state_dirty {
            push_frame(&mut buf, FrameKind::HardState, &encode(hs)?)?;
        }
        if buf.is_empty() {
            return Ok(());
        }
        self.write_synced(&buf).await?;
        self.mirror.splice(entries);
        if let Some(hs) = hard_state {
            self.mirror.hard_state = hs.clone();
        }
        self.hard_state_dirty = false;
        Ok(())
    }

    /// Appends entries durably (see `persist`).
    pub async fn append(&mut self, entries: &[Entry]) -> Result<()> {
        self.persist(entries, None).await
    }

    /// Sets the hard state durably.
    pub async fn set_hard_state(&mut self, hs: &HardState) -> Result<()> {
        self.persist(&[], Some(hs)).await
    }

    /// Records a commit index in memory only; it is written with the next write (see the
    /// module comment). Never moves the commit backwards.
    pub fn set_commit(&mut self, commit: u64) {
        if commit > self.mirror.hard_state.commit {
            self.mirror.hard_state.commit = commit;
            self.hard_state_dirty = true;
        }
    }

    /// Installs a snapshot received from the leader, durably: the log restarts after it.
    pub async fn apply_snapshot(&mut self, snap: Snapshot) -> Result<()> {
        self.check_live()?;
        check_snapshot_size(&snap)?;
        let held = self.mirror.snap_meta().index;
        let index = snap.get_metadata().index;
        if index < held {
            return Err(LogStoreError::SnapshotOutOfDate { index, held });
        }
        let mut hs = self.mirror.hard_state.clone();
        hs.term = hs.term.max(snap.get_metadata().term);
        hs.commit = hs.commit.max(index);
        let mut buf = Vec::new();
        push_frame(&mut buf, FrameKind::Snapshot, &encode(&snap)?)?;
        push_frame(&mut buf, FrameKind::HardState, &encode(&hs)?)?;
        self.write_synced(&buf).await?;
        self.mirror.install_snapshot(snap);
        debug_assert_eq!(self.mirror.hard_state, hs, "replay computes the same");
        self.hard_state_dirty = false;
        Ok(())
    }

    /// Replaces everything up to `index` (which must be held, with term `term`) with a
    /// snapshot of the state machine there, and rewrites the file without the compacted
    /// entries (atomically: see the module comment). `index` must not pass what the state
    /// machine applied (the caller's duty, as in raft's `MemStorage::compact`).
    pub async fn compact(&mut self, index: u64, term: u64, data: Vec<u8>) -> Result<()> {
        self.check_live()?;
        if data.len() > MAX_SNAPSHOT_BYTES {
            return Err(LogStoreError::SnapshotTooLarge {
                bytes: data.len(),
                max: MAX_SNAPSHOT_BYTES,
            });
        }
        let held = self.mirror.snap_meta().index;
        if index < held
            || self.mirror.term(index) != Some(term)
            || index > self.mirror.hard_state.commit
        {
            return Err(LogStoreError::BadCompaction {
                index,
                term,
                first_index: self.first_index(),
                last_index: self.last_index(),
            });
        }
        let mut snap = Snapshot {
            data: data.into(),
            ..Default::default()
        };
        let meta = snap.mut_metadata();
        meta.index = index;
        meta.term = term;
        meta.set_conf_state(self.mirror.conf_state.clone());
        let kept = &self.mirror.entries[(index - held) as usize..];
        let mut buf = Vec::new();
        push_frame(&mut buf, FrameKind::Snapshot, &encode(&snap)?)?;
        push_frame(
            &mut buf,
            FrameKind::ConfState,
            &encode(&self.mirror.conf_state)?,
        )?;
        push_frame(
            &mut buf,
            FrameKind::HardState,
            &encode(&self.mirror.hard_state)?,
        )?;
        for e in kept {
            push_frame(&mut buf, FrameKind::Entry, &encode(e)?)?;
        }
        self.poisoned = true; // until the new file is in place and open
        self.disk.write_file_durable(&self.path, &buf).await?;
        let (file, len) = self.disk.open(&self.path, false)?;
        debug_assert_eq!(len, buf.len() as u64);
        self.file = file;
        self.len = buf.len() as u64;
        self.mirror.entries.drain(..(index - held) as usize);
        self.mirror.snapshot = snap;
        self.hard_state_dirty = false;
        self.poisoned = false;
        Ok(())
    }

    /// The directory the log lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn check_live(&self) -> Result<()> {
        if self.poisoned {
            return Err(LogStoreError::Poisoned);
        }
        Ok(())
    }

    /// One write at the end of the valid frames, then fdatasync. Any failure poisons the
    /// store: the file's tail is unknown until a reopen recovers it.
    async fn write_synced(&mut self, buf: &[u8]) -> Result<()> {
        let len = self.len + buf.len() as u64;
        if len > MAX_LOG_FILE_BYTES {
            return Err(LogStoreError::LogFull {
                len,
                max: MAX_LOG_FILE_BYTES,
            });
        }
        self.poisoned = true;
        self.file.write_at(buf, self.len)?;
        self.file.fdatasync().await?;
        self.len += buf.len() as u64;
        self.poisoned = false;
        Ok(())
    }
}

fn check_snapshot_size(snap: &Snapshot) -> Result<()> {
    if snap.data.len() > MAX_SNAPSHOT_BYTES {
        return Err(LogStoreError::SnapshotTooLarge {
            bytes: snap.data.len(),
            max: MAX_SNAPSHOT_BYTES,
        });
    }
    Ok(())
}

fn encode<M: protobuf::Message>(m: &M) -> Result<Vec<u8>> {
    m.write_to_bytes()
        .map_err(|e| LogStoreError::Encode(e.to_string()))
}

fn frame_crc(len: u32, kind: u8, payload: &[u8]) -> u32 {
    let c = crc32c::crc32c(&len.to_le_bytes());
    let c = crc32c::crc32c_append(c, &[kind]);
    crc32c::crc32c_append(c, payload)
}

fn push_frame(buf: &mut Vec<u8>, kind: FrameKind, payload: &[u8]) -> Result<()> {
    if payload.len() > MAX_FRAME_PAYLOAD_BYTES {
        return Err(LogStoreError::SnapshotTooLarge {
            bytes: payload.len(),
            max: MAX_FRAME_PAYLOAD_BYTES,
        });
    }
    let len = payload.len() as u32;
    buf.extend_from_slice(&MAGIC);
    buf.extend_from_slice(&len.to_le_bytes());
    buf.extend_from_slice(&frame_crc(len, kind as u8, payload).to_le_bytes());
    buf.push(kind as u8);
    buf.extend_from_slice(payload);
    Ok(())
}

/// A frame that checks out at `pos`: its kind, payload and end.
fn parse_frame(bytes: &[u8], pos: usize) -> Option<(FrameKind, &[u8], usize)> {
    let header = bytes.get(pos..pos + HEADER_BYTES)?;
    if header[0..2] != MAGIC {
        return None;
    }
    let len = u32::from_le_bytes(header[2..6].try_into().ok()?);
    if len as usize > MAX_FRAME_PAYLOAD_BYTES {
        return None;
    }
    let crc = u32::from_le_bytes(header[6..10].try_into().ok()?);
    let kind = FrameKind::from_u8(header[10])?;
    let end = pos + HEADER_BYTES + len as usize;
    let payload = bytes.get(pos + HEADER_BYTES..end)?;
    (frame_crc(len, kind as u8, payload) == crc).then_some((kind, payload, end))
}

/// Replays the frames of `bytes` (see the module comment for the rules and for why a valid
/// frame after an invalid one is corruption rather than a torn tail).
fn replay(path: &Path, bytes: &[u8]) -> Result<Replay> {
    let mut mirror = Mirror::default();
    let mut pos = 0usize;
    let corrupt = |offset: usize, reason: String| LogStoreError::Corrupt {
        path: path.to_path_buf(),
        offset: offset as u64,
        reason,
    };
    while pos < bytes.len() {
        let Some((kind, payload, end)) = parse_frame(bytes, pos) else {
            // Torn tail, unless a valid frame follows somewhere.
            if let Some(q) = (pos + 1..bytes.len()).find(|&q| parse_frame(bytes, q).is_some()) {
                return Err(corrupt(
                    pos,
                    format!("invalid frame followed by a valid one at byte {q}"),
                ));
            }
            break;
        };
        let bad = |what: &str, e: protobuf::ProtobufError| corrupt(pos, format!("{what}: {e}"));
        match kind {
            FrameKind::Entry => {
                let e = Entry::parse_from_bytes(payload).map_err(|e| bad("entry", e))?;
                if mirror.check_append(std::slice::from_ref(&e)).is_err() {
                    return Err(corrupt(
                        pos,
                        format!(
                            "entry {} does not continue the log [{}, {}]",
                            e.index,
                            mirror.first_index(),
                            mirror.last_index()
                        ),
                    ));
                }
                let prev_term = mirror.term(e.index - 1).unwrap_or(0);
                if e.term < prev_term {
                    return Err(corrupt(
                        pos,
                        format!("entry {} term {} after term {prev_term}", e.index, e.term),
                    ));
                }
                mirror.splice(std::slice::from_ref(&e));
            }
            FrameKind::HardState => {
                mirror.hard_state =
                    HardState::parse_from_bytes(payload).map_err(|e| bad("hard state", e))?;
            }
            FrameKind::ConfState => {
                mirror.conf_state =
                    ConfState::parse_from_bytes(payload).map_err(|e| bad("conf state", e))?;
            }
            FrameKind::Snapshot => {
                let snap = Snapshot::parse_from_bytes(payload).map_err(|e| bad("snapshot", e))?;
                mirror.install_snapshot(snap);
            }
        }
        pos = end;
    }
    let last_index = mirror.last_index();
    if mirror.hard_state.commit > last_index {
        return Err(LogStoreError::CommitBeyondLog {
            commit: mirror.hard_state.commit,
            last_index,
        });
    }
    Ok(Replay {
        mirror,
        valid_len: pos as u64,
    })
}

fn store_err(e: StorageError) -> raft::Error {
    raft::Error::Store(e)
}

impl raft::Storage for LogStore {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(
            self.mirror.hard_state.clone(),
            self.mirror.conf_state.clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let m = &self.mirror;
        if low < m.first_index() {
            return Err(store_err(StorageError::Compacted));
        }
        if high > m.last_index() + 1 || low > high {
            return Err(store_err(StorageError::Unavailable));
        }
        let offset = m.first_index();
        let mut ents = m.entries[(low - offset) as usize..(high - offset) as usize].to_vec();
        raft::util::limit_size(&mut ents, max_size.into());
        Ok(ents)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let m = &self.mirror;
        if idx < m.snap_meta().index {
            return Err(store_err(StorageError::Compacted));
        }
        m.term(idx)
            .ok_or_else(|| store_err(StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.mirror.first_index())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.mirror.last_index())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let snap = &self.mirror.snapshot;
        if snap.get_metadata().index < request_index {
            return Err(store_err(StorageError::SnapshotTemporarilyUnavailable));
        }
        Ok(snap.clone())
    }
}

#[cfg(test)]
mod tests;

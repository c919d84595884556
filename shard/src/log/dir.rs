//! Identity and deletion of partition directories.
//!
//! `partition.metadata` (Kafka's `PartitionMetadataFile`): `version: 0\ntopic_id: <id>\n`,
//! the id as Kafka prints a `Uuid` (URL-safe base64, no padding, 22 characters). It is what
//! lets a topic re-created under the same name tell the old topic's directory from its own:
//! directory names carry only the topic name.
//!
//! Deletion is Kafka's: the directory is first renamed to `<topic>-<partition>.<unique>-delete`
//! (one atomic, durable step: once it is done the partition is gone, whatever happens next),
//! then its files are removed. A crash in between leaves a `*-delete` directory, which the
//! next start-up removes (`remove_deleted_dirs`); it is never opened as a partition.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use super::LogError;
use crate::storage::Disk;

/// Kafka's topic id (a UUID), as in the metadata log's records.
pub use wire::TopicId;

pub(crate) const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// Suffix of a directory being deleted (Kafka's `LocalLog.DeleteDirSuffix`).
pub const DELETE_DIR_SUFFIX: &str = "-delete";

/// Longest file name the usual Linux file systems take; the topic part of a delete-dir name
/// is cut to fit it, as Kafka does.
const MAX_NAME_BYTES: usize = 255;

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// A topic id as Kafka prints it (`Uuid.toString`): URL-safe base64 without padding.
pub fn encode_topic_id(id: &TopicId) -> String {
    let mut out = String::with_capacity(22);
    for chunk in id.chunks(3) {
        let mut b = [0u8; 3];
        b[..chunk.len()].copy_from_slice(chunk);
        let n = u32::from_be_bytes([0, b[0], b[1], b[2]]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// Inverse of `encode_topic_id` (None unless exactly 22 valid characters).
pub fn decode_topic_id(s: &str) -> Option<TopicId> {
    let s = s.as_bytes();
    if s.len() != 22 {
        return None;
    }
    let mut bits: u32 = 0;
    let mut nbits = 0;
    let mut out = Vec::with_capacity(16);
    for &c in s {
        let v = B64.iter().position(|&b| b == c)? as u32;
        bits = (bits << 6) | v;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push((bits >> nbits) as u8);
            bits &= (1 << nbits) - 1;
        }
    }
    // 22 * 6 = 132 bits: the 4 left over must be zero in a canonical encoding.
    if bits != 0 {
        return None;
    }
    out.try_into().ok()
}

/// The topic id recorded in `dir`, `None` when there is no `partition.metadata` (a new
/// directory, or one written before the file existed). A file that does not parse is an
/// error: guessing could hand one topic's data to another.
pub(crate) fn read_topic_id(disk: &Disk, dir: &Path) -> Result<Option<TopicId>, LogError> {
    let path = dir.join(PARTITION_METADATA_FILE);
    let text = match disk.read_file(&path) {
        Ok(t) => String::from_utf8_lossy(&t).into_owned(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io("read", &path, e)),
    };
    let mut version = None;
    let mut topic_id = None;
    for line in text.lines() {
        // Kafka splits on ":\s+".
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k.trim() {
            "version" => version = Some(v.trim().to_string()),
            "topic_id" => topic_id = decode_topic_id(v.trim()),
            _ => {}
        }
    }
    match (version.as_deref(), topic_id) {
        (Some("0"), Some(id)) => Ok(Some(id)),
        _ => Err(LogError::Corrupt {
            path,
            position: 0,
            reason: format!("unreadable partition metadata {text:?}"),
        }),
    }
}

/// Writes `partition.metadata` durably: temp file, fsync, rename, fsync of `dir`. Written once
/// per directory, before any segment, so a crash leaves either no file or a whole one.
pub(crate) async fn write_topic_id(disk: &Disk, dir: &Path, id: &TopicId) -> Result<(), LogError> {
    let path = dir.join(PARTITION_METADATA_FILE);
    let text = format!("version: 0\ntopic_id: {}\n", encode_topic_id(id));
    // Its fdatasync and the directory's fsync.
    crate::fsyncs::attribute(crate::fsyncs::SyncReason::PartitionCreate, 2);
    disk.write_file_durable(&path, text.as_bytes())
        .await
        .map_err(|e| LogError::io("write", &path, e))
}

/// `<topic>-<partition>.<unique>-delete` for the directory named `name`; the name part is cut
/// (at a char boundary) so the whole fits in `MAX_NAME_BYTES`.
fn delete_dir_name(name: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    // 32 hex digits like Kafka's dash-less random UUID; unique per process by the counter,
    // across restarts by the clock.
    let suffix = format!(
        ".{:024x}{:08x}{DELETE_DIR_SUFFIX}",
        nanos & ((1u128 << 96) - 1),
        count
    );
    let mut keep = name.len().min(MAX_NAME_BYTES - suffix.len());
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{suffix}", &name[..keep])
}

/// Deletes a partition directory the crash-safe way: rename to a `*-delete` name, make the
/// rename durable (fsync of the parent), then remove the files. Open fds (reads in flight)
/// keep working on the unlinked files. A directory that does not exist is not an error.
pub async fn delete_partition_dir(dir: &Path) -> Result<(), LogError> {
    delete_partition_dir_on(&Disk::Real, dir).await
}

/// `delete_partition_dir` on the given disk.
pub async fn delete_partition_dir_on(disk: &Disk, dir: &Path) -> Result<(), LogError> {
    let Some(name) = dir.file_name().and_then(|n| n.to_str()) else {
        return Err(LogError::io(
            "delete",
            dir,
            io::Error::new(io::ErrorKind::InvalidInput, "no directory name"),
        ));
    };
    let parent = dir.parent().unwrap_or(Path::new("."));
    let doomed: PathBuf = parent.join(delete_dir_name(name));
    match disk.rename(dir, &doomed) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(LogError::io("rename", dir, e)),
    }
    disk.sync_dir(parent)
        .await
        .map_err(|e| LogError::io("sync dir", parent, e))?;
    disk.remove_dir_all(&doomed)
        .map_err(|e| LogError::io("remove dir", &doomed, e))
}

/// Start-up: removes every `*-delete` directory under `parent` (a deletion interrupted after
/// its rename). Returns how many were removed. One that cannot be removed is logged and
/// skipped: it is never opened as a partition, so it only costs disk space.
pub fn remove_deleted_dirs(parent: &Path) -> Result<usize, LogError> {
    remove_deleted_dirs_on(&Disk::Real, parent)
}

/// `remove_deleted_dirs` on the given disk.
pub fn remove_deleted_dirs_on(disk: &Disk, parent: &Path) -> Result<usize, LogError> {
    let mut removed = 0;
    let entries = disk
        .read_dir(parent)
        .map_err(|e| LogError::io("read dir", parent, e))?;
    for entry in entries {
        let name = &entry.name;
        if !entry.is_dir || !name.ends_with(DELETE_DIR_SUFFIX) || !name.contains('.') {
            continue;
        }
        let path = parent.join(name);
        tracing::warn!(dir = %path.display(), "removing a partition directory whose deletion was interrupted");
        match disk.remove_dir_all(&path) {
            Ok(()) => removed += 1,
            Err(error) => {
                tracing::error!(dir = %path.display(), %error, "cannot remove a deleted partition directory")
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::test_util::{run, tmp};

    #[test]
    fn topic_id_base64_round_trip() {
        let s = "w6GkQtk6TcaLxQVSZ7oCxg";
        let id = decode_topic_id(s).unwrap();
        assert_eq!(encode_topic_id(&id), s);
        let mut id = [0u8; 16];
        id[15] = 1;
        assert_eq!(encode_topic_id(&id), "AAAAAAAAAAAAAAAAAAAAAQ");
        for seed in 0..=255u8 {
            let id: TopicId =
                std::array::from_fn(|i| seed.wrapping_mul(31).wrapping_add(i as u8 * 17));
            assert_eq!(decode_topic_id(&encode_topic_id(&id)), Some(id));
        }
        assert_eq!(decode_topic_id("AAAAAAAAAAAAAAAAAAAAAR"), None); // non-zero tail bits
        assert_eq!(decode_topic_id("short"), None);
        assert_eq!(decode_topic_id("AAAAAAAAAAAAAAAAAAAA+A"), None);
    }

    #[test]
    fn metadata_file_format_and_garbage() {
        run(async {
            let d = tmp();
            let id: TopicId = std::array::from_fn(|i| i as u8);
            assert_eq!(read_topic_id(&Disk::Real, d.path()).unwrap(), None);
            write_topic_id(&Disk::Real, d.path(), &id).await.unwrap();
            let text = std::fs::read_to_string(d.path().join(PARTITION_METADATA_FILE)).unwrap();
            assert_eq!(
                text,
                format!("version: 0\ntopic_id: {}\n", encode_topic_id(&id))
            );
            assert_eq!(read_topic_id(&Disk::Real, d.path()).unwrap(), Some(id));
            // Kafka's newer writer ends without a newline.
            std::fs::write(
                d.path().join(PARTITION_METADATA_FILE),
                format!("version: 0\ntopic_id: {}", encode_topic_id(&id)),
            )
            .unwrap();
            assert_eq!(read_topic_id(&Disk::Real, d.path()).unwrap(), Some(id));
            std::fs::write(d.path().join(PARTITION_METADATA_FILE), "version: 7\n").unwrap();
            assert!(matches!(
                read_topic_id(&Disk::Real, d.path()),
                Err(LogError::Corrupt { .. })
            ));
        });
    }

    #[test]
    fn delete_renames_then_removes_and_startup_sweeps_leftovers() {
        run(async {
            let d = tmp();
            let dir = d.path().join("t-0");
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("00000000000000000000.log"), b"x").unwrap();
            delete_partition_dir(&dir).await.unwrap();
            assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
            delete_partition_dir(&dir).await.unwrap(); // already gone: fine

            // A crash between the rename and the removal leaves this behind.
            let left = d.path().join(delete_dir_name("t-0"));
            assert!(left
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("t-0."));
            std::fs::create_dir(&left).unwrap();
            std::fs::write(left.join("00000000000000000000.log"), b"x").unwrap();
            std::fs::create_dir(d.path().join("keep-0")).unwrap();
            std::fs::write(d.path().join("file-delete"), b"").unwrap();
            assert_eq!(remove_deleted_dirs(d.path()).unwrap(), 1);
            assert!(!left.exists());
            assert!(d.path().join("keep-0").exists() && d.path().join("file-delete").exists());

            let long = "x".repeat(249) + "-17";
            let name = delete_dir_name(&long);
            assert!(name.len() <= MAX_NAME_BYTES && name.ends_with(DELETE_DIR_SUFFIX));
        });
    }
}

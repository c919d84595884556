//! `log-start-offset`: a partition's log start offset when DeleteRecords moved it past the
//! first segment's base offset (Kafka keeps the same fact in the log directory's
//! `log-start-offset-checkpoint`, one line per partition; we keep one small file per
//! partition directory, as the recovery point, so no shard-wide file is shared).
//!
//! Format: Kafka's checkpoint text, `0\n1\n<offset>\n` (version, entry count, the entry).
//! Written to a temporary file, fdatasynced, renamed over the old one and the directory
//! fsynced before DeleteRecords is answered, so an acknowledged deletion survives a crash
//! or a power loss (Kafka writes its checkpoint every 60 s and may lose the last minute).
//! A missing or unreadable file means "the first segment's base offset".

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

pub(crate) const LOG_START_OFFSET_FILE: &str = "log-start-offset";

/// The offset stored in `dir`, if any (unreadable or malformed: none, with a warning).
pub(crate) fn read(dir: &Path) -> Option<i64> {
    let path = dir.join(LOG_START_OFFSET_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "log start offset file unreadable");
            return None;
        }
    };
    let mut lines = text.lines();
    let parsed = match (lines.next(), lines.next(), lines.next()) {
        (Some("0"), Some("1"), Some(offset)) => offset.trim().parse::<i64>().ok(),
        _ => None,
    };
    if parsed.is_none() {
        tracing::warn!(path = %path.display(), "malformed log start offset file ignored");
    }
    parsed.filter(|&o| o >= 0)
}

/// Durably replaces the stored offset (tmp, fdatasync, rename, directory fsync).
pub(crate) fn write(dir: &Path, offset: i64) -> io::Result<()> {
    let path = dir.join(LOG_START_OFFSET_FILE);
    let tmp = dir.join(format!("{LOG_START_OFFSET_FILE}.tmp"));
    {
        let mut f = File::create(&tmp)?;
        f.write_all(format!("0\n1\n{offset}\n").as_bytes())?;
        f.sync_data()?;
    }
    fs::rename(&tmp, &path)?;
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(read(d.path()), None);
        write(d.path(), 42).unwrap();
        assert_eq!(read(d.path()), Some(42));
        write(d.path(), 7).unwrap();
        assert_eq!(read(d.path()), Some(7));
        fs::write(d.path().join(LOG_START_OFFSET_FILE), b"garbage").unwrap();
        assert_eq!(read(d.path()), None);
    }
}

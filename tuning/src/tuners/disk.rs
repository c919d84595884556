//! The data disk: the block device under the data directory (found through
//! /proc/self/mountinfo and /sys/dev/block/MAJ:MIN), its I/O scheduler and queue depth.

use std::path::{Component, Path, PathBuf};

use crate::context::Context;
use crate::finding::{write, Finding, Severity};
use crate::tuners::memory::selected;

/// Requests the block layer may queue: enough for write-back and readahead to stream.
pub const NR_REQUESTS_MIN: u64 = 256;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub device: String,
    pub mount_point: String,
    pub fs_type: String,
    pub source: String,
}

/// mountinfo escapes space, tab, newline and backslash as \ooo.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            let digits = std::str::from_utf8(&bytes[i + 1..i + 4]).unwrap_or("");
            if let Ok(v) = u8::from_str_radix(digits, 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let dash = fields.iter().position(|f| *f == "-")?;
            Some(Mount {
                device: fields.get(2)?.to_string(),
                mount_point: unescape(fields.get(4)?),
                fs_type: fields.get(dash + 1)?.to_string(),
                source: fields.get(dash + 2).unwrap_or(&"").to_string(),
            })
        })
        .collect()
}

/// The mount holding `path`: the longest mount point above it; the last of equals wins
/// (a later mount on the same point hides the earlier).
pub fn mount_of<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    let mut best: Option<&Mount> = None;
    for mount in mounts {
        if path.starts_with(&mount.mount_point)
            && !matches!(best, Some(b) if mount.mount_point.len() < b.mount_point.len())
        {
            best = Some(mount);
        }
    }
    best
}

/// The data directory as an absolute path on the checked system. On the real machine it is
/// resolved (symlinks, "..") from its nearest existing ancestor, since it may not exist yet.
fn absolute_data_dir(ctx: &Context) -> PathBuf {
    let dir = &ctx.data_dir;
    if !ctx.root.is_system() {
        return Path::new("/").join(dir);
    }
    let absolute = std::env::current_dir()
        .map(|cwd| cwd.join(dir))
        .unwrap_or(dir.clone());
    let mut existing = absolute.clone();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_owned());
                existing = parent.to_path_buf();
            }
            _ => return absolute,
        }
    }
    let mut resolved = std::fs::canonicalize(&existing).unwrap_or(existing);
    for name in rest.iter().rev() {
        resolved.push(name);
    }
    resolved
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

pub fn disk(ctx: &Context) -> Vec<Finding> {
    let data_dir = absolute_data_dir(ctx);
    let scheduler = Finding::new("disk", "data disk scheduler")
        .reason("merging and reordering belong to the device on SSDs; deadline on spinning disks");
    let mounts = match ctx.root.read("/proc/self/mountinfo") {
        Ok(text) => parse_mountinfo(&text),
        Err(_) => return vec![scheduler.unknown("no /proc/self/mountinfo")],
    };
    let Some(mount) = mount_of(&mounts, &data_dir) else {
        return vec![scheduler.unknown(format!("no mount holds {}", data_dir.display()))];
    };
    let sys_dev = format!("/sys/dev/block/{}", mount.device);
    let Some(device_dir) = ctx.root.resolve(&sys_dev) else {
        return vec![scheduler.unknown(format!(
            "{} is on {} {} (no block device)",
            data_dir.display(),
            mount.fs_type,
            mount.source
        ))];
    };
    // A partition's queue is its disk's.
    let disk_dir = if ctx.root.exists(&format!("{device_dir}/partition")) {
        device_dir
            .rsplit_once('/')
            .map_or(device_dir.clone(), |(p, _)| p.to_string())
    } else {
        device_dir
    };
    let name = disk_dir.rsplit('/').next().unwrap_or("disk").to_string();
    let queue = format!("{disk_dir}/queue");
    let rotational = ctx
        .root
        .read(&format!("{queue}/rotational"))
        .is_ok_and(|r| r.trim() == "1");
    vec![
        scheduler_finding(ctx, &queue, &name, rotational),
        nr_requests_finding(ctx, &queue, &name),
    ]
}

fn scheduler_finding(ctx: &Context, queue: &str, name: &str, rotational: bool) -> Finding {
    let wanted = if rotational { "mq-deadline" } else { "none" };
    let path = format!("{queue}/scheduler");
    let finding = Finding::new("disk", format!("{name} scheduler"))
        .wanted(wanted)
        .reason(if rotational {
            "a spinning disk needs requests sorted and reads kept from starving"
        } else {
            "an SSD reorders itself; a scheduler only adds a lock and latency"
        });
    let Ok(text) = ctx.root.read(&path) else {
        return finding.unknown("no scheduler file");
    };
    let Some(current) = selected(&text) else {
        return finding.unknown(format!("unparsable {text:?}"));
    };
    let offered = text
        .split_whitespace()
        .any(|s| s.trim_matches(|c| c == '[' || c == ']') == wanted);
    if !offered {
        return finding
            .current(current)
            .reason(format!("{wanted} is not offered by this device"));
    }
    let met = current == wanted;
    finding
        .current(current)
        .judged(met, Severity::Warning, vec![write(path, wanted)])
}

fn nr_requests_finding(ctx: &Context, queue: &str, name: &str) -> Finding {
    let path = format!("{queue}/nr_requests");
    let finding = Finding::new("disk", format!("{name} nr_requests"))
        .wanted(format!(">= {NR_REQUESTS_MIN}"))
        .reason("a queue deep enough for write-back and readahead to keep the device busy");
    match ctx.root.read(&path).map(|t| t.trim().parse::<u64>()) {
        Ok(Ok(current)) => finding.current(current.to_string()).judged(
            current >= NR_REQUESTS_MIN,
            Severity::Info,
            vec![write(path, NR_REQUESTS_MIN.to_string())],
        ),
        _ => finding.unknown("unreadable"),
    }
}

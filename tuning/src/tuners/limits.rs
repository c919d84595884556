//! Process limits: locked memory (io_uring rings and registered buffers) and open files
//! (one per connection and per segment file).

use crate::context::Context;
use crate::finding::{Action, Finding, Severity};

/// Locked memory a shard's rings and registered I/O buffers may need.
pub const MEMLOCK_PER_SHARD: u64 = 64 << 20;
/// Kafka's operations guide asks for at least 100,000 open files.
pub const NOFILE_MIN: u64 = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// None is unlimited.
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

fn show(value: Option<u64>) -> String {
    value.map_or_else(|| "unlimited".to_string(), |v| v.to_string())
}

fn getrlimit(resource: libc::__rlimit_resource_t) -> Option<Limit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed.
    if unsafe { libc::getrlimit(resource, &mut limit) } != 0 {
        return None;
    }
    let value = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v);
    Some(Limit {
        soft: value(limit.rlim_cur),
        hard: value(limit.rlim_max),
    })
}

/// A row of /proc/<pid>/limits: "Max open files   1024   524288   files".
pub fn parse_limits(table: &str, name: &str) -> Option<Limit> {
    let line = table.lines().find(|l| l.starts_with(name))?;
    let mut fields = line[name.len()..].split_whitespace();
    let mut value = || -> Option<Option<u64>> {
        match fields.next()? {
            "unlimited" => Some(None),
            number => number.parse().ok().map(Some),
        }
    };
    Some(Limit {
        soft: value()?,
        hard: value()?,
    })
}

fn read_limit(ctx: &Context, resource: libc::__rlimit_resource_t, name: &str) -> Option<Limit> {
    if ctx.root.is_system() {
        getrlimit(resource)
    } else {
        parse_limits(&ctx.root.read("/proc/self/limits").ok()?, name)
    }
}

pub fn rlimits(ctx: &Context) -> Vec<Finding> {
    let shards = ctx.shards().len().max(1) as u64;
    let memlock_wanted = MEMLOCK_PER_SHARD * shards;
    let memlock = Finding::new("rlimits", "RLIMIT_MEMLOCK")
        .wanted(format!("unlimited (>= {} MiB)", memlock_wanted >> 20))
        .reason("io_uring rings and registered buffers are locked memory (all of it before 5.12)");
    let memlock = match read_limit(ctx, libc::RLIMIT_MEMLOCK, "Max locked memory") {
        Some(limit) => memlock.current(show(limit.soft)).judged(
            !matches!(limit.soft, Some(v) if v < memlock_wanted),
            Severity::Warning,
            vec![Action::Manual {
                note:
                    "LimitMEMLOCK=infinity in the broker's systemd unit (or memlock in limits.conf)"
                        .to_string(),
            }],
        ),
        None => memlock.unknown("unreadable"),
    };
    let nofile = Finding::new("rlimits", "RLIMIT_NOFILE")
        .wanted(format!("hard >= {NOFILE_MIN}"))
        .reason("a file per connection and per segment; the broker raises soft to hard");
    let nofile = match read_limit(ctx, libc::RLIMIT_NOFILE, "Max open files") {
        Some(limit) => nofile
            .current(format!("soft {}, hard {}", show(limit.soft), show(limit.hard)))
            .judged(
                !matches!(limit.hard, Some(v) if v < NOFILE_MIN),
                Severity::Warning,
                vec![Action::Manual {
                    note: "LimitNOFILE=1048576 in the broker's systemd unit (or nofile in limits.conf)"
                        .to_string(),
                }],
            ),
        None => nofile.unknown("unreadable"),
    };
    vec![memlock, nofile]
}

//! Asynchronous I/O limits: Linux AIO's event cap and whether io_uring may be used.

use super::sysctl;
use crate::context::Context;
use crate::finding::{write, Finding, Severity};

/// Redpanda's aio_events tuner.
pub const AIO_MAX_NR: u64 = 1 << 20;

pub fn aio(ctx: &Context) -> Vec<Finding> {
    vec![sysctl::at_least(
        ctx,
        "aio",
        "fs.aio-max-nr",
        AIO_MAX_NR,
        Severity::Info,
        "only Linux AIO users count against it (glommio uses io_uring); other tools on the host may",
    )]
}

pub fn io_uring(ctx: &Context) -> Vec<Finding> {
    let key = "kernel.io_uring_disabled";
    let finding = Finding::new("io_uring", key)
        .wanted("0")
        .reason("every shard runs on io_uring rings (glommio); 1 limits them to io_uring_group");
    if !ctx.root.exists(&sysctl::path(key)) {
        return vec![finding.current("absent (kernel < 6.6: always on)")];
    }
    match sysctl::read_u64(ctx, key) {
        Ok(current) => {
            let short = if current >= 2 {
                Severity::Error
            } else {
                Severity::Warning
            };
            vec![finding.current(current.to_string()).judged(
                current == 0,
                short,
                vec![write(sysctl::path(key), "0")],
            )]
        }
        Err(why) => vec![finding.unknown(why)],
    }
}

//! Sysctls are files under /proc/sys named by the key with dots as slashes.

use crate::context::Context;
use crate::finding::{write, Finding, Severity};

pub fn path(key: &str) -> String {
    format!("/proc/sys/{}", key.replace('.', "/"))
}

pub fn read_u64(ctx: &Context, key: &str) -> Result<u64, String> {
    let text = ctx
        .root
        .read(&path(key))
        .map_err(|e| format!("unreadable ({})", e.kind()))?;
    text.trim()
        .parse()
        .map_err(|_| format!("unparsable {:?}", text.trim()))
}

/// A sysctl that should be at least `wanted`; apply raises it to exactly that.
pub fn at_least(
    ctx: &Context,
    tuner: &'static str,
    key: &str,
    wanted: u64,
    short: Severity,
    reason: &str,
) -> Finding {
    let finding = Finding::new(tuner, key)
        .wanted(format!(">= {wanted}"))
        .reason(reason);
    match read_u64(ctx, key) {
        Ok(current) => finding.current(current.to_string()).judged(
            current >= wanted,
            short,
            vec![write(path(key), wanted.to_string())],
        ),
        Err(why) => finding.unknown(why),
    }
}

/// A sysctl that should lie in `low..=high`; apply sets it to `target`.
pub fn within(
    ctx: &Context,
    tuner: &'static str,
    key: &str,
    (low, high, target): (u64, u64, u64),
    short: Severity,
    reason: &str,
) -> Finding {
    let wanted = if low == high {
        low.to_string()
    } else if low == 0 {
        format!("<= {high}")
    } else if high == u64::MAX {
        format!(">= {low}")
    } else {
        format!("{low}..{high}")
    };
    let finding = Finding::new(tuner, key).wanted(wanted).reason(reason);
    match read_u64(ctx, key) {
        Ok(current) => finding.current(current.to_string()).judged(
            (low..=high).contains(&current),
            short,
            vec![write(path(key), target.to_string())],
        ),
        Err(why) => finding.unknown(why),
    }
}

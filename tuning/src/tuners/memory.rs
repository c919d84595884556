//! Memory: transparent huge pages, swappiness and page-cache write-back.

use super::sysctl;
use crate::context::Context;
use crate::finding::{write, Finding, Severity};

const THP_DIR: &str = "/sys/kernel/mm/transparent_hugepage";

/// The bracketed choice of a sysfs selector ("always [madvise] never"), or the whole text
/// when it holds one word.
pub fn selected(text: &str) -> Option<String> {
    if let Some(start) = text.find('[') {
        let end = text[start..].find(']')? + start;
        return Some(text[start + 1..end].to_string());
    }
    let word = text.trim();
    (!word.is_empty() && !word.contains(' ')).then(|| word.to_string())
}

pub fn transparent_hugepages(ctx: &Context) -> Vec<Finding> {
    let mut findings = Vec::new();
    let enabled = format!("{THP_DIR}/enabled");
    let finding = Finding::new("transparent_hugepages", "thp enabled")
        .wanted("madvise")
        .reason(
            "THP covers heap only (not page cache); 'always' adds khugepaged and fault latency",
        );
    findings.push(
        match ctx.root.read(&enabled).ok().and_then(|t| selected(&t)) {
            Some(mode) => {
                let met = mode == "madvise" || mode == "never";
                finding
                    .current(mode)
                    .judged(met, Severity::Info, vec![write(&enabled, "madvise")])
            }
            None => finding.unknown("not exposed"),
        },
    );
    let defrag = format!("{THP_DIR}/defrag");
    let finding = Finding::new("transparent_hugepages", "thp defrag")
        .wanted("madvise")
        .reason("'always' stalls page faults on direct compaction");
    findings.push(
        match ctx.root.read(&defrag).ok().and_then(|t| selected(&t)) {
            Some(mode) => {
                let met = mode != "always";
                finding.current(mode).judged(
                    met,
                    Severity::Warning,
                    vec![write(&defrag, "madvise")],
                )
            }
            None => finding.unknown("not exposed"),
        },
    );
    findings
}

pub fn swappiness(ctx: &Context) -> Vec<Finding> {
    vec![sysctl::within(
        ctx,
        "swappiness",
        "vm.swappiness",
        (0, 1, 1),
        Severity::Warning,
        "reclaim page cache before swapping out the broker's heap (Redpanda and Kafka: 1)",
    )]
}

pub fn writeback(ctx: &Context) -> Vec<Finding> {
    let mut findings = Vec::new();
    // A ratio reads 0 once its *_bytes twin is set; the bytes value then rules.
    let by_bytes = |key: &str| sysctl::read_u64(ctx, key).map(|b| b > 0).unwrap_or(false);
    if by_bytes("vm.dirty_background_bytes") {
        let bytes = sysctl::read_u64(ctx, "vm.dirty_background_bytes").unwrap_or(0);
        findings.push(
            Finding::new("writeback", "vm.dirty_background_ratio")
                .current(format!("set as bytes ({bytes})"))
                .wanted("<= 5 (or bytes)")
                .reason("dirty_background_bytes overrides the ratio"),
        );
    } else {
        findings.push(sysctl::within(
            ctx,
            "writeback",
            "vm.dirty_background_ratio",
            (1, 5, 5),
            Severity::Info,
            "start background write-back early so appends stream to disk, not in bursts",
        ));
    }
    if by_bytes("vm.dirty_bytes") {
        let bytes = sysctl::read_u64(ctx, "vm.dirty_bytes").unwrap_or(0);
        findings.push(
            Finding::new("writeback", "vm.dirty_ratio")
                .current(format!("set as bytes ({bytes})"))
                .wanted(">= 40 (or bytes)")
                .reason("dirty_bytes overrides the ratio"),
        );
    } else {
        findings.push(sysctl::within(
            ctx,
            "writeback",
            "vm.dirty_ratio",
            (40, 80, 60),
            Severity::Info,
            "room for produce bursts before writers are throttled in balance_dirty_pages",
        ));
    }
    findings.push(sysctl::within(
        ctx,
        "writeback",
        "vm.dirty_expire_centisecs",
        (1, 3000, 3000),
        Severity::Info,
        "log pages are never rewritten: holding them dirty longer only delays write-back",
    ));
    let writeback = sysctl::within(
        ctx,
        "writeback",
        "vm.dirty_writeback_centisecs",
        (1, 500, 500),
        Severity::Info,
        "the flusher wakes often enough to keep write-back steady (0 turns it off)",
    );
    let off = writeback.current == "0";
    findings.push(if off {
        Finding {
            severity: Severity::Warning,
            ..writeback
        }
    } else {
        writeback
    });
    findings
}

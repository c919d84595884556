//! Network: accept and SYN backlogs, socket buffer limits, kernel TLS.

use super::sysctl;
use crate::context::Context;
use crate::finding::{write, Action, Finding, Severity};

/// Redpanda's net tuner and Linux >= 5.4's default for somaxconn.
pub const BACKLOG: u64 = 4096;
/// Largest socket buffer: a 10 Gb/s link with a 10 ms round trip keeps ~12 MiB in flight.
pub const SOCKET_BUFFER_MAX: u64 = 16 << 20;

pub fn listen_backlog(ctx: &Context) -> Vec<Finding> {
    vec![
        sysctl::at_least(
            ctx,
            "listen_backlog",
            "net.core.somaxconn",
            BACKLOG,
            Severity::Warning,
            "caps every listen() backlog; a reconnect storm of clients overflows a short one",
        ),
        sysctl::at_least(
            ctx,
            "listen_backlog",
            "net.ipv4.tcp_max_syn_backlog",
            BACKLOG,
            Severity::Warning,
            "half-open connections queued during a reconnect storm",
        ),
    ]
}

/// `tcp_rmem` / `tcp_wmem` hold "min default max"; only the max is raised.
fn tcp_buffer(ctx: &Context, key: &str) -> Finding {
    let finding = Finding::new("socket_buffers", key)
        .wanted(format!("max >= {SOCKET_BUFFER_MAX}"))
        .reason("the ceiling of TCP buffer auto-tuning: bounds one connection's throughput");
    let Ok(text) = ctx.root.read(&sysctl::path(key)) else {
        return finding.unknown("unreadable");
    };
    let fields: Vec<u64> = text
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    let [min, default, max] = fields[..] else {
        return finding.unknown(format!("unparsable {text:?}"));
    };
    finding.current(format!("{min} {default} {max}")).judged(
        max >= SOCKET_BUFFER_MAX,
        Severity::Info,
        vec![write(
            sysctl::path(key),
            format!("{min} {default} {SOCKET_BUFFER_MAX}"),
        )],
    )
}

pub fn socket_buffers(ctx: &Context) -> Vec<Finding> {
    let reason = "caps SO_RCVBUF/SO_SNDBUF (socket.*.buffer.bytes) on fast, long links";
    vec![
        sysctl::at_least(
            ctx,
            "socket_buffers",
            "net.core.rmem_max",
            SOCKET_BUFFER_MAX,
            Severity::Info,
            reason,
        ),
        sysctl::at_least(
            ctx,
            "socket_buffers",
            "net.core.wmem_max",
            SOCKET_BUFFER_MAX,
            Severity::Info,
            reason,
        ),
        tcp_buffer(ctx, "net.ipv4.tcp_rmem"),
        tcp_buffer(ctx, "net.ipv4.tcp_wmem"),
    ]
}

pub fn ktls(ctx: &Context) -> Vec<Finding> {
    let finding = Finding::new("ktls", "ktls (tls ulp)")
        .wanted("tls in tcp_available_ulp")
        .reason("kernel TLS lets TLS listeners send log data with sendfile, without copies");
    let Ok(ulps) = ctx.root.read("/proc/sys/net/ipv4/tcp_available_ulp") else {
        return vec![finding.unknown("no tcp_available_ulp")];
    };
    if ulps.split_whitespace().any(|u| u == "tls") {
        return vec![finding.current("loaded")];
    }
    let release = ctx
        .root
        .read("/proc/sys/kernel/osrelease")
        .unwrap_or_default();
    let module_dir = format!("/lib/modules/{}/kernel/net/tls", release.trim());
    let module = ctx
        .root
        .list(&module_dir)
        .into_iter()
        .find(|name| name.starts_with("tls.ko"));
    match module {
        Some(name) => vec![finding
            .current(format!("not loaded ({module_dir}/{name} present)"))
            .judged(
                false,
                Severity::Info,
                vec![
                    Action::Command {
                        command: "modprobe tls".to_string(),
                    },
                    write("/etc/modules-load.d/tls.conf", "tls\n"),
                ],
            )],
        None => vec![finding.current("not built (no tls.ko)").judged(
            false,
            Severity::Info,
            vec![Action::Manual {
                note: "a kernel built with CONFIG_TLS for kernel TLS".to_string(),
            }],
        )],
    }
}

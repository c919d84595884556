//! A panic as one ERROR event (message, location, thread, and the backtrace when
//! `RUST_BACKTRACE` asks for one) instead of the standard hook's lines on stderr, so it is
//! a line of the log like any other (JSON included); then the process aborts.
//!
//! Why abort: shards wait on each other (forwarded requests, the start-up barrier, the
//! metadata shard), so a shard thread that unwound and ended would leave a process that
//! looks alive and answers nothing on its partitions, for ever. A process that dies is
//! restarted by its service manager and its partitions recover from the log. Aborting in
//! the hook (rather than `panic = "abort"` in the profile) holds for any build of the
//! binary, and leaves `cargo test`, which never installs this hook, unwinding as usual.

use std::backtrace::{Backtrace, BacktraceStatus};
use std::panic::PanicHookInfo;

/// Installs the broker's hook: log the panic, then abort the process (status: killed by
/// SIGABRT, which no service manager takes for a clean stop).
pub fn install_hook() {
    std::panic::set_hook(Box::new(|info| {
        log_panic(info);
        std::process::abort();
    }));
}

/// The panic as one ERROR event through the installed subscriber.
fn log_panic(info: &PanicHookInfo<'_>) {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(not a string)");
    let location = info
        .location()
        .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
        .unwrap_or_default();
    let thread = std::thread::current();
    let thread = thread.name().unwrap_or("unnamed");
    let backtrace = Backtrace::capture();
    if backtrace.status() == BacktraceStatus::Captured {
        tracing::error!(thread, location, backtrace = %backtrace, "panicked: {message}");
    } else {
        tracing::error!(thread, location, "panicked: {message}");
    }
}

//! A panic as one ERROR event (message, location, thread, and the backtrace when
//! `RUST_BACKTRACE` asks for one) instead of the standard hook's lines on stderr, so it is
//! a line of the log like any other (JSON included).

use std::backtrace::{Backtrace, BacktraceStatus};

pub fn install_hook() {
    std::panic::set_hook(Box::new(|info| {
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
    }));
}

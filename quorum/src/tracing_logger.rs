//! raft-rs logs through `slog`; the workspace logs through `tracing`. This drain forwards
//! each slog record to the `tracing` event of the same level (target `raft`), with the
//! record's key-value pairs appended to the message, so raft's elections and warnings land
//! in the broker's log subscriber with everything else.

use std::fmt::{self, Write as _};

use slog::{Drain, Key, Level, OwnedKVList, Record, Serializer, KV};

struct TracingDrain;

/// Collects a record's key-value pairs as ` key=value`.
struct Pairs(String);

impl Serializer for Pairs {
    fn emit_arguments(&mut self, key: Key, val: &fmt::Arguments) -> slog::Result {
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record, values: &OwnedKVList) -> Result<(), slog::Never> {
        // Formatting costs: skip it for levels nobody listens to.
        let enabled = match record.level() {
            Level::Critical | Level::Error => {
                tracing::enabled!(target: "raft", tracing::Level::ERROR)
            }
            Level::Warning => tracing::enabled!(target: "raft", tracing::Level::WARN),
            Level::Info => tracing::enabled!(target: "raft", tracing::Level::INFO),
            Level::Debug => tracing::enabled!(target: "raft", tracing::Level::DEBUG),
            Level::Trace => tracing::enabled!(target: "raft", tracing::Level::TRACE),
        };
        if !enabled {
            return Ok(());
        }
        let mut pairs = Pairs(String::new());
        let _ = record.kv().serialize(record, &mut pairs);
        let _ = values.serialize(record, &mut pairs);
        let msg = record.msg();
        let kv = pairs.0;
        match record.level() {
            Level::Critical | Level::Error => tracing::error!(target: "raft", "{msg}{kv}"),
            Level::Warning => tracing::warn!(target: "raft", "{msg}{kv}"),
            Level::Info => tracing::info!(target: "raft", "{msg}{kv}"),
            Level::Debug => tracing::debug!(target: "raft", "{msg}{kv}"),
            Level::Trace => tracing::trace!(target: "raft", "{msg}{kv}"),
        }
        Ok(())
    }
}

/// The logger handed to raft-rs (which adds `raft_id` to every record itself).
pub fn logger() -> slog::Logger {
    slog::Logger::root(TracingDrain.fuse(), slog::o!())
}

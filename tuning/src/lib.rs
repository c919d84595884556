//! Checks and tunes a Linux host for the broker, in the manner of Redpanda's `rpk redpanda
//! tune`: each tuner reads a setting through an injected root ("/" in production, a fake
//! /proc and /sys in tests), says what it is, what it should be and why, and names the
//! write that fixes it. `check` only reads; `apply` prints, writes or scripts the fixes.
//! The broker runs `check` at start-up and logs what falls short.

pub mod apply;
pub mod cli;
pub mod context;
pub mod cpuset;
pub mod finding;
pub mod render;
pub mod root;
pub mod tuners;

use std::path::Path;

pub use context::Context;
pub use cpuset::CpuSet;
pub use finding::{Action, Finding, Severity};
pub use root::Root;

#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error("unknown tuner {name:?} (known: {known})")]
    UnknownTuner { name: String, known: String },
    #[error("writing output: {0}")]
    Output(#[from] std::io::Error),
    #[error("writing JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Runs the named tuners (all when `only` is empty), reading only.
pub fn check(ctx: &Context, only: &[String]) -> Result<Vec<Finding>, TuneError> {
    for name in only {
        if !tuners::TUNERS.iter().any(|(known, _)| known == name) {
            let known: Vec<&str> = tuners::TUNERS.iter().map(|(n, _)| *n).collect();
            return Err(TuneError::UnknownTuner {
                name: name.clone(),
                known: known.join(", "),
            });
        }
    }
    Ok(tuners::TUNERS
        .iter()
        .filter(|(name, _)| only.is_empty() || only.iter().any(|o| o == name))
        .flat_map(|(_, tuner)| tuner(ctx))
        .collect())
}

/// The broker's start-up check of this machine: every tuner, read-only.
pub fn startup_findings(data_dir: &Path, shard_cores: Option<CpuSet>) -> Vec<Finding> {
    let mut ctx = Context::new(Root::system(), data_dir);
    ctx.shard_cores = shard_cores;
    check(&ctx, &[]).unwrap_or_default()
}

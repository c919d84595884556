//! The command line, shared by the `tuning` binary and `broker tune`.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::apply::{self, Mode};
use crate::context::Context;
use crate::cpuset::CpuSet;
use crate::root::Root;
use crate::{check, render, TuneError};

#[derive(Debug, Subcommand)]
pub enum TuneCommand {
    /// Reports each setting: current value, wanted value, severity and why.
    Check {
        #[command(flatten)]
        target: Target,
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Shows the changes that fix what falls short (a dry run unless --yes).
    Apply {
        #[command(flatten)]
        target: Target,
        /// Make the changes (as root).
        #[arg(long, conflicts_with = "script")]
        yes: bool,
        /// Print a shell script making the changes instead.
        #[arg(long)]
        script: bool,
    },
}

#[derive(Debug, Args)]
pub struct Target {
    /// Where / is: every file is read and written below it (tests use a fake tree).
    #[arg(long, default_value = "/")]
    pub root: PathBuf,
    /// The broker's data directory (`log.dirs`): its disk is checked.
    #[arg(long, default_value = "./data")]
    pub data_dir: PathBuf,
    /// Cores the shards run on, e.g. 2-15 (default: every online core, as `num.shards=0`).
    #[arg(long, value_parser = parse_cpus)]
    pub shard_cores: Option<CpuSet>,
    /// Only these tuners (comma-separated names, as in the JSON `tuner` field).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
}

fn parse_cpus(text: &str) -> Result<CpuSet, String> {
    CpuSet::parse(text).map_err(|e| e.to_string())
}

impl Target {
    fn context(&self) -> Context {
        let mut ctx = Context::new(Root::new(&self.root), &self.data_dir);
        ctx.shard_cores = self.shard_cores.clone();
        ctx
    }
}

/// Runs one command, writing to `out`; returns the process exit code (1 when a write of
/// `apply --yes` failed). A reader that went away (`| head`) ends it quietly.
pub fn run(command: TuneCommand, out: &mut dyn Write) -> Result<i32, TuneError> {
    match run_command(command, out) {
        Err(TuneError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        result => result,
    }
}

fn run_command(command: TuneCommand, out: &mut dyn Write) -> Result<i32, TuneError> {
    match command {
        TuneCommand::Check { target, json } => {
            let findings = check(&target.context(), &target.only)?;
            if json {
                render::json(&findings, out)?;
            } else {
                render::table(&findings, out)?;
            }
            Ok(0)
        }
        TuneCommand::Apply {
            target,
            yes,
            script,
        } => {
            let ctx = target.context();
            let findings = check(&ctx, &target.only)?;
            let mode = match (yes, script) {
                (_, true) => Mode::Script,
                (true, false) => Mode::Apply,
                (false, false) => Mode::DryRun,
            };
            let outcome = apply::apply(&ctx.root, &findings, mode, out)?;
            Ok(i32::from(outcome.failed > 0))
        }
    }
}

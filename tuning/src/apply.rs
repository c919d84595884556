//! Carrying out findings: a dry run that prints, `--yes` that writes through the root, and
//! `--script` that renders the same steps as a shell script.

use std::io::Write;

use crate::finding::{Action, Finding};
use crate::root::Root;
use crate::TuneError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    DryRun,
    Apply,
    Script,
}

/// What `apply` did: writes done and failed (only in `Mode::Apply`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub written: usize,
    pub failed: usize,
}

/// The findings that fall short and have something to do, in report order.
pub fn pending(findings: &[Finding]) -> impl Iterator<Item = &Finding> {
    findings
        .iter()
        .filter(|f| f.severity.falls_short() && !f.actions.is_empty())
}

pub fn apply(
    root: &Root,
    findings: &[Finding],
    mode: Mode,
    out: &mut dyn Write,
) -> Result<Outcome, TuneError> {
    let mut outcome = Outcome::default();
    if mode == Mode::Script {
        script(findings, out)?;
        return Ok(outcome);
    }
    let mut any = false;
    for finding in pending(findings) {
        any = true;
        writeln!(
            out,
            "{}: {} -> {} ({})",
            finding.check,
            finding.current,
            finding.wanted,
            finding.severity.as_str()
        )?;
        for action in &finding.actions {
            match (action, mode) {
                (Action::Write { path, contents }, Mode::Apply) => {
                    match root.write(path, contents) {
                        Ok(()) => {
                            outcome.written += 1;
                            writeln!(out, "  wrote {} to {path}", shown(contents))?;
                        }
                        Err(error) => {
                            outcome.failed += 1;
                            writeln!(
                                out,
                                "  FAILED to write {} to {path}: {error}",
                                shown(contents)
                            )?;
                        }
                    }
                }
                (Action::Write { path, contents }, _) => {
                    writeln!(out, "  would write {} to {path}", shown(contents))?;
                }
                (Action::KernelCmdline { add }, _) => {
                    writeln!(
                        out,
                        "  add `{add}` to the kernel command line (reboot needed)"
                    )?;
                }
                (Action::Command { command }, _) => writeln!(out, "  run: {command}")?,
                (Action::Manual { note }, _) => writeln!(out, "  by hand: {note}")?,
            }
        }
    }
    if !any {
        writeln!(out, "nothing to change")?;
    } else if mode == Mode::DryRun {
        writeln!(
            out,
            "dry run: nothing written (--yes applies, --script prints a script)"
        )?;
    }
    Ok(outcome)
}

fn shown(contents: &str) -> String {
    format!("{:?}", contents.trim_end_matches('\n'))
}

/// POSIX shell single quoting.
pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn script(findings: &[Finding], out: &mut dyn Write) -> Result<(), TuneError> {
    writeln!(out, "#!/bin/sh")?;
    writeln!(
        out,
        "# Written by `tuning apply --script`: run as root. Runtime values only;"
    )?;
    writeln!(
        out,
        "# persist sysctls in /etc/sysctl.d and sysfs values in a boot-time unit."
    )?;
    writeln!(out, "set -u")?;
    for finding in pending(findings) {
        writeln!(out)?;
        writeln!(
            out,
            "# {}: {} -> {} ({}): {}",
            finding.check,
            finding.current,
            finding.wanted,
            finding.severity.as_str(),
            finding.reason
        )?;
        for action in &finding.actions {
            match action {
                Action::Write { path, contents } => match path.strip_prefix("/proc/sys/") {
                    Some(key) if !contents.contains('\n') => writeln!(
                        out,
                        "sysctl -w {}",
                        quote(&format!("{}={contents}", key.replace('/', ".")))
                    )?,
                    _ => writeln!(
                        out,
                        "printf '%s\\n' {} > {}",
                        quote(contents.trim_end_matches('\n')),
                        quote(path)
                    )?,
                },
                Action::KernelCmdline { add } => {
                    writeln!(out, "# add to the kernel command line, then reboot: {add}")?
                }
                Action::Command { command } => writeln!(out, "{command}")?,
                Action::Manual { note } => writeln!(out, "# by hand: {note}")?,
            }
        }
    }
    Ok(())
}

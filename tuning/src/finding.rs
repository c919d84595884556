//! What a tuner reports: one finding per setting, with the change that would fix it.

use serde::Serialize;

/// `Ok` and `Unknown` do not fall short; the others say how much the shortfall costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The setting is as wanted.
    Ok,
    /// The setting could not be read here (absent file, virtual device).
    Unknown,
    /// Worth changing for the last few percent, or only for some deployments.
    Info,
    /// Costs throughput or latency under load.
    Warning,
    /// The broker will not run well, or not at all.
    Error,
}

impl Severity {
    pub fn falls_short(self) -> bool {
        self >= Severity::Info
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Unknown => "unknown",
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// One step of `apply`. Only `Write` is carried out; the others are printed for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Write `contents` to the system path `path` (through the root).
    Write { path: String, contents: String },
    /// A boot parameter to add to the kernel command line (needs a reboot).
    KernelCmdline { add: String },
    /// A shell command a person runs (loading a module).
    Command { command: String },
    /// A change outside this machine's files (a systemd unit's limits).
    Manual { note: String },
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// The tuner's name, as `--only` takes it.
    pub tuner: &'static str,
    /// The setting, e.g. `vm.swappiness` or `vda scheduler`.
    pub check: String,
    pub current: String,
    pub wanted: String,
    pub severity: Severity,
    /// One line: why the wanted value suits this broker.
    pub reason: String,
    /// Empty when nothing is to be done.
    pub actions: Vec<Action>,
}

impl Finding {
    pub fn new(tuner: &'static str, check: impl Into<String>) -> Finding {
        Finding {
            tuner,
            check: check.into(),
            current: String::new(),
            wanted: String::new(),
            severity: Severity::Ok,
            reason: String::new(),
            actions: Vec::new(),
        }
    }

    pub fn current(mut self, current: impl Into<String>) -> Finding {
        self.current = current.into();
        self
    }

    pub fn wanted(mut self, wanted: impl Into<String>) -> Finding {
        self.wanted = wanted.into();
        self
    }

    pub fn reason(mut self, reason: impl Into<String>) -> Finding {
        self.reason = reason.into();
        self
    }

    /// Sets the severity when `met` is false (Ok otherwise) and keeps the actions only then.
    pub fn judged(mut self, met: bool, short: Severity, actions: Vec<Action>) -> Finding {
        if met {
            self.severity = Severity::Ok;
        } else {
            self.severity = short;
            self.actions = actions;
        }
        self
    }

    /// The setting could not be read; `why` replaces the current value.
    pub fn unknown(mut self, why: impl Into<String>) -> Finding {
        self.current = why.into();
        self.severity = Severity::Unknown;
        self.actions.clear();
        self
    }
}

pub fn write(path: impl Into<String>, contents: impl Into<String>) -> Action {
    Action::Write {
        path: path.into(),
        contents: contents.into(),
    }
}

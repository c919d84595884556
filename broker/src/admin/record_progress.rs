//! Progress of open-ended admin work (producing a large stdin, consuming many records): a
//! running count of records and bytes with a rate, on stderr
//! and only where a person watches it: when stderr is a terminal, or with `--progress`. A
//! redirected stderr gets nothing unless asked, so scripts' logs stay clean.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often the progress line is redrawn: often enough to look alive, rarely enough that
/// drawing it costs nothing next to the work.
const REDRAW_INTERVAL: Duration = Duration::from_millis(500);

/// A one-line counter of records and bytes, redrawn in place.
pub struct RecordProgress {
    enabled: bool,
    /// Whether the line is redrawn with `\r` (a terminal) or printed as new lines.
    in_place: bool,
    verb: &'static str,
    started: Instant,
    last: Option<Instant>,
    drawn: bool,
}

impl RecordProgress {
    /// Progress for `verb` ("produced", "consumed"): shown when stderr is a terminal or
    /// `forced`.
    pub fn new(verb: &'static str, forced: bool) -> RecordProgress {
        let terminal = std::io::stderr().is_terminal();
        RecordProgress {
            enabled: terminal || forced,
            in_place: terminal,
            verb,
            started: Instant::now(),
            last: None,
            drawn: false,
        }
    }

    /// As [`RecordProgress::new`], for a command whose results go to stdout: hidden (unless
    /// `forced`) when stdout is the same terminal, where it would tear the results' lines.
    pub fn beside_stdout(verb: &'static str, forced: bool) -> RecordProgress {
        let mut progress = RecordProgress::new(verb, forced);
        if !forced && std::io::stdout().is_terminal() {
            progress.enabled = false;
        }
        progress
    }

    /// No output at all (tests, library use).
    pub fn hidden() -> RecordProgress {
        RecordProgress {
            enabled: false,
            in_place: false,
            verb: "",
            started: Instant::now(),
            last: None,
            drawn: false,
        }
    }

    /// Reports the totals so far; draws at most once per [`REDRAW_INTERVAL`].
    pub fn update(&mut self, records: u64, bytes: u64) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if self.last.is_some_and(|t| now - t < REDRAW_INTERVAL) {
            return;
        }
        self.last = Some(now);
        self.draw(records, bytes);
    }

    /// The final totals, ending the line.
    pub fn finish(&mut self, records: u64, bytes: u64) {
        if !self.enabled || !self.drawn {
            return;
        }
        self.draw(records, bytes);
        if self.in_place {
            eprintln!();
        }
    }

    fn draw(&mut self, records: u64, bytes: u64) {
        self.drawn = true;
        let line = line(self.verb, records, bytes, self.started.elapsed());
        let mut err = std::io::stderr().lock();
        // Progress is best effort: a closed stderr must not fail the command.
        let _ = if self.in_place {
            write!(err, "\r{line}")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    }
}

/// `produced 12000 records, 1.5 MiB in 2.0 s (6000 records/s)`.
pub fn line(verb: &str, records: u64, bytes: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        records as f64 / secs
    } else {
        0.0
    };
    format!(
        "{verb} {records} records, {:.1} MiB in {secs:.1} s ({rate:.0} records/s)",
        bytes as f64 / f64::from(1 << 20)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_shows_counts_and_rate() {
        assert_eq!(
            line("produced", 12_000, 3 << 19, Duration::from_secs(2)),
            "produced 12000 records, 1.5 MiB in 2.0 s (6000 records/s)"
        );
        assert!(line("consumed", 0, 0, Duration::ZERO).ends_with("(0 records/s)"));
    }
}

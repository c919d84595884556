//! Progress of long admin work on stderr, so that stdout stays the command's result: a count
//! of work done out of a known total ([`Progress`]: offsets of thousands of partitions,
//! deleting many topics) or an open-ended count of records and bytes with a rate
//! ([`RecordProgress`]: producing a large stdin, consuming many records).
//!
//! Both draw through one [`Line`]: shown only when stderr is a terminal (redrawn in place with
//! `\r`) or when asked for with `--progress` (then one plain line per update, for logs), and
//! redrawn at most every `REDRAW_INTERVAL`. A redirected stderr gets nothing unless asked, so
//! scripts' logs stay clean.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// How often progress is redrawn at most: often enough to look alive, rarely enough that the
/// drawing costs nothing next to the work.
const REDRAW_INTERVAL: Duration = Duration::from_millis(200);

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Off,
    /// Redrawn in place on a terminal.
    Terminal,
    /// One line per update (`--progress` with stderr not a terminal).
    Lines,
}

impl Mode {
    /// The mode for stderr: `forced` is `--progress`.
    pub fn for_stderr(forced: bool) -> Mode {
        match (std::io::stderr().is_terminal(), forced) {
            (true, _) => Mode::Terminal,
            (false, true) => Mode::Lines,
            (false, false) => Mode::Off,
        }
    }
}

/// The progress line both front types draw: where, how, and when it was last drawn.
struct Line<W: Write> {
    out: W,
    mode: Mode,
    started: Instant,
    /// When the line was last drawn; `None` before the first time.
    drawn_at: Option<Instant>,
}

impl<W: Write> Line<W> {
    fn new(out: W, mode: Mode) -> Self {
        Line {
            out,
            mode,
            started: Instant::now(),
            drawn_at: None,
        }
    }

    /// Whether a redraw is due: the last one is `REDRAW_INTERVAL` old, or (before the first)
    /// the work is that old, or `first_at_once`.
    fn due(&self, first_at_once: bool) -> bool {
        if self.mode == Mode::Off {
            return false;
        }
        match self.drawn_at {
            Some(at) => at.elapsed() >= REDRAW_INTERVAL,
            None => first_at_once || self.started.elapsed() >= REDRAW_INTERVAL,
        }
    }

    fn drawn(&self) -> bool {
        self.drawn_at.is_some()
    }

    fn draw(&mut self, text: &str) {
        // Progress is a courtesy: a failed write to stderr must not fail the command.
        let _ = match self.mode {
            Mode::Off => return,
            Mode::Terminal => write!(self.out, "\r{text}\x1b[K"),
            Mode::Lines => writeln!(self.out, "{text}"),
        };
        let _ = self.out.flush();
        self.drawn_at = Some(Instant::now());
    }

    /// Ends a drawn terminal line: cleared when `keep` is false, else left with a newline.
    fn end_in_place(&mut self, keep: bool) {
        if self.mode == Mode::Terminal && self.drawn() {
            let _ = if keep {
                writeln!(self.out)
            } else {
                write!(self.out, "\r\x1b[K")
            };
            let _ = self.out.flush();
        }
    }
}

/// Counts work done out of a known total and draws it, cleared from a terminal at the end;
/// `--progress` always ends with a final `what: done/total` line.
pub struct Progress<W: Write> {
    line: Line<W>,
    what: String,
    total: u64,
    done: u64,
    /// What the last drawing showed.
    drawn_done: Option<u64>,
}

impl Progress<std::io::Stderr> {
    /// Progress of `what` on stderr.
    pub fn stderr(what: &str, total: u64, forced: bool) -> Self {
        Progress::new(std::io::stderr(), Mode::for_stderr(forced), what, total)
    }
}

impl<W: Write> Progress<W> {
    pub fn new(out: W, mode: Mode, what: &str, total: u64) -> Self {
        Progress {
            line: Line::new(out, mode),
            what: what.to_owned(),
            total,
            done: 0,
            drawn_done: None,
        }
    }

    /// Notes `n` more units done, drawing if the last drawing is old enough; fast work draws
    /// nothing on a terminal.
    pub fn advance(&mut self, n: u64) {
        self.done = self.done.saturating_add(n).min(self.total);
        if self.line.due(false) {
            self.draw();
        }
    }

    /// Ends the progress: clears the terminal line, or writes the final line.
    pub fn finish(mut self) {
        match self.line.mode {
            Mode::Off => {}
            Mode::Terminal => self.line.end_in_place(false),
            Mode::Lines => {
                if self.drawn_done != Some(self.done) {
                    self.draw();
                }
            }
        }
    }

    fn draw(&mut self) {
        let text = format!("{}: {}/{}", self.what, self.done, self.total);
        self.line.draw(&text);
        self.drawn_done = Some(self.done);
    }
}

/// A running count of records and bytes with a rate, drawn at once on the first update and
/// left on screen at the end.
pub struct RecordProgress<W: Write = std::io::Stderr> {
    line: Line<W>,
    verb: &'static str,
}

impl RecordProgress {
    /// Progress for `verb` ("produced", "consumed") on stderr: shown when stderr is a
    /// terminal or `forced`.
    pub fn new(verb: &'static str, forced: bool) -> RecordProgress {
        RecordProgress::to(std::io::stderr(), Mode::for_stderr(forced), verb)
    }

    /// As [`RecordProgress::new`], for a command whose results go to stdout: hidden (unless
    /// `forced`) when stdout is the same terminal, where it would tear the results' lines.
    pub fn beside_stdout(verb: &'static str, forced: bool) -> RecordProgress {
        let mode = if !forced && std::io::stdout().is_terminal() {
            Mode::Off
        } else {
            Mode::for_stderr(forced)
        };
        RecordProgress::to(std::io::stderr(), mode, verb)
    }

    /// No output at all (tests, library use).
    pub fn hidden() -> RecordProgress {
        RecordProgress::to(std::io::stderr(), Mode::Off, "")
    }
}

impl<W: Write> RecordProgress<W> {
    pub fn to(out: W, mode: Mode, verb: &'static str) -> Self {
        RecordProgress {
            line: Line::new(out, mode),
            verb,
        }
    }

    /// Reports the totals so far; draws at most once per [`REDRAW_INTERVAL`].
    pub fn update(&mut self, records: u64, bytes: u64) {
        if self.line.due(true) {
            self.draw(records, bytes);
        }
    }

    /// The final totals, ending the line (only where something was drawn before).
    pub fn finish(&mut self, records: u64, bytes: u64) {
        if !self.line.drawn() {
            return;
        }
        self.draw(records, bytes);
        self.line.end_in_place(true);
    }

    fn draw(&mut self, records: u64, bytes: u64) {
        let text = record_line(self.verb, records, bytes, self.line.started.elapsed());
        self.line.draw(&text);
    }
}

/// `produced 12000 records, 1.5 MiB in 2.0 s (6000 records/s)`.
pub fn record_line(verb: &str, records: u64, bytes: u64, elapsed: Duration) -> String {
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
    fn lines_mode_always_ends_with_the_total() {
        let mut buf = Vec::new();
        let mut p = Progress::new(&mut buf, Mode::Lines, "offsets", 10);
        p.advance(4);
        p.advance(6);
        p.finish();
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(text.lines().last(), Some("offsets: 10/10"));
    }

    #[test]
    fn off_and_quick_terminal_work_draw_nothing() {
        let mut buf = Vec::new();
        let mut p = Progress::new(&mut buf, Mode::Off, "x", 3);
        p.advance(3);
        p.finish();
        let mut p = Progress::new(&mut buf, Mode::Terminal, "x", 3);
        p.advance(3);
        p.finish();
        assert!(buf.is_empty());
    }

    #[test]
    fn slow_terminal_work_is_drawn_in_place_and_cleared() {
        let mut buf = Vec::new();
        let mut p = Progress::new(&mut buf, Mode::Terminal, "topics deleted", 5);
        std::thread::sleep(REDRAW_INTERVAL);
        p.advance(2);
        p.finish();
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(text, "\rtopics deleted: 2/5\x1b[K\r\x1b[K");
    }

    #[test]
    fn the_last_line_is_not_repeated() {
        let mut buf = Vec::new();
        let mut p = Progress::new(&mut buf, Mode::Lines, "x", 4);
        std::thread::sleep(REDRAW_INTERVAL);
        p.advance(4);
        p.finish();
        assert_eq!(String::from_utf8(buf).unwrap(), "x: 4/4\n");
    }

    #[test]
    fn done_never_passes_total() {
        let mut buf = Vec::new();
        let mut p = Progress::new(&mut buf, Mode::Lines, "x", 2);
        p.advance(5);
        p.finish();
        assert!(String::from_utf8(buf).unwrap().ends_with("x: 2/2\n"));
    }

    #[test]
    fn record_line_shows_counts_and_rate() {
        assert_eq!(
            record_line("produced", 12_000, 3 << 19, Duration::from_secs(2)),
            "produced 12000 records, 1.5 MiB in 2.0 s (6000 records/s)"
        );
        assert!(record_line("consumed", 0, 0, Duration::ZERO).ends_with("(0 records/s)"));
    }

    #[test]
    fn records_draw_at_once_then_throttle_and_end_with_the_totals() {
        let mut buf = Vec::new();
        let mut p = RecordProgress::to(&mut buf, Mode::Lines, "consumed");
        p.update(1, 10);
        p.update(2, 20);
        p.finish(3, 30);
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].starts_with("consumed 1 records"), "{text}");
        assert!(lines[1].starts_with("consumed 3 records"), "{text}");
    }

    #[test]
    fn records_on_a_terminal_stay_on_one_line_ended_by_a_newline() {
        let mut buf = Vec::new();
        let mut p = RecordProgress::to(&mut buf, Mode::Terminal, "produced");
        p.update(1, 0);
        p.finish(2, 0);
        let text = String::from_utf8(buf).unwrap();
        assert!(text.starts_with("\rproduced 1 records"), "{text:?}");
        assert!(text.ends_with("records/s)\x1b[K\n"), "{text:?}");
        assert_eq!(text.matches('\n').count(), 1, "{text:?}");
    }

    #[test]
    fn hidden_records_draw_nothing() {
        let mut buf = Vec::new();
        let mut p = RecordProgress::to(&mut buf, Mode::Off, "produced");
        p.update(1, 0);
        p.finish(1, 0);
        assert!(buf.is_empty());
    }
}

//! Progress of long admin work (offsets of thousands of partitions, deleting many topics) on
//! stderr, so that stdout stays the command's result.
//!
//! Shown only when stderr is a terminal (redrawn in place with `\r`) or when asked for with
//! `--progress` (then one plain line per update, for logs). Updates are drawn at most every
//! `REDRAW_INTERVAL`, so fast work draws nothing on a terminal; `--progress` always ends with
//! a final `what: done/total` line.

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

/// Counts work done out of a known total and draws it.
pub struct Progress<W: Write> {
    out: W,
    mode: Mode,
    what: String,
    total: u64,
    done: u64,
    /// When the last update was drawn and what it showed; `None` before the first.
    drawn_at: Option<Instant>,
    drawn_done: Option<u64>,
    started: Instant,
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
            out,
            mode,
            what: what.to_owned(),
            total,
            done: 0,
            drawn_at: None,
            drawn_done: None,
            started: Instant::now(),
        }
    }

    /// Notes `n` more units done, drawing if the last drawing is old enough.
    pub fn advance(&mut self, n: u64) {
        self.done = self.done.saturating_add(n).min(self.total);
        let due = match self.drawn_at {
            None => self.started.elapsed() >= REDRAW_INTERVAL,
            Some(at) => at.elapsed() >= REDRAW_INTERVAL,
        };
        if due && self.mode != Mode::Off {
            self.draw();
        }
    }

    /// Ends the progress: clears the terminal line, or writes the final line.
    pub fn finish(mut self) {
        match self.mode {
            Mode::Off => {}
            Mode::Terminal => {
                if self.drawn_at.is_some() {
                    // Progress is a courtesy: a failed write to stderr must not fail the command.
                    let _ = write!(self.out, "\r\x1b[K");
                    let _ = self.out.flush();
                }
            }
            Mode::Lines => {
                if self.drawn_done != Some(self.done) {
                    self.draw();
                }
            }
        }
    }

    fn draw(&mut self) {
        let line = format!("{}: {}/{}", self.what, self.done, self.total);
        let _ = match self.mode {
            Mode::Off => Ok(()),
            Mode::Terminal => write!(self.out, "\r{line}\x1b[K"),
            Mode::Lines => writeln!(self.out, "{line}"),
        };
        let _ = self.out.flush();
        self.drawn_at = Some(Instant::now());
        self.drawn_done = Some(self.done);
    }
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
}

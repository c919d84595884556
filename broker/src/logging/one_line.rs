//! Keeps every event on one line: a message, a field or a panic's backtrace that holds line
//! breaks would otherwise split one event over several lines (and a line-based collector
//! would take the rest for new events). Line breaks inside an event are written `\n` / `\r`.
//! (JSON output is escaped by serde already; this changes nothing there.)

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;

/// stderr, one event per line.
pub struct OneLineStderr;

impl<'a> MakeWriter<'a> for OneLineStderr {
    type Writer = OneLine<io::Stderr>;

    fn make_writer(&'a self) -> Self::Writer {
        OneLine(io::stderr())
    }
}

/// Writes each buffer it is given (the formatter hands over one whole event) with its inner
/// line breaks escaped, in one `write_all` (events of different threads do not interleave).
pub struct OneLine<W: Write>(pub W);

impl<W: Write> Write for OneLine<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (body, end) = match buf.strip_suffix(b"\n") {
            Some(body) => (body, &b"\n"[..]),
            None => (buf, &b""[..]),
        };
        if !body.iter().any(|&b| b == b'\n' || b == b'\r') {
            self.0.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut line = Vec::with_capacity(buf.len() + 16);
        for &b in body {
            match b {
                b'\n' => line.extend_from_slice(b"\\n"),
                b'\r' => line.extend_from_slice(b"\\r"),
                other => line.push(other),
            }
        }
        line.extend_from_slice(end);
        self.0.write_all(&line)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through(input: &[u8]) -> Vec<u8> {
        let mut out = OneLine(Vec::new());
        out.write_all(input).unwrap();
        out.0
    }

    #[test]
    fn inner_line_breaks_are_escaped_the_last_kept() {
        assert_eq!(through(b"plain event\n"), b"plain event\n");
        assert_eq!(
            through(b"panicked: boom\nstack backtrace:\r\n  0: main\n"),
            b"panicked: boom\\nstack backtrace:\\r\\n  0: main\n"
        );
        assert_eq!(through(b"no end\nat all"), b"no end\\nat all");
    }
}

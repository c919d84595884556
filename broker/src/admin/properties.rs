//! Java properties files, as kafka-configs.sh's `--add-config-file` reads them
//! (`java.util.Properties.load`): `key=value`, `key: value` or `key value` lines, `#` and `!`
//! comment lines, a trailing backslash continuing a line, and backslash escapes.

/// A properties file that cannot be read as one.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PropertiesError {
    #[error("line {line}: bad \\u escape")]
    BadUnicodeEscape { line: usize },
}

/// The `(key, value)` pairs of `text`, in file order (a later duplicate key wins when the
/// caller collects them into a map, as in Java).
pub fn parse(text: &str) -> Result<Vec<(String, String)>, PropertiesError> {
    let mut pairs = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, first)) = lines.next() {
        let first = first.trim_start_matches([' ', '\t', '\x0c']);
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        // Joins continuation lines: an odd count of trailing backslashes escapes the newline.
        let mut logical = first.to_owned();
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches([' ', '\t', '\x0c'])),
                None => break,
            }
        }
        pairs.push(split_pair(&logical, i + 1)?);
    }
    Ok(pairs)
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Splits a logical line at the first unescaped `=`, `:` or whitespace, then unescapes.
fn split_pair(line: &str, number: usize) -> Result<(String, String), PropertiesError> {
    let bytes = line.as_bytes();
    let mut end = bytes.len();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' | b' ' | b'\t' | b'\x0c' => {
                end = i;
                break;
            }
            _ => i += 1,
        }
    }
    let key = &line[..end.min(line.len())];
    let mut rest = line.get(end..).unwrap_or("");
    rest = rest.trim_start_matches([' ', '\t', '\x0c']);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches([' ', '\t', '\x0c']);
    }
    Ok((unescape(key, number)?, unescape(rest, number)?))
}

fn unescape(s: &str, line: usize) -> Result<String, PropertiesError> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let c = u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)
                    .and_then(char::from_u32)
                    .ok_or(PropertiesError::BadUnicodeEscape { line })?;
                out.push(c);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text).unwrap()
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_owned(), v.to_owned())
    }

    #[test]
    fn separators_comments_and_blank_lines_as_java_reads_them() {
        let text = "# a comment\n! another\n\nretention.ms=1000\ncleanup.policy : compact\n  \
                    segment.bytes 1048576\nempty=\nbare\n";
        assert_eq!(
            pairs(text),
            vec![
                kv("retention.ms", "1000"),
                kv("cleanup.policy", "compact"),
                kv("segment.bytes", "1048576"),
                kv("empty", ""),
                kv("bare", ""),
            ]
        );
    }

    #[test]
    fn continuations_and_escapes() {
        let text = "list=a,\\\n    b,\\\n    c\nkey\\=with\\:seps=v\\u0041\\\\\nurl=http\\://x\n";
        assert_eq!(
            pairs(text),
            vec![
                kv("list", "a,b,c"),
                kv("key=with:seps", "vA\\"),
                kv("url", "http://x"),
            ]
        );
        assert_eq!(
            parse("k=\\u00zz\n"),
            Err(PropertiesError::BadUnicodeEscape { line: 1 })
        );
    }
}

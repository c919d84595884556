//! Java properties syntax (`server.properties`): comments, continuations, escapes; and the
//! comma lists many values are (`list_items`).

use super::ConfigError;

/// Parses Java-properties text into (key, value, line) in file order (later duplicates win
/// when collected into a map, as in `java.util.Properties`).
pub fn parse_properties(
    path: &str,
    text: &str,
) -> Result<Vec<(String, String, usize)>, ConfigError> {
    let mut out = Vec::new();
    let mut lines = text.split('\n').enumerate();
    while let Some((idx, raw)) = lines.next() {
        let first = raw.strip_suffix('\r').unwrap_or(raw).trim_start();
        // Comment lines are never continued (Java semantics).
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        let mut logical = String::new();
        let mut cur = first.to_string();
        loop {
            let trailing = cur.chars().rev().take_while(|&c| c == '\\').count();
            if trailing % 2 == 1 {
                cur.pop();
                logical.push_str(&cur);
                match lines.next() {
                    Some((_, next)) => {
                        cur = next
                            .strip_suffix('\r')
                            .unwrap_or(next)
                            .trim_start()
                            .to_string()
                    }
                    None => break,
                }
            } else {
                logical.push_str(&cur);
                break;
            }
        }
        let (k, v) = split_key_value(&logical);
        let syntax = |message: String| ConfigError::Syntax {
            path: path.to_string(),
            line: idx + 1,
            message,
        };
        let key = unescape(k).map_err(syntax)?;
        let value = unescape(v).map_err(syntax)?;
        out.push((key, value.trim_end().to_string(), idx + 1));
    }
    Ok(out)
}

/// Splits at the first unescaped `=`, `:` or whitespace (Java rules).
fn split_key_value(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' => return (&line[..i], line[i + 1..].trim_start()),
            b' ' | b'\t' | b'\x0c' => {
                let rest = line[i..].trim_start();
                let rest = rest
                    .strip_prefix('=')
                    .or_else(|| rest.strip_prefix(':'))
                    .map(str::trim_start)
                    .unwrap_or(rest);
                return (&line[..i], rest);
            }
            _ => i += 1,
        }
    }
    (line, "")
}

fn unescape(s: &str) -> Result<String, String> {
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
                let cp = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .and_then(char::from_u32)
                    .ok_or_else(|| format!("malformed \\u escape `\\u{hex}`"))?;
                out.push(cp);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

/// Items of a comma list, trimmed, empty items dropped (Kafka's LIST parse).
pub(super) fn list_items(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse_properties("t.properties", text)
            .unwrap()
            .into_iter()
            .map(|(k, v, _)| (k, v))
            .collect()
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
        assert!(matches!(
            parse_properties("t.properties", "k=\\u00zz\n"),
            Err(ConfigError::Syntax { line: 1, .. })
        ));
    }
}

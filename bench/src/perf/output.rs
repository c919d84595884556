//! Output helpers: Java's `%.Nf`/`%f` number formatting, Kafka's date format, JSON files.
//!
//! Java's `Formatter` rounds the shortest decimal representation of a double HALF_UP
//! (`String.format("%.1f", 0.15)` is `0.2`, where C's printf gives `0.1`); [`java_fixed`]
//! does the same so our lines are byte-for-byte what Kafka's tools would print.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Formats `x` like Java's `String.format("%.{decimals}f", x)`.
pub fn java_fixed(x: f64, decimals: usize) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    // Java keeps the sign even when the rounded digits are all zero ("-0.00").
    let negative = x.is_sign_negative();
    // Shortest round-trip digits, never in exponent form.
    let repr = format!("{}", x.abs());
    let (int_part, frac_part) = match repr.split_once('.') {
        Some((i, f)) => (i.to_string(), f.to_string()),
        None => (repr.clone(), String::new()),
    };
    let mut digits: Vec<u8> = int_part
        .bytes()
        .chain(frac_part.bytes())
        .map(|b| b - b'0')
        .collect();
    let int_len = int_part.len();
    let keep = int_len + decimals;
    if digits.len() > keep {
        let round_up = digits[keep] >= 5;
        digits.truncate(keep);
        if round_up {
            let mut i = keep;
            loop {
                if i == 0 {
                    digits.insert(0, 1);
                    break;
                }
                i -= 1;
                if digits[i] == 9 {
                    digits[i] = 0;
                } else {
                    digits[i] += 1;
                    break;
                }
            }
        }
    } else {
        digits.resize(keep, 0);
    }
    let int_digits = digits.len() - decimals;
    let mut out = String::with_capacity(digits.len() + 2);
    if negative {
        out.push('-');
    }
    for &d in &digits[..int_digits] {
        out.push((b'0' + d) as char);
    }
    if int_digits == 0 {
        out.push('0');
    }
    if decimals > 0 {
        out.push('.');
        for &d in &digits[int_digits..] {
            out.push((b'0' + d) as char);
        }
    }
    out
}

/// Java's `%f` (six decimals).
pub fn java_f(x: f64) -> String {
    java_fixed(x, 6)
}

/// Kafka's consumer-perf date format `yyyy-MM-dd HH:mm:ss:SSS`, in local time like Java's
/// `SimpleDateFormat`.
pub fn kafka_date(t: SystemTime) -> String {
    let dt: chrono::DateTime<chrono::Local> = t.into();
    dt.format("%Y-%m-%d %H:%M:%S:%3f").to_string()
}

/// RFC 3339 UTC time with milliseconds, for the JSON reports.
pub fn rfc3339(t: SystemTime) -> String {
    let dt: chrono::DateTime<chrono::Utc> = t.into();
    dt.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
    }
}

/// A point in time in both JSON-friendly forms.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Timestamp {
    pub unix_ms: i64,
    pub rfc3339: String,
}

impl Timestamp {
    pub fn of(t: SystemTime) -> Self {
        Timestamp {
            unix_ms: unix_ms(t),
            rfc3339: rfc3339(t),
        }
    }
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    use anyhow::Context;
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// Bytes to Kafka's "MB" (MiB: both tools divide by 1024 * 1024).
pub fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_rounding() {
        assert_eq!(java_fixed(0.15, 1), "0.2");
        assert_eq!(java_fixed(0.125, 2), "0.13");
        assert_eq!(java_fixed(2.5, 0), "3");
        assert_eq!(java_fixed(9.96, 1), "10.0");
        assert_eq!(java_fixed(99.999, 2), "100.00");
        assert_eq!(java_fixed(0.0, 2), "0.00");
        assert_eq!(java_fixed(1234.5, 6), "1234.500000");
        assert_eq!(java_fixed(-0.004, 2), "-0.00");
        assert_eq!(java_fixed(-1.25, 1), "-1.3");
        assert_eq!(java_fixed(0.00001, 4), "0.0000");
        assert_eq!(java_fixed(0.00005, 4), "0.0001");
        assert_eq!(java_fixed(1e20, 1), "100000000000000000000.0");
        assert_eq!(java_fixed(f64::INFINITY, 2), "Infinity");
        assert_eq!(java_f(1.0 / 3.0), "0.333333");
    }
}

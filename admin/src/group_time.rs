//! The times `groups reset-offsets` takes: `--to-datetime` (ISO-8601 as
//! kafka-consumer-groups.sh, `YYYY-MM-DDTHH:mm:SS.sss` with an optional zone, local time
//! without one) and `--by-duration` (Java's `Duration` text, `PnDTnHnMnS`).

use anyhow::{bail, Context};

/// Milliseconds since the epoch of an ISO-8601 date-time.
pub fn parse_datetime(text: &str) -> anyhow::Result<i64> {
    let bad = || format!("bad date-time {text:?}: expected YYYY-MM-DDTHH:mm:SS[.sss][Z|+hh:mm]");
    let (date, rest) = text.split_once('T').with_context(bad)?;
    let mut date_parts = date.split('-');
    let (Some(y), Some(mo), Some(d), None) = (
        date_parts.next(),
        date_parts.next(),
        date_parts.next(),
        date_parts.next(),
    ) else {
        bail!(bad());
    };
    // The zone: Z, +hh:mm, -hh:mm, +hhmm or none (local time).
    let (time, zone_minutes) = if let Some(t) = rest.strip_suffix('Z') {
        (t, Some(0))
    } else if let Some(at) = rest.rfind(['+', '-']) {
        let (t, z) = rest.split_at(at);
        let sign = if z.starts_with('-') { -1 } else { 1 };
        let digits: String = z[1..].chars().filter(|c| *c != ':').collect();
        if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            bail!(bad());
        }
        let hh: i64 = digits[..2].parse()?;
        let mm: i64 = digits[2..].parse()?;
        (t, Some(sign * (hh * 60 + mm)))
    } else {
        (rest, None)
    };
    let mut time_parts = time.split(':');
    let (Some(h), Some(mi), s, None) = (
        time_parts.next(),
        time_parts.next(),
        time_parts.next(),
        time_parts.next(),
    ) else {
        bail!(bad());
    };
    let (sec, millis) = match s.unwrap_or("0").split_once('.') {
        Some((sec, frac)) => {
            if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
                bail!(bad());
            }
            let ms: i64 = format!("{frac:0<3}")[..3].parse()?;
            (sec, ms)
        }
        None => (s.unwrap_or("0"), 0),
    };
    let num = |v: &str, lo: i64, hi: i64| -> anyhow::Result<i64> {
        let n: i64 = v.parse().with_context(bad)?;
        if !(lo..=hi).contains(&n) {
            bail!(bad());
        }
        Ok(n)
    };
    let (y, mo, d) = (num(y, 1970, 9999)?, num(mo, 1, 12)?, num(d, 1, 31)?);
    let (h, mi, sec) = (num(h, 0, 23)?, num(mi, 0, 59)?, num(sec, 0, 60)?);
    let seconds = match zone_minutes {
        Some(z) => days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + sec - z * 60,
        None => local_seconds(y, mo, d, h, mi, sec)?,
    };
    Ok(seconds * 1000 + millis)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Seconds since the epoch of a local wall-clock time (the process's time zone, as Java's
/// default zone), through the C library's `mktime`.
fn local_seconds(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64) -> anyhow::Result<i64> {
    // SAFETY: an all-zero `tm` is a valid value; mktime only reads and normalises it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = (y - 1900) as libc::c_int;
    tm.tm_mon = (mo - 1) as libc::c_int;
    tm.tm_mday = d as libc::c_int;
    tm.tm_hour = h as libc::c_int;
    tm.tm_min = mi as libc::c_int;
    tm.tm_sec = s as libc::c_int;
    // Let the C library decide whether daylight saving time applies.
    tm.tm_isdst = -1;
    // SAFETY: `tm` is a valid, exclusively borrowed struct.
    let t = unsafe { libc::mktime(&mut tm) };
    if t == -1 {
        bail!("the local time {y}-{mo}-{d}T{h}:{mi}:{s} cannot be represented");
    }
    Ok(t)
}

/// Milliseconds of a Java `Duration` text: `PnDTnHnMnS` (each part optional, seconds may
/// have a fraction), e.g. `P1DT2H`, `PT30M`, `PT1.5S`.
pub fn parse_duration(text: &str) -> anyhow::Result<i64> {
    let bad = || format!("bad duration {text:?}: expected PnDTnHnMnS, e.g. P1DT2H30M");
    let upper = text.to_ascii_uppercase();
    let rest = upper.strip_prefix('P').with_context(bad)?;
    let (days, time) = match rest.split_once('T') {
        Some((d, t)) => {
            if t.is_empty() {
                bail!(bad());
            }
            (d, t)
        }
        None => (rest, ""),
    };
    let mut millis: f64 = 0.0;
    let mut parts = 0;
    if !days.is_empty() {
        let n = days.strip_suffix('D').with_context(bad)?;
        let n: f64 = n.parse::<u64>().with_context(bad)? as f64;
        millis += n * 86_400_000.0;
        parts += 1;
    }
    let mut number = String::new();
    for c in time.chars() {
        match c {
            '0'..='9' | '.' => number.push(c),
            'H' | 'M' | 'S' => {
                let n: f64 = number.parse().with_context(bad)?;
                if c != 'S' && number.contains('.') {
                    bail!(bad());
                }
                millis += n * match c {
                    'H' => 3_600_000.0,
                    'M' => 60_000.0,
                    _ => 1_000.0,
                };
                number.clear();
                parts += 1;
            }
            _ => bail!(bad()),
        }
    }
    if parts == 0 || !number.is_empty() {
        bail!(bad());
    }
    Ok(millis.round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes_with_zones() {
        assert_eq!(parse_datetime("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(
            parse_datetime("2020-01-01T00:00:00.000Z").unwrap(),
            1_577_836_800_000
        );
        assert_eq!(
            parse_datetime("2020-01-01T01:30:00.5+01:30").unwrap(),
            1_577_836_800_500
        );
        assert_eq!(
            parse_datetime("2019-12-31T19:00:00-0500").unwrap(),
            1_577_836_800_000
        );
        assert_eq!(
            parse_datetime("2024-02-29T12:00Z").unwrap(),
            1_709_208_000_000
        );
        for bad in [
            "2020-01-01",
            "2020-13-01T00:00:00Z",
            "2020-01-01T25:00:00Z",
            "2020-01-01T00:00:00+1",
            "x",
        ] {
            assert!(parse_datetime(bad).is_err(), "{bad}");
        }
        // No zone: local time, which is the same instant give or take a day.
        let local = parse_datetime("2020-01-01T00:00:00").unwrap();
        assert!((local - 1_577_836_800_000).abs() <= 86_400_000);
    }

    #[test]
    fn durations_as_java_parses_them() {
        assert_eq!(parse_duration("PT1H").unwrap(), 3_600_000);
        assert_eq!(parse_duration("P1DT2H3M4.5S").unwrap(), 93_784_500);
        assert_eq!(parse_duration("P2D").unwrap(), 172_800_000);
        assert_eq!(parse_duration("pt30m").unwrap(), 1_800_000);
        for bad in ["", "P", "PT", "1H", "PT1.5H", "PT5", "P1H"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}

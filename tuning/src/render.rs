//! Check output: an aligned table for people, JSON for scripts.

use std::io::Write;

use crate::finding::Finding;
use crate::TuneError;

/// Table cells longer than this are cut (the JSON keeps them whole).
const MAX_CELL: usize = 44;

fn cell(text: &str) -> String {
    if text.chars().count() <= MAX_CELL {
        text.to_string()
    } else {
        let cut: String = text.chars().take(MAX_CELL - 1).collect();
        format!("{cut}…")
    }
}

pub fn table(findings: &[Finding], out: &mut dyn Write) -> Result<(), TuneError> {
    let header = ["CHECK", "CURRENT", "WANTED", "SEVERITY", "REASON"];
    let rows: Vec<[String; 5]> = findings
        .iter()
        .map(|f| {
            [
                cell(&f.check),
                cell(&f.current),
                cell(&f.wanted),
                f.severity.as_str().to_string(),
                f.reason.clone(),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (width, text) in widths.iter_mut().zip(row.iter()) {
            *width = (*width).max(text.chars().count());
        }
    }
    let line = |cells: [&str; 5], out: &mut dyn Write| -> std::io::Result<()> {
        let mut text = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                text.push_str(c);
            } else {
                let pad = widths[i] - c.chars().count();
                text.push_str(c);
                text.push_str(&" ".repeat(pad + 2));
            }
        }
        writeln!(out, "{}", text.trim_end())
    };
    line(header, out)?;
    for row in &rows {
        line([&row[0], &row[1], &row[2], &row[3], &row[4]], out)?;
    }
    let short = findings.iter().filter(|f| f.severity.falls_short()).count();
    writeln!(out)?;
    writeln!(
        out,
        "{short} of {} checks fall short; `apply` shows the changes, `apply --yes` makes them",
        findings.len()
    )?;
    Ok(())
}

pub fn json(findings: &[Finding], out: &mut dyn Write) -> Result<(), TuneError> {
    serde_json::to_writer_pretty(&mut *out, findings)?;
    writeln!(out)?;
    Ok(())
}

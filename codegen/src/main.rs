//! Generates the Rust message codecs of `wire` from Apache Kafka's JSON message schemas.
//!
//! Usage: `cargo run -p codegen -- <schema dir> <out dir> [<random helper file>]`, e.g.
//! `cargo run -p codegen -- /work/shared/kafka-message-schemas/wire wire/src/generated`.
//! Internal records: `cargo run -p codegen -- --data <schema dir> <out dir>`, e.g.
//! `cargo run -p codegen -- --data /work/shared/kafka-message-schemas/group-coordinator wire/src/group_records`.
//! The output is committed, so building `wire` never needs the schemas. The random-message
//! helper used by wire's differential tests goes to `<out dir>/../../tests/random/mod.rs`
//! unless a third argument names another file.
//!
//! Why our own generator rather than the `kafka-protocol` crate's messages:
//! * decoding must be bounded by the input: every length and count is checked against the
//!   bytes left before anything is allocated (kafka-protocol 0.18 aborts the process on a
//!   4-byte MetadataRequest whose array count is 0x7fffff00);
//! * `bytes`/`records` fields must be zero-copy slices of the request buffer;
//! * we want to follow the exact schema revision the broker implements, plain `String`s
//!   and `Vec`s, and Kafka's own encode-time checks (non-default values in fields a version
//!   lacks, nulls where not nullable) as errors instead of silent loss;
//! * the generator is small enough to read in one sitting, and so is its output.
//!
//! The schemas are JSON with `//` line comments (see SCHEMA-FORMAT.md next to them).

mod api_index;
mod codec;
mod data;
mod error_codes;
mod message;
mod random;
mod schema;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::api_index::{generate_api, generate_mod};
use crate::data::generate_data;
use crate::message::generate_file;
use crate::random::generate_random;
use crate::schema::{load_dir, snake};

/// Formats the output if rustfmt is around (only our own files); the output is still valid
/// Rust without it, only harder to read.
fn rustfmt(files: &[PathBuf]) {
    let status = std::process::Command::new("rustfmt")
        .arg("--edition=2021")
        .args(files)
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        eprintln!("note: rustfmt did not run on the generated files");
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 4 && args[1] == "--data" {
        return generate_data(Path::new(&args[2]), Path::new(&args[3]));
    }
    if args.len() < 3 {
        bail!("usage: codegen <schema dir> <out dir> [<random helper file>]");
    }
    let (schema_dir, out_dir) = (PathBuf::from(&args[1]), PathBuf::from(&args[2]));
    let random_path = args
        .get(3)
        .map(PathBuf::from)
        .unwrap_or_else(|| out_dir.join("../../tests/random/mod.rs"));
    let schemas = load_dir(&schema_dir, |s| {
        matches!(s.kind.as_str(), "request" | "response" | "header")
    })?;
    std::fs::create_dir_all(&out_dir)?;
    for s in &schemas {
        let code = generate_file(s).with_context(|| format!("generating {}", s.name))?;
        std::fs::write(out_dir.join(format!("{}.rs", snake(&s.name))), code)?;
    }
    std::fs::write(out_dir.join("mod.rs"), generate_mod(&schemas)?)?;
    std::fs::write(out_dir.join("api.rs"), generate_api(&schemas)?)?;
    if let Some(dir) = random_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&random_path, generate_random(&schemas)?)?;
    let mut files: Vec<PathBuf> = schemas
        .iter()
        .map(|s| out_dir.join(format!("{}.rs", snake(&s.name))))
        .collect();
    files.push(out_dir.join("mod.rs"));
    files.push(out_dir.join("api.rs"));
    files.push(random_path.clone());
    rustfmt(&files);
    eprintln!(
        "generated {} schemas into {}",
        schemas.len(),
        out_dir.display()
    );
    Ok(())
}

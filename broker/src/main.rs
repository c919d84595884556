//! `broker`: the Kafka-protocol broker binary.
//!
//! `broker start [--config server.properties] [--override key=value ...]` loads Kafka-style
//! configuration, opens the metadata log, and starts one glommio shard per core (see
//! `server`). Errors at start-up are reported with context and a non-zero exit.
//! `broker tune check|apply` runs the `tuning` crate's host checks; `broker dump-log` prints a
//! log segment and `broker topics` administers topics; `broker groups`, `broker produce` and
//! `broker consume` are kafka-consumer-groups.sh and the console producer and consumer (see
//! `admin`).

use broker::{admin, config, server};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "broker",
    version,
    about = "A Kafka-protocol broker, thread-per-core on io_uring"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Starts the broker (defaults: one node on 127.0.0.1:9092, data in ./data).
    Start {
        /// A Kafka server.properties file.
        #[arg(long)]
        config: Option<PathBuf>,
        /// `key=value` settings applied after the file, with Kafka's key names.
        #[arg(long = "override", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    /// Checks and tunes this host for the broker (`tune check`, `tune apply [--yes|--script]`).
    Tune {
        #[command(subcommand)]
        command: tuning::cli::TuneCommand,
    },
    /// Prints the batches (and with --print-data the records) of a `.log` segment file.
    DumpLog {
        /// A segment file, e.g. data/<topic>-<partition>/00000000000000000000.log.
        file: PathBuf,
        /// Also print every record: offset, timestamp, key, value and headers.
        #[arg(long)]
        print_data: bool,
        /// One JSON object per line (per batch and per record).
        #[arg(long)]
        json: bool,
    },
    /// Creates, lists, describes and deletes topics over the Kafka protocol (kafka-topics.sh).
    Topics {
        #[command(subcommand)]
        command: admin::topics::TopicsCommand,
    },
    /// Lists, describes and resets consumer groups (kafka-consumer-groups.sh).
    Groups {
        #[command(subcommand)]
        command: admin::groups::GroupsCommand,
    },
    /// Produces the lines of stdin as records (kafka-console-producer.sh).
    Produce(admin::produce::ProduceArgs),
    /// Prints a topic's records without a consumer group (kafka-console-consumer.sh).
    Consume(admin::consume::ConsumeArgs),
}

/// glibc serves allocations above its mmap threshold (128 KiB by default, adapting upwards)
/// with fresh mmap'd pages, so every large request frame paid page faults and page zeroing
/// (`clear_page`) per 4 KiB. Keeping them in the heap reuses warm memory.
fn tune_allocator() {
    const MMAP_THRESHOLD_BYTES: libc::c_int = 64 << 20;
    const TRIM_THRESHOLD_BYTES: libc::c_int = 256 << 20;
    // SAFETY: mallopt only adjusts glibc's allocator parameters; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES);
    }
}

fn main() {
    tune_allocator();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Start { config, overrides } => start(config, overrides),
        Command::Tune { command } => tune(command),
        Command::DumpLog {
            file,
            print_data,
            json,
        } => dump_log(&file, admin::dump_log::Options { print_data, json }),
        Command::Topics { command } => topics(command),
        Command::Groups { command } => groups(command),
        Command::Produce(args) => produce(&args),
        Command::Consume(args) => consume(&args),
    };
    if let Err(error) = result {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}

fn tune(command: tuning::cli::TuneCommand) -> anyhow::Result<()> {
    let code = tuning::cli::run(command, &mut std::io::stdout().lock())?;
    if code != 0 {
        std::process::exit(code);
    }
    Ok(())
}

fn dump_log(file: &std::path::Path, options: admin::dump_log::Options) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    admin::dump_log::run(file, options, &mut out)?;
    std::io::Write::flush(&mut out)?;
    Ok(())
}

fn topics(command: admin::topics::TopicsCommand) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let result = command.run(&mut out);
    std::io::Write::flush(&mut out)?;
    result
}

fn groups(command: admin::groups::GroupsCommand) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let result = command.run(&mut out, &mut std::io::stderr());
    std::io::Write::flush(&mut out)?;
    result
}

fn produce(args: &admin::produce::ProduceArgs) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    admin::produce::run_stdin(args, &mut out)?;
    Ok(())
}

fn consume(args: &admin::consume::ConsumeArgs) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut progress =
        admin::record_progress::RecordProgress::beside_stdout("consumed", args.progress);
    let result = admin::consume::run(args, &mut out, &mut progress);
    std::io::Write::flush(&mut out)?;
    // kafka-console-consumer.sh's last line, on stderr so stdout holds only records.
    if let Ok(n) = result {
        eprintln!("Processed a total of {n} messages");
    }
    result.map(|_| ())
}

fn start(config_path: Option<PathBuf>, overrides: Vec<String>) -> anyhow::Result<()> {
    let config =
        config::load(config_path.as_deref(), &overrides).context("invalid configuration")?;
    for key in &config.ignored {
        tracing::info!(key = %key, "configuration key accepted but not used by this broker");
    }
    server::run(config)
}

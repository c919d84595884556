//! `broker`: the Kafka-protocol broker binary.
//!
//! `broker start [--config server.properties] [--override key=value ...]` loads Kafka-style
//! configuration, opens the metadata log, and starts one glommio shard per core (see
//! `server`). Errors at start-up are reported with context and a non-zero exit.
//! `broker tune check|apply` runs the `tuning` crate's host checks; `broker dump-log` prints a
//! log segment, `broker topics` administers topics, `broker get-offsets` and
//! `broker describe-cluster` ask any Kafka broker; `broker groups`, `broker produce` and
//! `broker consume` are kafka-consumer-groups.sh and the console producer and consumer (see
//! `admin`); `broker log-level` reads and changes a running broker's log levels (see `logging`).

use broker::{admin, alloc_count, config, logging, server};
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
    /// Creates, lists, describes, alters and deletes topics over the Kafka protocol
    /// (kafka-topics.sh, kafka-configs.sh).
    Topics {
        #[command(subcommand)]
        command: admin::topics::TopicsCommand,
    },
    /// Prints or changes a broker's log levels (kafka-configs.sh --entity-type broker-loggers).
    LogLevel(admin::log_level::LogLevelArgs),
    /// Prints partitions' offsets at a time: earliest, latest, ... (kafka-get-offsets.sh).
    GetOffsets(admin::offsets::GetOffsetsArgs),
    /// Prints the cluster id, the controller and the brokers.
    DescribeCluster(admin::cluster::DescribeClusterArgs),
    /// Describes the metadata quorum (kafka-metadata-quorum.sh describe --status |
    /// --replication).
    MetadataQuorum {
        #[command(subcommand)]
        command: admin::quorum::MetadataQuorumCommand,
    },
    /// Lists, describes and resets consumer groups (kafka-consumer-groups.sh).
    Groups {
        #[command(subcommand)]
        command: admin::groups::GroupsCommand,
    },
    /// Lists, describes and aborts transactions; finds hanging ones (kafka-transactions.sh).
    Transactions {
        #[command(subcommand)]
        command: admin::transactions::TransactionsCommand,
    },
    /// Adds, describes and removes users' SCRAM credentials (kafka-configs.sh --entity-type
    /// users).
    Scram {
        #[command(subcommand)]
        command: admin::scram::ScramCommand,
    },
    /// Sets, removes and describes client quotas (kafka-configs.sh --entity-type
    /// users|clients|ips).
    Quotas {
        #[command(subcommand)]
        command: admin::quotas::QuotasCommand,
    },
    /// Adds, lists and removes ACLs (kafka-acls.sh).
    Acls {
        #[command(subcommand)]
        command: admin::acls::AclsCommand,
    },
    /// Produces the lines of stdin as records (kafka-console-producer.sh).
    Produce(admin::produce::ProduceArgs),
    /// Prints a topic's records without a consumer group (kafka-console-consumer.sh).
    Consume(admin::consume::ConsumeArgs),
}

/// glibc serves allocations above its mmap threshold (128 KiB by default, adapting upwards)
/// with fresh mmap'd pages, so every large request frame paid page faults and page zeroing
/// (`clear_page`) per 4 KiB. Keeping them in the heap reuses warm memory.
/// The system allocator; it counts allocations per thread only with
/// `BROKER_COUNT_ALLOCATIONS=1` (see `alloc_count`).
#[global_allocator]
static ALLOCATOR: alloc_count::Counting = alloc_count::Counting;

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
    let cli = Cli::parse();
    // `start` installs its own, from its configuration (format, levels that change at run
    // time).
    if !matches!(cli.command, Command::Start { .. }) {
        logging::init_tool();
    }
    let result = match cli.command {
        Command::Start { config, overrides } => start(config, overrides),
        Command::Tune { command } => tune(command),
        Command::DumpLog {
            file,
            print_data,
            json,
        } => dump_log(&file, admin::dump_log::Options { print_data, json }),
        Command::Topics { command } => topics(command),
        Command::LogLevel(args) => to_stdout(|out| admin::log_level::run(&args, out)),
        Command::GetOffsets(args) => to_stdout(|out| admin::offsets::run(&args, out)),
        Command::DescribeCluster(args) => to_stdout(|out| admin::cluster::run(&args, out)),
        Command::MetadataQuorum { command } => to_stdout(|out| admin::quorum::run(&command, out)),
        Command::Groups { command } => to_stdout(|out| command.run(out, &mut std::io::stderr())),
        Command::Transactions { command } => to_stdout(|out| command.run(out)),
        Command::Scram { command } => to_stdout(|out| command.run(out)),
        Command::Quotas { command } => to_stdout(|out| command.run(out)),
        Command::Acls { command } => to_stdout(|out| command.run(out)),
        Command::Produce(args) => produce(&args),
        Command::Consume(args) => consume(&args),
    };
    if let Err(error) = result {
        // A reader that went away (`broker consume ... | head`) ends the command, as it ends
        // `cat`: quietly, not with an error about our stdout.
        if is_broken_pipe(&error) {
            std::process::exit(0);
        }
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
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

/// Runs an admin command whose output goes to buffered stdout.
fn to_stdout(
    command: impl FnOnce(&mut dyn std::io::Write) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let result = command(&mut out);
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
        admin::progress::RecordProgress::beside_stdout("consumed", args.common.progress);
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
    let levels = logging::starting_levels(&config.log_levels).context("RUST_LOG")?;
    logging::init_broker(config.log_format, levels)?;
    for key in &config.ignored {
        tracing::info!(key = %key, "configuration key accepted but not used by this broker");
    }
    if alloc_count::enable_from_env() {
        tracing::info!(
            "counting heap allocations per thread ({}=1): broker_heap_allocations_total",
            alloc_count::ENV
        );
    }
    if let Err(error) = server::run(config) {
        // An event like any other (one line, JSON with log.format=json).
        tracing::error!("{error:#}");
        std::process::exit(1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::is_broken_pipe;
    use anyhow::Context;
    use std::io::{Error, ErrorKind};

    #[test]
    fn a_closed_reader_is_told_from_other_errors() {
        let pipe: anyhow::Result<()> = Err(Error::from(ErrorKind::BrokenPipe).into());
        assert!(is_broken_pipe(
            &pipe.context("writing a record").unwrap_err()
        ));
        let refused: anyhow::Result<()> = Err(Error::from(ErrorKind::ConnectionRefused).into());
        assert!(!is_broken_pipe(&refused.context("connecting").unwrap_err()));
        assert!(!is_broken_pipe(&anyhow::anyhow!("broken pipe")));
    }
}

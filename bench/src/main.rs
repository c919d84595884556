//! `bench`: Kafka-protocol benchmark tools. See `bench --help` and `bench/src/perf/`.

use bench::perf::{ConsumerArgs, E2eArgs, ProducerArgs};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "bench",
    about = "Kafka-protocol benchmarks: perf tools with Kafka's output formats"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Producer throughput and latency, like kafka-producer-perf-test.
    ProducerPerf(ProducerArgs),
    /// Consumer throughput, like kafka-consumer-perf-test.
    ConsumerPerf(ConsumerArgs),
    /// End-to-end latency at a fixed rate, like Kafka's EndToEndLatency tool.
    E2eLatency(E2eArgs),
    // other subcommands: compare, limits, null-broker (bench/src/compare.rs, limits/)
    /// The same workload against two brokers, A B A B for several rounds: medians and A/B.
    Compare(bench::compare::CompareArgs),
    /// This machine's floors and ceilings (loopback TCP, fdatasync, AES-GCM, sendfile, null broker).
    Limits(bench::limits::LimitsArgs),
    /// A Kafka responder that stores nothing (client and protocol costs without a broker's).
    NullBroker(bench::null_broker::NullBrokerArgs),
    /// Writes RESULTS.md from `limits --json` and `compare --json` outputs.
    Results(bench::compare::ResultsArgs),
    /// Group coordinator: time to stabilise a group, offset commits/s, memory per group.
    Groups(bench::groups::GroupsArgs),
    /// Broker CPU per GiB fetched over plaintext zero-copy, copy, TLS and kTLS, with limits.
    FetchCost(bench::fetch_cost::FetchCostArgs),
    /// Fixed-rate produce (acks=1, acks=all) and e2e latency at several rates, with broker
    /// CPU per request, for our broker, the null broker and others: table, JSON, PNG.
    LatencySweep(bench::latency_sweep::LatencySweepArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::ProducerPerf(args) => args.run(),
        Command::ConsumerPerf(args) => args.run(),
        Command::E2eLatency(args) => args.run(),
        // other subcommands: compare, limits, null-broker (bench/src/compare.rs, limits/)
        Command::Compare(args) => bench::compare::run(&args).map(drop),
        Command::Limits(args) => bench::limits::run(&args).map(drop),
        Command::NullBroker(args) => bench::null_broker::run(&args),
        Command::Results(args) => bench::compare::results(&args),
        Command::Groups(args) => bench::groups::run(&args),
        Command::FetchCost(args) => bench::fetch_cost::run(&args).map(drop),
        Command::LatencySweep(args) => bench::latency_sweep::run(&args).map(drop),
    };
    if let Err(error) = result {
        eprintln!("error: {error:#}");
        std::process::exit(1);
    }
}

//! `tuning check|apply`: the host checks of the `tuning` crate (also `broker tune`).

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "tuning",
    version,
    about = "Checks and tunes a Linux host for the broker"
)]
struct Cli {
    #[command(subcommand)]
    command: tuning::cli::TuneCommand,
}

fn main() {
    let cli = Cli::parse();
    let mut stdout = std::io::stdout().lock();
    match tuning::cli::run(cli.command, &mut stdout) {
        Ok(code) => std::process::exit(code),
        Err(error) => {
            eprintln!("error: {error}");
            std::process::exit(2);
        }
    }
}

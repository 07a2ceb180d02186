//! Manual driver for the lab: `cargo run -p ferric-lab --example lab -- lab up --nodes 2`.
//! The argument shape mirrors `ferric lab …`, which the `ferric` binary wires to the same `run`.

use clap::Parser;

#[derive(Debug, Parser)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Debug, clap::Subcommand)]
enum Top {
    #[command(subcommand)]
    Lab(ferric_lab::LabCommand),
}

fn main() -> std::process::ExitCode {
    let Top::Lab(command) = Cli::parse().command;
    match ferric_lab::run(command) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("lab: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

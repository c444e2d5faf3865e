//! `kvik`: GPUDirect Storage readiness, and (with the I/O issues) reads and
//! writes through the kvik-rs stack with a report of the path each took.
//!
//! Exit codes: 0 success, 1 operational failure, 2 bad usage or bad input.

mod check;
mod config;
mod demo;
mod error;
mod plan;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use error::CliError;

#[derive(Debug, Parser)]
#[command(
    name = "kvik",
    version,
    about = "Files to GPU memory through GPUDirect Storage, with proof of the path taken"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// GDS readiness of this machine (and of PATH): libcufile, CUDA, nvidia-fs, udev, config, O_DIRECT.
    Check(check::Args),
    /// NVIDIA's tutorial: write a file, read it into GPU memory (host memory without a GPU), report the path.
    Demo(demo::Args),
    /// cufile.json: `validate` it like a compiler, or `show` the values cuFile will use and their sources.
    Config(config::Args),
    /// What a read would do, without doing it: routing with reasons, KvikIO tasks, cuFile work units.
    Plan(plan::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Config(args) => config::run(&args),
        Command::Plan(args) => plan::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kvik: error: {e}");
            e.exit_code()
        }
    }
}

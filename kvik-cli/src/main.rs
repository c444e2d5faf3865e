//! `kvik`: GPUDirect Storage readiness, and reads and writes through the
//! kvik-rs stack — local files through kvik-policy, remote objects (S3,
//! HTTP(S)) through kvik-remote — with a report of the path each took.
//! Arguments are parsed in `args`; policy is kvik-policy's.
//!
//! Exit codes (the rule is in `error.rs`): 0 success; 2 the request cannot
//! be valid on this machine as given; 1 it failed while running.

mod args;
mod bench;
mod check;
mod checksum;
mod config;
mod copy;
mod demo;
mod error;
mod input;
mod output;
mod output_file;
mod page_cache;
mod plan;
mod progress;
mod read;
mod report;
mod settings;
mod signals;
mod source;
mod window;
mod write;

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
    /// Read a file through the stack, or a remote object by URL (s3://, http(s)://): bytes, time, throughput, path report, CRC-32.
    Read(read::Args),
    /// Write a file through the stack (random or zeros): bytes, time, throughput, path report.
    Write(write::Args),
    /// Copy SRC (a file or a URL) to DST through the stack (read into memory, write out); DST appears only when complete.
    Copy(copy::Args),
    /// The effective KvikIO settings (KVIKIO_* environment) and where each came from.
    Settings(settings::Args),
    /// Read/write throughput vs dd, fio, memcpy, host→device copies and KvikIO; tables, JSON, SVG.
    Bench(Box<bench::Args>),
}

fn main() -> ExitCode {
    // SAFETY: the first statement: no other thread exists yet.
    unsafe { gds_core::log::redirect_through_environment() };
    let code = match parse().and_then(run) {
        Ok(()) => 0,
        Err(e) => {
            output::eprint_line(&format!("kvik: error: {e}"));
            e.code()
        }
    };
    // End without running library destructors: libcufile 1.15's teardown
    // crashes in its compatibility-mode worker threads after some runs (seen
    // on the H200: exit 139 after CUFILE_FORCE_COMPAT_MODE=true reads and
    // after a refused registration, with the work done and reported). Every
    // file is closed and renamed into place by now, and every write to
    // stdout and stderr was flushed when it was made.
    // SAFETY: _exit ends the process; nothing runs after it.
    unsafe { libc::_exit(code) }
}

/// The command line; `--help` and `--version` are printed here, through the
/// output layer (a full stdout is exit 1, a closed one ends quietly).
fn parse() -> Result<Command, CliError> {
    use clap::error::ErrorKind;
    use std::io::IsTerminal as _;
    match Cli::try_parse() {
        Ok(cli) => Ok(cli.command),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            if std::io::stdout().is_terminal() {
                // In colour, as clap prints it.
                let _ = e.print();
            } else {
                output::print(&e.render().to_string())?;
            }
            // SAFETY: _exit ends the process; stdout was flushed above.
            unsafe { libc::_exit(0) }
        }
        Err(e) => {
            // A usage error: clap's message on stderr, plain (clap would
            // pass a value's control characters to a terminal as they
            // are), its failure ignored like every write to stderr.
            output::eprint_line(e.render().to_string().trim_end());
            // SAFETY: _exit ends the process; nothing is buffered.
            unsafe { libc::_exit(e.exit_code()) }
        }
    }
}

fn run(command: Command) -> Result<(), CliError> {
    // A bad KVIKIO_* value is bad input for every command, before any I/O.
    kvik_policy::Settings::global()?;
    match command {
        Command::Check(args) => check::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Config(args) => config::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Read(args) => read::run(&args),
        Command::Write(args) => write::run(&args),
        Command::Copy(args) => copy::run(&args),
        Command::Settings(args) => settings::run(&args),
        Command::Bench(args) => bench::run(&args),
    }
}

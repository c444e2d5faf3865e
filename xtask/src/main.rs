//! Developer tasks for the kvik-rs workspace. Run as `cargo xtask <task>`.

mod codegen;
mod test;
mod validate_config;
mod wheel;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "kvik-rs developer tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Generate cufile-sys/src/{bindings,stats_v1_15}.rs from the pinned cufile.h headers.
    Codegen {
        /// Regenerate in memory and fail when the committed files differ.
        #[arg(long)]
        check: bool,
        /// cufile.h of nvidia-cufile 1.20.0.107 (default: downloaded with pip into target/xtask-cache).
        #[arg(long, value_name = "PATH")]
        header: Option<PathBuf>,
        /// cufile.h of nvidia-cufile 1.15.1.6 (default: downloaded with pip into target/xtask-cache).
        #[arg(long, value_name = "PATH")]
        header_v1_15: Option<PathBuf>,
    },
    /// Download and unpack a pinned nvidia-cufile wheel; print the path of its libcufile.so.0.
    FetchLibcufile {
        /// Wheel version: 1.20.0.107 (default) or 1.15.1.6.
        #[arg(default_value = wheel::CUFILE_1_20.version)]
        version: String,
    },
    /// Validate cufile.json files: compiler-style diagnostics, exit 1 on errors, 2 if unreadable.
    ValidateConfig(validate_config::Args),
    /// Every test: `cargo test --workspace`, then the Python package's pytest suite in a
    /// virtual environment under target/ (skipped, saying why, where Python is missing;
    /// a failure then under KVIK_REQUIRE_PYTHON=1).
    Test(test::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Codegen {
            check,
            header,
            header_v1_15,
        } => codegen::run(&codegen::Options {
            check,
            header,
            header_v1_15,
        }),
        Task::FetchLibcufile { version } => fetch_libcufile(&version),
        Task::ValidateConfig(args) => return validate_config::run(&args),
        Task::Test(args) => test::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn fetch_libcufile(version: &str) -> Result<(), String> {
    let pinned = wheel::find(version).ok_or_else(|| {
        let known: Vec<_> = wheel::ALL.iter().map(|w| w.version).collect();
        format!(
            "nvidia-cufile=={version} is not pinned; pinned versions: {}",
            known.join(", ")
        )
    })?;
    println!("{}", pinned.library()?.display());
    Ok(())
}

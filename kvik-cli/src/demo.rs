//! `kvik demo`: NVIDIA's GDS tutorial through the kvik-rs stack.
//!
//! Reading and writing land with the I/O issues (kvik-policy and the device
//! path); until then the demo runs the readiness check that decides which path
//! the read will take, and says so plainly.

use std::path::PathBuf;

use gds_core::readiness;

use crate::CliError;
use crate::error::print_json;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Size of the demo file (reading lands with the I/O issues).
    #[arg(long, default_value = "1GiB")]
    pub size: String,
    /// Directory for the demo file (default: the system temp directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "--dir {} is not a directory",
            dir.display()
        )));
    }
    let report = readiness::check(Some(&dir));
    if args.json {
        return print_json(&serde_json::json!({
            "readiness": report,
            "io": "not yet implemented: reading and writing land with the kvik-policy and device issues",
        }));
    }
    println!(
        "kvik demo: where would a {} file in {} go?\n",
        args.size,
        dir.display()
    );
    print!("{}", crate::check::render(&report));
    println!(
        "\nThe read itself lands with the I/O issues (kvik-policy, device memory); \
         this demo stops at the readiness check."
    );
    Ok(())
}

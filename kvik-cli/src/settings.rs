//! `kvik settings [--json]`: each effective KvikIO setting, its value and
//! where it came from (default or environment), with its variables, default
//! and rule — all from kvik-policy's one declaration of each setting. A bad `KVIKIO_*` value
//! never gets here: every command exits 2 with it first (see main.rs).

use kvik_policy::Settings;

use crate::CliError;
use crate::error::print_json;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the settings as JSON: {"name": {"value": …, "source": {"kind": …}}}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let settings = Settings::global()?;
    if args.json {
        return print_json(&settings);
    }
    crate::output::print(&render(&settings))
}

/// The human-readable table.
pub fn render(settings: &Settings) -> String {
    use std::fmt::Write as _;
    let mut out = String::from("KvikIO settings\n\n");
    for view in settings.describe() {
        let _ = writeln!(
            out,
            "  {:<21} {:<26} {}",
            view.name, view.value, view.source
        );
        let _ = writeln!(
            out,
            "  {:<21} {}; default {}; {}",
            "",
            view.variables.join(" or "),
            view.default,
            view.rule
        );
    }
    out
}

//! `kvik config validate [FILE]` and `kvik config show [FILE]`: the
//! cufile.json cuFile will read (or FILE), checked the way libcufile checks
//! it, and the values cuFile will use with where each comes from.
//!
//! Exit codes: 0 no errors (warnings allowed), 1 the file has errors (cuFile
//! refuses it), 2 the file cannot be read or the arguments are wrong.

use std::fmt::Write as _;
use std::path::PathBuf;

use cufile_config::{
    ApiOverrides, ConfigLocation, EffectiveConfig, Environment, Libcufile, LocationSource,
    LogDestination, ParsedConfig, Source, ValidateOptions, json_path, summary,
};

use crate::CliError;
use crate::error::print_json;
use crate::output::{self, escaped, outln};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Check a cufile.json: every problem with its line:column, like a compiler.
    Validate(Common),
    /// The values cuFile will use (built-in default < file < environment), each with its source.
    Show(ShowArgs),
}

#[derive(Debug, clap::Args)]
pub struct Common {
    /// The file to read (default: what cuFile reads: $CUFILE_ENV_PATH_JSON, else /etc/cufile.json).
    pub file: Option<PathBuf>,
    /// Print JSON for machines.
    #[arg(long)]
    pub json: bool,
    /// The libcufile version whose keys, ranges and defaults apply: 1.15 or 1.20.
    #[arg(long, default_value = "1.15", value_name = "VERSION")]
    pub library: Libcufile,
    /// Also check that paths named in the file (logging.dir, denylist, mount tables) exist here.
    #[arg(long)]
    pub check_paths: bool,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub common: Common,
    /// Also list keys whose built-in default is not known here.
    #[arg(long)]
    pub all: bool,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    match &args.command {
        Command::Validate(common) => validate(common),
        Command::Show(show_args) => show(show_args),
    }
}

/// The file to read and how it was chosen; `None` when cuFile would use its
/// built-in defaults.
struct Chosen {
    path: PathBuf,
    why: String,
}

fn choose(file: &Option<PathBuf>) -> Option<Chosen> {
    if let Some(path) = file {
        return Some(Chosen {
            path: path.clone(),
            why: "given on the command line".into(),
        });
    }
    let location = ConfigLocation::from_env();
    let path = location.path?;
    let why = match location.source {
        LocationSource::Environment => format!("from {}", cufile_config::ENV_CONFIG_PATH),
        _ => "the default path".into(),
    };
    Some(Chosen { path, why })
}

fn read(chosen: &Chosen, common: &Common) -> Result<ParsedConfig, CliError> {
    let options = ValidateOptions {
        library: common.library,
        check_paths: common.check_paths,
    };
    ParsedConfig::read(&chosen.path, &options).map_err(|error| CliError::Config {
        error,
        context: chosen.why.clone(),
    })
}

fn no_file_message() -> String {
    format!(
        "no cufile.json: {} is not set and {} does not exist; cuFile uses its built-in defaults",
        cufile_config::ENV_CONFIG_PATH,
        cufile_config::DEFAULT_CONFIG_PATH
    )
}

fn refused(chosen: &Chosen, parsed: &ParsedConfig) -> CliError {
    CliError::Failed(format!(
        "cuFile refuses {}: {}",
        escaped(&chosen.path),
        summary(&parsed.diagnostics)
    ))
}

fn validate(common: &Common) -> Result<(), CliError> {
    let Some(chosen) = choose(&common.file) else {
        if common.json {
            return print_json(&Vec::<()>::new());
        }
        return outln!("{}", no_file_message());
    };
    let parsed = read(&chosen, common)?;
    if common.json {
        // The name as it is where it is text; escaped where it is not.
        let name = match chosen.path.to_str() {
            Some(name) => name.to_owned(),
            None => escaped(&chosen.path).to_string(),
        };
        print_json(&parsed.file_diagnostics(&name))?;
    } else {
        output::print(&parsed.render(&escaped(&chosen.path).to_string()))?;
    }
    if parsed.has_errors() {
        return Err(refused(&chosen, &parsed));
    }
    Ok(())
}

fn show(args: &ShowArgs) -> Result<(), CliError> {
    let common = &args.common;
    let chosen = choose(&common.file);
    let parsed = chosen.as_ref().map(|c| read(c, common)).transpose()?;
    let effective = EffectiveConfig::resolve(
        common.library,
        parsed.as_ref(),
        &Environment::from_process(),
        &ApiOverrides::default(),
    );
    if common.json {
        let file = chosen.as_ref().zip(parsed.as_ref()).map(|(c, p)| {
            serde_json::json!({
                "path": c.path,
                "chosen": c.why,
                "errors": p.error_count(),
                "warnings": p.warning_count(),
                "diagnostics": p.diagnostics,
            })
        });
        print_json(&serde_json::json!({
            "file": file,
            "library": common.library,
            "file_refused": effective.file_refused,
            "execution": effective.execution(),
            "settings": effective.settings,
            "log": effective.log,
            "unmodelled_environment": effective.unmodelled_environment,
            "environment_diagnostics": effective.diagnostics,
        }))?;
    } else {
        output::print(&render_show(
            chosen.as_ref(),
            parsed.as_ref(),
            &effective,
            args.all,
        ))?;
    }
    match (chosen, parsed) {
        (Some(c), Some(p)) if p.has_errors() => Err(refused(&c, &p)),
        _ => Ok(()),
    }
}

fn value_text(value: &Option<serde_json::Value>) -> String {
    match value {
        Some(v) => v.to_string(),
        None => "?".into(),
    }
}

/// The readable `show` report.
fn render_show(
    chosen: Option<&Chosen>,
    parsed: Option<&ParsedConfig>,
    effective: &EffectiveConfig,
    all: bool,
) -> String {
    let mut out = String::new();
    match chosen.zip(parsed) {
        Some((c, p)) => {
            let _ = writeln!(
                out,
                "cufile.json  {} ({}): {}",
                escaped(&c.path),
                c.why,
                summary(&p.diagnostics)
            );
            if p.has_errors() {
                let _ = writeln!(
                    out,
                    "             cuFile refuses this file and its driver does not open; run `kvik config validate` for the errors"
                );
            }
        }
        None => {
            let _ = writeln!(out, "cufile.json  {}", no_file_message());
        }
    }
    let _ = writeln!(
        out,
        "library      {} (--library to change)",
        effective.library
    );
    let log = match &effective.log {
        LogDestination::File { path, source } => format!("{path} ({source})"),
        LogDestination::Directory { dir, source } => {
            format!("a file in {dir} ({source})")
        }
        LogDestination::WorkingDirectory => "cufile.log in the working directory".into(),
    };
    let _ = writeln!(out, "log          {log}");
    for variable in &effective.unmodelled_environment {
        let _ = writeln!(
            out,
            "environment  {variable} (read by cuFile; effect not modelled)"
        );
    }
    for d in &effective.diagnostics {
        let _ = writeln!(out, "warning: {}", d.message);
    }

    let rows: Vec<_> = effective
        .settings
        .iter()
        .filter(|s| all || s.source != Source::UnknownDefault)
        .collect();
    let width = rows.iter().map(|s| s.path.len()).max().unwrap_or(0).max(7);
    let values: Vec<String> = rows.iter().map(|s| value_text(&s.value)).collect();
    let value_width = values
        .iter()
        .map(|v| v.chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    let _ = writeln!(
        out,
        "\n{:<width$}  {:<value_width$}  source",
        "setting", "value"
    );
    for (setting, value) in rows.iter().zip(&values) {
        let _ = writeln!(
            out,
            "{:<width$}  {:<value_width$}  {}",
            json_path::display(setting.path),
            value,
            setting.source
        );
    }
    let hidden = effective.settings.len() - rows.len();
    if hidden > 0 {
        let _ = writeln!(
            out,
            "\n{hidden} more keys are not set and their built-in default is not known without a GPU (--all lists them)"
        );
    }
    out
}

//! `cargo xtask validate-config FILE…`: cufile.json diagnostics like a
//! compiler's. Exit 0 without errors (warnings allowed), 1 with errors, 2 when
//! a file cannot be read.

use std::path::PathBuf;
use std::process::ExitCode;

use cufile_config::{FileDiagnostic, Libcufile, ParsedConfig, ValidateOptions};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// cufile.json files to check.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print one JSON array of diagnostics (file, severity, kind, path, line, column, message, …).
    #[arg(long)]
    pub json: bool,
    /// The libcufile version whose keys and ranges apply: 1.15 or 1.20.
    #[arg(long, default_value = "1.15", value_name = "VERSION")]
    pub library: Libcufile,
    /// Also check that paths named in the files exist on this machine.
    #[arg(long)]
    pub check_paths: bool,
}

pub fn run(args: &Args) -> ExitCode {
    let options = ValidateOptions {
        library: args.library,
        check_paths: args.check_paths,
    };
    let mut unreadable = false;
    let mut errors = false;
    let mut parsed = Vec::new();
    for file in &args.files {
        match ParsedConfig::read(file, &options) {
            Ok(p) => {
                errors |= p.has_errors();
                parsed.push((file.display().to_string(), p));
            }
            Err(e) => {
                eprintln!("xtask: error: {e}");
                unreadable = true;
            }
        }
    }
    if args.json {
        let all: Vec<FileDiagnostic<'_>> = parsed
            .iter()
            .flat_map(|(name, p)| p.file_diagnostics(name))
            .collect();
        match serde_json::to_string_pretty(&all) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("xtask: error: cannot encode JSON: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        for (name, p) in &parsed {
            print!("{}", p.render(name));
        }
    }
    if unreadable {
        ExitCode::from(2)
    } else if errors {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../cufile-config/fixtures")
            .join(name)
    }

    fn exit(files: &[&PathBuf], library: Libcufile) -> ExitCode {
        run(&Args {
            files: files.iter().map(|f| (*f).clone()).collect(),
            json: true,
            library,
            check_paths: false,
        })
    }

    #[test]
    fn exit_codes_follow_the_worst_file() {
        let stock = fixture("stock.json");
        let warnings = fixture("broken/unknown_key.json");
        let errors = fixture("broken/out_of_range.json");
        let missing = fixture("broken/no-such-file.json");
        assert_eq!(
            exit(&[&stock, &warnings], Libcufile::V1_15),
            ExitCode::SUCCESS
        );
        assert_eq!(
            exit(&[&stock, &errors], Libcufile::V1_15),
            ExitCode::from(1)
        );
        assert_eq!(
            exit(&[&errors, &missing], Libcufile::V1_15),
            ExitCode::from(2)
        );
        let newer = fixture("broken/other_version.json");
        assert_eq!(exit(&[&newer], Libcufile::V1_15), ExitCode::from(1));
        assert_eq!(exit(&[&newer], Libcufile::V1_20), ExitCode::SUCCESS);
    }
}

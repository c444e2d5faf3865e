//! A saved run: `--save FILE` writes the JSON of a run, `--from FILE`
//! reads one back (from this or another machine) to show or plot it.

use std::path::Path;

use super::results::{Report, SCHEMA};
use crate::CliError;

/// `--save FILE`: the run as pretty JSON.
pub(super) fn save(path: &Path, report: &Report) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(report)
        .map_err(|e| CliError::Failed(format!("cannot encode JSON: {e}")))?;
    crate::output::write_file("--save", path, (text + "\n").as_bytes())
}

/// A saved run.
pub(super) fn load(path: &Path) -> Result<Report, CliError> {
    let text = crate::input::read_text("--from", path, crate::input::MAX_RESULTS_BYTES)?;
    let report: Report = serde_json::from_str(&text).map_err(|e| {
        CliError::Usage(format!(
            "--from {}: not a kvik bench result ({SCHEMA}): {e}",
            crate::output::escaped(path)
        ))
    })?;
    if report.schema != SCHEMA {
        return Err(CliError::Usage(format!(
            "--from {}: schema {:?}, this kvik reads {SCHEMA:?}",
            crate::output::escaped(path),
            report.schema
        )));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::super::results::sample_report;
    use super::super::table;
    use super::*;

    #[test]
    fn a_saved_run_reads_back_as_it_was() {
        let report = sample_report();
        let text = serde_json::to_string(&report).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(&path, &text).unwrap();
        let back = load(&path).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        assert_eq!(table::render(&back), table::render(&report));
        std::fs::write(&path, text.replace("kvik-bench/1", "kvik-bench/0")).unwrap();
        let Err(CliError::Usage(e)) = load(&path) else {
            panic!("another schema was accepted");
        };
        assert!(e.contains("kvik-bench/0"), "{e}");
    }
}

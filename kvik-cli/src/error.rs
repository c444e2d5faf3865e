//! Command errors and the exit code each maps to.

use std::process::ExitCode;

/// A failed command: bad input (exit 2) or an operational failure (exit 1).
#[derive(Debug)]
pub enum CliError {
    /// The arguments or input are wrong: exit 2.
    Usage(String),
    /// The command ran and failed: exit 1.
    Failed(String),
}

impl CliError {
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.code() as u8)
    }

    /// 2 for bad usage or input, 1 for an operational failure.
    pub fn code(&self) -> i32 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Failed(_) => 1,
        }
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Usage(m) | CliError::Failed(m) => f.write_str(m),
        }
    }
}

/// Print a value as pretty JSON on stdout.
pub fn print_json(value: &impl serde::Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::Failed(format!("cannot encode JSON: {e}")))?;
    println!("{text}");
    Ok(())
}

//! One problem found in a cufile.json: how bad it is, where it is, what is
//! wrong and what cuFile accepts instead.

use std::fmt;

/// How cuFile reacts to the problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// cuFile refuses the file (its driver does not open), or the file cannot
    /// mean what it says.
    Error,
    /// cuFile accepts the file but ignores or overrides part of it.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// What kind of problem a diagnostic reports; stable names for machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum DiagnosticKind {
    /// The text is not JSON (with comments) that libcufile's reader accepts.
    Syntax,
    /// The top-level value is not an object.
    NotAnObject,
    /// The same key twice in one object (the later value wins).
    DuplicateKey,
    /// Text after the top-level object (libcufile's reader ignores it).
    TrailingContent,
    /// A key cuFile does not read.
    UnknownKey,
    /// A key the chosen libcufile version does not read (another one does).
    OtherVersion,
    /// A value of the wrong JSON type.
    WrongType,
    /// A number outside the accepted range.
    OutOfRange,
    /// A number that is not a multiple of the required unit.
    Misaligned,
    /// A string that is not one of the accepted values.
    BadValue,
    /// Settings that contradict each other.
    Inconsistent,
    /// A path in the file that does not exist on this machine.
    MissingPath,
    /// A value taken from the environment that cuFile would not accept.
    Environment,
}

/// Line and column of a place in the file, both counted from 1; the column
/// counts characters (a tab is one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One problem in a cufile.json.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub kind: DiagnosticKind,
    /// The JSON path of the value (`execution.max_io_threads`,
    /// `properties.posix_pool_slab_size_kb[1]`); empty for the document itself.
    pub path: String,
    pub line: usize,
    pub column: usize,
    /// What is wrong, in one line, naming the key and the value.
    pub message: String,
    /// What cuFile accepts there (`0..=8`, `one of "default", "low", …`), when
    /// there is such a thing to say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// A hint: a key that was probably meant, what another library version does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn new(
        severity: Severity,
        kind: DiagnosticKind,
        path: impl Into<String>,
        at: Position,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            severity,
            kind,
            path: path.into(),
            line: at.line,
            column: at.column,
            message: message.into(),
            expected: None,
            help: None,
        }
    }

    pub fn error(
        kind: DiagnosticKind,
        path: impl Into<String>,
        at: Position,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic::new(Severity::Error, kind, path, at, message)
    }

    pub fn warning(
        kind: DiagnosticKind,
        path: impl Into<String>,
        at: Position,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic::new(Severity::Warning, kind, path, at, message)
    }

    pub fn with_expected(mut self, expected: impl Into<String>) -> Diagnostic {
        self.expected = Some(expected.into());
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    pub fn position(&self) -> Position {
        Position {
            line: self.line,
            column: self.column,
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// The diagnostic as a compiler prints it:
    /// `FILE:LINE:COL: error: MESSAGE`, then `help:` on its own line.
    pub fn render(&self, file: &str) -> String {
        let mut out = format!(
            "{file}:{}:{}: {}: {}",
            self.line, self.column, self.severity, self.message
        );
        if let Some(help) = &self.help {
            out.push_str("\n  help: ");
            out.push_str(help);
        }
        out
    }
}

/// A diagnostic with the file it is about, for machine output of several
/// files (`--json`).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct FileDiagnostic<'a> {
    pub file: &'a str,
    #[serde(flatten)]
    pub diagnostic: &'a Diagnostic,
}

/// Sorts diagnostics by position, errors first at the same place.
pub(crate) fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by(|a, b| {
        (a.line, a.column, a.severity, &a.path).cmp(&(b.line, b.column, b.severity, &b.path))
    });
}

/// `N errors, M warnings` with the right plurals.
pub fn summary(diagnostics: &[Diagnostic]) -> String {
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = diagnostics.len() - errors;
    format!(
        "{errors} error{}, {warnings} warning{}",
        if errors == 1 { "" } else { "s" },
        if warnings == 1 { "" } else { "s" }
    )
}

//! The `cufile.json` model: where cuFile finds its configuration, what every
//! key means, what is wrong with a file, and what cuFile will actually use.
//!
//! This crate builds no FFI and opens no driver: a user who only needs to
//! validate configs depends on it alone.
//!
//! ```
//! use cufile_config::{ParsedConfig, Severity};
//!
//! let parsed = ParsedConfig::parse(r#"{
//!     // cuFile accepts comments
//!     "execution": { "max_request_parallelism": 16 }
//! }"#);
//! let error = &parsed.diagnostics[0];
//! assert_eq!(error.severity, Severity::Error);
//! assert_eq!((error.line, error.column), (3, 47));
//! assert_eq!(
//!     error.message,
//!     "execution.max_request_parallelism = 16 is out of range 0..=8"
//! );
//! ```

mod defaults;
mod diagnostic;
mod effective;
pub mod env;
mod error;
mod execution;
pub mod json_path;
pub mod jsonc;
mod library;
mod location;
pub mod model;
pub mod schema;
mod validate;

use std::path::{Path, PathBuf};

pub use defaults::{library_defaults, stock_file};
pub use diagnostic::{Diagnostic, DiagnosticKind, FileDiagnostic, Position, Severity, summary};
pub use effective::{ApiOverrides, EffectiveConfig, EffectiveSetting, LogDestination, Source};
pub use env::Environment;
pub use error::{ConfigError, FileKind};
pub use execution::{EffectiveExecution, ExecutionConfig, ExecutionSources};
pub use library::Libcufile;
pub use location::{ConfigLocation, DEFAULT_CONFIG_PATH, ENV_CONFIG_PATH, LocationSource};
pub use model::CufileConfig;
pub use validate::ValidateOptions;

/// The largest cufile.json [`ParsedConfig::read`] reads: 1 MiB. The stock
/// file, every key with its comment, is 13 KiB; a file a hundred times that
/// is not a cuFile configuration, and parsing it would cost memory and time
/// for nothing.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// A cufile.json read and validated: the typed model of its valid content and
/// every problem found, sorted by position.
#[derive(Debug, Clone)]
pub struct ParsedConfig {
    /// The file it was read from, if any.
    pub path: Option<PathBuf>,
    pub options: ValidateOptions,
    /// The valid part of the file (invalid values are left out; unknown keys
    /// are kept in the sections' `other` maps).
    pub config: CufileConfig,
    pub diagnostics: Vec<Diagnostic>,
    root: Option<jsonc::Node>,
}

impl ParsedConfig {
    /// Parses and validates text for libcufile 1.15.
    pub fn parse(text: &str) -> ParsedConfig {
        ParsedConfig::parse_with(text, &ValidateOptions::default())
    }

    /// Parses and validates text.
    pub fn parse_with(text: &str, options: &ValidateOptions) -> ParsedConfig {
        ParsedConfig::from_document(jsonc::parse(text), options)
    }

    /// Parses and validates bytes (invalid UTF-8 is a warning, as libcufile
    /// does not check encodings).
    pub fn from_bytes(bytes: &[u8], options: &ValidateOptions) -> ParsedConfig {
        ParsedConfig::from_document(jsonc::parse_bytes(bytes), options)
    }

    /// Reads, parses and validates a file of at most [`MAX_FILE_BYTES`]
    /// (a larger one is [`ConfigError::TooLarge`], found without reading it
    /// all: a 100 MB log named by mistake, or a `/proc` file that says it is
    /// empty, costs no more than the limit). Only a regular file is read:
    /// anything else (a FIFO, `/dev/zero`, a socket, a directory) is
    /// [`ConfigError::NotAFile`], found without waiting: the path is opened
    /// with `O_NONBLOCK` (opening a FIFO to read otherwise waits for a
    /// writer) and the opened descriptor, not the path, is checked.
    ///
    /// ```
    /// use cufile_config::{ParsedConfig, ValidateOptions};
    /// # let dir = std::env::temp_dir().join(format!("cufile-config-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let path = dir.join("cufile.json");
    /// std::fs::write(&path, r#"{ "execution": { "max_io_threads": 8, "parallel_io": true,
    ///                            "min_io_threshold_size_kb": 1000 } }"#)?;
    /// let parsed = ParsedConfig::read(&path, &ValidateOptions::default())?;
    /// // 1000 KiB is not 4 KiB aligned: a warning, with its line and column.
    /// assert_eq!((parsed.error_count(), parsed.warning_count()), (0, 1));
    /// print!("{}", parsed.render("cufile.json"));
    /// // What cuFile will use, and where each value comes from.
    /// let execution = parsed.execution();
    /// assert_eq!(execution.config.max_io_threads, 8);
    /// assert_eq!(execution.config.min_io_threshold_size_kb, 1000);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(path: &Path, options: &ValidateOptions) -> Result<ParsedConfig, ConfigError> {
        let bytes = read_regular_file(path, MAX_FILE_BYTES)?;
        let mut parsed = ParsedConfig::from_bytes(&bytes, options);
        parsed.path = Some(path.to_path_buf());
        Ok(parsed)
    }

    fn from_document(document: jsonc::Document, options: &ValidateOptions) -> ParsedConfig {
        let mut diagnostics = document.diagnostics;
        let config = match &document.root {
            Some(root) => {
                let validation = validate::validate(root, options);
                diagnostics.extend(validation.diagnostics);
                validation.config
            }
            None => CufileConfig::default(),
        };
        diagnostic::sort(&mut diagnostics);
        ParsedConfig {
            path: None,
            options: *options,
            config,
            diagnostics,
            root: document.root,
        }
    }

    /// Whether cuFile refuses this file.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The diagnostics that are errors (cuFile refuses the file).
    pub fn error_count(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }

    /// The diagnostics that are warnings (cuFile reads the file anyway).
    pub fn warning_count(&self) -> usize {
        self.diagnostics.len() - self.error_count()
    }

    /// The parsed tree with positions (`None` when the text is not JSON).
    pub fn root(&self) -> Option<&jsonc::Node> {
        self.root.as_ref()
    }

    /// Where the value at a dotted path (`execution.max_io_threads`) starts.
    pub fn position(&self, path: &str) -> Option<Position> {
        self.root
            .as_ref()?
            .lookup(path.split('.'))
            .map(|n| n.position)
    }

    /// The `execution` settings this file gives the library it was validated
    /// for (file over built-in defaults; environment and API not applied:
    /// cuFile reads no environment variable for them).
    pub fn execution(&self) -> EffectiveExecution {
        self.effective(&Environment::default(), &ApiOverrides::default())
            .execution()
    }

    /// Everything cuFile will use with this file, `environment` and `api`.
    pub fn effective(&self, environment: &Environment, api: &ApiOverrides) -> EffectiveConfig {
        EffectiveConfig::resolve(self.options.library, Some(self), environment, api)
    }

    /// The diagnostics tagged with `file`, for `--json` output.
    pub fn file_diagnostics<'a>(&'a self, file: &'a str) -> Vec<FileDiagnostic<'a>> {
        self.diagnostics
            .iter()
            .map(|diagnostic| FileDiagnostic { file, diagnostic })
            .collect()
    }

    /// The diagnostics as a compiler prints them, one per line, then a
    /// summary line (`FILE: 1 error, 2 warnings`).
    pub fn render(&self, file: &str) -> String {
        let mut out = String::new();
        for d in &self.diagnostics {
            out.push_str(&d.render(file));
            out.push('\n');
        }
        out.push_str(&format!("{file}: {}\n", summary(&self.diagnostics)));
        out
    }
}

/// The bytes of the regular file at `path`, at most `limit` of them
/// ([`ConfigError::TooLarge`] past it, read no further than one byte past
/// it); anything but a regular file is [`ConfigError::NotAFile`], found
/// from the descriptor opened with `O_NONBLOCK`, without waiting. What
/// [`ParsedConfig::read`] reads with; public so that tools reading other
/// small files of their own (a saved benchmark run) apply the same rule.
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>, ConfigError> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read as _;
    let read_error = |source: std::io::Error| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let not_a_file = |file_type: &std::fs::FileType| {
        FileKind::of(file_type).map(|kind| ConfigError::NotAFile {
            path: path.to_path_buf(),
            kind,
        })
    };
    let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| {
        // A socket cannot be opened at all (ENXIO): say what it is.
        std::fs::metadata(path)
            .ok()
            .and_then(|meta| not_a_file(&meta.file_type()))
            .unwrap_or_else(|| read_error(e.into()))
    })?;
    let file = std::fs::File::from(fd);
    let meta = file.metadata().map_err(read_error)?;
    if let Some(refused) = not_a_file(&meta.file_type()) {
        return Err(refused);
    }
    let too_large = |size| ConfigError::TooLarge {
        path: path.to_path_buf(),
        size,
        limit,
    };
    if meta.len() > limit {
        return Err(too_large(Some(meta.len())));
    }
    // The size a file reports is not a bound (`/proc` files say 0, and a
    // file may grow while read): read one byte past the limit.
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > limit {
        return Err(too_large(None));
    }
    Ok(bytes)
}

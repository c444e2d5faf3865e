//! Where cuFile writes `cufile.log`, and what it said during a failing call.
//!
//! cuFile explains its failures only in its log (by default `cufile.log` in
//! the process's working directory). Unless the user chose a place
//! (`CUFILE_LOGFILE_PATH`, or `logging.dir` in cufile.json), we point it at a
//! per-process file under a runtime directory before the driver opens: the
//! user's directory stays clean and errors can quote exactly the right file.

use std::fmt;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};

use cufile_sys::CuFileLibrary;
use cufile_sys::bindings::CUFileStringConfigParameter_t as StringParam;

/// How many log lines an error quotes at most.
const EXCERPT_LINES: usize = 12;

/// Where this process's cufile.log goes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LogLocation {
    /// `CUFILE_LOGFILE_PATH` names the file.
    Environment { path: PathBuf },
    /// cufile.json's `logging.dir` names a directory (cuFile names the file).
    ConfigDir { dir: PathBuf },
    /// We pointed it at a per-process file.
    Redirected { path: PathBuf },
    /// cuFile's default: `cufile.log` in the working directory.
    WorkingDirectory { path: PathBuf },
}

impl LogLocation {
    /// The file to read, when it is known.
    pub fn file(&self) -> Option<&Path> {
        match self {
            LogLocation::Environment { path }
            | LogLocation::Redirected { path }
            | LogLocation::WorkingDirectory { path } => Some(path),
            LogLocation::ConfigDir { .. } => None,
        }
    }
}

static LOCATION: std::sync::OnceLock<LogLocation> = std::sync::OnceLock::new();

/// This process's log location, decided (and, where it is ours to choose,
/// set) on first use. gds-core calls it before anything that may log or open
/// the driver; setting the path after the driver opens has no effect.
pub fn location(lib: &CuFileLibrary) -> &'static LogLocation {
    LOCATION.get_or_init(|| configure(lib))
}

/// The log file [`redirect_through_environment`] chose, if it ran.
static CHOSEN_BY_US: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Choose this process's cuFile log file through `CUFILE_LOGFILE_PATH`, which
/// libcufile reads when it starts, unless the user chose one (the variable, or
/// `logging.dir` in cufile.json). For programs that can call it while still
/// single-threaded, such as a command-line tool's first line: the parameter
/// call gds-core makes otherwise (`cuFileSetParameterString`) did not always
/// take effect — with libcufile 1.15 the `kvik` command's log still went to
/// the working directory. Returns the file chosen.
///
/// # Safety
/// No other thread may read or write the environment during the call
/// (`std::env::set_var`'s rule).
pub unsafe fn redirect_through_environment() -> Option<PathBuf> {
    if std::env::var_os("CUFILE_LOGFILE_PATH").is_some_and(|p| !p.is_empty())
        || config_log_dir().is_some()
    {
        return None;
    }
    let path = per_process_log_path()?;
    // SAFETY: the caller guarantees no other thread touches the environment.
    unsafe { std::env::set_var("CUFILE_LOGFILE_PATH", &path) };
    let _ = CHOSEN_BY_US.set(path.clone());
    Some(path)
}

fn configure(lib: &CuFileLibrary) -> LogLocation {
    if let Some(path) = std::env::var_os("CUFILE_LOGFILE_PATH").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        if CHOSEN_BY_US.get() == Some(&path) {
            return LogLocation::Redirected { path };
        }
        return LogLocation::Environment { path };
    }
    // logging.dir is read from the file itself, not through
    // cuFileGetParameterString: the first parameter call initialises cuFile's
    // logger, after which the log path can no longer be changed.
    if let Some(dir) = config_log_dir() {
        return LogLocation::ConfigDir { dir };
    }
    let cwd_default = || LogLocation::WorkingDirectory {
        path: std::env::current_dir()
            .unwrap_or_default()
            .join("cufile.log"),
    };
    let Some(path) = per_process_log_path() else {
        return cwd_default();
    };
    if set_string(lib, StringParam::CUFILE_PARAM_ENV_LOGFILE_PATH, &path) {
        LogLocation::Redirected { path }
    } else {
        cwd_default()
    }
}

/// `logging.dir` of the cufile.json cuFile reads here, if it sets one.
fn config_log_dir() -> Option<PathBuf> {
    let location = cufile_config::ConfigLocation::from_env();
    let path = location.path.filter(|_| location.exists)?;
    let parsed =
        cufile_config::ParsedConfig::read(&path, &cufile_config::ValidateOptions::default())
            .ok()?;
    let dir = parsed.config.logging?.dir?;
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}

/// `$XDG_RUNTIME_DIR/kvik/cufile-<pid>.log`, else `/tmp/kvik-<uid>/cufile-<pid>.log`.
fn per_process_log_path() -> Option<PathBuf> {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| Path::new(d).is_dir())
        .map(|d| PathBuf::from(d).join("kvik"))
        .unwrap_or_else(|| std::env::temp_dir().join(format!("kvik-{uid}")));
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir.join(format!("cufile-{}.log", std::process::id())))
}

fn set_string(lib: &CuFileLibrary, param: StringParam, path: &Path) -> bool {
    let Ok(set) = cufile_sys::cufile_fn!(lib, cuFileSetParameterString) else {
        return false;
    };
    let Ok(value) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: passes a NUL-terminated string the library copies.
    unsafe { set(param, value.as_ptr()) }.is_success()
}

/// A marker in the log: where it ended before a call, so that afterwards we
/// can quote exactly what the call wrote.
#[derive(Debug, Clone)]
pub struct LogMark {
    location: LogLocation,
    offset: u64,
}

impl LogMark {
    pub fn new(location: &LogLocation) -> LogMark {
        let offset = location
            .file()
            .and_then(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .unwrap_or(0);
        LogMark {
            location: location.clone(),
            offset,
        }
    }

    /// The lines written since the mark (the last few), if any.
    pub fn excerpt(&self) -> Option<LogExcerpt> {
        let Some(path) = self.location.file() else {
            return Some(LogExcerpt {
                location: self.location.clone(),
                lines: Vec::new(),
            });
        };
        let mut file = std::fs::File::open(path).ok()?;
        let len = file.metadata().ok()?.len();
        // The log may have been rotated or truncated meanwhile: then read it all.
        let start = if len >= self.offset { self.offset } else { 0 };
        file.seek(SeekFrom::Start(start)).ok()?;
        let mut text = String::new();
        file.take(1 << 20).read_to_string(&mut text).ok()?;
        let lines: Vec<String> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect();
        let lines = lines[lines.len().saturating_sub(EXCERPT_LINES)..].to_vec();
        Some(LogExcerpt {
            location: self.location.clone(),
            lines,
        })
    }
}

/// What cufile.log said.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LogExcerpt {
    pub location: LogLocation,
    pub lines: Vec<String>,
}

impl fmt::Display for LogExcerpt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.location.file(), &self.location) {
            (None, LogLocation::ConfigDir { dir }) => {
                write!(f, "see the cuFile log in {}", dir.display())
            }
            (Some(path), _) if self.lines.is_empty() => {
                write!(f, "cuFile log {} has no new lines", path.display())
            }
            (Some(path), _) => write!(
                f,
                "cuFile log {}:\n    {}",
                path.display(),
                self.lines.join("\n    ")
            ),
            (None, _) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_quotes_only_what_was_written_after_the_mark() {
        let dir = std::env::temp_dir().join(format!("gds-core-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cufile.log");
        std::fs::write(&path, "old line\n").unwrap();
        let location = LogLocation::Redirected { path: path.clone() };
        let mark = LogMark::new(&location);
        let mut text = String::from("old line\n");
        for i in 0..20 {
            text.push_str(&format!(
                " ERROR  cufio:{i} udev property not found: ID_FS_USAGE vda\n"
            ));
        }
        std::fs::write(&path, text).unwrap();
        let excerpt = mark.excerpt().unwrap();
        assert_eq!(excerpt.lines.len(), EXCERPT_LINES);
        assert!(
            excerpt
                .lines
                .iter()
                .all(|l| l.contains("udev property not found"))
        );
        assert!(excerpt.lines.last().unwrap().contains("cufio:19"));
        assert!(excerpt.to_string().contains(path.to_str().unwrap()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_truncated_log_is_read_from_the_start() {
        let dir = std::env::temp_dir().join(format!("gds-core-log-trunc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cufile.log");
        std::fs::write(
            &path,
            "a long line that will be truncated away\n".repeat(10),
        )
        .unwrap();
        let mark = LogMark::new(&LogLocation::Environment { path: path.clone() });
        std::fs::write(&path, "fresh\n").unwrap();
        assert_eq!(mark.excerpt().unwrap().lines, vec!["fresh".to_string()]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Where cuFile looks for its configuration file.
//!
//! libcufile reads the file named by `CUFILE_ENV_PATH_JSON` when that
//! variable is set, else `/etc/cufile.json`, else uses its built-in defaults.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::FileKind;

pub const ENV_CONFIG_PATH: &str = "CUFILE_ENV_PATH_JSON";
pub const DEFAULT_CONFIG_PATH: &str = "/etc/cufile.json";

/// How the configuration path was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum LocationSource {
    /// `CUFILE_ENV_PATH_JSON` names it.
    Environment,
    /// The default path, `/etc/cufile.json`.
    DefaultPath,
    /// No file: the library runs on its built-in defaults.
    BuiltInDefaults,
}

impl fmt::Display for LocationSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LocationSource::Environment => ENV_CONFIG_PATH,
            LocationSource::DefaultPath => DEFAULT_CONFIG_PATH,
            LocationSource::BuiltInDefaults => "built-in defaults",
        })
    }
}

/// The configuration file cuFile will read, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConfigLocation {
    pub source: LocationSource,
    /// The file, when there is one to read.
    pub path: Option<PathBuf>,
    /// Whether `path` exists as a file right now.
    pub exists: bool,
}

impl ConfigLocation {
    /// Why `path` is not read, when it is not (`exists` is false): it does
    /// not exist, or it is not a regular file (a directory, a FIFO, a device).
    pub fn why_not_read(&self) -> Option<&'static str> {
        let path = self.path.as_ref().filter(|_| !self.exists)?;
        Some(match std::fs::metadata(path) {
            Err(_) => "does not exist",
            Ok(meta) => match FileKind::of(&meta.file_type()) {
                Some(FileKind::Directory) => "is a directory, not a regular file",
                Some(FileKind::Fifo) => "is a FIFO (named pipe), not a regular file",
                Some(FileKind::CharacterDevice) => "is a character device, not a regular file",
                Some(FileKind::BlockDevice) => "is a block device, not a regular file",
                Some(FileKind::Socket) => "is a socket, not a regular file",
                _ => "is not a regular file",
            },
        })
    }

    /// The location for this process's environment.
    pub fn from_env() -> ConfigLocation {
        Self::resolve(
            std::env::var_os(ENV_CONFIG_PATH),
            Path::new(DEFAULT_CONFIG_PATH),
        )
    }

    /// The location given the value of `CUFILE_ENV_PATH_JSON` and the default path.
    pub fn resolve(env_value: Option<OsString>, default_path: &Path) -> ConfigLocation {
        // An empty variable is treated as unset (as a shell `VAR=` intends).
        if let Some(value) = env_value.filter(|v| !v.is_empty()) {
            let path = PathBuf::from(value);
            return ConfigLocation {
                source: LocationSource::Environment,
                exists: path.is_file(),
                path: Some(path),
            };
        }
        if default_path.is_file() {
            return ConfigLocation {
                source: LocationSource::DefaultPath,
                path: Some(default_path.to_path_buf()),
                exists: true,
            };
        }
        ConfigLocation {
            source: LocationSource::BuiltInDefaults,
            path: None,
            exists: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_wins_even_when_its_file_is_missing() {
        let loc = ConfigLocation::resolve(
            Some("/nonexistent/cufile.json".into()),
            Path::new("/nonexistent/etc.json"),
        );
        assert_eq!(loc.source, LocationSource::Environment);
        assert_eq!(
            loc.path.as_deref(),
            Some(Path::new("/nonexistent/cufile.json"))
        );
        assert!(!loc.exists);
    }

    #[test]
    fn the_default_path_is_used_when_it_exists() {
        let dir = std::env::temp_dir().join(format!("cufile-config-loc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("cufile.json");
        std::fs::write(&file, "{}").unwrap();
        let loc = ConfigLocation::resolve(Some(OsString::new()), &file);
        assert_eq!(loc.source, LocationSource::DefaultPath);
        assert!(loc.exists);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_file_means_built_in_defaults() {
        let loc = ConfigLocation::resolve(None, Path::new("/nonexistent/cufile.json"));
        assert_eq!(loc.source, LocationSource::BuiltInDefaults);
        assert_eq!(loc.path, None);
    }
}

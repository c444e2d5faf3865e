//! The effective configuration: for every key the chosen libcufile reads,
//! the value cuFile will use and where it comes from. Precedence, lowest
//! first: built-in default < file < environment < API
//! (`cuFileSetParameter*`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use crate::ParsedConfig;
use crate::defaults::library_defaults;
use crate::env::{self, Environment};
use crate::error::ConfigError;
use crate::execution::{EffectiveExecution, ExecutionConfig, ExecutionSources};
use crate::library::Libcufile;
use crate::model::CufileConfig;
use crate::schema::{self, Setting};
use crate::validate::{check_value, env_value};
use crate::{Diagnostic, DiagnosticKind, Position};

/// Where an effective value comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// libcufile's built-in default.
    BuiltInDefault,
    /// Nothing sets it and the library default is not known (it cannot be
    /// read without a CUDA driver); cuFile uses its own default.
    UnknownDefault,
    /// The configuration file, at this place.
    File {
        #[serde(skip_serializing_if = "Option::is_none")]
        path: Option<PathBuf>,
        line: usize,
        column: usize,
    },
    /// An environment variable.
    Environment { variable: String },
    /// A `cuFileSetParameter*` call.
    Api,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::BuiltInDefault => f.write_str("built-in default"),
            Source::UnknownDefault => f.write_str("built-in default (value not known here)"),
            Source::File {
                path: Some(path),
                line,
                column,
            } => write!(f, "{}:{line}:{column}", path.display()),
            Source::File {
                path: None,
                line,
                column,
            } => write!(f, "file {line}:{column}"),
            Source::Environment { variable } => write!(f, "environment {variable}"),
            Source::Api => f.write_str("API (cuFileSetParameter*)"),
        }
    }
}

/// One key's effective value.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EffectiveSetting {
    pub path: &'static str,
    /// `None` when nothing sets it and the library default is not known.
    pub value: Option<serde_json::Value>,
    pub source: Source,
}

/// Values set through the cuFile API (`cuFileSetParameter*`), the highest
/// precedence. Only keys that such a call can set are accepted, with values
/// cuFile accepts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApiOverrides {
    values: BTreeMap<&'static str, serde_json::Value>,
}

impl ApiOverrides {
    /// Records `path = value`, checked against `library`'s rules.
    pub fn set(
        &mut self,
        library: Libcufile,
        path: &str,
        value: impl Into<serde_json::Value>,
    ) -> Result<&mut ApiOverrides, ConfigError> {
        let setting = schema::setting(path).ok_or_else(|| ConfigError::UnknownSetting {
            path: path.to_owned(),
        })?;
        if setting.api.is_none() || !setting.read_by(library) {
            return Err(ConfigError::NotSettableThroughApi {
                path: path.to_owned(),
            });
        }
        let value = check_value(setting, &value.into(), library).map_err(|message| {
            ConfigError::InvalidValue {
                path: path.to_owned(),
                message,
            }
        })?;
        self.values.insert(setting.path, value);
        Ok(self)
    }

    pub fn get(&self, path: &str) -> Option<&serde_json::Value> {
        self.values.get(path)
    }
}

/// Where cuFile writes its log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LogDestination {
    /// `CUFILE_LOGFILE_PATH` names the file.
    File { path: String, source: Source },
    /// `logging.dir` names the directory.
    Directory { dir: String, source: Source },
    /// Neither: `cufile.log` in the process's working directory.
    WorkingDirectory,
}

/// What cuFile will use, key by key.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EffectiveConfig {
    pub library: Libcufile,
    /// The file the values come from, if any.
    pub file: Option<PathBuf>,
    /// Whether cuFile refuses that file (it has errors): its driver would not
    /// open, whatever the values below say.
    pub file_refused: bool,
    /// Every key the library reads, in the order of the stock file.
    pub settings: Vec<EffectiveSetting>,
    /// The same values as a typed model (unknown defaults left out).
    #[serde(skip)]
    pub config: CufileConfig,
    pub log: LogDestination,
    /// Environment variables that are set and that cuFile reads, but whose
    /// effect is not modelled here (`NAME=value`).
    pub unmodelled_environment: Vec<String>,
    /// Environment values cuFile would not accept, or that this library
    /// version does not read.
    pub diagnostics: Vec<Diagnostic>,
}

fn pointer(path: &str) -> String {
    format!("/{}", path.replace('.', "/"))
}

fn insert(tree: &mut serde_json::Value, path: &str, value: serde_json::Value) {
    let mut node = tree;
    let mut keys = path.split('.').peekable();
    while let Some(key) = keys.next() {
        if !node.is_object() {
            *node = serde_json::Value::Object(serde_json::Map::new());
        }
        let serde_json::Value::Object(map) = node else {
            return;
        };
        if keys.peek().is_none() {
            map.insert(key.to_owned(), value);
            return;
        }
        node = map
            .entry(key.to_owned())
            .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
    }
}

impl EffectiveConfig {
    /// Resolves every key of `library`: API over environment over `file` over
    /// the library's defaults.
    pub fn resolve(
        library: Libcufile,
        file: Option<&ParsedConfig>,
        environment: &Environment,
        api: &ApiOverrides,
    ) -> EffectiveConfig {
        let defaults = library_defaults(library).to_json();
        let file_json = file.map(|f| f.config.to_json());
        let mut diagnostics = Vec::new();
        let mut settings = Vec::new();
        let mut tree = serde_json::Value::Object(serde_json::Map::new());

        for setting in schema::SETTINGS.iter().filter(|s| s.read_by(library)) {
            let from_file = file.zip(file_json.as_ref()).and_then(|(f, json)| {
                let value = json.pointer(&pointer(setting.path))?.clone();
                let at = f.position(setting.path).unwrap_or_default();
                Some((
                    value,
                    Source::File {
                        path: f.path.clone(),
                        line: at.line,
                        column: at.column,
                    },
                ))
            });
            let from_env = from_environment(setting, library, environment, &mut diagnostics);
            let from_api = api.get(setting.path).map(|v| (v.clone(), Source::Api));
            let from_default = defaults
                .pointer(&pointer(setting.path))
                .map(|v| (v.clone(), Source::BuiltInDefault));
            let (value, source) = match from_api.or(from_env).or(from_file).or(from_default) {
                Some((value, source)) => (Some(value), source),
                None => (None, Source::UnknownDefault),
            };
            if let Some(value) = &value {
                insert(&mut tree, setting.path, value.clone());
            }
            settings.push(EffectiveSetting {
                path: setting.path,
                value,
                source,
            });
        }

        for (var, value) in environment.known() {
            if !var.read_by.contains(&library) {
                diagnostics.push(Diagnostic::warning(
                    DiagnosticKind::Environment,
                    var.setting.unwrap_or(""),
                    Position::default(),
                    format!("{}={value} is set but {library} does not read it", var.name),
                ));
            }
        }
        let unmodelled_environment = environment
            .known()
            .filter(|(var, _)| var.setting.is_none() && var.name != env::LOGFILE_PATH)
            .filter(|(var, _)| var.read_by.contains(&library))
            .map(|(var, value)| format!("{}={value}", var.name))
            .collect();

        let log = if let Some(path) = environment.get(env::LOGFILE_PATH) {
            LogDestination::File {
                path: path.to_owned(),
                source: Source::Environment {
                    variable: env::LOGFILE_PATH.to_owned(),
                },
            }
        } else {
            match settings.iter().find(|s| s.path == "logging.dir") {
                Some(EffectiveSetting {
                    value: Some(serde_json::Value::String(dir)),
                    source,
                    ..
                }) => LogDestination::Directory {
                    dir: dir.clone(),
                    source: source.clone(),
                },
                _ => LogDestination::WorkingDirectory,
            }
        };

        EffectiveConfig {
            library,
            file: file.and_then(|f| f.path.clone()),
            file_refused: file.is_some_and(ParsedConfig::has_errors),
            settings,
            config: serde_json::from_value(tree).unwrap_or_default(),
            log,
            unmodelled_environment,
            diagnostics,
        }
    }

    /// The effective value of one key.
    pub fn setting(&self, path: &str) -> Option<&EffectiveSetting> {
        self.settings.iter().find(|s| s.path == path)
    }

    /// The `execution` settings as one typed struct, with each value's source.
    pub fn execution(&self) -> EffectiveExecution {
        let defaults = ExecutionConfig::library_defaults(self.library);
        let config = self.config.execution_section().resolve(&defaults);
        let source = |key: &str| {
            self.setting(&format!("execution.{key}"))
                .map_or(Source::BuiltInDefault, |s| s.source.clone())
        };
        EffectiveExecution {
            config,
            sources: ExecutionSources {
                max_io_queue_depth: source("max_io_queue_depth"),
                max_io_threads: source("max_io_threads"),
                parallel_io: source("parallel_io"),
                min_io_threshold_size_kb: source("min_io_threshold_size_kb"),
                max_request_parallelism: source("max_request_parallelism"),
            },
        }
    }
}

fn from_environment(
    setting: &Setting,
    library: Libcufile,
    environment: &Environment,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<(serde_json::Value, Source)> {
    let var = env::var_for(setting.path, library)?;
    let text = environment.get(var.name)?;
    match check_value(setting, &env_value(&setting.kind, text), library) {
        Ok(value) => Some((
            value,
            Source::Environment {
                variable: var.name.to_owned(),
            },
        )),
        Err(message) => {
            diagnostics.push(Diagnostic::warning(
                DiagnosticKind::Environment,
                setting.path,
                Position::default(),
                format!(
                    "{}={text} is invalid and left out here: {message}",
                    var.name
                ),
            ));
            None
        }
    }
}

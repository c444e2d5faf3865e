//! Effective values and their sources: built-in default < file < environment
//! < API.

use cufile_config::{
    ApiOverrides, ConfigError, EffectiveConfig, Environment, ExecutionConfig, Libcufile,
    LogDestination, ParsedConfig, Source, ValidateOptions,
};
use serde_json::json;

fn file(text: &str, library: Libcufile) -> ParsedConfig {
    ParsedConfig::parse_with(
        text,
        &ValidateOptions {
            library,
            check_paths: false,
        },
    )
}

#[test]
fn without_a_file_cufile_uses_its_built_in_defaults() {
    for (library, expected) in [
        (Libcufile::V1_15, ExecutionConfig::LIBRARY_DEFAULTS_1_15),
        (Libcufile::V1_20, ExecutionConfig::LIBRARY_DEFAULTS_1_20),
    ] {
        let effective = EffectiveConfig::resolve(
            library,
            None,
            &Environment::default(),
            &ApiOverrides::default(),
        );
        let execution = effective.execution();
        assert_eq!(execution.config, expected);
        assert_eq!(execution.sources.max_io_threads, Source::BuiltInDefault);
        assert!(!effective.file_refused);
        assert_eq!(effective.log, LogDestination::WorkingDirectory);
    }
    let effective = EffectiveConfig::resolve(
        Libcufile::V1_15,
        None,
        &Environment::default(),
        &ApiOverrides::default(),
    );
    let unknown = effective
        .setting("properties.max_direct_io_size_kb")
        .unwrap();
    assert_eq!(unknown.value, None);
    assert_eq!(unknown.source, Source::UnknownDefault);
    let known = effective.setting("properties.io_batchsize").unwrap();
    assert_eq!(known.value, Some(json!(128)));
}

#[test]
fn environment_beats_file_and_api_beats_environment() {
    let parsed = file(
        "{\n \"logging\": {\"level\": \"ERROR\", \"dir\": \"/var/log\"},\n \"execution\": {\"max_io_threads\": 4}\n}",
        Libcufile::V1_15,
    );
    let env = Environment::from_pairs([("CUFILE_LOGGING_LEVEL", "debug")]);
    let effective = parsed.effective(&env, &ApiOverrides::default());
    let level = effective.setting("logging.level").unwrap();
    assert_eq!(level.value, Some(json!("DEBUG")));
    assert_eq!(
        level.source,
        Source::Environment {
            variable: "CUFILE_LOGGING_LEVEL".into()
        }
    );
    let threads = effective.setting("execution.max_io_threads").unwrap();
    assert_eq!(threads.value, Some(json!(4)));
    assert_eq!(
        threads.source,
        Source::File {
            path: None,
            line: 3,
            column: 34
        }
    );
    assert_eq!(
        effective.log,
        LogDestination::Directory {
            dir: "/var/log".into(),
            source: Source::File {
                path: None,
                line: 2,
                column: 39
            }
        }
    );

    let mut api = ApiOverrides::default();
    api.set(Libcufile::V1_15, "logging.level", "TRACE").unwrap();
    api.set(Libcufile::V1_15, "execution.max_io_threads", 2)
        .unwrap();
    let effective = parsed.effective(&env, &api);
    assert_eq!(
        effective.setting("logging.level").unwrap().value,
        Some(json!("TRACE"))
    );
    assert_eq!(effective.execution().config.max_io_threads, 2);
    assert_eq!(effective.execution().sources.max_io_threads, Source::Api);
    assert_eq!(
        effective.config.logging.unwrap().level,
        Some(cufile_config::model::LogLevel::Trace)
    );
}

#[test]
fn each_version_reads_its_own_variables() {
    let env = Environment::from_pairs([("CUFILE_STATS_LEVEL", "3"), ("CUFILE_NVTX", "true")]);
    let v15 = EffectiveConfig::resolve(Libcufile::V1_15, None, &env, &ApiOverrides::default());
    assert_eq!(
        v15.setting("profile.cufile_stats").unwrap().source,
        Source::BuiltInDefault
    );
    assert_eq!(
        v15.setting("profile.nvtx").unwrap().value,
        Some(json!(true))
    );
    assert!(
        v15.diagnostics
            .iter()
            .any(|d| d.message.contains("CUFILE_STATS_LEVEL=3") && d.message.contains("1.15")),
        "{:#?}",
        v15.diagnostics
    );
    let v20 = EffectiveConfig::resolve(Libcufile::V1_20, None, &env, &ApiOverrides::default());
    assert_eq!(
        v20.setting("profile.cufile_stats").unwrap().value,
        Some(json!(3))
    );
    assert!(
        v20.setting("profile.nvtx").is_none(),
        "1.20 dropped profile.nvtx"
    );
}

#[test]
fn a_bad_environment_value_is_reported_and_left_out() {
    let parsed = file(
        r#"{"properties": {"force_compat_mode": false}}"#,
        Libcufile::V1_15,
    );
    let env = Environment::from_pairs([
        ("CUFILE_FORCE_COMPAT_MODE", "maybe"),
        ("CUFILE_LOGFILE_PATH", "/tmp/cufile-test.log"),
        ("CUFILE_DMABUF_ENABLE", "1"),
    ]);
    let effective = parsed.effective(&env, &ApiOverrides::default());
    let force = effective.setting("properties.force_compat_mode").unwrap();
    assert_eq!(force.value, Some(json!(false)));
    assert!(matches!(force.source, Source::File { .. }));
    assert!(
        effective.diagnostics[0]
            .message
            .starts_with("CUFILE_FORCE_COMPAT_MODE=maybe is invalid"),
        "{:#?}",
        effective.diagnostics
    );
    assert_eq!(
        effective.log,
        LogDestination::File {
            path: "/tmp/cufile-test.log".into(),
            source: Source::Environment {
                variable: "CUFILE_LOGFILE_PATH".into()
            }
        }
    );
    assert_eq!(effective.unmodelled_environment, ["CUFILE_DMABUF_ENABLE=1"]);
}

#[test]
fn api_overrides_are_checked_like_the_library_checks_them() {
    let mut api = ApiOverrides::default();
    assert!(matches!(
        api.set(Libcufile::V1_15, "execution.max_request_parallelism", 16),
        Err(ConfigError::InvalidValue { .. })
    ));
    assert!(matches!(
        api.set(Libcufile::V1_15, "execution.max_io_thread", 1),
        Err(ConfigError::UnknownSetting { .. })
    ));
    assert!(matches!(
        api.set(Libcufile::V1_15, "properties.io_priority", "low"),
        Err(ConfigError::NotSettableThroughApi { .. })
    ));
    assert!(matches!(
        api.set(Libcufile::V1_15, "execution.max_io_threads", 64),
        Err(ConfigError::InvalidValue { .. })
    ));
    assert!(
        api.set(Libcufile::V1_20, "execution.max_io_threads", 64)
            .is_ok()
    );
    let err = api
        .set(Libcufile::V1_15, "execution.parallel_io", "yes")
        .unwrap_err()
        .to_string();
    assert!(err.contains("execution.parallel_io"), "{err}");
}

#[test]
fn a_refused_file_is_flagged() {
    let parsed = file(
        r#"{"execution": {"max_request_parallelism": 16}}"#,
        Libcufile::V1_15,
    );
    let effective = parsed.effective(&Environment::default(), &ApiOverrides::default());
    assert!(effective.file_refused);
    // The invalid value is not in the model: the default shows.
    assert_eq!(effective.execution().config.max_request_parallelism, 0);
}

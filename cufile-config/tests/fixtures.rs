//! The fixture files: a stock-style cufile.json, a minimal override, and one
//! broken file per kind of mistake. Their diagnostics are snapshots; the
//! tests below state what must hold whatever the wording.

use std::path::{Path, PathBuf};

use cufile_config::{
    DiagnosticKind, ExecutionConfig, Libcufile, ParsedConfig, Severity, ValidateOptions, stock_file,
};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn read(name: &str, library: Libcufile) -> ParsedConfig {
    let options = ValidateOptions {
        library,
        check_paths: false,
    };
    ParsedConfig::read(&fixtures().join(name), &options).expect("fixture is readable")
}

/// The diagnostics as a reviewer reads them.
#[derive(serde::Serialize)]
struct Row {
    at: String,
    severity: Severity,
    kind: DiagnosticKind,
    path: String,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    help: Option<String>,
}

fn rows(parsed: &ParsedConfig) -> Vec<Row> {
    parsed
        .diagnostics
        .iter()
        .map(|d| Row {
            at: format!("{}:{}", d.line, d.column),
            severity: d.severity,
            kind: d.kind,
            path: d.path.clone(),
            message: d.message.clone(),
            expected: d.expected.clone(),
            help: d.help.clone(),
        })
        .collect()
}

/// Every broken fixture, and whether cuFile refuses it (libcufile 1.15).
const BROKEN: &[(&str, bool)] = &[
    ("bad_enum.json", true),
    ("binary_garbage.bin", true),
    ("cross_field.json", true),
    ("duplicate_key.json", false),
    ("empty.json", true),
    ("extra_brace.json", false),
    ("misaligned.json", true),
    ("not_an_object.json", true),
    ("other_version.json", true),
    ("out_of_range.json", true),
    ("trailing_comma.json", true),
    ("unbalanced_brace.json", true),
    ("unknown_key.json", false),
    ("wrong_type.json", true),
];

#[test]
fn diagnostics_of_every_broken_fixture() {
    let mut listed: Vec<String> = std::fs::read_dir(fixtures().join("broken"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    listed.sort();
    let known: Vec<&str> = BROKEN.iter().map(|(name, _)| *name).collect();
    assert_eq!(listed, known, "every broken fixture is listed in BROKEN");

    for (name, refused) in BROKEN {
        let parsed = read(&format!("broken/{name}"), Libcufile::V1_15);
        assert_eq!(
            parsed.has_errors(),
            *refused,
            "{name}: {:#?}",
            parsed.diagnostics
        );
        assert!(!parsed.diagnostics.is_empty(), "{name} has no diagnostics");
        let stem = name.split('.').next().unwrap();
        insta::assert_yaml_snapshot!(stem, rows(&parsed));
    }
}

#[test]
fn the_other_version_fixture_is_valid_for_libcufile_1_20() {
    let parsed = read("broken/other_version.json", Libcufile::V1_20);
    assert!(!parsed.has_errors(), "{:#?}", parsed.diagnostics);
    insta::assert_yaml_snapshot!("other_version_1_20", rows(&parsed));
}

#[test]
fn errors_name_the_offending_key() {
    for (name, _) in BROKEN {
        let parsed = read(&format!("broken/{name}"), Libcufile::V1_15);
        for d in parsed.diagnostics.iter().filter(|d| d.is_error()) {
            assert!(d.line >= 1 && d.column >= 1, "{name}: {d:?}");
            match d.kind {
                DiagnosticKind::Syntax | DiagnosticKind::NotAnObject => {
                    assert!(d.path.is_empty(), "{name}: {d:?}")
                }
                _ => assert!(
                    !d.path.is_empty() && d.message.contains(&d.path),
                    "{name}: the message does not name the key: {d:?}"
                ),
            }
        }
    }
}

#[test]
fn the_issue_example_reads_like_a_compiler() {
    let parsed = read("broken/out_of_range.json", Libcufile::V1_15);
    let text = parsed.render("cufile.json");
    assert!(
        text.contains(
            "cufile.json:7:36: error: execution.max_request_parallelism = 16 is out of range 0..=8"
        ),
        "{text}"
    );
    assert!(
        text.ends_with("cufile.json: 10 errors, 0 warnings\n"),
        "{text}"
    );
}

#[test]
fn the_stock_fixture_is_clean_and_is_the_stock_model() {
    let parsed = read("stock.json", Libcufile::V1_20);
    let paths: Vec<&str> = parsed.diagnostics.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(
        paths,
        ["profile.nvtx"],
        "libcufile 1.20 no longer reads profile.nvtx"
    );
    let parsed = read("stock.json", Libcufile::V1_15);
    assert!(parsed.diagnostics.is_empty(), "{:#?}", parsed.diagnostics);
    assert_eq!(parsed.config, stock_file());
    assert_eq!(parsed.execution().config, ExecutionConfig::STOCK_FILE);
}

#[test]
fn the_minimal_override_is_clean_and_fills_in_defaults() {
    let parsed = read("minimal.json", Libcufile::V1_15);
    assert!(parsed.diagnostics.is_empty(), "{:#?}", parsed.diagnostics);
    let execution = parsed.execution();
    assert_eq!(
        execution.config,
        ExecutionConfig {
            parallel_io: true,
            max_io_threads: 8,
            max_request_parallelism: 4,
            ..ExecutionConfig::LIBRARY_DEFAULTS_1_15
        }
    );
    assert_eq!(
        execution.sources.max_io_queue_depth,
        cufile_config::Source::BuiltInDefault
    );
    assert!(matches!(
        execution.sources.max_io_threads,
        cufile_config::Source::File {
            line: 7,
            column: 27,
            ..
        }
    ));
}

#[test]
fn every_fixture_model_round_trips_through_json() {
    let mut names = vec!["stock.json".to_owned(), "minimal.json".to_owned()];
    names.extend(BROKEN.iter().map(|(n, _)| format!("broken/{n}")));
    for name in names {
        let parsed = read(&name, Libcufile::V1_15);
        let json = serde_json::to_string_pretty(&parsed.config).unwrap();
        let back: cufile_config::CufileConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, parsed.config, "{name}");
        // Written out as a file, the model validates to itself.
        let reparsed = ParsedConfig::parse(&json);
        assert_eq!(reparsed.config, parsed.config, "{name}: {json}");
        if !parsed.has_errors() {
            assert!(
                !reparsed.has_errors(),
                "{name}: {:#?}",
                reparsed.diagnostics
            );
        }
    }
}

#[test]
fn unknown_keys_are_kept_in_the_model() {
    let parsed = read("broken/unknown_key.json", Libcufile::V1_15);
    let config = &parsed.config;
    assert_eq!(config.other["version"], serde_json::json!(2));
    let execution = config.execution.as_ref().unwrap();
    assert_eq!(execution.other["total_threads"], serde_json::json!(32));
    let fs = config.fs.as_ref().unwrap();
    assert_eq!(fs.other["ext4"], serde_json::json!({"allow_odirect": true}));
    assert_eq!(
        fs.lustre.as_ref().unwrap().other["rdma_write_support"],
        serde_json::json!(true)
    );
}

#[test]
fn large_and_real_numbers_in_unknown_keys_round_trip_exactly() {
    // Found by the fuzz target: a 95-digit number under an unknown key came
    // back one bit off after model -> JSON -> model.
    let text = format!(
        r#"{{"execution": {{"x": {}6, "y": 0.1, "z": -1.5e-300}}}}"#,
        "4".repeat(94)
    );
    let parsed = ParsedConfig::parse(&text);
    let json = serde_json::to_string(&parsed.config).unwrap();
    let back: cufile_config::CufileConfig = serde_json::from_str(&json).unwrap();
    assert_eq!(back, parsed.config, "{json}");
    assert_eq!(ParsedConfig::parse(&json).config, parsed.config);
}

//! `kvik config validate` and `kvik config show` as a user runs them: output,
//! JSON shape, exit codes (0 clean or warnings, 1 errors, 2 unreadable/usage).

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../cufile-config/fixtures")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// `kvik` with no CUFILE_* variables from the caller's environment.
fn kvik_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kvik"));
    command
        .args(args)
        .env_remove(cufile_config::ENV_CONFIG_PATH);
    for var in cufile_config::env::ENV_VARS {
        command.env_remove(var.name);
    }
    command.envs(env.iter().copied());
    command.output().expect("run kvik")
}

fn kvik(args: &[&str]) -> Output {
    kvik_with(args, &[])
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(out)))
}

#[test]
fn errors_print_like_a_compiler_and_exit_1() {
    let file = fixture("broken/out_of_range.json");
    let out = kvik(&["config", "validate", &file]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "{file}:7:36: error: execution.max_request_parallelism = 16 is out of range 0..=8"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("{file}: 10 errors, 0 warnings")),
        "{text}"
    );
    assert!(stderr(&out).contains("cuFile refuses"), "{}", stderr(&out));
}

#[test]
fn json_is_an_array_of_diagnostics() {
    let file = fixture("broken/wrong_type.json");
    let out = kvik(&["config", "validate", "--json", &file]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    let diagnostics = v.as_array().unwrap();
    assert!(diagnostics.len() >= 5, "{v}");
    for d in diagnostics {
        assert_eq!(d["file"], file.as_str());
        assert!(["error", "warning"].contains(&d["severity"].as_str().unwrap()));
        assert!(d["path"].is_string() && d["message"].is_string(), "{d}");
        assert!(d["line"].as_u64().unwrap() >= 1 && d["column"].as_u64().unwrap() >= 1);
    }
    assert!(
        diagnostics
            .iter()
            .any(|d| d["path"] == "execution.max_io_threads" && d["line"] == 5),
        "{v}"
    );
}

#[test]
fn warnings_alone_exit_0_and_every_fixture_gets_its_exit_code() {
    for (name, code) in [
        ("stock.json", 0),
        ("minimal.json", 0),
        ("broken/unknown_key.json", 0),
        ("broken/duplicate_key.json", 0),
        ("broken/extra_brace.json", 0),
        ("broken/trailing_comma.json", 1),
        ("broken/unbalanced_brace.json", 1),
        ("broken/empty.json", 1),
        ("broken/binary_garbage.bin", 1),
        ("broken/not_an_object.json", 1),
        ("broken/bad_enum.json", 1),
        ("broken/misaligned.json", 1),
    ] {
        let out = kvik(&["config", "validate", &fixture(name)]);
        assert_eq!(out.status.code(), Some(code), "{name}: {}", stdout(&out));
    }
    let out = kvik(&[
        "config",
        "validate",
        "--library",
        "1.20",
        &fixture("broken/other_version.json"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn an_unreadable_file_exits_2_naming_it() {
    let out = kvik(&["config", "validate", "/nonexistent/kvik-cufile.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("/nonexistent/kvik-cufile.json"),
        "{}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty());
    let out = kvik_with(
        &["config", "show"],
        &[("CUFILE_ENV_PATH_JSON", "/nonexistent/env.json")],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("CUFILE_ENV_PATH_JSON"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_bad_library_version_is_a_usage_error() {
    let out = kvik(&[
        "config",
        "validate",
        "--library",
        "1.9",
        &fixture("stock.json"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("1.15"), "{}", stderr(&out));
}

#[test]
fn without_file_argument_the_file_cufile_reads_is_validated() {
    let out = kvik_with(
        &["config", "validate"],
        &[("CUFILE_ENV_PATH_JSON", &fixture("broken/cross_field.json"))],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("is smaller than"), "{}", stdout(&out));
}

#[test]
fn show_lists_values_with_their_sources() {
    let file = fixture("minimal.json");
    let out = kvik_with(
        &["config", "show", "--json", &file],
        &[
            ("CUFILE_LOGGING_LEVEL", "debug"),
            ("CUFILE_LOGFILE_PATH", "/tmp/k.log"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["library"], "1.15");
    assert_eq!(v["file"]["errors"], 0);
    assert_eq!(v["execution"]["config"]["max_io_threads"], 8);
    assert_eq!(v["execution"]["sources"]["max_io_threads"]["kind"], "file");
    assert_eq!(v["execution"]["sources"]["max_io_threads"]["line"], 7);
    assert_eq!(
        v["execution"]["sources"]["max_io_queue_depth"]["kind"],
        "built_in_default"
    );
    let level = v["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["path"] == "logging.level")
        .unwrap();
    assert_eq!(level["value"], "DEBUG");
    assert_eq!(level["source"]["variable"], "CUFILE_LOGGING_LEVEL");
    assert_eq!(v["log"]["kind"], "file");
    assert_eq!(v["log"]["path"], "/tmp/k.log");

    let out = kvik(&["config", "show", &file]);
    let text = stdout(&out);
    let row = text
        .lines()
        .find(|l| l.starts_with("execution.max_io_threads"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        row.contains(" 8 ") && row.ends_with(&format!("{file}:7:27")),
        "{row}"
    );
}

#[test]
fn show_of_a_refused_file_still_shows_and_exits_1() {
    let out = kvik(&["config", "show", &fixture("broken/out_of_range.json")]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("cuFile refuses this file"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("execution.max_request_parallelism")),
        "{text}"
    );
}

#[test]
fn no_config_file_means_built_in_defaults() {
    if std::path::Path::new(cufile_config::DEFAULT_CONFIG_PATH).exists() {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "skipped: {} exists on this machine",
            cufile_config::DEFAULT_CONFIG_PATH
        );
        return;
    }
    let out = kvik(&["config", "validate"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).contains("built-in defaults"),
        "{}",
        stdout(&out)
    );
    let v = json(&kvik(&["config", "show", "--json"]));
    assert!(v["file"].is_null());
    assert_eq!(v["execution"]["config"]["parallel_io"], false);
    assert_eq!(v["execution"]["config"]["max_io_threads"], 0);
}

//! `kvik check` as a user runs it: exit codes, the verdict, the JSON shape.

use std::io::Write as _;
use std::process::{Command, Output};

fn kvik(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvik"))
        .args(args)
        .output()
        .expect("run kvik")
}

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

#[test]
fn check_exits_zero_and_ends_with_a_verdict() {
    let out = kvik(&["check"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let verdict = text
        .lines()
        .find_map(|l| l.strip_prefix("verdict: "))
        .expect("a verdict line");
    assert!(
        [
            "direct path possible",
            "cuFile compat mode only",
            "POSIX only"
        ]
        .contains(&verdict),
        "unexpected verdict {verdict:?}"
    );
    for label in [
        "libcufile",
        "CUDA driver",
        "nvidia-fs",
        "/run/udev",
        "WSL",
        "cufile.json",
    ] {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(label)),
            "no {label} row in:\n{text}"
        );
    }
}

#[test]
fn json_report_has_a_verdict_with_reasons() {
    let dir = std::env::temp_dir();
    let out = kvik(&["check", "--json", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    let kind = v["verdict"]["kind"].as_str().unwrap();
    assert!(
        ["direct_path_possible", "compat_mode_only", "posix_only"].contains(&kind),
        "{kind}"
    );
    assert!(!v["verdict"]["reasons"].as_array().unwrap().is_empty());
    assert_eq!(
        v["path"]["path"],
        serde_json::json!(std::path::absolute(&dir).unwrap())
    );
    assert!(
        v["path"]["filesystem"]["ok"]["name"].is_string(),
        "{}",
        v["path"]
    );
}

#[test]
fn a_missing_path_is_a_usage_error_naming_it() {
    let out = kvik(&["check", "/nonexistent/kvik-check-path"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/kvik-check-path"), "{err}");
    assert!(out.stdout.is_empty(), "no report for a bad argument");
}

#[test]
fn an_unknown_flag_is_a_usage_error() {
    assert_eq!(kvik(&["check", "--no-such-flag"]).status.code(), Some(2));
}

#[test]
fn without_a_cuda_driver_the_verdict_is_posix_only_with_reasons() {
    if let Ok(driver) = gds_core::cuda::probe() {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: a CUDA driver is present ({})",
            driver.version_string()
        );
        return;
    }
    let v = json(&kvik(&["check", "--json"]));
    assert_eq!(v["verdict"]["kind"], "posix_only");
    let reasons = v["verdict"]["reasons"].as_array().unwrap();
    let kinds: Vec<&str> = reasons
        .iter()
        .map(|r| r["kind"].as_str().expect("every reason has a kind"))
        .collect();
    assert!(kinds.contains(&"no_cuda"), "{kinds:?}");
    assert!(kinds.contains(&"no_direct_path"), "{kinds:?}");
    let no_cuda = reasons.iter().find(|r| r["kind"] == "no_cuda").unwrap();
    assert_eq!(no_cuda["cause"]["kind"], "library_missing", "{no_cuda}");
    assert!(
        no_cuda["cause"]["message"]
            .as_str()
            .unwrap()
            .contains("libcuda.so.1")
    );
    assert_eq!(v["driver"]["status"], "not_opened");
    assert!(
        ["no_cuda", "no_libcufile"].contains(&v["driver"]["reason"].as_str().unwrap()),
        "{}",
        v["driver"]
    );
    assert!(
        v["cuda"]["error"]
            .as_str()
            .unwrap()
            .contains("libcuda.so.1")
    );
}

#[test]
fn the_library_named_by_the_environment_is_reported_with_its_version() {
    let Some(path) = std::env::var_os("KVIK_CUFILE_LIBRARY").filter(|v| !v.is_empty()) else {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: KVIK_CUFILE_LIBRARY is not set (no libcufile to test)"
        );
        return;
    };
    let v = json(&kvik(&["check", "--json"]));
    let lib = &v["libcufile"];
    assert_eq!(lib["status"], "loaded", "{lib}");
    assert_eq!(lib["found_by"], "KVIK_CUFILE_LIBRARY");
    let canonical = std::fs::canonicalize(&path).unwrap();
    assert_eq!(lib["path"], canonical.to_str().unwrap());
    let version = lib["version"].as_str().unwrap();
    assert!(version.starts_with("1."), "{version}");
}

//! `kvik bench` as a user runs it, on a small file: exit codes, the JSON
//! shape, the table. No figure is asserted (a benchmark is not a test).

use std::process::{Command, Output};

fn kvik(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kvik"))
        .args(args)
        .output()
        .expect("run kvik")
}

#[test]
fn a_small_run_reports_every_case_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("plot.svg");
    let out = kvik(&[
        "bench",
        "--dir",
        dir.path().to_str().unwrap(),
        "--size",
        "4MiB",
        "--threads",
        "1,2",
        "--task-size",
        "1MiB",
        "--window",
        "all,2MiB",
        "--memory",
        "host",
        "--ops",
        "read,write",
        "--cache",
        "hot,cold",
        "--drop",
        "file",
        "--reps",
        "2",
        "--references",
        "memcpy,dd",
        "--json",
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(r["schema"], "kvik-bench/1");
    assert!(
        r["command_line"]
            .as_str()
            .unwrap()
            .starts_with("kvik bench ")
    );
    // 3 workloads × 2 windows × 1 task size × 2 thread counts.
    let cases = r["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 12);
    for c in cases {
        assert!(c["error"].is_null(), "{c}");
        let t = &c["throughput"];
        assert_eq!(t["samples"].as_array().unwrap().len(), 2);
        assert!(t["min"].as_f64().unwrap() <= t["median"].as_f64().unwrap());
        assert!(t["median"].as_f64().unwrap() <= t["max"].as_f64().unwrap());
        assert_eq!(c["backend"], "posix");
    }
    // Every reference is either measured or says why not; dd ran.
    let refs = r["references"].as_array().unwrap();
    assert!(refs.iter().any(|x| x["name"] == "memcpy"));
    assert!(
        refs.iter()
            .any(|x| x["name"].as_str().unwrap().starts_with("dd "))
    );
    for x in refs {
        assert!(x["throughput"].is_object() ^ x["error"].is_string(), "{x}");
    }
    assert!(
        r["cold_cache"]["method"]
            .as_str()
            .unwrap()
            .contains("posix_fadvise")
    );
    assert_eq!(r["tuning"][0]["memory"], "host");
    // The temporary file is gone; the plot is there.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, vec!["plot.svg".to_string()]);
    assert!(std::fs::read_to_string(&plot).unwrap().starts_with("<svg"));
}

#[test]
fn device_memory_without_a_gpu_is_skipped_with_the_reason() {
    if gds_core::cuda::probe().is_ok() {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "skipped: a CUDA driver is present; this test is for machines without one"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = kvik(&[
        "bench",
        "--dir",
        dir.path().to_str().unwrap(),
        "--size",
        "1MiB",
        "--threads",
        "1",
        "--task-size",
        "1MiB",
        "--memory",
        "host,device:0",
        "--ops",
        "read",
        "--cache",
        "hot",
        "--reps",
        "1",
        "--no-references",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("device:0: skipped: no CUDA driver"),
        "no skip note in:\n{text}"
    );
    assert!(text.contains("host      read hot"), "{text}");
}

#[test]
fn bad_arguments_exit_2_and_name_the_problem() {
    let out = kvik(&["bench", "--threads", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 1"));
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::write(&small, b"abc").unwrap();
    let out = kvik(&["bench", "--file", small.to_str().unwrap(), "--size", "1MiB"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("less than --size"));
}

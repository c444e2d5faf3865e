//! `kvik read / write / copy / settings / demo` as a user runs them: exit
//! codes, what errors name, the JSON shape, byte-identical copies, CRC-32s
//! that match zlib's, and no partial files after a failure.

use std::path::Path;
use std::process::{Command, Output};

use kvik_test_support::skip;

fn kvik_cmd(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kvik"));
    cmd.args(args);
    // The tests set their own KVIKIO_* where they mean to.
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("KVIKIO_") {
            cmd.env_remove(name);
        }
    }
    cmd
}

fn kvik(args: &[&str]) -> Output {
    kvik_cmd(args).output().expect("run kvik")
}

fn ok(out: &Output) -> &Output {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&ok(out).stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// Exit code 2 or 1 as asked, nothing on stdout, and stderr naming `needle`.
fn fails(out: &Output, code: i32, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {err}");
    assert!(err.contains(needle), "{needle:?} not in: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn write_then_read_with_checksums_that_agree_with_zlib() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.bin");
    let size = (3 << 20) + 4097;
    let w = json(&kvik(&[
        "write",
        p(&file),
        "--size",
        &size.to_string(),
        "--checksum",
        "--json",
        "--task-size",
        "1MiB",
    ]));
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(bytes.len(), size);
    let expected = format!("{:08x}", crc32fast::hash(&bytes));
    assert_eq!(w["checksum_crc32"], expected.as_str());
    assert_eq!(w["bytes"], size);
    assert_eq!(w["report"]["kvik"]["route"]["backend"], "posix");

    let r = json(&kvik(&[
        "read",
        p(&file),
        "--host",
        "--checksum",
        "--json",
        "--threads",
        "3",
    ]));
    assert_eq!(r["bytes"], size);
    assert!(r["seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(r["checksum_crc32"], expected.as_str());
    assert_eq!(r["report"]["kvik"]["route"]["backend"], "posix");
    assert_eq!(
        r["report"]["kvik"]["route"]["reason"]["kind"],
        "host_memory"
    );
    assert_eq!(r["settings"]["num_threads"]["value"], 3);
    assert_eq!(task_count(&r["report"]), 1, "4 MiB tasks");
    assert_eq!(r["report"]["kvik"]["execution"]["kind"], "calling_thread");
    assert_eq!(r["memory"]["kind"], "host");

    // zlib itself, where Python is at hand.
    match Command::new("python3")
        .args([
            "-c",
            "import sys, zlib; print('%08x' % zlib.crc32(open(sys.argv[1], 'rb').read()))",
        ])
        .arg(&file)
        .output()
    {
        Ok(py) if py.status.success() => {
            assert_eq!(String::from_utf8_lossy(&py.stdout).trim(), expected);
        }
        _ => skip(
            "write_then_read_with_checksums_that_agree_with_zlib",
            "python3 with zlib is not available; compared with crc32fast only",
        ),
    }

    // A slice, and the human report.
    let slice = kvik(&[
        "read",
        p(&file),
        "--host",
        "--offset",
        "1000",
        "--size",
        "4KiB",
        "--checksum",
    ]);
    let text = String::from_utf8(ok(&slice).stdout.clone()).unwrap();
    let crc = format!("{:08x}", crc32fast::hash(&bytes[1000..1000 + 4096]));
    assert!(text.contains(&format!("CRC-32       {crc}")), "{text}");
    for needle in [
        "path report",
        "backend",
        "posix: host memory",
        "compat mode",
        "cuFile",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
}

#[test]
fn the_check_string_has_zlibs_crc() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("check");
    std::fs::write(&file, b"123456789").unwrap();
    let r = json(&kvik(&["read", p(&file), "--checksum", "--json"]));
    assert_eq!(r["checksum_crc32"], "cbf43926"); // zlib.crc32(b"123456789")
}

#[test]
fn copy_is_byte_identical_and_copies_into_directories() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    ok(&kvik(&[
        "write",
        p(&src),
        "--size",
        "5000007",
        "--seed",
        "9",
    ]));
    let dst = dir.path().join("dst.bin");
    let c = json(&kvik(&[
        "copy",
        p(&src),
        p(&dst),
        "--json",
        "--checksum",
        "--buffer",
        "1MiB",
        "--task-size",
        "256KiB",
    ]));
    let original = std::fs::read(&src).unwrap();
    assert!(std::fs::read(&dst).unwrap() == original);
    assert_eq!(c["bytes"], 5_000_007);
    assert_eq!(
        c["checksum_crc32"],
        format!("{:08x}", crc32fast::hash(&original)).as_str()
    );
    assert_eq!(c["read"]["report"]["kvik"]["route"]["backend"], "posix");
    assert_eq!(c["write"]["report"]["operation"], "write");
    assert_eq!(c["write"]["report"]["path"], p(&dst));
    // Windows of 1 MiB: the read report covers all of them.
    assert_eq!(c["read"]["report"]["bytes"], 5_000_007);

    let into = dir.path().join("into");
    std::fs::create_dir(&into).unwrap();
    ok(&kvik(&["copy", p(&src), p(&into)]));
    assert!(std::fs::read(into.join("src.bin")).unwrap() == original);

    // An empty file copies to an empty file.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    ok(&kvik(&["copy", p(&empty), p(&dir.path().join("empty2"))]));
    assert_eq!(std::fs::read(dir.path().join("empty2")).unwrap().len(), 0);
    // No temporary files are left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".kvik-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_copy_that_fails_midway_leaves_no_file() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    ok(&kvik(&["write", p(&src), "--size", "4MiB"]));
    let dst = dir.path().join("dst.bin");
    // Files may grow to 1 MiB only: the write fails with EFBIG part way.
    let mut cmd = kvik_cmd(&["copy", p(&src), p(&dst), "--buffer", "512KiB"]);
    // SAFETY: async-signal-safe calls only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: 1 << 20,
                rlim_max: libc::RLIM_INFINITY,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    fails(&out, 1, "File too large");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        vec!["src.bin".to_string()],
        "a partial file was left"
    );
}

#[test]
fn bad_input_exits_2_naming_what_was_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("small");
    std::fs::write(&file, vec![1u8; 1000]).unwrap();
    let missing = dir.path().join("missing");
    fails(&kvik(&["read", p(&missing)]), 2, p(&missing));
    fails(&kvik(&["read", p(dir.path())]), 2, "is a directory");
    fails(
        &kvik(&["read", p(&file), "--offset", "2000"]),
        2,
        "--offset 2000 is beyond the end",
    );
    // From the end to the end: 0 bytes, as for an empty file (and `copy`).
    ok(&kvik(&["read", p(&file), "--offset", "1000"]));
    fails(
        &kvik(&["read", p(&file), "--size", "1001"]),
        2,
        "ends beyond the end",
    );
    fails(&kvik(&["read", p(&file), "--size", "0"]), 2, "zero");
    fails(
        &kvik(&["read", p(&file), "--size", "lots"]),
        2,
        "\"lots\" is not a size",
    );
    fails(&kvik(&["read", p(&file), "--offset", "4x"]), 2, "\"4x\"");
    fails(&kvik(&["read", p(&file), "--threads", "0"]), 2, "0 threads");
    fails(
        &kvik(&["read", p(&file), "--compat", "maybe"]),
        2,
        "\"maybe\" is not a compat mode",
    );
    fails(&kvik(&["write", p(&file), "--size", "0"]), 2, "zero");
    fails(
        &kvik(&["write", p(dir.path()), "--size", "1"]),
        2,
        "is a directory",
    );
    let nowhere = dir.path().join("no/such/dir/file");
    fails(
        &kvik(&["write", p(&nowhere), "--size", "1"]),
        2,
        "does not exist",
    );
    fails(&kvik(&["copy", p(&missing), p(&file)]), 2, p(&missing));
    fails(&kvik(&["copy", p(&file), p(&file)]), 2, "are the same file");
    fails(
        &kvik(&["demo", "--dir", p(&missing)]),
        2,
        "is not a directory",
    );
    fails(&kvik(&["demo", "--size", "0"]), 2, "zero");
}

#[test]
fn a_demo_that_cannot_fit_is_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    fails(
        &kvik(&["demo", "--dir", p(dir.path()), "--size", "100TiB"]),
        1,
        "free",
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing left behind"
    );
}

#[test]
fn an_unreadable_file_names_the_path() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        skip(
            "an_unreadable_file_names_the_path",
            "running as root: permissions are not enforced",
        );
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret");
    std::fs::write(&file, b"x").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o000)).unwrap();
    fails(&kvik(&["read", p(&file)]), 2, p(&file));
}

#[test]
fn compat_off_without_cufile_cannot_be_valid_here_with_reasons() {
    if gds_core::cuda::probe().is_ok() {
        skip(
            "compat_off_without_cufile_cannot_be_valid_here_with_reasons",
            "a CUDA driver is present",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, b"data").unwrap();
    // The request cannot be valid on this machine as given: exit 2.
    fails(
        &kvik(&["read", p(&file), "--compat", "off"]),
        2,
        "compat mode is OFF",
    );
    let on = json(&kvik(&["read", p(&file), "--compat", "on", "--json"]));
    assert_eq!(on["report"]["kvik"]["file"]["requested"], "ON");
    let auto = json(&kvik(&["read", p(&file), "--json"]));
    let file = &auto["report"]["kvik"]["file"];
    assert_eq!(file["requested"], "AUTO");
    assert_eq!(file["effective"], "ON");
    assert_eq!(file["decision"]["kind"], "auto_unavailable");
    let kinds: Vec<&str> = file["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"no_cuda"), "{kinds:?}");
    assert!(
        auto["memory"]["reason"]
            .as_str()
            .unwrap()
            .contains("no CUDA driver")
    );
}

#[test]
fn a_bad_kvikio_variable_stops_every_command_before_any_io() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("never");
    for args in [
        vec!["settings"],
        vec!["check"],
        vec!["write", p(&target), "--size", "1KiB"],
        vec!["demo", "--dir", p(dir.path()), "--size", "1MiB"],
    ] {
        let out = kvik_cmd(&args)
            .env("KVIKIO_TASK_SIZE", "4x")
            .env("KVIKIO_NTHREADS", "2")
            .env("KVIKIO_NUM_THREADS", "3")
            .output()
            .unwrap();
        fails(&out, 2, "KVIKIO_TASK_SIZE=\"4x\" is invalid: unknown unit");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("KVIKIO_NUM_THREADS=3 disagrees"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no file was created"
    );
}

#[test]
fn settings_show_values_and_sources() {
    let v = json(&kvik(&["settings", "--json"]));
    assert_eq!(v["compat_mode"]["value"], "AUTO");
    assert_eq!(v["compat_mode"]["source"]["kind"], "default");
    assert_eq!(v["task_size"]["value"], 4 << 20);
    let out = kvik_cmd(&["settings", "--json"])
        .env("KVIKIO_TASK_SIZE", "1MiB")
        .env("KVIKIO_NUM_THREADS", "5")
        .env("KVIKIO_COMPAT_MODE", "yes")
        .output()
        .unwrap();
    let v = json(&out);
    assert_eq!(v["task_size"]["value"], 1 << 20);
    assert_eq!(v["task_size"]["source"]["variable"], "KVIKIO_TASK_SIZE");
    assert_eq!(v["num_threads"]["value"], 5);
    assert_eq!(v["num_threads"]["source"]["variable"], "KVIKIO_NUM_THREADS");
    assert_eq!(v["compat_mode"]["value"], "ON");
    let text = String::from_utf8(ok(&kvik(&["settings"])).stdout.clone()).unwrap();
    for name in [
        "compat_mode",
        "num_threads",
        "task_size",
        "gds_threshold",
        "bounce_buffer_size",
        "auto_direct_io_read",
        "auto_direct_io_write",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    assert!(text.contains("default"), "{text}");
}

#[test]
fn the_environment_reaches_reads() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("env");
    std::fs::write(&file, vec![5u8; 100_000]).unwrap();
    let out = kvik_cmd(&["read", p(&file), "--json"])
        .env("KVIKIO_TASK_SIZE", "16KiB")
        .env("KVIKIO_COMPAT_MODE", "on")
        .output()
        .unwrap();
    let v = json(&out);
    assert_eq!(v["report"]["kvik"]["task_size"], 16384);
    assert_eq!(task_count(&v["report"]), 7);
    assert_eq!(v["report"]["kvik"]["file"]["decision"]["kind"], "compat_on");
    // The command line beats the environment.
    let out = kvik_cmd(&["read", p(&file), "--json", "--task-size", "50000"])
        .env("KVIKIO_TASK_SIZE", "16KiB")
        .output()
        .unwrap();
    assert_eq!(task_count(&json(&out)["report"]), 2);
}

#[test]
fn demo_writes_reads_verifies_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let v = json(&kvik(&[
        "demo",
        "--size",
        "8MiB",
        "--host",
        "--dir",
        p(dir.path()),
        "--json",
    ]));
    assert_eq!(v["verified"], true);
    assert_eq!(v["read"]["bytes"], 8 << 20);
    assert_eq!(v["write"]["bytes"], 8 << 20);
    assert_eq!(v["read"]["report"]["kvik"]["route"]["backend"], "posix");
    assert!(v["read"]["report"]["kvik"]["file"]["decision"]["kind"].is_string());
    assert_eq!(v["memory"]["kind"], "host");
    assert_eq!(v["checksum_crc32"].as_str().unwrap().len(), 8);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "removed");

    let out = kvik(&["demo", "--size", "1MiB", "--dir", p(dir.path()), "--keep"]);
    let text = String::from_utf8(ok(&out).stdout.clone()).unwrap();
    let kept: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(std::fs::metadata(&kept[0]).unwrap().len(), 1 << 20);
    assert!(
        text.contains(&format!("kept {}", kept[0].display())),
        "{text}"
    );
    assert!(text.contains("matches the bytes written"), "{text}");
    assert!(text.contains("path report (read)"), "{text}");
}

/// The check, once (1 GiB): a copy of a random file is identical.
#[test]
fn copy_of_a_1_gib_random_file_is_byte_identical() {
    use std::io::Read as _;
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("1g.bin");
    let dst = dir.path().join("1g.copy");
    let w = json(&kvik(&[
        "write",
        p(&src),
        "--size",
        "1GiB",
        "--checksum",
        "--json",
    ]));
    let c = json(&kvik(&["copy", p(&src), p(&dst), "--checksum", "--json"]));
    assert_eq!(c["bytes"], 1u64 << 30);
    assert_eq!(c["checksum_crc32"], w["checksum_crc32"]);
    let (mut a, mut b) = (
        std::fs::File::open(&src).unwrap(),
        std::fs::File::open(&dst).unwrap(),
    );
    assert_eq!(b.metadata().unwrap().len(), 1 << 30);
    let (mut x, mut y) = (vec![0u8; 8 << 20], vec![0u8; 8 << 20]);
    let mut offset = 0u64;
    loop {
        let n = a.read(&mut x).unwrap();
        b.read_exact(&mut y[..n]).unwrap();
        assert!(
            x[..n] == y[..n],
            "the copy differs in the 8 MiB from offset {offset}"
        );
        if n == 0 {
            break;
        }
        offset += n as u64;
    }
    assert_eq!(offset, 1 << 30);
}

/// The number of tasks in a path report (its task runs, summed).
fn task_count(report: &serde_json::Value) -> u64 {
    report["kvik"]["tasks"]
        .as_array()
        .expect("task runs")
        .iter()
        .map(|run| run["count"].as_u64().unwrap())
        .sum()
}

//! `kvik` when things go wrong: writes and copies that fail (file size
//! limit, a full filesystem, SIGKILL) never leave a half-written file in
//! place of an old one; `--fsync`; junk in every `KVIKIO_*` and `CUFILE_*`
//! variable; cufile.json files that are endless, huge or not files, in
//! bounded memory.

mod common;

use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{OutputWithinDeadline as _, fails, json, kvik, kvik_cmd, names, ok, p, text};
use kvik_test_support::skip;

/// Set `resource` (an `RLIMIT_*`) to `limit` for `cmd`, and ignore
/// `SIGXFSZ` so that a write past `RLIMIT_FSIZE` fails with EFBIG instead
/// of killing it.
fn with_rlimit(cmd: &mut Command, resource: libc::__rlimit_resource_t, limit: u64) -> &mut Command {
    // SAFETY: async-signal-safe calls only, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let rlimit = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(resource, &rlimit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// Let `cmd`'s files grow to `limit` bytes only.
fn file_size_limit(cmd: &mut Command, limit: u64) -> &mut Command {
    with_rlimit(cmd, libc::RLIMIT_FSIZE, limit)
}

/// Let `cmd` have at most `limit` bytes of address space: an allocation
/// past it fails, so finishing under the limit proves the memory it used
/// was bounded. (A peak-RSS measurement from `wait4` would include the test
/// process's own memory, shared with the child between fork and exec.)
fn address_space_limit(cmd: &mut Command, limit: u64) -> &mut Command {
    with_rlimit(cmd, libc::RLIMIT_AS, limit)
}

#[test]
fn an_old_destination_survives_a_failed_copy_or_write_intact() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    ok(&kvik(&["write", p(&src), "--size", "4MiB", "--seed", "1"]));
    let dst = dir.path().join("dst.bin");
    ok(&kvik(&[
        "write",
        p(&dst),
        "--size",
        "300KiB",
        "--seed",
        "2",
    ]));
    let old = std::fs::read(&dst).unwrap();

    for args in [
        vec!["copy", p(&src), p(&dst), "--buffer", "512KiB"],
        vec!["copy", p(&src), p(&dst), "--fsync"],
        vec!["write", p(&dst), "--size", "3MiB"],
        vec![
            "write",
            p(&dst),
            "--size",
            "3MiB",
            "--fsync",
            "--threads",
            "1",
        ],
    ] {
        let out = file_size_limit(&mut kvik_cmd(&args), 1 << 20).output_within_deadline();
        fails(
            &out,
            1,
            &["File too large", &format!("{} is unchanged", p(&dst))],
        );
        assert!(std::fs::read(&dst).unwrap() == old, "{args:?}: DST changed");
        assert_eq!(names(dir.path()), ["dst.bin", "src.bin"], "{args:?}");
    }
    // A new name is not created by a failure either.
    let fresh = dir.path().join("fresh.bin");
    let out = file_size_limit(&mut kvik_cmd(&["copy", p(&src), p(&fresh)]), 1 << 20)
        .output_within_deadline();
    fails(&out, 1, &[&format!("{} was not created", p(&fresh))]);
    assert_eq!(names(dir.path()), ["dst.bin", "src.bin"]);
}

#[test]
fn a_full_filesystem_fails_the_copy_and_keeps_the_old_destination() {
    let dir = tempfile::tempdir().unwrap();
    let fs = dir.path().join("small");
    std::fs::create_dir(&fs).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "kvik-cli-test", p(&fs)])
        .stderr(Stdio::piped())
        .output();
    match mounted {
        Ok(out) if out.status.success() => {}
        Ok(out) => return skip("a_full_filesystem_fails_the_copy", text(&out.stderr).trim()),
        Err(e) => return skip("a_full_filesystem_fails_the_copy", e),
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").args(["-l", p(self.0)]).status();
        }
    }
    let _unmount = Unmount(&fs);

    // Too big to fit: refused before writing, naming the sizes.
    let src = dir.path().join("src.bin");
    ok(&kvik(&["write", p(&src), "--size", "2MiB"]));
    let dst = fs.join("dst.bin");
    ok(&kvik(&[
        "write",
        p(&dst),
        "--size",
        "100KiB",
        "--seed",
        "3",
    ]));
    let old = std::fs::read(&dst).unwrap();
    let out = kvik(&["copy", p(&src), p(&dst)]);
    fails(
        &out,
        1,
        &["needs 2 MiB", "free", &format!("{} is unchanged", p(&dst))],
    );
    assert!(std::fs::read(&dst).unwrap() == old);

    // Two copies that each fit, but not together: both start, and the
    // filesystem fills under them. Whoever fails (ENOSPC mid-write, or
    // refused up front if the other finished first) leaves its old file.
    let other = fs.join("other.bin");
    ok(&kvik(&[
        "write",
        p(&other),
        "--size",
        "100KiB",
        "--seed",
        "4",
    ]));
    let other_old = std::fs::read(&other).unwrap();
    let half = dir.path().join("half.bin");
    ok(&kvik(&[
        "write",
        p(&half),
        "--size",
        "480KiB",
        "--seed",
        "5",
    ]));
    let new = std::fs::read(&half).unwrap();
    let children: Vec<_> = [&dst, &other]
        .iter()
        .map(|target| {
            kvik_cmd(&[
                "copy",
                p(&half),
                p(target),
                "--threads",
                "1",
                "--task-size",
                "4KiB",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    let mut failed = 0;
    for (child, (target, old)) in children
        .into_iter()
        .zip([(&dst, &old), (&other, &other_old)])
    {
        let out = child.wait_with_output().unwrap();
        let now = std::fs::read(target).unwrap();
        if out.status.success() {
            assert!(now == new, "{}: copied, but not equal", p(target));
        } else {
            failed += 1;
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{err}");
            assert!(
                err.contains("No space left on device") || err.contains("free"),
                "{err}"
            );
            assert!(
                err.contains(&format!("{} is unchanged", p(target))),
                "{err}"
            );
            assert!(now == *old, "{}: changed by a failed copy", p(target));
        }
    }
    assert!(failed >= 1, "both copies fit in 1 MiB?");
    assert_eq!(
        names(&fs),
        ["dst.bin", "other.bin"],
        "temporary files are removed"
    );
}

#[test]
fn a_killed_copy_leaves_the_old_destination_or_the_whole_new_one() {
    // SIGKILL at different moments: the destination is always one of the
    // two complete files. (What SIGKILL can leave is the temporary file,
    // `.dst.bin.kvik-PID.tmp`: nothing runs to remove it.)
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.bin");
    ok(&kvik(&["write", p(&src), "--size", "48MiB", "--seed", "4"]));
    let new = std::fs::read(&src).unwrap();
    let dst = dir.path().join("dst.bin");
    for (round, delay_ms) in [0u64, 5, 20, 60, 150].into_iter().enumerate() {
        ok(&kvik(&["write", p(&dst), "--size", "1MiB", "--seed", "5"]));
        let old = std::fs::read(&dst).unwrap();
        let mut child = kvik_cmd(&["copy", p(&src), p(&dst), "--buffer", "4MiB"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        child.wait().unwrap();
        let now = std::fs::read(&dst).unwrap();
        assert!(
            now == old || now == new,
            "round {round}: DST is {} bytes, neither the old file nor the new one",
            now.len()
        );
        for name in names(dir.path()) {
            if name.ends_with(".tmp") {
                std::fs::remove_file(dir.path().join(name)).unwrap();
            }
        }
    }
}

#[test]
fn requests_larger_than_the_machine_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("huge.bin");
    // More than any test machine's disk: refused before a byte is written.
    let out = kvik(&["write", p(&file), "--size", "1024TiB"]);
    fails(&out, 1, &[p(&file), "needs 1024 TiB", "free"]);
    assert!(names(dir.path()).is_empty());
    // More memory than the process may have: an error, not a crash.
    let out = address_space_limit(
        &mut kvik_cmd(&["write", p(&file), "--size", "512MiB", "--buffer", "512MiB"]),
        256 << 20,
    )
    .output_within_deadline();
    fails(&out, 1, &["cannot allocate a 512 MiB buffer", "--buffer"]);
    assert!(names(dir.path()).is_empty());
    let sparse = dir.path().join("sparse.bin");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(512 << 20)
        .unwrap();
    let out = address_space_limit(&mut kvik_cmd(&["read", p(&sparse)]), 256 << 20)
        .output_within_deadline();
    fails(&out, 1, &["cannot allocate a 512 MiB buffer"]);
}

#[test]
fn fsync_is_reported_and_changes_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("synced.bin");
    let w = json(&kvik(&[
        "write",
        p(&file),
        "--size",
        "1MiB",
        "--fsync",
        "--json",
        "--checksum",
    ]));
    assert_eq!(w["committed"]["durability"], "fsync");
    assert!(w["committed"]["sync_seconds"].as_f64().unwrap() >= 0.0);
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(
        w["checksum_crc32"],
        format!("{:08x}", crc32fast::hash(&bytes)).as_str()
    );
    let plain = json(&kvik(&["write", p(&file), "--size", "1MiB", "--json"]));
    assert_eq!(plain["committed"]["durability"], "atomic");

    let copy = dir.path().join("copy.bin");
    let c = json(&kvik(&["copy", p(&file), p(&copy), "--fsync", "--json"]));
    assert_eq!(c["committed"]["durability"], "fsync");
    assert!(std::fs::read(&copy).unwrap() == std::fs::read(&file).unwrap());
    let readable = ok(&kvik(&["copy", p(&file), p(&copy), "--fsync"]))
        .stdout
        .clone();
    assert!(
        text(&readable).contains("durable      yes: file and directory synced"),
        "{}",
        text(&readable)
    );
    let readable = ok(&kvik(&["write", p(&file), "--size", "4KiB"]))
        .stdout
        .clone();
    assert!(
        text(&readable).contains("--fsync to wait for the rename too"),
        "{}",
        text(&readable)
    );
    assert_eq!(names(dir.path()), ["copy.bin", "synced.bin"]);
}

#[test]
fn junk_in_any_kvikio_variable_exits_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, b"data").unwrap();
    let huge = "9".repeat(100_000);
    for variable in [
        "KVIKIO_COMPAT_MODE",
        "KVIKIO_NTHREADS",
        "KVIKIO_NUM_THREADS",
        "KVIKIO_TASK_SIZE",
        "KVIKIO_GDS_THRESHOLD",
        "KVIKIO_BOUNCE_BUFFER_SIZE",
        "KVIKIO_AUTO_DIRECT_IO_READ",
        "KVIKIO_AUTO_DIRECT_IO_WRITE",
    ] {
        for value in ["", "junk", "-1", "18446744073709551616", huge.as_str()] {
            for args in [vec!["settings"], vec!["read", p(&file)]] {
                let out = kvik_cmd(&args)
                    .env(variable, value)
                    .output_within_deadline();
                fails(&out, 2, &[&format!("{variable}="), "is invalid"]);
                assert!(
                    out.stderr.len() < 1000,
                    "{variable}: {} bytes",
                    out.stderr.len()
                );
            }
        }
    }
    // Numbers that parse but would be absurd.
    let out = kvik_cmd(&["read", p(&file)])
        .env("KVIKIO_NTHREADS", "1000000")
        .output_within_deadline();
    fails(&out, 2, &["KVIKIO_NTHREADS=\"1000000\"", "at most 1024"]);
    fails(
        &kvik(&["read", p(&file), "--threads", "5000"]),
        2,
        &["num_threads = 5000", "at most 1024"],
    );
}

#[test]
fn junk_in_cufile_variables_is_diagnosed_never_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cufile.json");
    std::fs::write(&config, b"{ \"execution\": { \"max_io_threads\": 4 } }").unwrap();
    let huge = "7".repeat(100_000);
    for var in cufile_config::env::ENV_VARS {
        for value in ["junk", "-1", "99999999999999999999999", huge.as_str()] {
            for args in [
                vec!["config", "show", p(&config), "--json", "--all"],
                vec!["config", "validate", p(&config)],
            ] {
                let out = kvik_cmd(&args)
                    .env(var.name, value)
                    .output_within_deadline();
                let err = text(&out.stderr);
                assert!(!err.contains("panicked"), "{}={value:.20}: {err}", var.name);
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{}={value:.20}: {err}",
                    var.name
                );
            }
        }
    }
    // A modelled variable with a bad value is named in the diagnostics.
    let out = kvik_cmd(&["config", "show", p(&config)])
        .env("CUFILE_LOGGING_LEVEL", "LOUD")
        .output_within_deadline();
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(all.contains("CUFILE_LOGGING_LEVEL"), "{all}");
}

#[test]
fn cufile_json_that_is_huge_endless_or_not_a_file_is_a_clear_error_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("cufile.json");
    {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
        out.write_all(b"{ \"x\": [").unwrap();
        let chunk = "1, ".repeat(1 << 18);
        for _ in 0..(100 << 20) / chunk.len() {
            out.write_all(chunk.as_bytes()).unwrap();
        }
        out.write_all(b"1] }").unwrap();
    }
    let big_size = std::fs::metadata(&big).unwrap().len();
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, b"").unwrap();
    let missing = dir.path().join("missing.json");
    for (path, needle, check_says) in [
        (
            big.as_path(),
            format!("is {big_size} bytes: larger than"),
            "larger than the 1048576 bytes",
        ),
        (
            Path::new("/dev/zero"),
            "is a character device, not a regular file".to_string(),
            "is a character device, not a regular file",
        ),
        (
            dir.path(),
            "is a directory, not a regular file".to_string(),
            "is a directory, not a regular file",
        ),
        (
            missing.as_path(),
            "does not exist".to_string(),
            "does not exist",
        ),
    ] {
        for args in [
            vec!["config", "validate", p(path)],
            vec!["config", "show", p(path)],
        ] {
            let out = address_space_limit(&mut kvik_cmd(&args), 256 << 20).output_within_deadline();
            fails(&out, 2, &[p(path), &needle]);
        }
        // Named by CUFILE_ENV_PATH_JSON: check says why it is not used, and
        // plan falls back or refuses, naming it.
        let out = kvik_cmd(&["check"])
            .env("CUFILE_ENV_PATH_JSON", path)
            .output_within_deadline();
        assert!(!text(&out.stderr).contains("panicked"));
        let report = text(&out.stdout);
        assert!(
            report.contains(p(path)) && report.contains(check_says),
            "{check_says:?} not in:\n{report}"
        );
        let out = kvik_cmd(&["plan", "--size", "1MiB"])
            .env("CUFILE_ENV_PATH_JSON", path)
            .output_within_deadline();
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert!(!all.contains("panicked"), "{all}");
        assert!(all.contains(p(path)), "{all}");
    }
    // The limit is real: the same command on a file it does read, made
    // to need more memory than that, fails.
    let out = address_space_limit(&mut kvik_cmd(&["config", "validate", p(&big)]), 4 << 20)
        .output_within_deadline();
    assert!(!out.status.success());

    // An empty file is a file with no JSON: diagnosed, exit 1.
    let out = kvik(&["config", "validate", p(&empty)]);
    fails(&out, 1, &[]);
    assert!(
        text(&out.stdout).contains("no JSON value"),
        "{}",
        text(&out.stdout)
    );
}

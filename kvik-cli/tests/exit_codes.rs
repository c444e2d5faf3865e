//! The exit-code rule (kvik-cli/README.md, "Exit codes and messages"),
//! row by row through the real binary: 2 when the request cannot be valid
//! on this machine as given, 1 when it failed while running (or a verdict
//! asked for is negative), 0 otherwise; the same problem gives the same
//! code whichever command or source meets it; every message says what is
//! really wrong; no path or value reaches the terminal with its control
//! characters.

mod common;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::process::Stdio;

use common::{kvik_cmd, mkfifo, p, run, text};

/// One row: a command, its environment, the code, what stderr must say and
/// what it must not.
struct Row<'a> {
    args: Vec<&'a str>,
    env: Vec<(&'a str, &'a str)>,
    code: i32,
    says: Vec<&'a str>,
    never: Vec<&'a str>,
}

fn row<'a>(args: &[&'a str], code: i32, says: &[&'a str]) -> Row<'a> {
    Row {
        args: args.to_vec(),
        env: vec![],
        code,
        says: says.to_vec(),
        never: vec![],
    }
}

impl<'a> Row<'a> {
    fn env(mut self, name: &'a str, value: &'a str) -> Self {
        self.env.push((name, value));
        self
    }
    fn never(mut self, needles: &[&'a str]) -> Self {
        self.never.extend_from_slice(needles);
        self
    }
}

fn check(rows: &[Row<'_>]) {
    for row in rows {
        let mut cmd = kvik_cmd(&row.args);
        for (name, value) in &row.env {
            cmd.env(name, value);
        }
        let out = run(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()));
        let err = text(&out.stderr);
        let shown = format!("kvik {} {:?}", row.args.join(" "), row.env);
        assert_eq!(out.status.code(), Some(row.code), "{shown}: stderr: {err}");
        for needle in &row.says {
            assert!(err.contains(needle), "{shown}: {needle:?} not in: {err}");
        }
        for needle in row.never.iter().chain(&["panicked"]) {
            assert!(!err.contains(needle), "{shown}: {needle:?} in: {err}");
        }
    }
}

/// A directory with a file, an empty file, a symlink loop, a config cuFile
/// refuses and one it accepts.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), b"data").unwrap();
        std::fs::write(dir.path().join("empty"), b"").unwrap();
        std::os::unix::fs::symlink(dir.path().join("b"), dir.path().join("a")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("a"), dir.path().join("b")).unwrap();
        std::fs::write(
            dir.path().join("bad.json"),
            r#"{ "execution": { "max_io_threads": -1 } }"#,
        )
        .unwrap();
        mkfifo(&dir.path().join("fifo"));
        Setup { dir }
    }

    fn path(&self, name: &str) -> String {
        p(&self.dir.path().join(name)).to_owned()
    }
}

#[test]
fn requests_that_cannot_be_valid_here_exit_2_naming_the_real_problem() {
    let s = Setup::new();
    let (file, empty, lp, bad, fifo) = (
        s.path("file"),
        s.path("empty"),
        s.path("a"),
        s.path("bad.json"),
        s.path("fifo"),
    );
    let (under_file, under_loop) = (format!("{file}/x"), format!("{lp}/x"));
    let (missing, missing_dir) = (s.path("missing"), s.path("no/such/x"));
    let no_such = s.path("no");
    let loop_says = "too many levels of symbolic links";
    let file_says = "is a regular file, not a directory";
    check(&[
        row(&["read"], 2, &["FILE"]),
        row(&["settings"], 2, &["KVIKIO_NTHREADS"]).env("KVIKIO_NTHREADS", "zero"),
        row(&["read", &missing], 2, &[&missing, "does not exist"]),
        row(&["read", &file, "--offset", "5"], 2, &["beyond the end"]),
        // A symlink loop is a loop, not a missing file, in every command.
        row(&["check", &lp], 2, &[&lp, loop_says]).never(&["does not exist"]),
        row(&["config", "validate", &lp], 2, &[&lp, loop_says]).never(&["does not exist"]),
        row(&["bench", "--from", &lp], 2, &[&lp, loop_says]).never(&["does not exist"]),
        row(&["write", &under_loop, "--size", "1"], 2, &[loop_says]).never(&["does not exist"]),
        row(&["copy", &file, &under_loop], 2, &[loop_says]).never(&["does not exist"]),
        // A parent that is a file is named as such.
        row(
            &["write", &under_file, "--size", "1"],
            2,
            &[&file, file_says],
        )
        .never(&["does not exist"]),
        row(&["copy", &file, &under_file], 2, &[&file, file_says]).never(&["does not exist"]),
        row(&["check", &under_file], 2, &[&file, file_says]).never(&["does not exist"]),
        row(&["config", "validate", &under_file], 2, &[&file, file_says]),
        // A missing ancestor is named, not the path below it.
        row(
            &["write", &missing_dir, "--size", "1"],
            2,
            &[&no_such, "does not exist"],
        ),
        row(
            &["bench", "--from", &missing_dir],
            2,
            &[&no_such, "does not exist"],
        ),
        // Not a file where a file is read.
        row(&["config", "validate", &fifo], 2, &["FIFO"]),
        row(&["plan", "--size", "1MiB", "--config", &fifo], 2, &["FIFO"]),
        // A cufile.json cuFile would refuse cannot be planned with, wherever
        // it came from.
        row(
            &["plan", "--size", "1MiB", "--config", &bad],
            2,
            &["cuFile would refuse"],
        ),
        row(&["plan", "--size", "1MiB"], 2, &["cuFile would refuse"])
            .env("CUFILE_ENV_PATH_JSON", &bad),
        // Permission denied (sysfs refuses new files even to root).
        row(
            &["write", "/sys/kvik-exit-code-test", "--size", "1"],
            2,
            &["permission denied"],
        ),
        row(
            &["copy", &file, "/sys/kvik-exit-code-test"],
            2,
            &["permission denied"],
        ),
        // A directory that takes no new files.
        row(
            &["write", "/proc/kvik-exit-code-test", "--size", "1"],
            2,
            &["/proc"],
        ),
        // An empty file is read and copied alike: 0 bytes, exit 0.
        row(&["read", &empty], 0, &[]),
        row(&["read", &empty, "--checksum", "--json"], 0, &[]),
        row(&["copy", &empty, &s.path("empty-copy")], 0, &[]),
    ]);
}

#[test]
fn what_this_machine_cannot_do_is_2_and_what_runs_out_is_1() {
    let s = Setup::new();
    let (file, bad) = (s.path("file"), s.path("bad.json"));
    let mut rows = vec![
        // A verdict asked for and negative: exit 1.
        row(&["config", "validate", &bad], 1, &["cuFile refuses"]),
        row(&["config", "show", &bad], 1, &["cuFile refuses"]),
        // Free space is a resource of the moment, not a property of the
        // request: exit 1, before and during the write alike.
        row(
            &["demo", "--dir", p(s.dir.path()), "--size", "100TiB"],
            1,
            &["free"],
        ),
    ];
    if gds_core::cuda::probe().is_err() {
        rows.extend([
            row(
                &["read", &file, "--compat", "off"],
                2,
                &["compat mode is OFF"],
            ),
            row(&["read", &file, "--device", "0"], 2, &["--device 0"]),
        ]);
    } else {
        eprintln!("skipped: rows for a machine without a CUDA driver: a CUDA driver is present");
    }
    check(&rows);
}

/// Remote objects, through the real binary and a real server on
/// localhost: what the request as given cannot change is 2 (a bad URL, a
/// missing or forbidden object, another 4xx, a server without byte ranges,
/// a range past the end, a bad `KVIKIO_HTTP_*`); the network and the
/// server failing while it runs is 1 (a refused connection, 5xx after
/// every attempt, a timeout, a body cut short).
#[test]
fn remote_objects_follow_the_same_rule() {
    use kvik_test_support::http_server::{Reply, Request, Script, Server, refused_url};
    use std::sync::Arc;
    let paths = [
        "/data.bin",
        "/forbidden.bin",
        "/gone.bin",
        "/whole.bin",
        "/busy.bin",
        "/broken.bin",
        "/silent.bin",
        "/short.bin",
    ];
    let object: Arc<[u8]> = vec![7u8; 4096].into();
    let script: Script = Arc::new(|r: &Request| match (r.path.as_str(), r.method.as_str()) {
        ("/forbidden.bin", _) => Reply::Status(403),
        ("/gone.bin", _) => Reply::Status(410),
        (_, "HEAD") | ("/data.bin", _) => Reply::Serve,
        ("/whole.bin", _) => Reply::WholeObject,
        ("/busy.bin", _) => Reply::Status(503),
        ("/broken.bin", _) => Reply::Status(500),
        ("/silent.bin", _) => Reply::NoAnswer,
        _ => Reply::Truncate { after: 10 },
    });
    let server = Server::start(paths.iter().map(|p| (*p, object.clone())).collect(), script);
    let url = |path: &str| server.url(path);
    let (data, missing, forbidden, gone) = (
        url("/data.bin"),
        url("/missing.bin"),
        url("/forbidden.bin"),
        url("/gone.bin"),
    );
    let (whole, busy, broken, silent, short) = (
        url("/whole.bin"),
        url("/busy.bin"),
        url("/broken.bin"),
        url("/silent.bin"),
        url("/short.bin"),
    );
    let refused = refused_url("/data.bin");
    check(&[
        // 2: the request as given cannot succeed.
        row(&["read", "http://"], 2, &["http://"]),
        row(&["read", &missing], 2, &[&missing, "not found (HTTP 404)"]),
        row(&["copy", &missing, "/nonexistent/dst"], 2, &[&missing]),
        row(
            &["read", &forbidden],
            2,
            &[&forbidden, "access denied (HTTP 403)"],
        ),
        row(&["read", &gone], 2, &[&gone, "HTTP 410"]),
        row(&["read", &whole], 2, &[&whole, "byte ranges"]),
        row(
            &["read", &data, "--offset", "4000", "--size", "100"],
            2,
            &["beyond the end"],
        ),
        row(&["read", &data], 2, &["KVIKIO_HTTP_TIMEOUT"]).env("KVIKIO_HTTP_TIMEOUT", "soon"),
        row(&["bench", "--file", &missing], 2, &[&missing]),
        // 1: the network or the server failed while it ran.
        row(&["read", &refused], 1, &[&refused]),
        row(&["read", &busy], 1, &[&busy, "HTTP 503", "2 attempts"])
            .env("KVIKIO_HTTP_MAX_ATTEMPTS", "2"),
        row(&["read", &broken], 1, &[&broken, "HTTP 500"]).env("KVIKIO_HTTP_STATUS_CODES", "503"),
        row(&["read", &silent], 1, &[&silent, "timed out"])
            .env("KVIKIO_HTTP_TIMEOUT", "1")
            .env("KVIKIO_HTTP_MAX_ATTEMPTS", "1"),
        row(&["read", &short], 1, &[&short, "incomplete body"]),
    ]);
}

/// `sh -c SCRIPT` in a new mount namespace (a user namespace too, so that
/// no privilege is needed where they are allowed), `KVIK` set to the
/// binary; `None` where namespaces are not allowed.
fn in_mount_namespace(script: &str, dir: &Path) -> Option<std::process::Output> {
    if std::process::Command::new("unshare")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: read-only and full filesystems: no unshare command");
        return None;
    }
    let out = run(std::process::Command::new("unshare")
        .args(["-rm", "sh", "-c", script])
        .env("KVIK", env!("CARGO_BIN_EXE_kvik"))
        .env("DIR", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped()));
    let err = text(&out.stderr);
    if err.contains("unshare:") || err.contains("mount:") {
        eprintln!("skipped: read-only and full filesystems: {err}");
        return None;
    }
    Some(out)
}

#[test]
fn a_read_only_filesystem_is_2_like_permission_denied_and_a_full_one_is_1() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
        mount -t tmpfs -o ro none "$DIR" || exit 99
        "$KVIK" write "$DIR/x" --size 1 --host; echo "write=$?" >&2
        "$KVIK" copy /proc/self/exe "$DIR/x" --host; echo "copy=$?" >&2
        umount "$DIR"
        mount -t tmpfs -o size=1m none "$DIR" || exit 99
        "$KVIK" write "$DIR/x" --size 4MiB --host; echo "full=$?" >&2
    "#;
    let Some(out) = in_mount_namespace(script, dir.path()) else {
        return;
    };
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    for (line, says) in [
        ("write=2", "the filesystem is read-only"),
        ("copy=2", "the filesystem is read-only"),
        ("full=1", "free"),
    ] {
        assert!(err.contains(line), "{line:?} not in: {err}");
        assert!(err.contains(says), "{says:?} not in: {err}");
    }
}

#[test]
fn control_characters_in_names_never_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    // ESC [2J clears the screen; ESC ]0; sets the title; a newline would
    // forge a line of output.
    let name = OsStr::from_bytes(b"evil\x1b[2J\x1b]0;owned\x07\nkvik: ok\xff.json");
    let evil = dir.path().join(name);
    std::fs::write(&evil, r#"{ "execution": { "max_io_threads": 4 } }"#).unwrap();
    let evil_dir = dir.path().join(OsStr::from_bytes(b"dir\x1b[31m"));
    std::fs::create_dir(&evil_dir).unwrap();
    let missing = dir.path().join(OsStr::from_bytes(b"gone\x1b[8m\nx"));
    let runs: Vec<Vec<&OsStr>> = vec![
        vec!["config".as_ref(), "validate".as_ref(), evil.as_os_str()],
        vec!["config".as_ref(), "show".as_ref(), evil.as_os_str()],
        vec!["check".as_ref(), evil_dir.as_os_str()],
        vec!["bench".as_ref(), "--from".as_ref(), missing.as_os_str()],
        vec!["config".as_ref(), "validate".as_ref(), missing.as_os_str()],
        vec![
            "plan".as_ref(),
            "--size".as_ref(),
            "1MiB".as_ref(),
            "--config".as_ref(),
            missing.as_os_str(),
        ],
        vec!["read".as_ref(), missing.as_os_str()],
    ];
    for args in runs {
        let out = run(kvik_cmd::<&str>(&[])
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()));
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            assert!(
                !bytes.iter().any(|&b| b == 0x1b || b == 0x07),
                "{args:?}: a control byte on {stream}: {}",
                text(bytes)
            );
        }
        assert!(
            text(&out.stdout).contains("\\x1b") || text(&out.stderr).contains("\\x1b"),
            "{args:?}: the name is shown escaped"
        );
        if out.status.code() != Some(0) {
            // One error, on one line: the newline in the name is shown.
            assert_eq!(
                text(&out.stderr).lines().count(),
                1,
                "{}",
                text(&out.stderr)
            );
        }
    }
    // A bad value clap reports: its control characters are not passed on.
    let out = run(kvik_cmd(&["read", "x", "--offset", "\x1b[2J4x"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped()));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("4x"), "{}", text(&out.stderr));
    assert!(!out.stderr.contains(&0x1b), "{}", text(&out.stderr));
}

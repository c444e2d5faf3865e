//! stdout and stderr that cannot be written: a reader that went away (a
//! closed pipe: `kvik settings | head -1`), a full device (`> /dev/full`),
//! a closed descriptor. No command panics (exit 101) on any of them: a
//! broken pipe ends quietly (exit 0 unless the command's own work failed),
//! a full stdout is exit 1 with a message on stderr, and a stderr that
//! cannot be written changes nothing but the message.

mod common;

use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::{closed_pipe, dev_full, fails, kvik_cmd, p, run, text};

fn saved_bench_run() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../bench/results/cpu-2core.json")
}

/// Every command whose report this layer writes, with arguments that make
/// it succeed here.
fn commands(dir: &std::path::Path) -> Vec<Vec<String>> {
    let config = dir.join("cufile.json");
    std::fs::write(&config, r#"{ "execution": { "max_io_threads": 4 } }"#).unwrap();
    let config = p(&config).to_owned();
    let saved = saved_bench_run();
    let saved = p(&saved).to_owned();
    let args: &[&[&str]] = &[
        &["settings"],
        &["settings", "--json"],
        &["config", "validate", &config],
        &["config", "validate", &config, "--json"],
        &["config", "show", &config],
        &["config", "show", &config, "--json"],
        &["plan", "--size", "1GiB", "--config", &config],
        &["plan", "--size", "1GiB", "--config", &config, "--json"],
        &["check"],
        &["check", "--json"],
        &["bench", "--from", &saved],
        &["bench", "--from", &saved, "--json"],
        &["--help"],
        &["--version"],
        &["config", "--help"],
    ];
    args.iter()
        .map(|a| a.iter().map(|s| s.to_string()).collect())
        .collect()
}

fn cmd(args: &[String]) -> Command {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    kvik_cmd(&args)
}

#[test]
fn a_reader_that_went_away_ends_every_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    for args in commands(dir.path()) {
        let out = run(cmd(&args).stdout(closed_pipe()).stderr(Stdio::piped()));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: stderr: {}",
            text(&out.stderr)
        );
        assert_eq!(text(&out.stderr), "", "{args:?}: nothing on stderr");
    }
}

#[test]
fn a_full_stdout_is_exit_1_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    for args in commands(dir.path()) {
        let out = run(cmd(&args).stdout(dev_full()).stderr(Stdio::piped()));
        fails(
            &out,
            1,
            &["cannot write the report to stdout", "No space left"],
        );
    }
}

#[test]
fn a_broken_pipe_keeps_the_code_of_the_commands_own_failure() {
    // cuFile refuses this file: `config validate` exits 1 whether or not
    // anyone reads its diagnostics, and says why on stderr.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{ "execution": { "max_io_threads": -1 } }"#).unwrap();
    let out = run(kvik_cmd(&["config", "validate", p(&bad)])
        .stdout(closed_pipe())
        .stderr(Stdio::piped()));
    fails(&out, 1, &["cuFile refuses"]);
    // And a bad request stays exit 2.
    let out = run(kvik_cmd(&["plan", "--size", "1GiB", "--config", p(&bad)])
        .stdout(closed_pipe())
        .stderr(Stdio::piped()));
    fails(&out, 2, &["cuFile would refuse it"]);
}

#[test]
fn stderr_that_cannot_be_written_never_causes_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json");
    let failing = ["config", "validate", p(&missing)];
    // A closed stderr (the command starts with descriptor 2 closed), a
    // broken pipe and a full device: the command still exits 2 for its own
    // error, not 101 for a panic nor by a signal.
    for stderr in ["closed", "broken pipe", "/dev/full"] {
        let mut command = kvik_cmd(&failing);
        command.stdout(Stdio::null());
        match stderr {
            "closed" => {
                let close_stderr = || {
                    // SAFETY: in the child, before exec: descriptor 2 is
                    // owned by nothing else there.
                    unsafe { rustix::io::close(2) };
                    Ok(())
                };
                // SAFETY: the hook only calls close(2), which is
                // async-signal-safe.
                unsafe { command.pre_exec(close_stderr) };
            }
            "broken pipe" => {
                command.stderr(closed_pipe());
            }
            _ => {
                command.stderr(dev_full());
            }
        }
        let out = run(&mut command);
        assert_eq!(out.status.code(), Some(2), "stderr {stderr}: {out:?}");
    }
    // Both closed at once, on success: still 0.
    let out = run(kvik_cmd(&["settings"])
        .stdout(closed_pipe())
        .stderr(closed_pipe()));
    assert_eq!(out.status.code(), Some(0));
}

//! `kvik plan` as a user runs it: the JSON contract, the collapsed table, the
//! what-if routing on this machine, and every bad input named.
//!
//! Each run clears the `KVIKIO_*` variables and points `CUFILE_ENV_PATH_JSON`
//! at a missing file, so the plan uses libcufile's built-in defaults whatever
//! this machine's /etc/cufile.json says; tests that need more set it.

use std::process::{Command, Output};

use gds_core::readiness;
use kvik_policy::CuFileAvailability;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const NO_CONFIG: &str = "/nonexistent/kvik-plan-test/cufile.json";

fn kvik_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kvik"));
    command.arg("plan").args(args);
    for variable in [
        "KVIKIO_COMPAT_MODE",
        "KVIKIO_TASK_SIZE",
        "KVIKIO_GDS_THRESHOLD",
    ] {
        command.env_remove(variable);
    }
    command.env("CUFILE_ENV_PATH_JSON", NO_CONFIG);
    command.envs(env.iter().copied());
    command.output().expect("run kvik")
}

fn kvik(args: &[&str]) -> Output {
    kvik_with(args, &[])
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    let output = kvik(&all);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

fn text(args: &[&str]) -> String {
    let output = kvik(args);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    String::from_utf8(output.stdout).unwrap()
}

fn u(value: &serde_json::Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

/// What cuFile can do on this machine, as the command sees it.
fn here() -> CuFileAvailability {
    CuFileAvailability::from_readiness(&readiness::check(None))
}

/// The tasks tile the request, and each cuFile task's units tile the task.
fn assert_tiles(plan: &serde_json::Value, offset: u64, size: u64) {
    let tasks = plan["tasks"].as_array().expect("a tasks array");
    assert_eq!(u(&plan["totals"]["tasks"]), tasks.len() as u64);
    let mut next = offset;
    let mut units_total = 0;
    for task in tasks {
        assert_eq!(u(&task["file_offset"]), next, "{task}");
        assert_eq!(u(&task["buffer_offset"]), next - offset, "{task}");
        let task_size = u(&task["size"]);
        let units = task["work_units"].as_array().expect("a work_units array");
        match task["backend"].as_str().unwrap() {
            "cufile" => {
                assert!(!units.is_empty(), "{task}");
                let mut unit_next = next;
                for unit in units {
                    assert_eq!(u(&unit["file_offset"]), unit_next, "{task}");
                    unit_next += u(&unit["size"]);
                }
                assert_eq!(unit_next, next + task_size, "{task}");
            }
            "posix" => assert!(units.is_empty(), "{task}"),
            other => panic!("backend {other:?}"),
        }
        units_total += units.len() as u64;
        next += task_size;
    }
    assert_eq!(next, offset + size);
    assert_eq!(u(&plan["totals"]["work_units"]), units_total);
}

#[test]
fn one_gib_in_kvikio_tasks_under_the_built_in_defaults() {
    let plan = json(&["--size", "1GiB", "--compat", "off"]);
    assert_eq!(u(&plan["totals"]["tasks"]), 256);
    assert_eq!(
        u(&plan["totals"]["work_units"]),
        256,
        "no cufile.json: no splitting"
    );
    assert_tiles(&plan, 0, GIB);
    assert!(
        plan["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["backend"] == "cufile" && u(&t["size"]) == 4 * MIB)
    );
    let cufile = &plan["cufile"];
    assert_eq!(cufile["source"], "built-in defaults (libcufile 1.15)");
    assert_eq!(cufile["execution"]["parallel_io"]["value"], false);
    assert_eq!(cufile["execution"]["max_io_threads"]["value"], 0);
    assert_eq!(
        cufile["execution"]["min_io_threshold_size_kb"]["source"],
        "built-in defaults (libcufile 1.15)"
    );
    let notes = cufile["notes"].to_string();
    assert!(notes.contains(NO_CONFIG), "{notes}");
    assert_eq!(plan["settings"]["task_size"]["source"], "default");
    assert_eq!(plan["settings"]["compat_mode"]["source"], "--compat");
}

#[test]
fn one_task_of_1_gib_is_one_unit_without_cufile_json() {
    let plan = json(&["--size", "1GiB", "--task-size", "1GiB", "--compat", "off"]);
    assert_eq!(u(&plan["totals"]["tasks"]), 1);
    assert_eq!(u(&plan["totals"]["work_units"]), 1);
    assert_eq!(plan["runs"][0]["split_rule"]["rule"], "parallel_io_off");
    assert_tiles(&plan, 0, GIB);
}

#[test]
fn the_table_collapses_runs_of_identical_tasks() {
    let out = text(&[
        "--size",
        "100MiB",
        "--offset",
        "100",
        "--task-size",
        "16MiB",
        "--compat",
        "off",
    ]);
    assert!(out.contains("plan: 7 tasks, 7 cuFile work units"), "{out}");
    let header = out
        .lines()
        .position(|l| l.contains("task size") && l.contains("cuFile work units per task"))
        .unwrap_or_else(|| panic!("no table header in:\n{out}"));
    let rows: Vec<&str> = out.lines().skip(header + 1).take(2).collect();
    assert!(rows[0].trim_start().starts_with("6  16 MiB"), "{out}");
    assert!(
        rows[0].contains("every 16 MiB") && rows[0].contains("cufile"),
        "{out}"
    );
    assert!(rows[1].trim_start().starts_with("1  4 MiB"), "{out}");
    assert!(out.contains("cuFile's split: parallel_io is off"), "{out}");
}

#[test]
fn host_memory_is_posix_with_no_units_and_runs_here() {
    let plan = json(&["--size", "10MiB", "--memory", "host"]);
    assert_eq!(u(&plan["totals"]["tasks"]), 3);
    assert_eq!(u(&plan["totals"]["work_units"]), 0);
    assert_eq!(plan["routing"]["request"]["backend"], "posix");
    assert_tiles(&plan, 0, 10 * MIB);
    assert_eq!(
        plan["this_machine"]["can_execute"], true,
        "{}",
        plan["this_machine"]
    );
}

#[test]
fn a_device_request_below_gds_threshold_is_one_posix_call() {
    let plan = json(&[
        "--size",
        "1MiB",
        "--task-size",
        "256KiB",
        "--gds-threshold",
        "2MiB",
        "--compat",
        "off",
    ]);
    assert_eq!(u(&plan["totals"]["tasks"]), 1, "not split into tasks");
    assert_eq!(u(&plan["totals"]["work_units"]), 0);
    assert_eq!(plan["tasks"][0]["backend"], "posix");
    assert_eq!(
        plan["routing"]["request"]["reason"]["kind"],
        "below_gds_threshold"
    );
    assert_eq!(plan["execution"]["kind"], "calling_thread");
    assert_eq!(
        plan["settings"]["gds_threshold"]["source"],
        "--gds-threshold"
    );
}

#[test]
fn auto_plans_what_the_facts_here_allow() {
    let here = here();
    let plan = json(&["--size", "64MiB"]);
    let backend = plan["routing"]["request"]["backend"].as_str().unwrap();
    let assumptions = plan["routing"]["assumptions"].as_array().unwrap();
    if !here.usable {
        // No cuFile here: the plan is for a machine where it runs, and says so.
        assert_eq!(backend, "cufile");
        assert_eq!(assumptions.len(), 1, "{assumptions:?}");
        assert_eq!(plan["this_machine"]["can_execute"], false);
    } else if !here.direct_path {
        // cuFile would only run its compatibility mode: AUTO takes POSIX here.
        assert_eq!(backend, "posix");
        assert!(assumptions.is_empty());
        assert_eq!(plan["this_machine"]["can_execute"], true);
    } else {
        assert_eq!(backend, "cufile");
        assert!(assumptions.is_empty());
        assert_eq!(plan["this_machine"]["can_execute"], true);
    }
}

#[test]
fn compat_off_plans_cufile_and_says_when_this_machine_cannot() {
    let plan = json(&["--size", "16MiB", "--compat", "off"]);
    assert_eq!(plan["routing"]["request"]["backend"], "cufile");
    assert_eq!(plan["routing"]["file"]["effective"], "OFF");
    let machine = &plan["this_machine"];
    if here().usable {
        assert_eq!(machine["can_execute"], true, "{machine}");
        return;
    }
    assert_eq!(machine["can_execute"], false, "{machine}");
    let reasons = machine["reasons"].to_string();
    if gds_core::cuda::probe().is_err() {
        assert!(reasons.contains("device memory needs a GPU"), "{reasons}");
    } else {
        assert!(reasons.contains("compat mode is OFF"), "{reasons}");
    }
    let out = text(&["--size", "16MiB", "--compat", "off"]);
    assert!(out.contains("could NOT execute this plan"), "{out}");
}

#[test]
fn kvikio_variables_are_read_and_flags_win() {
    let output = kvik_with(
        &["--size", "1GiB", "--memory", "host", "--json"],
        &[("KVIKIO_TASK_SIZE", "16MiB"), ("KVIKIO_COMPAT_MODE", "on")],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(u(&plan["totals"]["tasks"]), 64);
    assert_eq!(
        plan["settings"]["task_size"]["source"],
        "environment (KVIKIO_TASK_SIZE)"
    );
    assert_eq!(plan["settings"]["compat_mode"]["value"], "ON");

    let output = kvik_with(
        &[
            "--size",
            "1GiB",
            "--memory",
            "host",
            "--task-size",
            "1GiB",
            "--json",
        ],
        &[("KVIKIO_TASK_SIZE", "16MiB")],
    );
    let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(u(&plan["totals"]["tasks"]), 1);
    assert_eq!(plan["settings"]["task_size"]["source"], "--task-size");
}

#[test]
fn a_huge_plan_prints_at_once_and_json_refuses_it() {
    // 2^38 tasks: the table comes from arithmetic, not iteration.
    let out = text(&[
        "--size",
        "1024TiB",
        "--task-size",
        "4KiB",
        "--memory",
        "host",
        "--offset",
        "100",
    ]);
    assert!(
        out.contains("plan: 274877906944 tasks, 0 cuFile work units"),
        "{out}"
    );
    let output = kvik(&["--size", "1TiB", "--task-size", "4KiB", "--json"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("268435456"), "{}", stderr(&output));
}

#[test]
fn an_empty_request_has_no_tasks() {
    let plan = json(&["--size", "0"]);
    assert_eq!(u(&plan["totals"]["tasks"]), 0);
    assert_eq!(plan["tasks"], serde_json::json!([]));
    assert!(text(&["--size", "0"]).contains("nothing to read"));
}

#[test]
fn bad_input_exits_2_and_names_the_value() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["--size", "4x"], &["--size", "4x"]),
        (&["--size=-1"], &["--size", "negative"]),
        (
            &["--size", "1GiB", "--offset", "1.5B"],
            &["--offset", "1.5B"],
        ),
        (
            &["--size", "1GiB", "--task-size", "0"],
            &["--task-size", "greater than 0"],
        ),
        (
            &["--size", "1GiB", "--gds-threshold", "lots"],
            &["--gds-threshold", "lots"],
        ),
        (
            &["--size", "1GiB", "--compat", "maybe"],
            &["--compat", "maybe"],
        ),
        (
            &["--size", "1GiB", "--memory", "disk"],
            &["--memory", "disk"],
        ),
        (&["--size", "16777216TiB"], &["--size", "too large"]),
        (
            &["--size", "4GiB", "--offset", "9223372036854775807"],
            &["--offset", "largest file offset"],
        ),
        (
            &["--size", "1GiB", "--memory", "host", "--registered"],
            &["--registered"],
        ),
        (
            &[
                "--size",
                "1GiB",
                "--config",
                "/nonexistent/some-cufile.json",
            ],
            &["/nonexistent/some-cufile.json"],
        ),
        (&[], &["--size"]),
    ];
    for (args, mentions) in cases {
        let output = kvik(args);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(output.stdout.is_empty(), "{args:?}: no plan for bad input");
        for mention in *mentions {
            assert!(err.contains(mention), "{args:?}: {mention:?} not in {err}");
        }
    }
    let output = kvik_with(&["--size", "1GiB"], &[("KVIKIO_TASK_SIZE", "4MiBs")]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(
        err.contains("KVIKIO_TASK_SIZE") && err.contains("4MiBs"),
        "{err}"
    );
}

#[test]
fn a_cufile_json_found_here_sets_the_execution_settings_with_their_sources() {
    let dir = std::env::temp_dir().join(format!("kvik-plan-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cufile.json");
    std::fs::write(
        &file,
        "// stock execution settings\n{\n  \"execution\": {\n    \"max_io_threads\": 4,\n    \"parallel_io\": true,\n    \"min_io_threshold_size_kb\": 8192,\n    \"max_request_parallelism\": 4\n  }\n}\n",
    )
    .unwrap();
    let output = kvik_with(
        &[
            "--size",
            "16MiB",
            "--task-size",
            "16MiB",
            "--compat",
            "off",
            "--json",
        ],
        &[("CUFILE_ENV_PATH_JSON", file.to_str().unwrap())],
    );
    let broken = dir.join("broken.json");
    std::fs::write(
        &broken,
        "{ \"execution\": { \"max_request_parallelism\": 16 } }",
    )
    .unwrap();
    let refused = kvik_with(
        &["--size", "1GiB", "--config", broken.to_str().unwrap()],
        &[],
    );
    std::fs::remove_dir_all(&dir).unwrap();

    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let plan: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // NVIDIA's example: 16 MiB with the stock settings is 2 units of 8 MiB.
    assert_eq!(plan["totals"]["work_units"], 2, "{plan}");
    let threads = &plan["cufile"]["execution"]["max_io_threads"];
    assert_eq!(threads["value"], 4);
    assert_eq!(
        threads["source"],
        format!("{}:4:23", file.display()),
        "{threads}"
    );
    let depth = &plan["cufile"]["execution"]["max_io_queue_depth"];
    assert_eq!(depth["source"], "built-in default", "{depth}");

    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(err.contains("execution.max_request_parallelism"), "{err}");
    assert!(err.contains("cuFile would refuse it"), "{err}");
}

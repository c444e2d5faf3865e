//! Snapshots of readable plans: a request cut into KvikIO tasks
//! (`kvik_policy::task::split`), each task one `cuFileRead` cut into cuFile's
//! work units (`gds_core::schedule::plan`). Runs of identical tasks are
//! collapsed, so a 256-task plan is one line; the view is made for review,
//! not a Debug dump.

use cufile_config::ExecutionConfig;
use gds_core::schedule::{self, Registration, Request};
use kvik_policy::Size;
use kvik_policy::task::split_with_page_size;
use serde::Serialize;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Plans are for a 4 KiB-page machine whatever this one uses.
const PAGE_SIZE: u64 = 4096;

#[derive(Debug, Serialize)]
struct PlanView {
    request: String,
    cufile: String,
    task_size: String,
    totals: Totals,
    /// Consecutive tasks with the same size, units and rule, as one entry.
    runs: Vec<RunView>,
}

#[derive(Debug, Serialize)]
struct Totals {
    tasks: u64,
    work_units: u64,
}

#[derive(Debug, Serialize, PartialEq)]
struct RunView {
    tasks: u64,
    /// The first task's file offset, and the step between tasks of the run.
    file_offsets: String,
    task_size: String,
    /// cuFile's units for each task of the run, as `count × size` runs.
    work_units: String,
    /// Where the units of the run's first task start in the file.
    first_task_unit_offsets: Vec<u64>,
    rule: String,
}

fn describe_config(name: &str, e: &ExecutionConfig) -> String {
    format!(
        "{name}: parallel_io {}, max_io_threads {}, max_request_parallelism {}, \
         min_io_threshold_size_kb {}",
        e.parallel_io, e.max_io_threads, e.max_request_parallelism, e.min_io_threshold_size_kb
    )
}

/// The units as `count × size` runs: "2 × 8 MiB", "1 × 4 MiB, 1 × 4100 KiB".
fn unit_sizes_text(units: &schedule::WorkUnits) -> String {
    let runs: Vec<String> = units
        .size_runs()
        .map(|(count, size)| format!("{count} × {}", Size(size)))
        .collect();
    runs.join(", ")
}

fn plan_view(
    config_name: &str,
    execution: &ExecutionConfig,
    registration: Registration,
    file_offset: u64,
    size: u64,
    task_size: u64,
) -> PlanView {
    let mut runs: Vec<RunView> = Vec::new();
    let mut totals = Totals {
        tasks: 0,
        work_units: 0,
    };
    for task in split_with_page_size(file_offset, size, task_size, PAGE_SIZE) {
        let request = Request {
            file_offset: task.file_offset,
            buffer_offset: task.buffer_offset,
            size: task.size,
        };
        let units = schedule::plan(request, execution, registration);
        totals.tasks += 1;
        totals.work_units += units.len() as u64;
        let rule = units.rule().to_string();
        let unit_sizes = unit_sizes_text(&units);
        let offsets: Vec<u64> = units.map(|u| u.file_offset).collect();
        if let Some(run) = runs.last_mut()
            && run.task_size == Size(task.size).to_string()
            && run.work_units == unit_sizes
            && run.rule == rule
        {
            run.tasks += 1;
            continue;
        }
        runs.push(RunView {
            tasks: 1,
            file_offsets: task.file_offset.to_string(),
            task_size: Size(task.size).to_string(),
            work_units: unit_sizes,
            first_task_unit_offsets: offsets,
            rule,
        });
    }
    for run in &mut runs {
        if run.tasks > 1 {
            run.file_offsets = format!("{}, then every {}", run.file_offsets, run.task_size);
        }
    }
    PlanView {
        request: format!(
            "{} at file offset {file_offset} into {} device memory",
            Size(size),
            match registration {
                Registration::Registered => "registered (cuFileBufRegister)",
                Registration::Unregistered => "unregistered",
            }
        ),
        cufile: describe_config(config_name, execution),
        task_size: Size(task_size).to_string(),
        totals,
        runs,
    }
}

const STOCK: ExecutionConfig = ExecutionConfig::STOCK_FILE;
const UNREGISTERED: Registration = Registration::Unregistered;

#[test]
fn nvidia_1_gib_in_4_mib_tasks_is_256_tasks_of_one_unit() {
    let view = plan_view("stock cufile.json", &STOCK, UNREGISTERED, 0, GIB, 4 * MIB);
    assert_eq!((view.totals.tasks, view.totals.work_units), (256, 256));
    insta::assert_yaml_snapshot!(view);
}

#[test]
fn nvidia_1_gib_in_one_task_is_4_units_of_256_mib() {
    let view = plan_view("stock cufile.json", &STOCK, UNREGISTERED, 0, GIB, GIB);
    assert_eq!(view.runs[0].work_units, "4 × 256 MiB");
    insta::assert_yaml_snapshot!(view);
}

#[test]
fn nvidia_16_mib_request_is_2_units_of_8_mib() {
    // One cuFileRead of 16 MiB (a task size of at least 16 MiB; KvikIO's
    // default 4 MiB would make four requests of one unit each).
    let view = plan_view(
        "stock cufile.json",
        &STOCK,
        UNREGISTERED,
        0,
        16 * MIB,
        16 * MIB,
    );
    assert_eq!(view.runs[0].work_units, "2 × 8 MiB");
    insta::assert_yaml_snapshot!(view);
}

#[test]
fn parallel_io_off_never_splits() {
    let off = ExecutionConfig {
        parallel_io: false,
        ..STOCK
    };
    let view = plan_view(
        "stock cufile.json with parallel_io false",
        &off,
        UNREGISTERED,
        0,
        GIB,
        GIB,
    );
    assert_eq!(view.totals.work_units, 1);
    insta::assert_yaml_snapshot!(view);
}

#[test]
fn registration_changes_the_units_at_8_mib_plus_4_kib() {
    #[derive(Debug, Serialize)]
    struct Both {
        registered: PlanView,
        unregistered: PlanView,
    }
    let size = 8 * MIB + 4 * KIB;
    let both = Both {
        registered: plan_view(
            "stock cufile.json",
            &STOCK,
            Registration::Registered,
            0,
            size,
            size,
        ),
        unregistered: plan_view("stock cufile.json", &STOCK, UNREGISTERED, 0, size, size),
    };
    assert_eq!(
        (
            both.registered.totals.work_units,
            both.unregistered.totals.work_units
        ),
        (2, 1)
    );
    insta::assert_yaml_snapshot!(both);
}

#[test]
fn an_unaligned_offset_moves_every_unit_but_not_the_counts() {
    let view = plan_view(
        "stock cufile.json",
        &STOCK,
        UNREGISTERED,
        100,
        100 * MIB,
        16 * MIB,
    );
    assert_eq!(view.runs.len(), 2, "six 16 MiB tasks, then one of 4 MiB");
    assert_eq!(
        view.runs[0].first_task_unit_offsets,
        vec![100, 100 + 8 * MIB]
    );
    insta::assert_yaml_snapshot!(view);
}

#[test]
fn the_library_defaults_without_cufile_json_never_split() {
    let defaults = ExecutionConfig::LIBRARY_DEFAULTS_1_15;
    let name = "built-in defaults (libcufile 1.15, no cufile.json)";
    #[derive(Debug, Serialize)]
    struct Both {
        four_mib_tasks: PlanView,
        one_task: PlanView,
    }
    let both = Both {
        four_mib_tasks: plan_view(name, &defaults, UNREGISTERED, 0, GIB, 4 * MIB),
        one_task: plan_view(name, &defaults, UNREGISTERED, 0, GIB, GIB),
    };
    assert_eq!(both.one_task.totals.work_units, 1);
    insta::assert_yaml_snapshot!(both);
}

#[test]
fn a_threshold_below_1_mib_widens_units_to_size_over_parallelism() {
    let small = ExecutionConfig {
        min_io_threshold_size_kb: 512,
        ..STOCK
    };
    let view = plan_view(
        "stock cufile.json with min_io_threshold_size_kb 512",
        &small,
        UNREGISTERED,
        0,
        3 * MIB,
        3 * MIB,
    );
    // Measured on libcufile 1.15: 3, not min(4, ceil((3 MiB − 1 MiB) / 512 KiB)) = 4.
    assert_eq!(view.totals.work_units, 3);
    insta::assert_yaml_snapshot!(view);
}

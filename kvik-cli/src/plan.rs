//! `kvik plan`: what a read would do, without doing it.
//!
//! The routing decision (KvikIO's compat mode, gds_threshold, host or device
//! memory) with its reasons, the KvikIO task split, and for every task that
//! goes to cuFile the work units cuFile schedules (`gds_core::schedule`).
//!
//! A plan is a what-if: device memory under compat mode OFF plans the cuFile
//! route even where this machine has no GPU or libcufile, and then says that
//! this machine could not execute it, and why. Where the facts here show cuFile
//! working without a direct path, AUTO plans what it would do here (POSIX);
//! where cuFile cannot run at all, the plan assumes a machine where it can,
//! with a direct path, and says so.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use cufile_config::{
    ConfigLocation, ExecutionConfig, LocationSource, ParsedConfig, ValidateOptions,
};
use gds_core::readiness::{self, Readiness};
use gds_core::schedule::{Registration, SplitRule};
use kvik_policy::plan::{CuFileSplit, Execution, PlannedRun, Request};
use kvik_policy::routing::{self, FileRouting, RequestRoute};
use kvik_policy::{Backend, CompatMode, CuFileAvailability, MemoryKind, Settings, Size};
use serde::Serialize;

use crate::CliError;
use crate::args::{MemoryTarget, Overrides};
use crate::error::print_json;
use crate::output::escaped;

/// `--json` lists every task; past this many it refuses (the listing would
/// run to hundreds of megabytes) and asks for a larger task size.
pub const MAX_JSON_TASKS: u64 = 1 << 20;

/// The largest file offset cuFile and `pread` accept (`off_t`).
const MAX_FILE_END: u64 = i64::MAX as u64;

const BUILT_IN_DEFAULTS: &str = "built-in defaults (libcufile 1.15)";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Bytes to read: plain bytes or with a unit (1GiB, 4MiB, 8KiB).
    #[arg(long, value_parser = crate::args::size)]
    pub size: u64,
    /// Where the read starts in the file.
    #[arg(long, default_value = "0", value_parser = crate::args::size)]
    pub offset: u64,
    /// Where the bytes go: host (always POSIX), device (GPU 0) or device:N
    /// (cuFile, or POSIX through bounce buffers, per the routing).
    #[arg(long, value_name = "KIND", default_value = "device", value_parser = crate::args::memory)]
    pub memory: MemoryTarget,
    /// KvikIO's task size [default: KVIKIO_TASK_SIZE, else 4 MiB].
    #[arg(long, value_parser = crate::args::positive_size)]
    pub task_size: Option<u64>,
    /// Device reads smaller than this skip cuFile [default: KVIKIO_GDS_THRESHOLD, else 16 KiB].
    #[arg(long, value_parser = crate::args::size)]
    pub gds_threshold: Option<u64>,
    /// The device buffer is registered with cuFileBufRegister.
    #[arg(long)]
    pub registered: bool,
    /// A cufile.json to take cuFile's execution settings from [default: the one cuFile
    /// would read here: CUFILE_ENV_PATH_JSON, else /etc/cufile.json, else built-in defaults].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// KvikIO's compat mode: on, off or auto [default: KVIKIO_COMPAT_MODE, else auto].
    #[arg(long, value_parser = crate::args::compat)]
    pub compat: Option<CompatMode>,
    /// Print the plan as JSON, every task listed.
    #[arg(long)]
    pub json: bool,
}

/// A value and where it came from.
#[derive(Debug, Clone, Serialize)]
pub struct Sourced<T> {
    pub value: T,
    pub source: String,
}

/// The KvikIO settings a plan uses: the command line, else the `KVIKIO_*`
/// environment, else the defaults — kvik-policy's `Settings`, which requests
/// run under too.
#[derive(Debug, Clone, Serialize)]
pub struct PlanSettings {
    pub compat_mode: Sourced<CompatMode>,
    pub task_size: Sourced<u64>,
    pub gds_threshold: Sourced<u64>,
    pub num_threads: Sourced<usize>,
    #[serde(skip)]
    pub settings: Settings,
}

impl PlanSettings {
    fn resolve(args: &Args) -> Result<PlanSettings, CliError> {
        let settings = Overrides {
            compat: args.compat,
            task_size: args.task_size,
            gds_threshold: args.gds_threshold,
            threads: None,
        }
        .settings()?;
        let views = settings.describe();
        let source = |name: &str, flag: Option<&str>| match flag {
            Some(flag) => flag.to_string(),
            None => views
                .iter()
                .find(|v| v.name == name)
                .map(|v| v.source.to_string())
                .unwrap_or_default(),
        };
        Ok(PlanSettings {
            compat_mode: Sourced {
                value: settings.compat_mode(),
                source: source("compat_mode", args.compat.map(|_| "--compat")),
            },
            task_size: Sourced {
                value: settings.task_size(),
                source: source("task_size", args.task_size.map(|_| "--task-size")),
            },
            gds_threshold: Sourced {
                value: settings.gds_threshold(),
                source: source(
                    "gds_threshold",
                    args.gds_threshold.map(|_| "--gds-threshold"),
                ),
            },
            num_threads: Sourced {
                value: settings.num_threads(),
                source: source("num_threads", None),
            },
            settings,
        })
    }
}

/// cuFile's execution settings for the plan, and where they came from.
#[derive(Debug, Clone, Serialize)]
pub struct CuFileSettings {
    /// Where the settings came from, in words.
    pub source: String,
    /// The cufile.json read, when one was.
    pub config_file: Option<PathBuf>,
    /// Whether the destination buffer is registered (`--registered`).
    pub registered: bool,
    /// Each execution setting with its source.
    pub execution: ExecutionView,
    /// What the plan assumed about the configuration, if anything.
    pub notes: Vec<String>,
    #[serde(skip)]
    pub config: ExecutionConfig,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExecutionView {
    pub max_io_queue_depth: Sourced<u64>,
    pub max_io_threads: Sourced<u64>,
    pub parallel_io: Sourced<bool>,
    pub min_io_threshold_size_kb: Sourced<u64>,
    pub max_request_parallelism: Sourced<u64>,
}

impl CuFileSettings {
    fn from_one_source(
        config: ExecutionConfig,
        source: &str,
        config_file: Option<PathBuf>,
        registered: bool,
        notes: Vec<String>,
    ) -> CuFileSettings {
        fn sourced<T>(value: T, source: &str) -> Sourced<T> {
            Sourced {
                value,
                source: source.to_string(),
            }
        }
        CuFileSettings {
            source: source.to_string(),
            config_file,
            registered,
            execution: ExecutionView {
                max_io_queue_depth: sourced(config.max_io_queue_depth, source),
                max_io_threads: sourced(config.max_io_threads, source),
                parallel_io: sourced(config.parallel_io, source),
                min_io_threshold_size_kb: sourced(config.min_io_threshold_size_kb, source),
                max_request_parallelism: sourced(config.max_request_parallelism, source),
            },
            notes,
            config,
        }
    }

    /// `--config FILE`, else the file libcufile would read here, else its
    /// built-in defaults.
    fn resolve(args: &Args, location: &ConfigLocation) -> Result<CuFileSettings, CliError> {
        if let Some(file) = &args.config {
            return Self::from_file(file, "--config", args.registered);
        }
        match (location.source, &location.path) {
            (LocationSource::BuiltInDefaults, _) => Ok(Self::from_one_source(
                ExecutionConfig::LIBRARY_DEFAULTS_1_15,
                BUILT_IN_DEFAULTS,
                None,
                args.registered,
                vec![format!(
                    "no cufile.json here ({} unset, {} missing)",
                    cufile_config::ENV_CONFIG_PATH,
                    cufile_config::DEFAULT_CONFIG_PATH
                )],
            )),
            // A name that leads nowhere: libcufile uses its built-in
            // defaults. Anything that exists is read as cuFile would read
            // it, and refused as --config would refuse it.
            (source, Some(path)) if std::fs::metadata(path).is_err() => Ok(Self::from_one_source(
                ExecutionConfig::LIBRARY_DEFAULTS_1_15,
                BUILT_IN_DEFAULTS,
                None,
                args.registered,
                vec![format!(
                    "{source} names {}, which {}: assuming libcufile falls back to its \
                     built-in defaults",
                    escaped(path),
                    location.why_not_read().unwrap_or("cannot be read")
                )],
            )),
            (source, Some(path)) => Self::from_file(path, &source.to_string(), args.registered),
            (source, None) => Err(CliError::Failed(format!("{source} names no file"))),
        }
    }

    /// The execution settings of one cufile.json, each with its source
    /// (`file:line:col`, or the built-in default for keys the file omits).
    /// A file that cannot be read, or that cuFile would refuse, cannot be
    /// planned with, wherever it came from (--config, CUFILE_ENV_PATH_JSON,
    /// /etc/cufile.json): the same file gives the same exit code.
    fn from_file(
        path: &Path,
        found_by: &str,
        registered: bool,
    ) -> Result<CuFileSettings, CliError> {
        let parsed = ParsedConfig::read(path, &ValidateOptions::default()).map_err(|error| {
            CliError::Config {
                error,
                context: format!("found by {found_by}"),
            }
        })?;
        if parsed.has_errors() {
            let first = parsed
                .diagnostics
                .iter()
                .find(|d| d.is_error())
                .map(|d| format!("{}:{}: {} = {}", d.line, d.column, d.path, d.message))
                .unwrap_or_default();
            return Err(CliError::Usage(format!(
                "{} (found by {found_by}) has {} error(s) and cuFile would refuse it; first: {first} \
                 (run `kvik config validate {}`)",
                escaped(path),
                parsed.error_count(),
                escaped(path)
            )));
        }
        let effective = parsed.execution();
        let sources = &effective.sources;
        let config = effective.config;
        fn sourced<T>(value: T, source: &cufile_config::Source) -> Sourced<T> {
            Sourced {
                value,
                source: source.to_string(),
            }
        }
        let mut notes = Vec::new();
        if parsed.warning_count() > 0 {
            notes.push(format!(
                "{}: {} warning(s) (run `kvik config validate {}`)",
                escaped(&path),
                parsed.warning_count(),
                escaped(&path)
            ));
        }
        Ok(CuFileSettings {
            source: format!("{} (found by {found_by})", escaped(&path)),
            config_file: Some(path.to_path_buf()),
            registered,
            execution: ExecutionView {
                max_io_queue_depth: sourced(config.max_io_queue_depth, &sources.max_io_queue_depth),
                max_io_threads: sourced(config.max_io_threads, &sources.max_io_threads),
                parallel_io: sourced(config.parallel_io, &sources.parallel_io),
                min_io_threshold_size_kb: sourced(
                    config.min_io_threshold_size_kb,
                    &sources.min_io_threshold_size_kb,
                ),
                max_request_parallelism: sourced(
                    config.max_request_parallelism,
                    &sources.max_request_parallelism,
                ),
            },
            notes,
            config,
        })
    }
}

/// Whether this machine could carry out the plan.
#[derive(Debug, Clone, Serialize)]
pub struct ThisMachine {
    pub can_execute: bool,
    /// `kvik check`'s verdict here.
    pub verdict: readiness::VerdictKind,
    /// Why it can or cannot, most decisive first.
    pub reasons: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Routing {
    /// The per-file decision the plan uses.
    pub file: FileRouting,
    /// The decision for this request.
    pub request: RequestRoute,
    /// What the plan assumed that the facts here did not establish.
    pub assumptions: Vec<String>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct UnitView {
    pub file_offset: u64,
    pub buffer_offset: u64,
    pub size: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskView {
    pub file_offset: u64,
    pub buffer_offset: u64,
    pub size: u64,
    pub backend: Backend,
    /// cuFile's work units for this task (empty when it does not go to cuFile).
    pub work_units: Vec<UnitView>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    pub tasks: u64,
    pub work_units: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RequestView {
    pub file_offset: u64,
    pub size: u64,
    pub memory: MemoryKind,
    pub registered: bool,
}

/// The whole plan, as `--json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub request: RequestView,
    pub settings: PlanSettings,
    pub routing: Routing,
    pub this_machine: ThisMachine,
    pub cufile: CuFileSettings,
    /// Where the tasks run.
    pub execution: Execution,
    pub totals: Totals,
    /// The tasks as runs of equal tasks, with cuFile's split of each.
    pub runs: Vec<PlannedRun>,
    /// Every task; filled only for `--json`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<Vec<TaskView>>,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let plan = build(args, &readiness::check(None), &ConfigLocation::from_env())?;
    if args.json {
        print_json(&plan)
    } else {
        crate::output::print(&render(&plan))
    }
}

/// The plan for `args` on a machine described by `facts`: kvik-policy's
/// planning function (what `FileHandle` executes), on what-if routing.
pub fn build(args: &Args, facts: &Readiness, location: &ConfigLocation) -> Result<Plan, CliError> {
    if args
        .offset
        .checked_add(args.size)
        .is_none_or(|end| end > MAX_FILE_END)
    {
        return Err(CliError::Usage(format!(
            "--offset {} + --size {} ends past the largest file offset ({MAX_FILE_END})",
            args.offset, args.size
        )));
    }
    if args.registered && args.memory == MemoryTarget::Host {
        return Err(CliError::Usage(
            "--registered applies to device memory (cuFileBufRegister); host memory is always \
             read with POSIX"
                .into(),
        ));
    }
    let settings = PlanSettings::resolve(args)?;
    let cufile = CuFileSettings::resolve(args, location)?;
    let memory = args.memory.kind();

    let here = CuFileAvailability::from_readiness(facts);
    let (assumed, assumptions) = what_if(&here);
    let file = routing::route_file(settings.compat_mode.value, &assumed)
        .expect("the what-if availability is always usable");
    let split = CuFileSplit {
        execution: cufile.config,
        registration: Registration::from(args.registered),
    };
    let plan = kvik_policy::plan::plan(
        Request::read(args.offset, args.size, memory),
        &settings.settings,
        &file,
        Some(split),
    );
    let this_machine = this_machine(facts, &here, &settings, &plan);

    let task_count = plan.task_count();
    if args.json && task_count > MAX_JSON_TASKS {
        return Err(CliError::Usage(format!(
            "--json lists every task and this plan has {task_count} (more than {MAX_JSON_TASKS}); \
             use a larger --task-size"
        )));
    }
    let tasks = args.json.then(|| {
        plan.tasks()
            .map(|task| TaskView {
                file_offset: task.file_offset,
                buffer_offset: task.buffer_offset,
                size: task.size,
                backend: plan.route.backend,
                work_units: plan
                    .work_units(&task)
                    .map(|units| {
                        units
                            .map(|u| UnitView {
                                file_offset: u.file_offset,
                                buffer_offset: u.buffer_offset,
                                size: u.size,
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect()
    });

    Ok(Plan {
        request: RequestView {
            file_offset: args.offset,
            size: args.size,
            memory,
            registered: args.registered,
        },
        routing: Routing {
            file,
            request: plan.route,
            assumptions,
        },
        this_machine,
        cufile,
        execution: plan.execution,
        totals: Totals {
            tasks: task_count,
            work_units: plan.total_work_units().unwrap_or(0),
            bytes: args.size,
        },
        runs: plan.runs(),
        tasks,
        settings,
    })
}

/// What the plan assumes cuFile can do: the facts here where cuFile runs
/// here; otherwise a machine where it runs with a direct path.
fn what_if(here: &CuFileAvailability) -> (CuFileAvailability, Vec<String>) {
    if here.usable {
        return (here.clone(), Vec::new());
    }
    let assumption =
        "assumed for this plan: cuFile usable with a direct path (nvidia-fs), as on a \
                      GDS machine; this machine cannot run cuFile (see \"this machine\")"
            .to_string();
    let assumed = CuFileAvailability {
        usable: true,
        direct_path: true,
        evidence: Vec::new(),
    };
    (assumed, vec![assumption])
}

/// Whether this machine would carry out `planned` as planned: the same
/// planning function, on this machine's cuFile availability.
fn this_machine(
    facts: &Readiness,
    here: &CuFileAvailability,
    settings: &PlanSettings,
    planned: &kvik_policy::plan::Plan,
) -> ThisMachine {
    let verdict = facts.verdict.kind;
    let memory = planned.request.memory;
    let refuse = |mut reasons: Vec<String>| {
        for reason in here.evidence.iter().map(ToString::to_string) {
            // The first reason may already quote the CUDA probe.
            if !reasons.iter().any(|r| r.contains(reason.as_str())) {
                reasons.push(reason);
            }
        }
        ThisMachine {
            can_execute: false,
            verdict,
            reasons,
        }
    };
    if let (MemoryKind::Device { .. }, Err(no_gpu)) = (memory, &facts.cuda) {
        return refuse(vec![format!(
            "device memory needs a GPU, and this machine has none ({no_gpu})"
        )]);
    }
    match routing::route_file(settings.compat_mode.value, here) {
        Err(required) => refuse(vec![required.to_string()]),
        Ok(file) => {
            let route =
                kvik_policy::plan::plan(planned.request, &settings.settings, &file, None).route;
            if route.backend == planned.route.backend {
                let mut reasons = vec![format!(
                    "this machine would take the same route: {} ({})",
                    route.backend, route.reason
                )];
                if memory != MemoryKind::Host {
                    reasons.extend(file.reasons());
                }
                ThisMachine {
                    can_execute: true,
                    verdict,
                    reasons,
                }
            } else {
                let mut reasons = vec![format!(
                    "this machine would route the request to {} instead: {}",
                    route.backend, route.reason
                )];
                reasons.extend(file.reasons());
                ThisMachine {
                    can_execute: false,
                    verdict,
                    reasons,
                }
            }
        }
    }
}

/// A task's units as `count × size` runs: "4 × 256 MiB", "1 × 4 MiB, 1 × 4100 KiB".
fn unit_sizes_text(unit_sizes: &[(u64, u64)]) -> String {
    unit_sizes
        .iter()
        .map(|(count, size)| format!("{count} × {}", Size(*size)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A file offset in a unit where it is a whole number of KiB, else in bytes.
fn offset_text(offset: u64) -> String {
    if offset % 1024 == 0 {
        Size(offset).to_string()
    } else {
        offset.to_string()
    }
}

/// The human-readable plan.
pub fn render(plan: &Plan) -> String {
    let mut out = String::new();
    let r = &plan.request;
    let memory = match r.memory {
        MemoryKind::Host => "host memory".to_string(),
        MemoryKind::Device { ordinal } => format!(
            "GPU {ordinal} memory ({} buffer)",
            if r.registered {
                "registered"
            } else {
                "unregistered"
            }
        ),
    };
    let _ = writeln!(
        out,
        "kvik plan: read {} at file offset {} into {memory}\n",
        Size(r.size),
        r.file_offset
    );

    let routing = &plan.routing;
    let _ = writeln!(out, "routing: {}", routing.request.backend);
    let _ = writeln!(out, "  - this request: {}", routing.request.reason);
    let resolved = if routing.file.requested == routing.file.effective {
        String::new()
    } else {
        format!(" resolves to {} for this file", routing.file.effective)
    };
    let _ = writeln!(
        out,
        "  - compat mode {} ({}){resolved}: device memory goes to {}",
        routing.file.requested, plan.settings.compat_mode.source, routing.file.device_backend
    );
    for reason in routing.file.reasons().iter().chain(&routing.assumptions) {
        let _ = writeln!(out, "  - {reason}");
    }
    let m = &plan.this_machine;
    let _ = writeln!(
        out,
        "\nthis machine ({}): {}",
        m.verdict,
        if m.can_execute {
            "could execute this plan"
        } else {
            "could NOT execute this plan"
        }
    );
    for reason in &m.reasons {
        let _ = writeln!(out, "  - {reason}");
    }

    let s = &plan.settings;
    let c = &plan.cufile;
    let e = &c.config;
    let _ = writeln!(out, "\nsettings");
    let _ = writeln!(
        out,
        "  task size       {} ({})",
        Size(s.task_size.value),
        s.task_size.source
    );
    let _ = writeln!(
        out,
        "  gds_threshold   {} ({})",
        Size(s.gds_threshold.value),
        s.gds_threshold.source
    );
    let _ = writeln!(
        out,
        "  cuFile          {}: parallel_io {}, max_io_threads {}, max_request_parallelism {}, \
         min_io_threshold_size_kb {}",
        c.source,
        e.parallel_io,
        e.max_io_threads,
        e.max_request_parallelism,
        e.min_io_threshold_size_kb
    );
    for note in &c.notes {
        let _ = writeln!(out, "                  {note}");
    }

    let t = &plan.totals;
    let _ = writeln!(
        out,
        "\nplan: {} task{}, {} cuFile work unit{}, {}",
        t.tasks,
        if t.tasks == 1 { "" } else { "s" },
        t.work_units,
        if t.work_units == 1 { "" } else { "s" },
        plan.execution
    );
    if plan.runs.is_empty() {
        let _ = writeln!(out, "  nothing to read");
        return out;
    }
    let rows: Vec<[String; 5]> = plan
        .runs
        .iter()
        .map(|run| {
            let tasks = &run.tasks;
            let offsets = if tasks.count == 1 {
                offset_text(tasks.first_file_offset)
            } else {
                format!(
                    "{} … {} (every {})",
                    offset_text(tasks.first_file_offset),
                    offset_text(tasks.last_file_offset()),
                    Size(tasks.size)
                )
            };
            [
                tasks.count.to_string(),
                Size(tasks.size).to_string(),
                offsets,
                run.backend.to_string(),
                if run.backend == Backend::Cufile {
                    unit_sizes_text(&run.unit_sizes)
                } else {
                    "— (POSIX)".into()
                },
            ]
        })
        .collect();
    let header = [
        "tasks",
        "task size",
        "file offsets",
        "backend",
        "cuFile work units per task",
    ];
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|row| row[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut line = |cells: [&str; 5]| {
        let mut text = String::from(" ");
        for (i, cell) in cells.iter().enumerate() {
            let pad = widths[i] - cell.chars().count();
            if i == 0 {
                let _ = write!(text, " {}{cell}", " ".repeat(pad));
            } else {
                let _ = write!(text, "  {cell}{}", " ".repeat(pad));
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(header);
    for row in &rows {
        line([&row[0], &row[1], &row[2], &row[3], &row[4]]);
    }
    let mut rules: Vec<SplitRule> = plan.runs.iter().filter_map(|run| run.split_rule).collect();
    rules.dedup();
    for rule in rules {
        let _ = writeln!(out, "  cuFile's split: {rule}");
    }
    out
}

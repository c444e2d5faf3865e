//! The results of a run, as `--json` prints them and `bench/results/`
//! keeps them (`kvik-bench/1`): the machine, the file, our cases, the
//! reference points, the targets, the recommendation, the notes.

use std::fmt;
use std::path::PathBuf;

use kvik_policy::Size;

use super::args::{Cache, Op};
use super::cache::ColdCache;
use super::machine::Machine;
use super::stats::Summary;
use super::{random, remote, tune};
pub use crate::args::MemoryTarget;

/// What a result file is (bump when the JSON changes shape).
pub const SCHEMA: &str = "kvik-bench/1";

/// What is measured: a read from a page-cached (hot) or uncached (cold)
/// file, or a write to storage (the write and an fdatasync, timed together).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Workload {
    pub op: Op,
    /// `None` for writes: the cache state does not apply.
    pub cache: Option<Cache>,
}

impl Workload {
    pub const READ_HOT: Workload = Workload {
        op: Op::Read,
        cache: Some(Cache::Hot),
    };
    pub const READ_COLD: Workload = Workload {
        op: Op::Read,
        cache: Some(Cache::Cold),
    };
    pub const WRITE: Workload = Workload {
        op: Op::Write,
        cache: None,
    };

    /// The workloads `ops` × `cache` ask for, in a fixed order.
    pub fn selected(ops: &[Op], cache: &[Cache]) -> Vec<Workload> {
        let mut out = Vec::new();
        if ops.contains(&Op::Read) {
            for state in [Cache::Hot, Cache::Cold] {
                if cache.contains(&state) {
                    out.push(Workload {
                        op: Op::Read,
                        cache: Some(state),
                    });
                }
            }
        }
        if ops.contains(&Op::Write) {
            out.push(Workload::WRITE);
        }
        out
    }

    /// For panels and headings.
    pub fn title(self) -> &'static str {
        match (self.op, self.cache) {
            (Op::Read, Some(Cache::Hot)) => "read, page-cached file",
            (Op::Read, _) => "read, cold cache",
            (Op::Write, _) => "write + fdatasync",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match (self.op, self.cache) {
            (Op::Read, Some(Cache::Hot)) => "read hot",
            (Op::Read, _) => "read cold",
            (Op::Write, _) => "write",
        })
    }
}

/// One measured configuration of ours.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Case {
    pub memory: MemoryTarget,
    #[serde(flatten)]
    pub workload: Workload,
    pub threads: usize,
    pub task_size: u64,
    /// Device memory only.
    pub bounce_buffer_size: Option<u64>,
    /// The reused destination window; `None`: one buffer for the whole range.
    pub window: Option<u64>,
    /// These are the default settings on this machine (and the whole range
    /// lands in one buffer, as for an application).
    pub defaults: bool,
    pub bytes: u64,
    /// The backend the path report names (`posix`, `cufile`).
    pub backend: Option<String>,
    /// The path report's O_DIRECT status.
    pub direct_io: Option<String>,
    /// The most of the file found in the page cache just before a timed
    /// repetition (cold runs: proves the cache was empty).
    pub page_cache_resident_max: Option<f64>,
    pub throughput: Option<Summary>,
    pub error: Option<String>,
    pub vs_best_tool: Option<f64>,
    pub vs_ceiling: Option<f64>,
    pub vs_kvikio: Option<f64>,
}

impl Case {
    pub fn median(&self) -> Option<f64> {
        self.throughput.as_ref().map(|s| s.median)
    }

    /// `host read hot, 2 threads, 4 MiB tasks`.
    pub fn label(&self) -> String {
        let mut s = format!(
            "{} {}, {} thread{}, {} tasks",
            self.memory,
            self.workload,
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            Size(self.task_size)
        );
        if let Some(b) = self.bounce_buffer_size {
            s.push_str(&format!(", {} bounce buffers", Size(b)));
        }
        if let Some(w) = self.window {
            s.push_str(&format!(", {} window reused", Size(w)));
        }
        s
    }
}

/// What a reference point is to our figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RefKind {
    /// Another tool doing the same job (dd, fio): the bar to beat.
    Tool,
    /// What the memory system allows (memcpy, host→device copies).
    Ceiling,
    /// Another implementation of the same library (KvikIO).
    Peer,
}

/// One reference figure.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Reference {
    pub name: String,
    pub kind: RefKind,
    pub memory: MemoryTarget,
    #[serde(flatten)]
    pub workload: Workload,
    pub threads: usize,
    /// O_DIRECT (bypasses the page cache).
    pub direct: bool,
    pub block_size: Option<u64>,
    pub bytes: u64,
    /// How to run it by hand.
    pub command: Option<String>,
    pub throughput: Option<Summary>,
    pub error: Option<String>,
    pub vs_best_tool: Option<f64>,
}

impl Reference {
    pub fn median(&self) -> Option<f64> {
        self.throughput.as_ref().map(|s| s.median)
    }
}

/// A throughput target (bench/README.md), checked against this run's figures.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Target {
    pub name: String,
    pub ours: String,
    pub ours_bytes_per_second: f64,
    pub reference: String,
    pub reference_bytes_per_second: f64,
    pub ratio: f64,
    pub goal: f64,
    pub met: bool,
}

/// The settings a run starts from.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Defaults {
    pub num_threads: usize,
    pub task_size: u64,
    pub bounce_buffer_size: u64,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct FileInfo {
    pub path: PathBuf,
    pub bytes: u64,
    /// Created by this run (random bytes).
    pub created: bool,
    pub kept: bool,
}

/// A whole run: what `--json` prints and `bench/results/` keeps.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub schema: String,
    pub command_line: String,
    pub date: String,
    pub kvik_version: String,
    pub machine: Machine,
    pub file: FileInfo,
    pub reps: u32,
    pub compat_mode: String,
    /// How cold-cache repetitions emptied the cache.
    pub cold_cache: Option<ColdCache>,
    pub defaults: Defaults,
    pub cases: Vec<Case>,
    pub references: Vec<Reference>,
    pub targets: Vec<Target>,
    pub tuning: Vec<tune::Recommendation>,
    pub notes: Vec<String>,
    /// `--pattern random`: many small reads at random offsets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random: Option<random::RandomRun>,
    /// `--file URL`: whole-object reads of a remote object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<remote::RemoteRun>,
}

/// The JSON of a run, for tests of its shape.
#[cfg(test)]
pub(super) fn sample_report() -> Report {
    use super::cache::DropMethod;
    use super::compare::{compare, targets};
    use super::machine;
    use super::reference::reference;
    use std::path::Path;
    let case = |threads, task_size, median: f64, workload| Case {
        memory: MemoryTarget::Host,
        workload,
        threads,
        task_size,
        bounce_buffer_size: None,
        window: None,
        defaults: threads == 2 && task_size == 4 << 20,
        bytes: 1 << 30,
        backend: Some("posix".into()),
        direct_io: Some("off".into()),
        page_cache_resident_max: Some(0.0),
        throughput: Summary::from_rates(vec![median * 0.95, median, median * 1.05]),
        error: None,
        vs_best_tool: None,
        vs_ceiling: None,
        vs_kvikio: None,
    };
    let mut cases = vec![
        case(1, 4 << 20, 6e9, Workload::READ_HOT),
        case(2, 4 << 20, 11e9, Workload::READ_HOT),
        case(1, 4 << 20, 1.5e9, Workload::READ_COLD),
        case(2, 4 << 20, 2.0e9, Workload::READ_COLD),
    ];
    let tool = |name: &str, workload, threads, direct, median: f64| {
        let mut r = reference(name.into(), RefKind::Tool, MemoryTarget::Host, workload);
        r.threads = threads;
        r.direct = direct;
        r.throughput = Summary::from_rates(vec![median]);
        r
    };
    let mut memcpy = reference(
        "memcpy".into(),
        RefKind::Ceiling,
        MemoryTarget::Host,
        Workload::READ_HOT,
    );
    memcpy.threads = 2;
    memcpy.throughput = Summary::from_rates(vec![20e9]);
    let mut failed = tool("fio io_uring O_DIRECT", Workload::READ_COLD, 1, true, 0.0);
    failed.throughput = None;
    failed.error = Some("fio failed".into());
    let mut refs = vec![
        tool("dd bs=16M buffered", Workload::READ_HOT, 1, false, 10e9),
        tool("fio psync buffered", Workload::READ_HOT, 2, false, 12e9),
        tool("fio psync O_DIRECT", Workload::READ_COLD, 2, true, 2.1e9),
        tool("dd bs=16M buffered", Workload::READ_COLD, 1, false, 2.5e9),
        failed,
        memcpy,
    ];
    compare(&mut cases, &mut refs);
    let targets = targets(&cases, &refs);
    let tuning = tune::recommend(&cases);
    Report {
        schema: SCHEMA.into(),
        command_line: "kvik bench --size 1GiB".into(),
        date: machine::utc(0),
        kvik_version: "0.1.0".into(),
        machine: Machine::describe(Path::new("/tmp/x")),
        file: FileInfo {
            path: "/tmp/x".into(),
            bytes: 1 << 30,
            created: true,
            kept: false,
        },
        reps: 3,
        compat_mode: "AUTO".into(),
        cold_cache: Some(ColdCache::resolve(DropMethod::File).unwrap()),
        defaults: Defaults {
            num_threads: 2,
            task_size: 4 << 20,
            bounce_buffer_size: 16 << 20,
        },
        cases,
        references: refs,
        targets,
        tuning,
        notes: vec![],
        random: None,
        remote: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_follow_ops_and_cache_states() {
        assert_eq!(
            Workload::selected(&[Op::Write, Op::Read], &[Cache::Cold, Cache::Hot]),
            vec![Workload::READ_HOT, Workload::READ_COLD, Workload::WRITE]
        );
        assert_eq!(Workload::selected(&[Op::Write], &[]), vec![Workload::WRITE]);
        assert!(Workload::selected(&[Op::Read], &[]).is_empty());
        assert_eq!(Workload::READ_COLD.to_string(), "read cold");
    }

    #[test]
    fn ratios_compare_with_the_best_of_the_same_workload() {
        let r = sample_report();
        let hot2 = &r.cases[1];
        // Best hot tool: fio psync at 12 GB/s; ceiling: memcpy at 20 GB/s.
        assert!((hot2.vs_best_tool.unwrap() - 11.0 / 12.0).abs() < 1e-9);
        assert!((hot2.vs_ceiling.unwrap() - 11.0 / 20.0).abs() < 1e-9);
        assert_eq!(hot2.vs_kvikio, None);
        // Cold: best tool is dd buffered at 2.5 GB/s; no ceiling for cold reads.
        let cold2 = &r.cases[3];
        assert!((cold2.vs_best_tool.unwrap() - 0.8).abs() < 1e-9);
        assert_eq!(cold2.vs_ceiling, None);
        // References get their own ratio; a failed one gets none.
        let dd_hot = &r.references[0];
        assert!((dd_hot.vs_best_tool.unwrap() - 10.0 / 12.0).abs() < 1e-9);
        assert_eq!(r.references[4].vs_best_tool, None);
    }

    #[test]
    fn targets_judge_the_defaults() {
        let r = sample_report();
        let host = &r.targets[0];
        assert!(host.ours.contains("(defaults)"), "{}", host.ours);
        assert!((host.ratio - 11.0 / 12.0).abs() < 1e-9);
        assert!(!host.met);
        // Cold: against fio's best O_DIRECT (2.1 GB/s), not dd buffered.
        let cold = &r.targets[1];
        assert!(
            cold.reference.starts_with("fio psync O_DIRECT"),
            "{}",
            cold.reference
        );
        assert!(cold.met);
        assert_eq!(r.targets.len(), 2);
    }

    #[test]
    fn the_json_has_the_documented_shape() {
        let value = serde_json::to_value(sample_report()).unwrap();
        for key in [
            "schema",
            "command_line",
            "date",
            "machine",
            "file",
            "reps",
            "cold_cache",
            "defaults",
            "cases",
            "references",
            "targets",
            "tuning",
            "notes",
        ] {
            assert!(value.get(key).is_some(), "no {key}");
        }
        assert_eq!(value["schema"], "kvik-bench/1");
        assert_eq!(value["date"], "1970-01-01T00:00:00Z");
        let case = &value["cases"][1];
        assert_eq!(case["memory"], "host");
        assert_eq!(case["op"], "read");
        assert_eq!(case["cache"], "hot");
        assert_eq!(case["threads"], 2);
        assert_eq!(case["defaults"], true);
        assert_eq!(case["throughput"]["median"], 11e9);
        assert!(case["throughput"]["samples"].as_array().unwrap().len() == 3);
        assert!(case["vs_best_tool"].is_f64());
        let failed = &value["references"][4];
        assert_eq!(failed["throughput"], serde_json::Value::Null);
        assert_eq!(failed["error"], "fio failed");
        assert!(value["machine"]["cores"].as_u64().unwrap() >= 1);
        assert!(value["tuning"][0]["threads"].is_u64());
    }
}

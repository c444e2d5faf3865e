//! `kvik bench`'s arguments: what to measure (size, threads, task sizes,
//! bounce buffers, windows, memory kinds, operations, cache states,
//! repetitions), the reference points, and where results go. Values are
//! read with the command line's shared parsers (`crate::args`).

use std::path::PathBuf;

use kvik_policy::CompatMode;

use super::cache::DropMethod;
use super::random;
use crate::args::{Location, MemoryTarget};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Benchmark this file (its first --size bytes; created with random bytes
    /// when missing, and then kept), or the remote object at this URL
    /// (s3://…, http(s)://…: whole-object reads, at most --size bytes,
    /// through kvik-remote; --threads is GETs in flight). Default: a
    /// temporary file in --dir, removed afterwards.
    #[arg(long, value_name = "FILE|URL")]
    pub file: Option<Location>,
    /// Directory for the temporary file (default: the system temp directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Bytes per transfer (the file's size).
    #[arg(long, default_value = "1GiB", value_parser = crate::args::positive_size)]
    pub size: u64,
    /// Thread counts, comma-separated.
    #[arg(long, value_name = "N,…", value_delimiter = ',', default_value = "1,2,4", value_parser = crate::args::threads)]
    pub threads: Vec<usize>,
    /// Task sizes, comma-separated.
    #[arg(long = "task-size", value_name = "SIZE,…", value_delimiter = ',', default_value = "1MiB,4MiB,16MiB", value_parser = crate::args::positive_size)]
    pub task_sizes: Vec<u64>,
    /// Bounce buffer sizes, comma-separated (device memory only).
    #[arg(long = "bounce-buffer", value_name = "SIZE,…", value_delimiter = ',', default_value = "16MiB", value_parser = crate::args::positive_size)]
    pub bounce_buffers: Vec<u64>,
    /// Destination per transfer, comma-separated: `all` (the whole range in
    /// one buffer, as an application loading a file) or a SIZE reused for
    /// each part of the range in turn (as dd and fio do: their few MiB stay
    /// in the CPU cache, so page-cache reads never pay for memory bandwidth).
    #[arg(long, value_name = "all|SIZE,…", value_delimiter = ',', default_value = "all", value_parser = parse_window)]
    pub window: Vec<Window>,
    /// Memory kinds: host, device (GPU 0) or device:N, comma-separated.
    /// Default: host, plus device:0 where a CUDA driver and a GPU are present.
    #[arg(long, value_name = "KIND,…", value_delimiter = ',', value_parser = crate::args::memory)]
    pub memory: Vec<MemoryTarget>,
    /// Operations, comma-separated.
    #[arg(
        long,
        value_name = "OP,…",
        value_delimiter = ',',
        value_enum,
        default_value = "read,write"
    )]
    pub ops: Vec<Op>,
    /// Page-cache states for reads, comma-separated.
    #[arg(
        long,
        value_name = "STATE,…",
        value_delimiter = ',',
        value_enum,
        default_value = "hot,cold"
    )]
    pub cache: Vec<Cache>,
    /// Timed repetitions of each measurement (after one untimed warm-up).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub reps: u32,
    /// How cold-cache runs empty the cache.
    #[arg(long = "drop", value_enum, default_value = "auto")]
    pub drop_method: DropMethod,
    /// Reference points, comma-separated.
    #[arg(
        long,
        value_name = "REF,…",
        value_delimiter = ',',
        value_enum,
        default_value = "memcpy,htod,dd,fio"
    )]
    pub references: Vec<RefSource>,
    /// Measure no reference points.
    #[arg(long, conflicts_with = "references")]
    pub no_references: bool,
    /// fio's block size.
    #[arg(long, value_name = "SIZE", default_value = "4MiB", value_parser = crate::args::positive_size)]
    pub fio_block: u64,
    /// KvikIO's results for the same file (the JSON lines of
    /// bench/kvikio_bench.py), compared thread count by thread count.
    #[arg(long, value_name = "FILE")]
    pub kvikio: Option<PathBuf>,
    /// Compat mode for the file handles (overrides KVIKIO_COMPAT_MODE).
    #[arg(long, value_name = "MODE", value_parser = crate::args::compat)]
    pub compat: Option<CompatMode>,
    /// Draw throughput vs threads (one panel per workload) as SVG here.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Keep the temporary benchmark file.
    #[arg(long)]
    pub keep: bool,
    /// Print the results as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON to FILE (with the readable report on stdout).
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    #[command(flatten)]
    pub random: random::RandomArgs,
    /// Measure nothing: show a saved run (--json / --save output, from this
    /// or another machine) as a table, and --plot it.
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
}

/// Where one transfer's bytes land.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Window {
    /// One buffer as large as the range.
    All,
    /// A buffer of this size, reused for each part of the range.
    Reused(u64),
}

impl Window {
    /// The reused size, `None` for the whole range.
    pub fn bytes(self) -> Option<u64> {
        match self {
            Window::All => None,
            Window::Reused(n) => Some(n),
        }
    }
}

/// `all` or a size.
pub fn parse_window(text: &str) -> Result<Window, String> {
    if text.trim().eq_ignore_ascii_case("all") {
        return Ok(Window::All);
    }
    crate::args::positive_size(text).map(Window::Reused)
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Cache {
    /// The file is in the page cache.
    Hot,
    /// The file's pages are dropped before each repetition.
    Cold,
}

/// Where reference points come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RefSource {
    /// Host memcpy of the same size, at each thread count.
    Memcpy,
    /// Pinned and pageable host→device copies of the same size (GPU only).
    Htod,
    /// dd, 16 MiB blocks, buffered and O_DIRECT.
    Dd,
    /// fio sequential reads: psync, libaio, io_uring; numjobs = threads.
    Fio,
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::Workload;
    use super::*;
    use crate::args::memory as parse_memory;
    use clap::Parser as _;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    pub(in crate::bench) fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn defaults_parse() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.size, 1 << 30);
        assert_eq!(a.threads, vec![1, 2, 4]);
        assert_eq!(a.task_sizes, vec![1 << 20, 4 << 20, 16 << 20]);
        assert_eq!(a.bounce_buffers, vec![16 << 20]);
        assert_eq!(a.ops, vec![Op::Read, Op::Write]);
        assert_eq!(a.cache, vec![Cache::Hot, Cache::Cold]);
        assert_eq!(a.reps, 5);
        assert!(a.memory.is_empty());
        assert_eq!(a.references.len(), 4);
    }

    #[test]
    fn lists_parse_and_bad_values_are_refused() {
        let a = parse(&[
            "--threads",
            "1,4,8,16",
            "--task-size",
            "256KiB,4MiB",
            "--memory",
            "host,device:1,device",
            "--ops",
            "read",
            "--cache",
            "hot",
            "--reps",
            "3",
        ])
        .unwrap();
        assert_eq!(a.threads, vec![1, 4, 8, 16]);
        assert_eq!(a.task_sizes, vec![256 << 10, 4 << 20]);
        assert_eq!(
            a.memory,
            vec![
                MemoryTarget::Host,
                MemoryTarget::Device(1),
                MemoryTarget::Device(0)
            ]
        );
        assert_eq!(
            Workload::selected(&a.ops, &a.cache),
            vec![Workload::READ_HOT]
        );
        for bad in [
            &["--threads", "0"][..],
            &["--threads", "two"],
            &["--task-size", "4MB/s"],
            &["--task-size", "0"],
            &["--memory", "gpu"],
            &["--memory", "device:x"],
            &["--reps", "0"],
            &["--ops", "append"],
            &["--references", "dd", "--no-references"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
        let e = parse_memory("vram").unwrap_err();
        assert!(e.contains("\"vram\"") && e.contains("device:N"), "{e}");
    }

    #[test]
    fn windows_parse() {
        let a = parse(&["--window", "all,16MiB"]).unwrap();
        assert_eq!(a.window, vec![Window::All, Window::Reused(16 << 20)]);
        assert_eq!(parse(&[]).unwrap().window, vec![Window::All]);
        assert!(parse(&["--window", "0"]).is_err());
        assert!(parse(&["--window", "some"]).is_err());
    }
}

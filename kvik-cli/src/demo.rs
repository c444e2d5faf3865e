//! `kvik demo`: NVIDIA's GDS tutorial through the kvik-rs stack. Creates a
//! file (from host memory), reads it back with the best path available —
//! GPU 0's memory when a GPU exists, host memory otherwise (`--host` /
//! `--device N` choose) — checks every byte came back (CRC-32), and prints
//! the path report and the throughput. The file has no name (`O_TMPFILE`)
//! unless `--keep` links it into the directory at the end, so nothing is
//! left behind, whatever ends the demo; where the filesystem has no
//! `O_TMPFILE`, it has a random name, removed at the end and on signals.

use std::path::{Path, PathBuf};

use kvik_policy::{Settings, Size};

use crate::CliError;
use crate::args::{MemoryArgs, Overrides};
use crate::output_file::{Durability, OutputFile};
use crate::report;
use crate::write::{self, Pattern};

/// The creation writes in windows of this size (the progress bar's step).
const WRITE_WINDOW: u64 = 64 << 20;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Size of the demo file.
    #[arg(long, default_value = "1GiB", value_parser = crate::args::positive_size)]
    pub size: u64,
    /// Directory for the demo file (default: the system temp directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the demo file afterwards (its path is printed).
    #[arg(long)]
    pub keep: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Where the file is read into.
    #[command(flatten)]
    pub memory: MemoryArgs,
    /// Compat mode: on (POSIX only), off (cuFile only), auto (overrides KVIKIO_COMPAT_MODE).
    #[arg(long, value_name = "MODE", value_parser = crate::args::compat)]
    pub compat: Option<kvik_policy::CompatMode>,
}

#[derive(Debug, serde::Serialize)]
struct Phase<Report> {
    bytes: u64,
    seconds: f64,
    bytes_per_second: f64,
    report: Report,
}

impl<Report> Phase<Report> {
    fn new(bytes: u64, seconds: f64, report: Report) -> Self {
        Phase {
            bytes,
            seconds,
            bytes_per_second: bytes as f64 / seconds.max(f64::MIN_POSITIVE),
            report,
        }
    }
}

#[derive(Debug, serde::Serialize)]
struct Output<'a> {
    #[serde(serialize_with = "kvik_policy::path_serde::serialize")]
    file: &'a Path,
    kept: bool,
    memory: crate::args::MemoryChoice,
    settings: Settings,
    write: Phase<kvik_policy::PathReport>,
    /// Share of the file in the page cache just before the read (0–1).
    page_cache_resident_before_read: Option<f64>,
    read: Phase<kvik_remote::SourceReport>,
    checksum_crc32: String,
    /// The bytes read back have the CRC-32 of the bytes written.
    verified: bool,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "--dir {} is not a directory",
            crate::output::escaped(&dir)
        )));
    }
    let settings = Overrides {
        compat: args.compat,
        ..Overrides::default()
    }
    .settings()?;
    let memory = args.memory.choose()?;
    let name = format!("kvik-demo-{}.bin", std::process::id());
    let path = dir.join(&name);
    // Refused up front when it cannot fit (seen: --size 1TiB).
    if matches!(memory.kind, kvik_policy::MemoryKind::Device { .. })
        && settings.compat_mode() != kvik_policy::CompatMode::On
    {
        crate::output_file::name_temporaries_for_cufile();
    }
    let mut scratch = OutputFile::scratch(&dir, &name, args.size)?;
    if !args.json {
        report::print(&format!(
            "kvik demo: write a {} file, read it back through the kvik-rs stack, report the \
             path\n\n",
            Size(args.size)
        ))?;
    }

    // 1. Create the file (through the stack, as the tutorial does).
    // The file is created from host memory (the tutorial's first step).
    let mut host_settings = settings.clone();
    host_settings.set_compat_mode(kvik_policy::CompatMode::On);
    let writer = scratch.handle("w", &host_settings)?;
    let mut window =
        crate::window::WindowBuffer::Host(crate::window::host_buffer(args.size.min(WRITE_WINDOW))?);
    let bar = crate::progress::bar(args.size, "creating", args.json);
    let written = write::write_pattern(&writer, args.size, Pattern::Random, 0, &mut window, &bar)?;
    bar.finish_and_clear();
    writer.sync_data()?;
    drop(window);

    // 2. Read it back with the best path available.
    let resident = crate::page_cache::residency_of(scratch.file(), 0, args.size);
    let reader = kvik_remote::Source::Local(scratch.handle("r", &settings)?);
    let mut buffer =
        crate::window::WindowBuffer::new(&memory, args.size.min(crate::window::DEFAULT_WINDOW))?;
    buffer.prepare_source(&reader)?;
    let bar = crate::progress::bar(args.size, "reading", args.json);
    let mut hasher = crc32fast::Hasher::new();
    let read =
        crate::window::read_windows(&reader, 0, args.size, &mut buffer, &bar, |window, n, _| {
            crate::checksum::crc_update(&mut hasher, window.host_bytes(n)?);
            Ok(())
        })?;
    bar.finish_and_clear();
    let crc = hasher.finalize();
    let verified = crc == written.crc32;
    if args.keep {
        scratch.commit(&writer, Durability::Atomic)?;
    }

    let output = Output {
        file: &path,
        kept: args.keep,
        memory,
        settings,
        write: Phase::new(args.size, written.seconds, written.report),
        page_cache_resident_before_read: resident,
        read: Phase::new(read.bytes, read.seconds, read.report),
        checksum_crc32: crate::checksum::crc_hex(crc),
        verified,
    };
    let text = if args.json {
        report::json(&output)?
    } else {
        render(&output)
    };
    if args.keep {
        report::print_after_commit(Ok(text), &path);
    } else {
        report::print(&text)?;
    }
    if !verified {
        return Err(CliError::Failed(format!(
            "{}: the bytes read back (CRC-32 {}) differ from those written (CRC-32 {})",
            crate::output::escaped(&path),
            crate::checksum::crc_hex(crc),
            crate::checksum::crc_hex(written.crc32)
        )));
    }
    Ok(())
}

fn render(o: &Output<'_>) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  wrote   {} in {:.3} s: {} ({})",
        crate::output::escaped(&o.file),
        o.write.seconds,
        report::rate(o.write.bytes, o.write.seconds),
        o.write.report.kvik.direct_io.status
    );
    let _ = writeln!(
        out,
        "  read    {} into {} in {:.3} s: {}",
        Size(o.read.bytes),
        crate::args::memory_name(o.memory.kind),
        o.read.seconds,
        report::rate(o.read.bytes, o.read.seconds)
    );
    let _ = writeln!(
        out,
        "  cached  {} of the file was in the page cache before the read{}",
        report::percent(o.page_cache_resident_before_read),
        match o.page_cache_resident_before_read {
            Some(share) if share < 0.5 => " (so the read came from storage)",
            Some(_) => " (so the read ran at memory speed)",
            None => "",
        }
    );
    let _ = writeln!(
        out,
        "  check   CRC-32 {} {}",
        o.checksum_crc32,
        if o.verified {
            "matches the bytes written"
        } else {
            "DIFFERS from the bytes written"
        }
    );
    let _ = writeln!(
        out,
        "  memory  {}: {}",
        crate::args::memory_name(o.memory.kind),
        o.memory.reason
    );
    let _ = writeln!(out, "\npath report (read)\n{}", o.read.report);
    let _ = writeln!(
        out,
        "{}",
        if o.kept {
            format!("kept {}", crate::output::escaped(&o.file))
        } else {
            "removed the demo file (--keep keeps it)".to_string()
        }
    );
    out
}

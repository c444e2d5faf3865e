//! `kvik read FILE`: read through the stack; report bytes, time,
//! throughput, the path report and (with `--checksum`) the CRC-32.

use std::path::PathBuf;

use kvik_policy::{FileHandle, Size};

use crate::CliError;
use crate::report;
use crate::source::Source;
use crate::transfer::{self, IoArgs, parse_positive_size, parse_size_arg};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to read.
    pub file: PathBuf,
    /// Where to start, in bytes (or 4KiB, 1GiB, …).
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_size_arg)]
    pub offset: u64,
    /// How much to read (default: to the end of the file).
    #[arg(long, value_name = "N", value_parser = parse_positive_size)]
    pub size: Option<u64>,
    /// Read at most this much at a time into one reused buffer.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_positive_size)]
    pub buffer: u64,
    #[command(flatten)]
    pub io: IoArgs,
}

#[derive(Debug, serde::Serialize)]
struct Output<'a> {
    #[serde(serialize_with = "kvik_policy::path_serde::serialize")]
    file: &'a std::path::Path,
    offset: u64,
    bytes: u64,
    seconds: f64,
    bytes_per_second: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    checksum_crc32: Option<String>,
    /// Share of the range in the page cache before the read (0–1).
    page_cache_resident_before: Option<f64>,
    buffer_bytes: u64,
    memory: transfer::MemoryChoice,
    settings: kvik_policy::Settings,
    report: kvik_policy::PathReport,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let settings = args.io.settings()?;
    let source = Source::open(&args.file, "FILE")?;
    let Some(file_len) = source.len.filter(|_| source.positional()) else {
        return Err(CliError::Usage(format!(
            "FILE {} is {}: it has no size to read at offsets through the stack (kvik copy \
             FILE DST can save it, in order)",
            crate::output::escaped(&args.file),
            source.kind.described()
        )));
    };
    let size = range(file_len, args.offset, args.size, &args.file)?;
    let memory = transfer::choose_memory(args.io.host, args.io.device)?;
    let opened = source.file()?;
    let resident = transfer::page_cache_residency_of(&opened, args.offset, size);
    let file = FileHandle::from_file(opened, &args.file, "r", &settings)
        .map_err(transfer::policy_error)?;

    let mut buffer = transfer::WindowBuffer::new(&memory, size.min(args.buffer))?;
    buffer.prepare(&file)?;
    let bar = transfer::progress(size, "read", args.io.json);
    let mut hasher = args.io.checksum.then(crc32fast::Hasher::new);
    let result = transfer::read_windows(
        &file,
        args.offset,
        size,
        &mut buffer,
        &bar,
        |window, n, _| {
            if let Some(h) = hasher.as_mut() {
                transfer::crc_update(h, window.host_bytes(n)?);
            }
            Ok(())
        },
    )?;
    bar.finish_and_clear();
    let checksum = hasher.map(|h| transfer::crc_hex(h.finalize()));

    let output = Output {
        file: &args.file,
        offset: args.offset,
        bytes: result.bytes,
        seconds: result.seconds,
        bytes_per_second: result.bytes as f64 / result.seconds.max(f64::MIN_POSITIVE),
        checksum_crc32: checksum,
        page_cache_resident_before: resident,
        buffer_bytes: buffer.len() as u64,
        memory,
        settings,
        report: result.report,
    };
    report::print(&if args.io.json {
        report::json(&output)?
    } else {
        render(&output)
    })
}

fn render(output: &Output<'_>) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "read {} from {} at offset {} into {}",
        Size(output.bytes),
        crate::output::escaped(&output.file),
        output.offset,
        transfer::memory_name(output.memory.kind),
    );
    let _ = writeln!(
        text,
        "  {} bytes in {:.4} s: {}",
        output.bytes,
        output.seconds,
        transfer::rate(output.bytes, output.seconds)
    );
    if let Some(crc) = &output.checksum_crc32 {
        let _ = writeln!(text, "  CRC-32       {crc}");
    }
    let _ = writeln!(
        text,
        "  page cache   {} of the range was cached before the read",
        transfer::percent(output.page_cache_resident_before)
    );
    let _ = writeln!(
        text,
        "  buffer       {} (reused for each window, faulted in before timing)",
        Size(output.buffer_bytes)
    );
    let _ = writeln!(
        text,
        "  memory       {}: {}",
        transfer::memory_name(output.memory.kind),
        output.memory.reason
    );
    let _ = writeln!(text, "\npath report\n{}", output.report);
    text
}

/// The number of bytes to read, or why the range is bad.
fn range(
    file_len: u64,
    offset: u64,
    size: Option<u64>,
    path: &std::path::Path,
) -> Result<u64, CliError> {
    let usage = |m: String| Err(CliError::Usage(m));
    if offset > file_len {
        return usage(format!(
            "--offset {offset} is beyond the end of {} ({file_len} bytes)",
            crate::output::escaped(&path)
        ));
    }
    match size {
        Some(size) if offset.checked_add(size).is_none_or(|end| end > file_len) => usage(format!(
            "--offset {offset} + --size {size} ends beyond the end of {} ({file_len} bytes)",
            crate::output::escaped(&path)
        )),
        Some(size) => Ok(size),
        // To the end, which may be where it starts: an empty file reads as
        // 0 bytes, as `copy` copies it.
        None => Ok(file_len - offset),
    }
}

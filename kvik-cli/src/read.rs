//! `kvik read FILE|URL`: read through the stack (a local file) or through
//! kvik-remote (an object on S3 or an HTTP(S) server); report bytes, time,
//! throughput, the path report and (with `--checksum`) the CRC-32.

use kvik_policy::{FileHandle, Size};
use kvik_remote::{Source, SourceReport};

use crate::CliError;
use crate::args::{IoArgs, Location, MemoryChoice, memory_name};
use crate::report;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to read, or a remote object's URL: s3://bucket/key,
    /// http(s)://…, an S3 presigned URL.
    #[arg(value_name = "FILE|URL")]
    pub file: Location,
    /// Where to start, in bytes (or 4KiB, 1GiB, …).
    #[arg(long, value_name = "N", default_value = "0", value_parser = crate::args::size)]
    pub offset: u64,
    /// How much to read (default: to the end of the file).
    #[arg(long, value_name = "N", value_parser = crate::args::positive_size)]
    pub size: Option<u64>,
    /// Read at most this much at a time into one reused buffer.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = crate::args::positive_size)]
    pub buffer: u64,
    #[command(flatten)]
    pub io: IoArgs,
}

#[derive(Debug, serde::Serialize)]
struct Output<'a> {
    file: &'a Location,
    offset: u64,
    bytes: u64,
    seconds: f64,
    bytes_per_second: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    checksum_crc32: Option<String>,
    /// Share of the range in the page cache before the read (0–1); `null`
    /// for a remote object.
    page_cache_resident_before: Option<f64>,
    buffer_bytes: u64,
    memory: MemoryChoice,
    settings: kvik_policy::Settings,
    /// kvik-policy's path report for a file; kvik-remote's report (backend
    /// `remote`, every ranged GET and retry) for a URL.
    report: SourceReport,
}

/// What is read, opened: the bytes to read (the range checked against its
/// size), how much of the range was cached, the memory it is read into.
struct Opened {
    source: Source,
    size: u64,
    resident: Option<f64>,
    memory: MemoryChoice,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let settings = args.io.settings()?;
    let Opened {
        source,
        size,
        resident,
        memory,
    } = match &args.file {
        Location::Path(path) => open_local(args, path, &settings)?,
        Location::Url(url) => open_url(args, url, &settings)?,
    };

    let mut buffer = crate::window::WindowBuffer::new(&memory, size.min(args.buffer))?;
    buffer.prepare_source(&source)?;
    let bar = crate::progress::bar(size, "read", args.io.json);
    let mut hasher = args.io.checksum.then(crc32fast::Hasher::new);
    let result = crate::window::read_windows(
        &source,
        args.offset,
        size,
        &mut buffer,
        &bar,
        |window, n, _| {
            if let Some(h) = hasher.as_mut() {
                crate::checksum::crc_update(h, window.host_bytes(n)?);
            }
            Ok(())
        },
    )?;
    bar.finish_and_clear();
    let checksum = hasher.map(|h| crate::checksum::crc_hex(h.finalize()));

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

/// A local file: one with a size, read at offsets through the stack.
fn open_local(
    args: &Args,
    path: &std::path::Path,
    settings: &kvik_policy::Settings,
) -> Result<Opened, CliError> {
    let local = crate::source::Source::open(path, "FILE")?;
    let Some(len) = local.len.filter(|_| local.positional()) else {
        return Err(CliError::Usage(format!(
            "FILE {} is {}: it has no size to read at offsets through the stack (kvik copy \
             FILE DST can save it, in order)",
            crate::output::escaped(path),
            local.kind.described()
        )));
    };
    let size = range(len, args.offset, args.size, &args.file)?;
    let memory = args.io.memory.choose()?;
    let opened = local.file()?;
    let resident = crate::page_cache::residency_of(&opened, args.offset, size);
    let file = FileHandle::from_file(opened, path, "r", settings)?;
    Ok(Opened {
        source: Source::Local(file),
        size,
        resident,
        memory,
    })
}

/// A remote object: its size from the server, read into host memory
/// unless `--device N` asks for a GPU.
fn open_url(args: &Args, url: &str, settings: &kvik_policy::Settings) -> Result<Opened, CliError> {
    if args.io.compat.is_some() {
        return Err(CliError::Usage(format!(
            "--compat chooses between cuFile and POSIX for a local file; {} is read over HTTP",
            args.file.shown()
        )));
    }
    let source = crate::source::open_remote(url, settings)?;
    let size = range(source.nbytes()?, args.offset, args.size, &args.file)?;
    Ok(Opened {
        source,
        size,
        resident: None,
        memory: args.io.memory.choose()?,
    })
}

fn render(output: &Output<'_>) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "read {} from {} at offset {} into {}",
        Size(output.bytes),
        output.file.shown(),
        output.offset,
        memory_name(output.memory.kind),
    );
    let _ = writeln!(
        text,
        "  {} bytes in {:.4} s: {}",
        output.bytes,
        output.seconds,
        report::rate(output.bytes, output.seconds)
    );
    if let Some(crc) = &output.checksum_crc32 {
        let _ = writeln!(text, "  CRC-32       {crc}");
    }
    if let Location::Path(_) = output.file {
        let _ = writeln!(
            text,
            "  page cache   {} of the range was cached before the read",
            report::percent(output.page_cache_resident_before)
        );
    }
    let _ = writeln!(
        text,
        "  buffer       {} (reused for each window, faulted in before timing)",
        Size(output.buffer_bytes)
    );
    let _ = writeln!(
        text,
        "  memory       {}: {}",
        memory_name(output.memory.kind),
        output.memory.reason
    );
    let _ = writeln!(text, "\npath report\n{}", output.report);
    text
}

/// The number of bytes to read, or why the range is bad.
fn range(len: u64, offset: u64, size: Option<u64>, file: &Location) -> Result<u64, CliError> {
    let usage = |m: String| Err(CliError::Usage(m));
    if offset > len {
        return usage(format!(
            "--offset {offset} is beyond the end of {} ({len} bytes)",
            file.shown()
        ));
    }
    match size {
        Some(size) if offset.checked_add(size).is_none_or(|end| end > len) => usage(format!(
            "--offset {offset} + --size {size} ends beyond the end of {} ({len} bytes)",
            file.shown()
        )),
        Some(size) => Ok(size),
        // To the end, which may be where it starts: an empty file reads as
        // 0 bytes, as `copy` copies it.
        None => Ok(len - offset),
    }
}

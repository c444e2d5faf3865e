//! `kvik copy SRC DST`: read SRC through the stack into memory, write it to
//! DST through the stack. DST appears only when complete. A source without
//! a size (a pipe, a FIFO with a writer, a proc file, or with `--size` a
//! character device) is read in order, window by window, to its end.

use std::path::{Path, PathBuf};

use kvik_policy::{FileHandle, Size};

use crate::CliError;
use crate::output_file::{self, Durability, OutputFile};
use crate::report;
use crate::source::{Source, SourceKind};
use crate::transfer::{self, IoArgs, parse_positive_size};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to copy (a pipe, FIFO or proc file is read to its end).
    pub src: PathBuf,
    /// Where to: a file (replaced if it exists), or a directory to copy into.
    pub dst: PathBuf,
    /// Copy only the first N bytes; required for a character device such
    /// as /dev/zero, whose end may never come.
    #[arg(long, value_name = "N", value_parser = parse_positive_size)]
    pub size: Option<u64>,
    /// Copy at most this much at a time through one reused buffer (a
    /// stream: at most 64 MiB).
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_positive_size)]
    pub buffer: u64,
    /// Return only when DST is durable: fsync it and its directory
    /// (without it, the data is synced and DST put in place, but a crash
    /// soon after may still find the old DST).
    #[arg(long)]
    pub fsync: bool,
    #[command(flatten)]
    pub io: IoArgs,
}

/// The largest window a stream is read into (its length is unknown, so
/// the buffer is not sized to it).
const STREAM_WINDOW: u64 = 64 << 20;

#[derive(Debug, serde::Serialize)]
struct Leg {
    seconds: f64,
    bytes_per_second: f64,
    /// No report for a stream: it is read in order, not through the stack.
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<kvik_policy::PathReport>,
}

#[derive(Debug, serde::Serialize)]
struct Output<'a> {
    #[serde(serialize_with = "kvik_policy::path_serde::serialize")]
    source: &'a Path,
    source_kind: SourceKind,
    #[serde(serialize_with = "kvik_policy::path_serde::serialize")]
    destination: &'a Path,
    bytes: u64,
    /// Reads plus writes.
    seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    checksum_crc32: Option<String>,
    memory: transfer::MemoryChoice,
    settings: kvik_policy::Settings,
    committed: output_file::Committed,
    read: Leg,
    write: Leg,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let settings = args.io.settings()?;
    let mut source = Source::open(&args.src, "SRC")?;
    // How much to copy, decided before DST is touched.
    let size = match (source.len, args.size) {
        (Some(len), Some(n)) if n > len => {
            return Err(CliError::Usage(format!(
                "--size {n}: SRC {} has only {len} bytes",
                crate::output::escaped(&args.src)
            )));
        }
        (Some(len), limit) => Some(limit.unwrap_or(len)),
        (None, Some(n)) => Some(n),
        (None, None) if source.kind == SourceKind::CharacterDevice => {
            return Err(CliError::Usage(format!(
                "SRC {} is a character device, which may never end: say how much to copy \
                 with --size",
                crate::output::escaped(&args.src)
            )));
        }
        (None, None) => None,
    };
    let dst = if args.dst.is_dir() {
        let name = args.src.file_name().ok_or_else(|| {
            CliError::Usage(format!(
                "SRC {} has no file name",
                crate::output::escaped(&args.src)
            ))
        })?;
        args.dst.join(name)
    } else {
        args.dst.clone()
    };
    let memory = transfer::choose_memory(args.io.host, args.io.device)?;
    let mut output = OutputFile::create(&dst, size, Some(source.identity()))?;
    let out_file = output.handle("w", &settings)?;
    let copied = match (source.positional(), size) {
        (true, Some(size)) => source
            .file()
            .and_then(|file| {
                FileHandle::from_file(file, &args.src, "r", &settings)
                    .map_err(transfer::policy_error)
            })
            .and_then(|src| copy_positional(&src, &out_file, size, args, &memory))
            .and_then(|copied| source.unchanged().map(|()| copied)),
        _ => copy_stream(&mut source, &out_file, size, args, &memory),
    }
    .map_err(|e| output.failed(e))?;
    let committed = output
        .commit(&out_file, Durability::from_flag(args.fsync))
        .map_err(|e| output.failed(e))?;

    // DST is in place: from here on, nothing fails the command.
    let bytes = copied.bytes;
    let leg = |seconds: f64, report| Leg {
        seconds,
        bytes_per_second: bytes as f64 / seconds.max(f64::MIN_POSITIVE),
        report,
    };
    let out = Output {
        source: &args.src,
        source_kind: source.kind,
        destination: &dst,
        bytes,
        seconds: copied.read_seconds + copied.write_seconds,
        checksum_crc32: copied.crc32.map(transfer::crc_hex),
        memory,
        settings,
        committed,
        read: leg(copied.read_seconds, copied.read_report),
        write: leg(copied.write_seconds, Some(copied.write_report)),
    };
    let text = if args.io.json {
        report::json(&out)
    } else {
        Ok(render(&out))
    };
    report::print_after_commit(text, &dst);
    Ok(())
}

/// What a copy moved, before DST is put in place.
struct Copied {
    bytes: u64,
    read_seconds: f64,
    write_seconds: f64,
    /// `None` for a stream: it is not read through the stack.
    read_report: Option<kvik_policy::PathReport>,
    write_report: kvik_policy::PathReport,
    crc32: Option<u32>,
}

/// Writes windows to DST through the stack, in order, and keeps the
/// write leg's time, report and checksum.
struct Writer<'a> {
    file: &'a FileHandle,
    seconds: f64,
    report: Option<kvik_policy::PathReport>,
    hasher: Option<crc32fast::Hasher>,
}

impl Writer<'_> {
    fn write(
        &mut self,
        window: &mut transfer::WindowBuffer,
        n: usize,
        at: u64,
    ) -> Result<(), CliError> {
        if let Some(h) = self.hasher.as_mut() {
            transfer::crc_update(h, window.host_bytes(n)?);
        }
        let start = std::time::Instant::now();
        let t = window
            .write(self.file, n, at)
            .map_err(transfer::policy_error)?;
        self.seconds += start.elapsed().as_secs_f64();
        match &mut self.report {
            None => self.report = Some(t.report),
            Some(r) => r.absorb(t.report),
        }
        Ok(())
    }

    /// The write leg's report (an empty write still says how it was routed).
    fn finish(self) -> Result<(f64, kvik_policy::PathReport, Option<u32>), CliError> {
        let report = match self.report {
            Some(r) => r,
            None => {
                self.file
                    .write_with_report(&[0u8; 0][..], 0)
                    .map_err(transfer::policy_error)?
                    .report
            }
        };
        Ok((self.seconds, report, self.hasher.map(|h| h.finalize())))
    }
}

/// Copy `size` bytes of a file read through the stack.
fn copy_positional(
    src: &FileHandle,
    dst: &FileHandle,
    size: u64,
    args: &Args,
    memory: &transfer::MemoryChoice,
) -> Result<Copied, CliError> {
    let mut writer = Writer {
        file: dst,
        seconds: 0.0,
        report: None,
        hasher: args.io.checksum.then(crc32fast::Hasher::new),
    };
    let (read_seconds, read_report) = if size == 0 {
        // Nothing to read; still report how an empty request was routed.
        let t = src
            .read_with_report(&mut [0u8; 0][..], 0)
            .map_err(transfer::policy_error)?;
        (0.0, t.report)
    } else {
        let mut buffer = transfer::WindowBuffer::new(memory, size.min(args.buffer))?;
        buffer.prepare(src)?;
        buffer.prepare(dst)?;
        let bar = transfer::progress(size, "copy", args.io.json);
        let read = transfer::read_windows(src, 0, size, &mut buffer, &bar, |window, n, at| {
            writer.write(window, n, at)
        })?;
        bar.finish_and_clear();
        (read.seconds, read.report)
    };
    let (write_seconds, write_report, crc32) = writer.finish()?;
    Ok(Copied {
        bytes: size,
        read_seconds,
        write_seconds,
        read_report: Some(read_report),
        write_report,
        crc32,
    })
}

/// Copy a stream, in order, to its end or to `limit` bytes (then it must
/// not end sooner).
fn copy_stream(
    source: &mut Source,
    dst: &FileHandle,
    limit: Option<u64>,
    args: &Args,
    memory: &transfer::MemoryChoice,
) -> Result<Copied, CliError> {
    source.start_stream()?;
    let window = args
        .buffer
        .min(STREAM_WINDOW)
        .min(limit.unwrap_or(u64::MAX));
    let mut buffer = transfer::WindowBuffer::new(memory, window)?;
    buffer.prepare(dst)?;
    let bar = transfer::progress(limit.unwrap_or(0), "copy", args.io.json);
    let mut writer = Writer {
        file: dst,
        seconds: 0.0,
        report: None,
        hasher: args.io.checksum.then(crc32fast::Hasher::new),
    };
    let mut read_seconds = 0.0;
    let mut done = 0u64;
    loop {
        let want = limit.map_or(window, |l| (l - done).min(window)) as usize;
        if want == 0 {
            break;
        }
        let start = std::time::Instant::now();
        let n = buffer.fill_from(want, source)?;
        read_seconds += start.elapsed().as_secs_f64();
        if n > 0 {
            writer.write(&mut buffer, n, done)?;
            done += n as u64;
            bar.inc(n as u64);
        }
        if n < want {
            break;
        }
    }
    bar.finish_and_clear();
    if let Some(limit) = limit
        && done < limit
    {
        return Err(CliError::Failed(format!(
            "SRC {} ({}) ended after {done} bytes, before --size {limit}",
            crate::output::escaped(&source.path),
            source.kind.described()
        )));
    }
    let (write_seconds, write_report, crc32) = writer.finish()?;
    Ok(Copied {
        bytes: done,
        read_seconds,
        write_seconds,
        read_report: None,
        write_report,
        crc32,
    })
}

fn render(out: &Output<'_>) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "copied {} from {} to {}",
        Size(out.bytes),
        crate::output::escaped(&out.source),
        crate::output::escaped(&out.destination)
    );
    let how = match out.read.report {
        Some(_) => String::new(),
        None => format!(
            " (in order, to its end: SRC is {}, not read through the stack)",
            out.source_kind.described()
        ),
    };
    let _ = writeln!(
        text,
        "  read         {:.4} s: {}{how}",
        out.read.seconds,
        transfer::rate(out.bytes, out.read.seconds)
    );
    let _ = writeln!(
        text,
        "  write        {:.4} s: {}",
        out.write.seconds,
        transfer::rate(out.bytes, out.write.seconds)
    );
    transfer::checksum_and_memory(&mut text, out.checksum_crc32.as_ref(), &out.memory);
    text.push_str(&output_file::summary(&out.committed));
    text.push('\n');
    if let Some(report) = &out.read.report {
        let _ = writeln!(text, "path report (read)\n{report}");
    }
    if let Some(report) = &out.write.report {
        let _ = writeln!(text, "path report (write)\n{report}");
    }
    text
}

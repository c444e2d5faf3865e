//! `kvik copy SRC DST`: read SRC through the stack into memory, write it to
//! DST through the stack. DST appears only when complete. A source without
//! a size (a pipe, a FIFO with a writer, a proc file, or with `--size` a
//! character device) is read in order, window by window, to its end. SRC
//! may be a URL (`s3://…`, `http(s)://…`): the object is read through
//! kvik-remote; DST is always local, with every guarantee above.

use std::path::{Path, PathBuf};

use kvik_policy::{FileHandle, Size};
use kvik_remote::SourceReport;

use crate::CliError;
use crate::args::{IoArgs, Location};
use crate::output_file::{self, Durability, OutputFile};
use crate::report;
use crate::source::{Source, SourceKind};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to copy (a pipe, FIFO or proc file is read to its end), or a
    /// remote object's URL: s3://bucket/key, http(s)://…, an S3 presigned URL.
    #[arg(value_name = "SRC")]
    pub src: Location,
    /// Where to: a file (replaced if it exists), or a directory to copy into.
    pub dst: PathBuf,
    /// Copy only the first N bytes; required for a character device such
    /// as /dev/zero, whose end may never come.
    #[arg(long, value_name = "N", value_parser = crate::args::positive_size)]
    pub size: Option<u64>,
    /// Copy at most this much at a time through one reused buffer (a
    /// stream: at most 64 MiB).
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = crate::args::positive_size)]
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
struct Leg<Report> {
    seconds: f64,
    bytes_per_second: f64,
    /// No report for a stream: it is read in order, not through the stack.
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<Report>,
}

impl<Report> Leg<Report> {
    fn new(bytes: u64, seconds: f64, report: Option<Report>) -> Self {
        Leg {
            seconds,
            bytes_per_second: bytes as f64 / seconds.max(f64::MIN_POSITIVE),
            report,
        }
    }
}

#[derive(Debug, serde::Serialize)]
struct Output<'a> {
    source: &'a Location,
    source_kind: SourceKind,
    #[serde(serialize_with = "kvik_policy::path_serde::serialize")]
    destination: &'a Path,
    bytes: u64,
    /// Reads plus writes.
    seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    checksum_crc32: Option<String>,
    memory: crate::args::MemoryChoice,
    settings: kvik_policy::Settings,
    committed: output_file::Committed,
    read: Leg<SourceReport>,
    write: Leg<kvik_policy::PathReport>,
}

/// What SRC is, opened.
enum Src {
    Local(Source),
    Remote(kvik_remote::Source),
}

pub fn run(args: &Args) -> Result<(), CliError> {
    crate::args::local_destination("DST", &args.dst)?;
    let settings = args.io.settings()?;
    let mut src = match &args.src {
        Location::Path(path) => Src::Local(Source::open(path, "SRC")?),
        Location::Url(url) => Src::Remote(crate::source::open_remote(url, &settings)?),
    };
    let (len, kind) = match &src {
        Src::Local(local) => (local.len, local.kind),
        Src::Remote(remote) => (Some(remote.nbytes()?), SourceKind::Remote),
    };
    // How much to copy, decided before DST is touched.
    let size = match (len, args.size) {
        (Some(len), Some(n)) if n > len => {
            return Err(CliError::Usage(format!(
                "--size {n}: SRC {} has only {len} bytes",
                args.src.shown()
            )));
        }
        (Some(len), limit) => Some(limit.unwrap_or(len)),
        (None, Some(n)) => Some(n),
        (None, None) if kind == SourceKind::CharacterDevice => {
            return Err(CliError::Usage(format!(
                "SRC {} is a character device, which may never end: say how much to copy \
                 with --size",
                args.src.shown()
            )));
        }
        (None, None) => None,
    };
    let dst = if args.dst.is_dir() {
        let name = args
            .src
            .file_name()
            .ok_or_else(|| CliError::Usage(format!("SRC {} has no file name", args.src.shown())))?;
        args.dst.join(name)
    } else {
        args.dst.clone()
    };
    let (memory, identity) = match &src {
        Src::Local(local) => (args.io.memory.choose()?, Some(local.identity())),
        Src::Remote(_) => (args.io.memory.choose()?, None),
    };
    if matches!(memory.kind, kvik_policy::MemoryKind::Device { .. })
        && settings.compat_mode() != kvik_policy::CompatMode::On
    {
        crate::output_file::name_temporaries_for_cufile();
    }
    let mut output = OutputFile::create(&dst, size, identity)?;
    let out_file = output.handle("w", &settings)?;
    let copied = match (&mut src, size) {
        (Src::Local(local), Some(size)) if local.positional() => local
            .file()
            .and_then(|file| Ok(FileHandle::from_file(file, &local.path, "r", &settings)?))
            .and_then(|file| {
                let source = kvik_remote::Source::Local(file);
                copy_positional(&source, &out_file, size, args, &memory)
            })
            .and_then(|copied| local.unchanged().map(|()| copied)),
        (Src::Local(local), size) => copy_stream(local, &out_file, size, args, &memory),
        (Src::Remote(remote), Some(size)) => {
            copy_positional(remote, &out_file, size, args, &memory)
        }
        (Src::Remote(_), None) => unreachable!("an object's size is known once it is open"),
    }
    .map_err(|e| output.failed(e))?;
    let committed = output
        .commit(&out_file, Durability::from_flag(args.fsync))
        .map_err(|e| output.failed(e))?;

    // DST is in place: from here on, nothing fails the command.
    let bytes = copied.bytes;
    let out = Output {
        source: &args.src,
        source_kind: kind,
        destination: &dst,
        bytes,
        seconds: copied.read_seconds + copied.write_seconds,
        checksum_crc32: copied.crc32.map(crate::checksum::crc_hex),
        memory,
        settings,
        committed,
        read: Leg::new(bytes, copied.read_seconds, copied.read_report),
        write: Leg::new(bytes, copied.write_seconds, Some(copied.write_report)),
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
    read_report: Option<SourceReport>,
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
        window: &mut crate::window::WindowBuffer,
        n: usize,
        at: u64,
    ) -> Result<(), CliError> {
        if let Some(h) = self.hasher.as_mut() {
            crate::checksum::crc_update(h, window.host_bytes(n)?);
        }
        let start = std::time::Instant::now();
        let t = window.write(self.file, n, at)?;
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
            None => self.file.write_with_report(&[0u8; 0][..], 0)?.report,
        };
        Ok((self.seconds, report, self.hasher.map(|h| h.finalize())))
    }
}

/// Copy `size` bytes of a file read through the stack, or of a remote
/// object.
fn copy_positional(
    src: &kvik_remote::Source,
    dst: &FileHandle,
    size: u64,
    args: &Args,
    memory: &crate::args::MemoryChoice,
) -> Result<Copied, CliError> {
    let mut writer = Writer {
        file: dst,
        seconds: 0.0,
        report: None,
        hasher: args.io.checksum.then(crc32fast::Hasher::new),
    };
    let (read_seconds, read_report) = if size == 0 {
        // Nothing to read; still report how an empty request was routed.
        let t = src.read_with_report(&mut [0u8; 0][..], 0)?;
        (0.0, t.report)
    } else {
        let mut buffer = crate::window::WindowBuffer::new(memory, size.min(args.buffer))?;
        buffer.prepare_source(src)?;
        buffer.prepare(dst)?;
        let bar = crate::progress::bar(size, "copy", args.io.json);
        let read =
            crate::window::read_windows(src, 0, size, &mut buffer, &bar, |window, n, at| {
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
    memory: &crate::args::MemoryChoice,
) -> Result<Copied, CliError> {
    source.start_stream()?;
    let window = args
        .buffer
        .min(STREAM_WINDOW)
        .min(limit.unwrap_or(u64::MAX));
    let mut buffer = crate::window::WindowBuffer::new(memory, window)?;
    buffer.prepare(dst)?;
    let bar = crate::progress::bar(limit.unwrap_or(0), "copy", args.io.json);
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
        out.source.shown(),
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
        report::rate(out.bytes, out.read.seconds)
    );
    let _ = writeln!(
        text,
        "  write        {:.4} s: {}",
        out.write.seconds,
        report::rate(out.bytes, out.write.seconds)
    );
    report::checksum_and_memory(&mut text, out.checksum_crc32.as_ref(), &out.memory);
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

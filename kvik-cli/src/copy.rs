//! `kvik copy SRC DST`: read SRC through the stack into memory, write it to
//! DST through the stack. DST appears only when complete.

use std::path::{Path, PathBuf};

use kvik_policy::{FileHandle, Size};

use crate::CliError;
use crate::error::print_json;
use crate::transfer::{self, AtomicOutput, Durability, IoArgs, parse_positive_size};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to copy.
    pub src: PathBuf,
    /// Where to: a file (replaced if it exists), or a directory to copy into.
    pub dst: PathBuf,
    /// Copy at most this much at a time through one reused buffer.
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = parse_positive_size)]
    pub buffer: u64,
    /// Return only when DST is durable: fsync it and its directory
    /// (without it, the data is synced and DST renamed into place, but a
    /// crash soon after may still find the old DST).
    #[arg(long)]
    pub fsync: bool,
    #[command(flatten)]
    pub io: IoArgs,
}

#[derive(Debug, serde::Serialize)]
struct Leg {
    seconds: f64,
    bytes_per_second: f64,
    report: kvik_policy::PathReport,
}

#[derive(Debug, serde::Serialize)]
struct Output<'a> {
    source: &'a Path,
    destination: &'a Path,
    bytes: u64,
    /// Reads plus writes.
    seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    checksum_crc32: Option<String>,
    memory: transfer::MemoryChoice,
    settings: kvik_policy::Settings,
    committed: transfer::Committed,
    read: Leg,
    write: Leg,
}

pub fn run(args: &Args) -> Result<(), CliError> {
    let settings = args.io.settings()?;
    let size = transfer::existing_file(&args.src, "SRC")?;
    let dst = if args.dst.is_dir() {
        let name = args.src.file_name().ok_or_else(|| {
            CliError::Usage(format!("SRC {} has no file name", args.src.display()))
        })?;
        args.dst.join(name)
    } else {
        args.dst.clone()
    };
    if same_file(&args.src, &dst) {
        return Err(CliError::Usage(format!(
            "SRC {} and DST {} are the same file",
            args.src.display(),
            dst.display()
        )));
    }
    let memory = transfer::choose_memory(args.io.host, args.io.device)?;
    let src = FileHandle::open_with(&args.src, "r", &settings).map_err(transfer::policy_error)?;
    let mut output = AtomicOutput::new(&dst, size)?;
    let out_file = FileHandle::open_with(output.temporary(), "w", &settings)
        .map_err(|e| output.failed(transfer::policy_error(e)))?;

    let mut buffer = transfer::WindowBuffer::new(&memory, size.min(args.buffer))
        .map_err(|e| output.failed(e))?;
    buffer.prepare(&src).map_err(|e| output.failed(e))?;
    buffer.prepare(&out_file).map_err(|e| output.failed(e))?;
    let bar = transfer::progress(size, "copy", args.io.json);
    let mut hasher = args.io.checksum.then(crc32fast::Hasher::new);
    let mut write_seconds = 0.0;
    let mut write_report: Option<kvik_policy::PathReport> = None;
    let read = if size == 0 {
        // Nothing to read; still report how an empty request was routed.
        let t = src
            .read_with_report(&mut [0u8; 0][..], 0)
            .map_err(transfer::policy_error)?;
        let w = out_file
            .write_with_report(&[0u8; 0][..], 0)
            .map_err(transfer::policy_error)?;
        write_report = Some(w.report);
        transfer::ReadResult {
            bytes: 0,
            seconds: 0.0,
            report: t.report,
        }
    } else {
        transfer::read_windows(&src, 0, size, &mut buffer, &bar, |window, n, at| {
            if let Some(h) = hasher.as_mut() {
                transfer::crc_update(h, window.host_bytes(n)?);
            }
            let start = std::time::Instant::now();
            let t = window
                .write(&out_file, n, at)
                .map_err(transfer::policy_error)?;
            write_seconds += start.elapsed().as_secs_f64();
            match &mut write_report {
                None => write_report = Some(t.report),
                Some(r) => r.absorb(t.report),
            }
            Ok(())
        })
        .map_err(|e| output.failed(e))?
    };
    bar.finish_and_clear();
    let committed = output
        .commit(&out_file, Durability::from_flag(args.fsync))
        .map_err(|e| output.failed(e))?;

    let mut write_report = write_report.expect("written");
    write_report.path = dst.clone();
    let leg = |seconds: f64, report| Leg {
        seconds,
        bytes_per_second: size as f64 / seconds.max(f64::MIN_POSITIVE),
        report,
    };
    let out = Output {
        source: &args.src,
        destination: &dst,
        bytes: size,
        seconds: read.seconds + write_seconds,
        checksum_crc32: hasher.map(|h| transfer::crc_hex(h.finalize())),
        memory,
        settings,
        committed,
        read: leg(read.seconds, read.report),
        write: leg(write_seconds, write_report),
    };
    if args.io.json {
        return print_json(&out);
    }
    println!(
        "copied {} from {} to {}",
        Size(size),
        args.src.display(),
        dst.display()
    );
    println!(
        "  read         {:.4} s: {}",
        out.read.seconds,
        transfer::rate(size, out.read.seconds)
    );
    println!(
        "  write        {:.4} s: {}",
        out.write.seconds,
        transfer::rate(size, out.write.seconds)
    );
    if let Some(crc) = &out.checksum_crc32 {
        println!("  CRC-32       {crc}");
    }
    println!("  memory       host: {}", out.memory.reason);
    transfer::print_durability(&out.committed);
    println!("\npath report (read)\n{}", out.read.report);
    println!("path report (write)\n{}", out.write.report);
    Ok(())
}

/// Whether two paths name the same file (same device and inode).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

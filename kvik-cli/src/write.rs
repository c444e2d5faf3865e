//! `kvik write FILE --size N`: write a pattern through the stack; report
//! bytes, time, throughput and the path report. The file appears only when
//! complete (written under a temporary name, then renamed).

use std::path::PathBuf;
use std::time::Instant;

use kvik_policy::{FileHandle, Size};

use crate::CliError;
use crate::args::IoArgs;
use crate::output_file::{self, Durability, OutputFile};
use crate::report;

/// What to fill the file with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// Pseudo-random bytes (splitmix64 from --seed): incompressible, reproducible.
    Random,
    Zeros,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to write (replaced if it exists).
    pub file: PathBuf,
    /// How many bytes (or 4KiB, 1GiB, …).
    #[arg(long, value_name = "N", value_parser = crate::args::positive_size)]
    pub size: u64,
    #[arg(long, value_enum, default_value_t = Pattern::Random)]
    pub pattern: Pattern,
    /// Seed of the random pattern.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write at most this much at a time from one reused buffer.
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = crate::args::positive_size)]
    pub buffer: u64,
    /// Return only when the file is durable: fsync it and its directory
    /// (without it, the data is synced and the file renamed into place, but
    /// a crash soon after may still find the old file).
    #[arg(long)]
    pub fsync: bool,
    #[command(flatten)]
    pub io: IoArgs,
}

#[derive(Debug, serde::Serialize)]
struct Output<'a> {
    #[serde(serialize_with = "kvik_policy::path_serde::serialize")]
    file: &'a std::path::Path,
    bytes: u64,
    seconds: f64,
    bytes_per_second: f64,
    pattern: Pattern,
    #[serde(skip_serializing_if = "Option::is_none")]
    checksum_crc32: Option<String>,
    memory: crate::args::MemoryChoice,
    settings: kvik_policy::Settings,
    committed: output_file::Committed,
    report: kvik_policy::PathReport,
}

/// A file written through the stack.
#[derive(Debug)]
pub struct Written {
    pub seconds: f64,
    pub crc32: u32,
    pub report: kvik_policy::PathReport,
}

/// Write `size` bytes of `pattern` to `file` from `buffer`, a window at a
/// time. Only the writes are timed.
pub fn write_pattern(
    file: &FileHandle,
    size: u64,
    pattern: Pattern,
    seed: u64,
    buffer: &mut crate::window::WindowBuffer,
    bar: &indicatif::ProgressBar,
) -> Result<Written, CliError> {
    let mut hasher = crc32fast::Hasher::new();
    let mut report: Option<kvik_policy::PathReport> = None;
    let mut seconds = 0.0;
    let mut done = 0u64;
    while done < size {
        let n = (size - done).min(buffer.len() as u64) as usize;
        // Filling (and, for GPU memory, uploading) is not timed.
        buffer.fill(n, |window| {
            match pattern {
                Pattern::Random => fill_random(window, seed, done),
                Pattern::Zeros => window.fill(0),
            }
            crate::checksum::crc_update(&mut hasher, window);
        })?;
        let start = Instant::now();
        let t = buffer.write(file, n, done)?;
        seconds += start.elapsed().as_secs_f64();
        match &mut report {
            None => report = Some(t.report),
            Some(r) => r.absorb(t.report),
        }
        done += n as u64;
        bar.inc(n as u64);
    }
    Ok(Written {
        seconds,
        crc32: hasher.finalize(),
        report: report.expect("size > 0"),
    })
}

/// Fill `window` (which starts `start` bytes into the file) with the
/// random pattern: every 8-byte word is splitmix64 of (seed, word index),
/// so any window of any file is reproducible on its own. Filled in
/// parallel; the pattern is not the point of the exercise.
pub fn fill_random(window: &mut [u8], seed: u64, start: u64) {
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 20;
    debug_assert_eq!(start % 8, 0, "windows start on a word");
    window
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(i, chunk)| {
            let first_word = (start + (i * CHUNK) as u64) / 8;
            for (j, word) in chunk.chunks_mut(8).enumerate() {
                let value =
                    splitmix64(seed ^ (first_word + j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                word.copy_from_slice(&value.to_le_bytes()[..word.len()]);
            }
        });
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub fn run(args: &Args) -> Result<(), CliError> {
    crate::args::local_destination("FILE", &args.file)?;
    let settings = args.io.settings()?;
    let memory = args.io.memory.choose()?;
    if matches!(memory.kind, kvik_policy::MemoryKind::Device { .. })
        && settings.compat_mode() != kvik_policy::CompatMode::On
    {
        crate::output_file::name_temporaries_for_cufile();
    }
    let mut output = OutputFile::create(&args.file, Some(args.size), None)?;
    let file = output.handle("w", &settings)?;
    // Windows are whole words so each starts the pattern on a word.
    let window = args.size.min(args.buffer.next_multiple_of(8));
    let mut buffer =
        crate::window::WindowBuffer::new(&memory, window).map_err(|e| output.failed(e))?;
    buffer.prepare(&file).map_err(|e| output.failed(e))?;
    let bar = crate::progress::bar(args.size, "write", args.io.json);
    let written = write_pattern(&file, args.size, args.pattern, args.seed, &mut buffer, &bar)
        .map_err(|e| output.failed(e))?;
    bar.finish_and_clear();
    let committed = output
        .commit(&file, Durability::from_flag(args.fsync))
        .map_err(|e| output.failed(e))?;

    // DST is in place: from here on, nothing fails the command.
    let out = Output {
        file: &args.file,
        bytes: args.size,
        seconds: written.seconds,
        bytes_per_second: args.size as f64 / written.seconds.max(f64::MIN_POSITIVE),
        pattern: args.pattern,
        checksum_crc32: args
            .io
            .checksum
            .then(|| crate::checksum::crc_hex(written.crc32)),
        memory,
        settings,
        committed,
        report: written.report,
    };
    let text = if args.io.json {
        report::json(&out)
    } else {
        Ok(render(&out))
    };
    report::print_after_commit(text, &args.file);
    Ok(())
}

fn render(out: &Output<'_>) -> String {
    use std::fmt::Write as _;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "wrote {} of {:?} to {}",
        Size(out.bytes),
        out.pattern,
        crate::output::escaped(&out.file)
    );
    let _ = writeln!(
        text,
        "  {} bytes in {:.4} s: {}",
        out.bytes,
        out.seconds,
        report::rate(out.bytes, out.seconds)
    );
    report::checksum_and_memory(&mut text, out.checksum_crc32.as_ref(), &out.memory);
    text.push_str(&output_file::summary(&out.committed));
    let _ = writeln!(text, "\npath report\n{}", out.report);
    text
}

//! Does coalescing neighbours pay? Reads a page-cached file as N entries of
//! SIZE bytes, adjacent in the file and in the destination, once as
//! sub-ranges of one buffer (neighbours merged into reads of up to
//! `task_size`) and once as separate slices of the same memory (one `pread`
//! per entry), and prints the median throughput of each. Also a random
//! (non-adjacent) batch of the same entries, where nothing can merge.
//!
//!     cargo run --release -p kvik-policy --example batch_coalesce -- FILE [SIZE] [THREADS]

use std::time::Instant;

use kvik_policy::{FileHandle, ReadInto, ReadRange, Settings};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: batch_coalesce FILE [SIZE] [THREADS]")?;
    let size: usize = args.next().map_or(Ok(4096), |s| s.parse())?;
    let threads: usize = args.next().map_or(Ok(2), |s| s.parse())?;
    let mut settings = Settings::global()?;
    settings.set_num_threads(threads)?;
    let file = FileHandle::open_with(&path, "r", &settings)?;
    let len = (file.nbytes()? as usize).min(256 << 20) / size * size;
    let n = len / size;
    let mut buf = vec![0u8; len];
    std::fs::read(&path)?; // page-cache the file
    let adjacent: Vec<ReadRange> = (0..n as u64)
        .map(|i| ReadRange {
            file_offset: i * size as u64,
            buffer_offset: i * size as u64,
            len: size as u64,
        })
        .collect();
    // A fixed shuffle of the file offsets (xorshift), destinations in order.
    let mut order: Vec<u64> = (0..n as u64).collect();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for i in (1..n).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(i, (state % (i as u64 + 1)) as usize);
    }
    let shuffled: Vec<ReadRange> = order
        .iter()
        .enumerate()
        .map(|(i, &block)| ReadRange {
            file_offset: block * size as u64,
            buffer_offset: (i * size) as u64,
            len: size as u64,
        })
        .collect();
    let reps = 7;
    let mut rates = |label: &str, run: &mut dyn FnMut(&mut [u8]) -> usize| {
        run(&mut buf);
        let mut r = Vec::new();
        for _ in 0..reps {
            let t = Instant::now();
            let reads = run(&mut buf);
            r.push((len as f64 / t.elapsed().as_secs_f64(), reads));
        }
        let reads = r[0].1;
        let gbps = median(r.into_iter().map(|x| x.0).collect()) / 1e9;
        println!(
            "{label:<44} {gbps:>6.2} GB/s  {:>8.0} kIOPS  ({reads} preads for {n} entries)",
            gbps * 1e9 / size as f64 / 1e3
        );
    };
    rates("adjacent, one buffer (coalesced)", &mut |b| {
        file.read_batch_into(&mut *b, &adjacent)
            .unwrap()
            .report
            .grouping
            .reads
    });
    rates("adjacent, separate slices (a pread each)", &mut |b| {
        let reads = b
            .chunks_mut(size)
            .enumerate()
            .map(|(i, s)| ReadInto::new((i * size) as u64, s));
        file.read_batch(reads).unwrap().report.grouping.reads
    });
    rates("shuffled, one buffer (nothing to merge)", &mut |b| {
        file.read_batch_into(&mut *b, &shuffled)
            .unwrap()
            .report
            .grouping
            .reads
    });
    println!(
        "{size}-byte entries, {threads} threads, task size {}",
        settings.task_size()
    );
    Ok(())
}

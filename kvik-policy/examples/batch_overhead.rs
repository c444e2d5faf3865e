//! Per-read cost of a batch against a plain `pread` loop: N random 4 KiB
//! reads of a page-cached FILE, one thread each way; and the same reads on
//! THREADS plain threads (a descriptor each, as fio's jobs), into each
//! read's own slot and into a small buffer per thread.
//!
//!     cargo run --release -p kvik-policy --example batch_overhead -- FILE [N] [THREADS]

use std::os::unix::fs::FileExt;
use std::time::Instant;

use kvik_policy::{AlignedBuffer, FileHandle, ReadRange, Settings};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: batch_overhead FILE [N] [THREADS]")?;
    let n: usize = args.next().map_or(Ok(20_000), |s| s.parse())?;
    let threads: usize = args.next().map_or(Ok(1), |s| s.parse())?;
    let io = 4096usize;
    let std_file = std::fs::File::open(&path)?;
    let blocks = std_file.metadata()?.len() / io as u64;
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let offsets: Vec<u64> = (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % blocks) * io as u64
        })
        .collect();
    let mut buf = AlignedBuffer::new(n * io);
    buf.prefault();
    let mut settings = Settings::global()?;
    settings.set_num_threads(threads)?;
    let file = FileHandle::open_with(&path, "r", &settings)?;
    let ranges: Vec<ReadRange> = offsets
        .iter()
        .enumerate()
        .map(|(i, &o)| ReadRange {
            file_offset: o,
            buffer_offset: (i * io) as u64,
            len: io as u64,
        })
        .collect();
    let (mut plains, mut nowaits, mut batches) = (vec![], vec![], vec![]);
    let (mut spread_slots, mut spread_reused) = (vec![], vec![]);
    // The same reads on THREADS plain threads, each a contiguous share of
    // the (random) list and its own descriptor, as fio's jobs: into each
    // read's own slot of the buffer (where the batch puts them), and into
    // one 4 KiB buffer per thread (where fio puts them).
    let spread = |slots: bool, buf: &mut [u8]| -> std::io::Result<f64> {
        let share = n.div_ceil(threads);
        let files: Vec<std::fs::File> = (0..threads)
            .map(|_| std::fs::File::open(&path))
            .collect::<std::io::Result<_>>()?;
        let t = Instant::now();
        std::thread::scope(|scope| {
            let mut rest = &mut buf[..];
            let mut handles = Vec::new();
            for (k, chunk) in offsets.chunks(share).enumerate() {
                let (mine, tail) = rest.split_at_mut((chunk.len() * io).min(rest.len()));
                rest = tail;
                let file = &files[k];
                handles.push(scope.spawn(move || -> std::io::Result<()> {
                    let mut own = vec![0u8; io];
                    for (i, &o) in chunk.iter().enumerate() {
                        let dest = if slots {
                            &mut mine[i * io..(i + 1) * io]
                        } else {
                            &mut own[..]
                        };
                        file.read_at(dest, o)?;
                    }
                    Ok(())
                }));
            }
            handles
                .into_iter()
                .try_for_each(|h| h.join().expect("reader"))
        })?;
        Ok(t.elapsed().as_secs_f64())
    };
    for _ in 0..21 {
        spread_slots.push(spread(true, &mut buf)?);
        spread_reused.push(spread(false, &mut buf)?);
        let t = Instant::now();
        for (i, &o) in offsets.iter().enumerate() {
            std_file.read_at(&mut buf[i * io..(i + 1) * io], o)?;
        }
        let plain = t.elapsed().as_secs_f64();
        let t = Instant::now();
        for (i, &o) in offsets.iter().enumerate() {
            let iov = libc::iovec {
                iov_base: buf[i * io..].as_mut_ptr().cast(),
                iov_len: io,
            };
            // SAFETY: one iovec over `io` bytes of `buf`, borrowed mutably.
            let got = unsafe {
                libc::preadv2(
                    std::os::fd::AsRawFd::as_raw_fd(&std_file),
                    &iov,
                    1,
                    o as i64,
                    libc::RWF_NOWAIT,
                )
            };
            if got != io as isize {
                // Not cached (evicted meanwhile): read it as the backend would.
                std_file.read_at(&mut buf[i * io..(i + 1) * io], o)?;
            }
        }
        let nowait = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let done = file.read_batch_into(&mut buf, &ranges)?;
        let batch = t.elapsed().as_secs_f64();
        assert_eq!(done.report.failed_entries, 0);
        plains.push(plain);
        nowaits.push(nowait);
        batches.push(batch);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2] * 1e6 / n as f64
    };
    println!(
        "median of 21 rounds, µs per 4 KiB read: pread loop {:.2}; preadv2(RWF_NOWAIT) loop {:.2}; batch ({threads} thread{}) {:.2}; \
         {threads} plain threads (thread start included) into the slots {:.2}, into a 4 KiB buffer each {:.2}",
        median(&mut plains),
        median(&mut nowaits),
        if threads == 1 { "" } else { "s" },
        median(&mut batches),
        median(&mut spread_slots),
        median(&mut spread_reused),
    );
    Ok(())
}

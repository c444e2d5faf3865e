//! Many requests at once: threads reading and writing disjoint ranges of
//! one file, many files through one pool, and requests issued from inside
//! pool tasks (where KvikIO can deadlock). Every result is compared byte for
//! byte with a sequential reference; every wait has a deadline, so a
//! deadlock fails the test instead of hanging it.

mod common;

use std::sync::{Arc, Barrier};

use common::{random_bytes, settings, within_a_minute};
use kvik_policy::{FileHandle, thread_pool};
use rayon::prelude::*;

/// Run `work(i)` on `threads` threads at once (started together); fail
/// instead of hanging if they take more than a minute.
fn on_threads(what: &str, threads: usize, work: impl Fn(usize) + Send + Sync + 'static) {
    let work = Arc::new(work);
    within_a_minute(what, move || {
        let start = Arc::new(Barrier::new(threads));
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let (work, start) = (work.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    work(i);
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
    });
}

/// The sequential reference: one thread, one task, plain std I/O.
fn reference(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[test]
fn threads_write_and_read_disjoint_ranges_of_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared");
    const THREADS: usize = 12;
    const RANGE: usize = 300_007; // odd: ranges straddle tasks and pages
    let data = Arc::new(random_bytes(THREADS * RANGE, 1));
    let f = FileHandle::open_with(&path, "w+", &settings(4, 64 << 10)).unwrap();
    let (f2, data2) = (f.clone(), data.clone());
    on_threads("disjoint writes", THREADS, move |i| {
        let range = &data2[i * RANGE..(i + 1) * RANGE];
        let at = (i * RANGE) as u64;
        // Blocking and background requests, in pieces of odd sizes, in
        // reverse order within the range.
        let pieces = [0, 1, 4097, 100_000, 250_000, RANGE];
        for w in pieces.windows(2).rev() {
            let (piece, offset) = (&range[w[0]..w[1]], at + w[0] as u64);
            let written = if w[0] % 2 == 0 {
                f2.write(piece, offset).unwrap()
            } else {
                f2.pwrite(piece.to_vec(), offset).wait().unwrap().1.bytes
            };
            assert_eq!(written, piece.len());
        }
    });
    assert!(
        reference(&path) == *data,
        "concurrent writes differ from the data"
    );
    assert_eq!(f.tasks_in_flight(), 0);

    // Readers of every range, racing writers that rewrite the same bytes in
    // other ranges: every read equals the reference.
    let (f2, data2) = (f.clone(), data.clone());
    on_threads("disjoint reads and writes", THREADS, move |i| {
        let range = &data2[i * RANGE..(i + 1) * RANGE];
        let at = (i * RANGE) as u64;
        for round in 0..4 {
            if (i + round) % 3 == 0 {
                f2.write(range, at).unwrap();
            } else if round % 2 == 0 {
                let mut buf = vec![0u8; RANGE];
                f2.read_exact(&mut buf, at).unwrap();
                assert!(buf[..] == range[..], "range {i} round {round}");
            } else {
                let (buf, _) = f2.pread(vec![0u8; RANGE], at).wait_exact().unwrap();
                assert!(buf[..] == range[..], "range {i} round {round}");
            }
        }
    });
    assert!(reference(&path) == *data);
}

#[test]
fn many_files_at_once_through_one_pool() {
    let dir = tempfile::tempdir().unwrap();
    let s = settings(3, 32 << 10);
    let files: Vec<(std::path::PathBuf, Vec<u8>)> = (0..24)
        .map(|i| {
            (
                dir.path().join(format!("file-{i}")),
                random_bytes(10_000 + i * 37_813, i as u64),
            )
        })
        .collect();
    let files = Arc::new(files);
    let files2 = files.clone();
    within_a_minute("many files", move || {
        // Every file's write in flight at once, then every read.
        let handles: Vec<FileHandle> = files2
            .iter()
            .map(|(p, _)| FileHandle::open_with(p, "w+", &s).unwrap())
            .collect();
        let writes: Vec<_> = handles
            .iter()
            .zip(files2.iter())
            .map(|(h, (_, d))| h.pwrite(d.clone(), 0))
            .collect();
        for w in writes {
            w.wait().unwrap();
        }
        let reads: Vec<_> = handles
            .iter()
            .zip(files2.iter())
            .map(|(h, (_, d))| h.pread(vec![0u8; d.len()], 0))
            .collect();
        for (r, (p, d)) in reads.into_iter().zip(files2.iter()) {
            let (buf, done) = r.wait_exact().unwrap();
            assert_eq!(done.bytes, d.len());
            assert!(buf == *d, "{}", p.display());
        }
        // And from many threads (rayon's global pool), blocking calls.
        handles
            .par_iter()
            .zip(files2.par_iter())
            .for_each(|(h, (_, d))| {
                let mut buf = vec![0u8; d.len()];
                h.read_exact(&mut buf, 0).unwrap();
                assert!(buf == *d);
            });
        for h in &handles {
            assert_eq!(h.tasks_in_flight(), 0);
        }
    });
    for (p, d) in files.iter() {
        assert!(reference(p) == *d, "{}", p.display());
    }
}

#[test]
fn requests_issued_from_inside_pool_tasks_never_deadlock() {
    // Every worker of the I/O pool busy with a task that itself issues
    // multi-task requests and waits on them: KvikIO's pool can deadlock
    // here; ours runs the inner tasks in place.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested");
    let data = Arc::new(random_bytes(256 << 10, 9));
    std::fs::write(&path, &*data).unwrap();
    for threads in [1usize, 2] {
        let f = FileHandle::open_with(&path, "r+", &settings(threads, 8192)).unwrap();
        let pool = thread_pool::get(threads).unwrap();
        let data = data.clone();
        let ok = within_a_minute("nested requests", move || {
            let (tx, rx) = std::sync::mpsc::channel();
            for job in 0..32usize {
                let (f, data, tx) = (f.clone(), data.clone(), tx.clone());
                pool.spawn(move || {
                    let offset = (job * 4096) as u64;
                    let len = data.len() - job * 4096;
                    let ok = match job % 3 {
                        0 => {
                            let mut buf = vec![0u8; len];
                            f.read_exact(&mut buf, offset).is_ok() && buf[..] == data[job * 4096..]
                        }
                        1 => f
                            .pread(vec![0u8; len], offset)
                            .wait_exact()
                            .is_ok_and(|(buf, _)| buf[..] == data[job * 4096..]),
                        // A write of the same bytes, waited on in the pool.
                        _ => f
                            .pwrite(data[job * 4096..].to_vec(), offset)
                            .wait()
                            .is_ok_and(|(_, done)| done.bytes == len),
                    };
                    let _ = tx.send(ok);
                });
            }
            drop(tx);
            rx.iter().filter(|&ok| ok).count()
        });
        assert_eq!(ok, 32, "{threads} thread(s)");
    }
    assert!(reference(&path) == *data);
}

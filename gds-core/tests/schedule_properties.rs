//! Properties of `gds_core::schedule::plan` for settings the measured vectors
//! do not contain: every thread count libcufile accepts (0..=32), every
//! request parallelism (0..=8), thresholds from 4 KiB to 64 MiB, sizes from
//! one byte to a TiB, odd offsets. The cases come from a fixed-seed generator,
//! so a failure reproduces.

use cufile_config::ExecutionConfig;
use gds_core::schedule::{self, Registration, Request, UNIT_ALIGNMENT, WorkUnit};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// SplitMix64: a small, well-mixed generator with a fixed seed.
struct Cases(u64);

impl Cases {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    fn execution(&mut self) -> ExecutionConfig {
        ExecutionConfig {
            max_io_queue_depth: 1 + self.below(256),
            max_io_threads: self.below(33),
            parallel_io: self.below(4) != 0,
            min_io_threshold_size_kb: self.pick(&[
                4, 8, 12, 64, 100, 512, 1000, 1024, 2048, 4096, 8192, 16384, 65536,
            ]),
            max_request_parallelism: self.below(9),
        }
    }

    /// Sizes spread over every scale, with page-exact and ragged ones.
    fn size(&mut self) -> u64 {
        let scale = 1u64 << self.below(41);
        match self.below(3) {
            0 => scale,
            1 => scale + self.below(scale),
            _ => (scale + self.below(scale)).next_multiple_of(4 * KIB),
        }
    }

    fn request(&mut self) -> Request {
        Request {
            file_offset: self.pick(&[0, 1, 100, 4096, 4 * MIB + 17]) + self.below(1 << 40),
            buffer_offset: self.pick(&[0, 512, 4096, 8 * MIB]),
            size: self.size(),
        }
    }

    fn registration(&mut self) -> Registration {
        Registration::from(self.below(2) == 1)
    }
}

const ROUNDS: usize = 20_000;

fn parallelism(e: &ExecutionConfig) -> u64 {
    e.max_request_parallelism.min(e.max_io_threads)
}

fn threshold(e: &ExecutionConfig) -> u64 {
    (e.min_io_threshold_size_kb * KIB).max(UNIT_ALIGNMENT)
}

fn count(size: u64, e: &ExecutionConfig, registration: Registration) -> u64 {
    let request = Request {
        file_offset: 0,
        buffer_offset: 0,
        size,
    };
    schedule::plan(request, e, registration).len() as u64
}

#[test]
fn units_tile_the_request_on_4_kib_boundaries() {
    let mut cases = Cases(1);
    for _ in 0..ROUNDS {
        let (e, request, registration) = (cases.execution(), cases.request(), cases.registration());
        let plan = schedule::plan(request, &e, registration);
        let expected = plan.len();
        let (piece, last) = (plan.piece_size(), plan.last_size());
        let units: Vec<WorkUnit> = plan.collect();
        let context = format!("{e:?} {request:?} {registration:?}: {units:?}");
        assert_eq!(units.len(), expected, "len() is exact: {context}");
        let mut next = 0;
        for (i, u) in units.iter().enumerate() {
            assert_eq!(u.file_offset, request.file_offset + next, "{context}");
            assert_eq!(u.buffer_offset, request.buffer_offset + next, "{context}");
            assert!(u.size > 0, "no empty unit: {context}");
            assert_eq!(next % UNIT_ALIGNMENT, 0, "boundary on 4 KiB: {context}");
            if i + 1 < units.len() {
                assert_eq!(u.size, piece, "equal pieces: {context}");
            } else {
                assert_eq!(u.size, last, "{context}");
            }
            next += u.size;
        }
        assert_eq!(next, request.size, "the units cover the request: {context}");
        // The last piece takes the rest: it is the largest unless pieces were
        // raised to one page, and never larger by a page per unit or more.
        let n = units.len() as u64;
        if n > 1 && request.size / n >= UNIT_ALIGNMENT {
            assert!(
                last >= piece && last - piece < n * UNIT_ALIGNMENT,
                "{context}"
            );
        }
    }
}

#[test]
fn counts_respect_the_settings() {
    let mut cases = Cases(2);
    for _ in 0..ROUNDS {
        let (e, size, registration) = (cases.execution(), cases.size(), cases.registration());
        let n = count(size, &e, registration);
        let context = format!("{e:?} size {size} {registration:?}: {n} units");
        assert!(n >= 1, "a non-empty request has a unit: {context}");
        if !e.parallel_io {
            assert_eq!(n, 1, "{context}");
        }
        assert!(
            n <= parallelism(&e).max(1),
            "at most min(parallelism, threads): {context}"
        );
        assert!(
            n <= size.div_ceil(threshold(&e)),
            "no unit below the threshold's share: {context}"
        );
        if e.parallel_io && registration.is_registered() {
            let expected = size.div_ceil(threshold(&e)).min(parallelism(&e)).max(1);
            assert_eq!(n, expected, "registered: min(P, ceil(size / T)): {context}");
        }
        if e.parallel_io && !registration.is_registered() && threshold(&e) >= MIB {
            // The plain threshold rule, min(P, ceil((size - 1 MiB) / T)), holds
            // exactly where the threshold is at least 1 MiB.
            let expected = size
                .saturating_sub(MIB)
                .div_ceil(threshold(&e))
                .clamp(1, parallelism(&e).max(1));
            assert_eq!(n, expected, "unregistered, T >= 1 MiB: {context}");
        }
    }
}

#[test]
fn registering_never_reduces_units_and_the_queue_depth_and_offsets_do_not_matter() {
    let mut cases = Cases(3);
    for _ in 0..ROUNDS {
        let (e, request) = (cases.execution(), cases.request());
        let sizes = |request: Request, e: &ExecutionConfig, registration| -> Vec<u64> {
            schedule::plan(request, e, registration)
                .map(|u| u.size)
                .collect()
        };
        let registered = sizes(request, &e, Registration::Registered);
        let unregistered = sizes(request, &e, Registration::Unregistered);
        assert!(
            registered.len() >= unregistered.len(),
            "{e:?} {request:?}: {registered:?} vs {unregistered:?}"
        );
        let at_zero = Request {
            file_offset: 0,
            buffer_offset: 0,
            ..request
        };
        let other_depth = ExecutionConfig {
            max_io_queue_depth: 1,
            ..e
        };
        assert_eq!(
            sizes(at_zero, &other_depth, Registration::Registered),
            registered
        );
        assert_eq!(sizes(at_zero, &e, Registration::Unregistered), unregistered);
    }
}

#[test]
fn larger_requests_never_get_fewer_units() {
    let mut cases = Cases(4);
    for _ in 0..ROUNDS {
        let (e, registration) = (cases.execution(), cases.registration());
        let small = cases.size();
        let large = small + cases.pick(&[1, 4 * KIB, 256 * KIB, MIB]) + cases.below(small);
        let (a, b) = (
            count(small, &e, registration),
            count(large, &e, registration),
        );
        assert!(
            a <= b,
            "{e:?} {registration:?}: {small} → {a} units, {large} → {b}"
        );
    }
}

#[test]
fn counts_climb_one_at_a_time_for_every_accepted_thread_and_parallelism_setting() {
    // Exhaustive over threads × parallelism (libcufile accepts 0..=32 and
    // 0..=8): as a request grows 64 KiB at a time the count climbs from 1 to
    // min(parallelism, threads) without skipping a value.
    for threads in 0..=32 {
        for parallelism in 0..=8 {
            let e = ExecutionConfig {
                max_io_threads: threads,
                max_request_parallelism: parallelism,
                ..ExecutionConfig::STOCK_FILE
            };
            for registration in [Registration::Registered, Registration::Unregistered] {
                let mut previous = 1;
                let mut size = 4 * KIB;
                while size <= 80 * MIB {
                    let n = count(size, &e, registration);
                    assert!(
                        n == previous || n == previous + 1,
                        "{e:?} {registration:?} size {size}: {previous} → {n}"
                    );
                    previous = n;
                    size += 64 * KIB;
                }
                assert_eq!(previous, threads.min(parallelism).max(1));
            }
        }
    }
}

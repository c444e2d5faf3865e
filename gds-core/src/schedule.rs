//! cuFile's scheduling split: how ONE `cuFileRead`/`cuFileWrite` becomes the
//! work units cuFile hands to its own worker threads.
//!
//! A work unit is what cuFile schedules (and counts once in its per-GPU
//! `n_total_reads`), not an individual storage transfer. The rule below was
//! derived from 2,252 cases measured on libcufile 1.15
//! (`gds-core/tests/data/cufile_work_units.csv`) and reproduces every one:
//!
//! * an empty request has no units;
//! * `parallel_io: false`, or no parallelism (`min(max_request_parallelism,
//!   max_io_threads)` is 0) → one unit;
//! * otherwise a unit covers `U = max(T, size / P)` bytes, with
//!   `T = min_io_threshold_size_kb` KiB and `P = min(max_request_parallelism,
//!   max_io_threads)`: at least the threshold, and never more than `P` units;
//! * registered destination buffer: `ceil(size / U)` units;
//! * unregistered destination buffer: `ceil((size − 1 MiB) / U)` units, at
//!   least 1 — the first MiB of a request into an unregistered buffer never
//!   earns a unit of its own ([`UNREGISTERED_HEAD`]).
//!
//! Where `size / P` does not bind (`ceil(size / T) <= P`) this is the rule
//! first stated from fewer measurements, `ceil(size / T)` and
//! `ceil((size − 1 MiB) / T)` capped at `P`. Where it
//! binds, the difference shows only for `T` below 1 MiB: with `T` = 512 KiB,
//! `P` = 4 and an unregistered 3 MiB request, cuFile made 3 units, not
//! `min(4, ceil(2 MiB / 512 KiB))` = 4 — the units were widened to
//! `3 MiB / 4` before the first MiB was set aside.
//!
//! The file offset and the buffer's alignment do not change the count (they
//! change `n_unaligned_reads`), and neither does `per_buffer_cache_size_kb`
//! (1024 and 4096 KiB gave identical counts), so the model takes only the
//! `execution` section.
//!
//! Unit boundaries are not visible in cuFile's counters; the model assumes
//! equal pieces, each a multiple of 4 KiB from the start of the request (at
//! least 4 KiB), the last piece taking the rest.
//!
//! NVIDIA's worked examples, under the stock `cufile.json` (an unregistered
//! buffer): one 1 GiB read is 4 units of 256 MiB; a 16 MiB read, 2 units of
//! 8 MiB; the same 1 GiB in KvikIO's 4 MiB tasks, one unit per task.
//!
//! ```
//! use cufile_config::ExecutionConfig;
//! use gds_core::schedule::{self, Registration, Request};
//!
//! let stock = ExecutionConfig::STOCK_FILE;
//! let read = |size| Request { file_offset: 0, buffer_offset: 0, size };
//! let units = schedule::plan(read(1 << 30), &stock, Registration::Unregistered);
//! assert_eq!(units.unit_count(), 4);
//! assert_eq!(units.size_runs().collect::<Vec<_>>(), [(4, 256 << 20)]);
//! let units = schedule::plan(read(16 << 20), &stock, Registration::Unregistered);
//! assert_eq!(units.size_runs().collect::<Vec<_>>(), [(2, 8 << 20)]);
//! let units = schedule::plan(read(4 << 20), &stock, Registration::Unregistered);
//! assert_eq!(units.unit_count(), 1);
//! println!("{}", units.rule()); // why cuFile cuts it so
//! ```

use std::fmt;

use cufile_config::ExecutionConfig;

/// Unit boundaries fall on multiples of this from the start of a request.
pub const UNIT_ALIGNMENT: u64 = 4096;

/// The part of a request into an unregistered buffer that does not count
/// towards its units: 1 MiB, whatever `per_buffer_cache_size_kb` says
/// (measured with 1024 and 4096 KiB) and whatever the threshold (512 KiB,
/// 1 MiB, 8 MiB).
pub const UNREGISTERED_HEAD: u64 = 1 << 20;

/// One `cuFileRead`/`cuFileWrite` call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Request {
    /// Where the request starts in the file.
    pub file_offset: u64,
    /// `bufPtr_offset`: where it starts in the (registered or not) device buffer.
    pub buffer_offset: u64,
    /// Bytes.
    pub size: u64,
}

/// Whether the destination (or source) device buffer was registered with
/// `cuFileBufRegister`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Registration {
    /// Registered with `cuFileBufRegister`.
    Registered,
    /// Not registered (cuFile stages it through its own registered buffers).
    Unregistered,
}

impl Registration {
    /// Whether this is [`Registration::Registered`].
    pub fn is_registered(self) -> bool {
        self == Registration::Registered
    }
}

impl From<bool> for Registration {
    fn from(registered: bool) -> Self {
        if registered {
            Registration::Registered
        } else {
            Registration::Unregistered
        }
    }
}

/// One scheduled piece of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct WorkUnit {
    pub file_offset: u64,
    pub buffer_offset: u64,
    pub size: u64,
}

/// Why a request got the number of units it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "rule")]
pub enum SplitRule {
    /// Nothing to move.
    Empty,
    /// `parallel_io` is false: one unit.
    ParallelIoOff,
    /// `min(max_request_parallelism, max_io_threads)` is 0: one unit.
    NoParallelism {
        max_request_parallelism: u64,
        max_io_threads: u64,
    },
    /// Units of `min_io_threshold_size_kb` (the request needs at most
    /// `parallelism` of them).
    Threshold {
        threshold: u64,
        parallelism: u64,
        registration: Registration,
    },
    /// The request would need more than `parallelism` units of the threshold:
    /// units widen to `size / parallelism`.
    Parallelism {
        threshold: u64,
        parallelism: u64,
        registration: Registration,
    },
}

impl fmt::Display for SplitRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let registration = match *self {
            SplitRule::Empty => return f.write_str("empty request: no work units"),
            SplitRule::ParallelIoOff => return f.write_str("parallel_io is off: one work unit"),
            SplitRule::NoParallelism {
                max_request_parallelism,
                max_io_threads,
            } => {
                return write!(
                    f,
                    "no parallelism (max_request_parallelism {max_request_parallelism}, \
                     max_io_threads {max_io_threads}): one work unit"
                );
            }
            SplitRule::Threshold {
                threshold,
                parallelism,
                registration,
            } => {
                write!(
                    f,
                    "units of min_io_threshold_size_kb ({} KiB), at most {parallelism}",
                    threshold / 1024
                )?;
                registration
            }
            SplitRule::Parallelism {
                threshold,
                parallelism,
                registration,
            } => {
                write!(
                    f,
                    "units widened to size / {parallelism} (more than {parallelism} units of \
                     min_io_threshold_size_kb ({} KiB) needed)",
                    threshold / 1024
                )?;
                registration
            }
        };
        match registration {
            Registration::Registered => Ok(()),
            Registration::Unregistered => {
                f.write_str("; the first MiB of an unregistered buffer earns no unit")
            }
        }
    }
}

/// How cuFile splits `request` into work units under `execution`.
///
/// Pure and O(1): no I/O, no allocation. The units come out of the returned
/// iterator in file order, and `len()` gives their number without iterating.
pub fn plan(
    request: Request,
    execution: &ExecutionConfig,
    registration: Registration,
) -> WorkUnits {
    let (count, rule) = unit_count(request.size, execution, registration);
    let piece = if count <= 1 {
        request.size
    } else {
        let share = request.size / count;
        (share - share % UNIT_ALIGNMENT).max(UNIT_ALIGNMENT)
    };
    WorkUnits {
        request,
        count,
        piece,
        rule,
        next: 0,
    }
}

/// The number of work units for a request of `size` bytes, and why.
fn unit_count(
    size: u64,
    execution: &ExecutionConfig,
    registration: Registration,
) -> (u64, SplitRule) {
    if size == 0 {
        return (0, SplitRule::Empty);
    }
    if !execution.parallel_io {
        return (1, SplitRule::ParallelIoOff);
    }
    let parallelism = execution
        .max_request_parallelism
        .min(execution.max_io_threads);
    if parallelism == 0 {
        return (
            1,
            SplitRule::NoParallelism {
                max_request_parallelism: execution.max_request_parallelism,
                max_io_threads: execution.max_io_threads,
            },
        );
    }
    // libcufile refuses thresholds below 4 KiB; clamping keeps the model
    // total (no division by zero) for configs it would reject.
    let threshold = execution
        .min_io_threshold_size_kb
        .saturating_mul(1024)
        .max(UNIT_ALIGNMENT);
    // The part of the request that is divided into units.
    let counted = match registration {
        Registration::Registered => size,
        Registration::Unregistered => size.saturating_sub(UNREGISTERED_HEAD),
    };
    if size.div_ceil(threshold) <= parallelism {
        let rule = SplitRule::Threshold {
            threshold,
            parallelism,
            registration,
        };
        (counted.div_ceil(threshold).max(1), rule)
    } else {
        // Units of size / parallelism: ceil(counted / (size / parallelism)),
        // exact in 128 bits.
        let count = (u128::from(counted) * u128::from(parallelism)).div_ceil(u128::from(size));
        let rule = SplitRule::Parallelism {
            threshold,
            parallelism,
            registration,
        };
        // count <= parallelism because counted <= size.
        (u64::try_from(count).unwrap_or(parallelism).max(1), rule)
    }
}

/// The work units of one request, in file order. Lazy and cheap to clone:
/// `len()` is the count, `rule()` says why.
#[derive(Debug, Clone)]
pub struct WorkUnits {
    request: Request,
    count: u64,
    /// The size of every unit but the last.
    piece: u64,
    rule: SplitRule,
    next: u64,
}

impl WorkUnits {
    /// The request being split.
    pub fn request(&self) -> Request {
        self.request
    }

    /// Why the request got this many units.
    pub fn rule(&self) -> SplitRule {
        self.rule
    }

    /// The number of units of the whole request (not only those left to iterate).
    pub fn unit_count(&self) -> u64 {
        self.count
    }

    /// The size of every unit but the last (0 for an empty request).
    pub fn piece_size(&self) -> u64 {
        self.piece
    }

    /// The units of the whole request as runs of equal size, `(count, size)`,
    /// in file order: at most two, the equal pieces and then a last piece
    /// that took a different rest.
    pub fn size_runs(&self) -> impl Iterator<Item = (u64, u64)> + use<> {
        let (n, piece, last) = (self.count, self.piece, self.last_size());
        let runs = match n {
            0 => [None, None],
            _ if last == piece => [Some((n, piece)), None],
            _ => [Some((n - 1, piece)), Some((1, last))],
        };
        runs.into_iter().flatten()
    }

    /// The size of the last unit (0 for an empty request).
    pub fn last_size(&self) -> u64 {
        match self.count {
            0 => 0,
            n => self.request.size - (n - 1) * self.piece,
        }
    }
}

impl Iterator for WorkUnits {
    type Item = WorkUnit;

    fn next(&mut self) -> Option<WorkUnit> {
        if self.next >= self.count {
            return None;
        }
        let start = self.next * self.piece;
        let size = if self.next + 1 == self.count {
            self.request.size - start
        } else {
            self.piece
        };
        self.next += 1;
        Some(WorkUnit {
            file_offset: self.request.file_offset + start,
            buffer_offset: self.request.buffer_offset + start,
            size,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::try_from(self.count - self.next).unwrap_or(usize::MAX);
        (left, Some(left))
    }
}

impl ExactSizeIterator for WorkUnits {}

impl std::iter::FusedIterator for WorkUnits {}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    const STOCK: ExecutionConfig = ExecutionConfig::STOCK_FILE;

    fn request(size: u64) -> Request {
        Request {
            file_offset: 0,
            buffer_offset: 0,
            size,
        }
    }

    fn sizes(units: WorkUnits) -> Vec<u64> {
        units.map(|u| u.size).collect()
    }

    #[test]
    fn nvidias_worked_examples() {
        for registration in [Registration::Registered, Registration::Unregistered] {
            assert_eq!(
                sizes(plan(request(GIB), &STOCK, registration)),
                vec![256 * MIB; 4]
            );
            assert_eq!(
                sizes(plan(request(16 * MIB), &STOCK, registration)),
                vec![8 * MIB; 2]
            );
            assert_eq!(
                sizes(plan(request(4 * MIB), &STOCK, registration)),
                vec![4 * MIB]
            );
        }
    }

    #[test]
    fn the_first_mib_of_an_unregistered_request_earns_no_unit() {
        let size = 8 * MIB + 4 * KIB;
        let registered = plan(request(size), &STOCK, Registration::Registered);
        assert_eq!(sizes(registered), vec![4 * MIB, 4 * MIB + 4 * KIB]);
        let unregistered = plan(request(size), &STOCK, Registration::Unregistered);
        assert_eq!(sizes(unregistered), vec![size]);
        // 9 MiB: still one unit; just above: two.
        assert_eq!(
            plan(request(9 * MIB), &STOCK, Registration::Unregistered).len(),
            1
        );
        assert_eq!(
            plan(
                request(9 * MIB + 4 * KIB),
                &STOCK,
                Registration::Unregistered
            )
            .len(),
            2
        );
    }

    #[test]
    fn units_widen_when_the_threshold_would_need_too_many() {
        let config = ExecutionConfig {
            min_io_threshold_size_kb: 512,
            ..STOCK
        };
        // 3 MiB unregistered: units of 3 MiB / 4, of which the first MiB is
        // set aside: ceil(2 MiB / 768 KiB) = 3 (not ceil(2 MiB / 512 KiB) = 4).
        let units = plan(request(3 * MIB), &config, Registration::Unregistered);
        assert_eq!(units.len(), 3);
        assert!(matches!(
            units.rule(),
            SplitRule::Parallelism { parallelism: 4, .. }
        ));
        assert_eq!(sizes(units), vec![MIB, MIB, MIB]);
        // 2 MiB fits in 4 units of 512 KiB: the threshold rule applies.
        let units = plan(request(2 * MIB), &config, Registration::Unregistered);
        assert_eq!(units.len(), 2);
        assert!(matches!(units.rule(), SplitRule::Threshold { .. }));
    }

    #[test]
    fn no_splitting_without_parallel_io_or_parallelism() {
        let off = ExecutionConfig {
            parallel_io: false,
            ..STOCK
        };
        let units = plan(request(GIB), &off, Registration::Registered);
        assert_eq!(units.rule(), SplitRule::ParallelIoOff);
        assert_eq!(sizes(units), vec![GIB]);

        let no_threads = ExecutionConfig {
            max_io_threads: 0,
            ..STOCK
        };
        let units = plan(request(GIB), &no_threads, Registration::Registered);
        assert_eq!(units.len(), 1);
        assert!(matches!(
            units.rule(),
            SplitRule::NoParallelism {
                max_io_threads: 0,
                ..
            }
        ));
        assert_eq!(
            plan(
                request(GIB),
                &ExecutionConfig::LIBRARY_DEFAULTS_1_15,
                Registration::Registered
            )
            .len(),
            1
        );
    }

    #[test]
    fn offsets_follow_the_request_and_boundaries_sit_on_4_kib() {
        let req = Request {
            file_offset: 100,
            buffer_offset: 8192,
            size: 24 * MIB + 12345,
        };
        let units: Vec<WorkUnit> = plan(req, &STOCK, Registration::Registered).collect();
        assert_eq!(units.len(), 4);
        let mut next = 0;
        for u in &units {
            assert_eq!(u.file_offset, 100 + next);
            assert_eq!(u.buffer_offset, 8192 + next);
            assert_eq!(next % UNIT_ALIGNMENT, 0);
            next += u.size;
        }
        assert_eq!(next, req.size);
        // The last unit takes the rest.
        assert!(units[3].size > units[0].size);
    }

    #[test]
    fn size_runs_summarise_the_units() {
        let runs = |size, registration| -> Vec<(u64, u64)> {
            plan(request(size), &STOCK, registration)
                .size_runs()
                .collect()
        };
        assert_eq!(runs(GIB, Registration::Registered), vec![(4, 256 * MIB)]);
        assert_eq!(
            runs(8 * MIB + 4 * KIB, Registration::Registered),
            vec![(1, 4 * MIB), (1, 4 * MIB + 4 * KIB)]
        );
        assert_eq!(
            runs(8 * MIB + 4 * KIB, Registration::Unregistered),
            vec![(1, 8 * MIB + 4 * KIB)]
        );
        assert_eq!(runs(0, Registration::Registered), vec![]);
        // The runs describe the whole request, whatever was iterated.
        let mut units = plan(request(24 * MIB + 1), &STOCK, Registration::Registered);
        let all: Vec<(u64, u64)> = units.size_runs().collect();
        units.next();
        assert_eq!(units.size_runs().collect::<Vec<_>>(), all);
        assert_eq!(all, vec![(3, 6 * MIB), (1, 6 * MIB + 1)]);
    }

    #[test]
    fn empty_requests_have_no_units() {
        let units = plan(request(0), &STOCK, Registration::Unregistered);
        assert_eq!(units.rule(), SplitRule::Empty);
        assert_eq!(
            (units.len(), units.piece_size(), units.last_size()),
            (0, 0, 0)
        );
    }

    #[test]
    fn tiny_units_never_go_below_one_page() {
        let config = ExecutionConfig {
            min_io_threshold_size_kb: 4,
            max_io_threads: 32,
            max_request_parallelism: 8,
            ..STOCK
        };
        // 5000 bytes at a 4 KiB threshold: two units, 4 KiB and the rest.
        assert_eq!(
            sizes(plan(request(5000), &config, Registration::Registered)),
            vec![4096, 904]
        );
        // A zero threshold (rejected by libcufile) does not divide by zero.
        let zero = ExecutionConfig {
            min_io_threshold_size_kb: 0,
            ..config
        };
        assert_eq!(
            plan(request(5000), &zero, Registration::Registered).len(),
            2
        );
    }

    #[test]
    fn huge_requests_do_not_overflow() {
        let units = plan(request(u64::MAX), &STOCK, Registration::Unregistered);
        assert_eq!(units.len(), 4);
        assert_eq!(units.map(|u| u.size).sum::<u64>(), u64::MAX);
    }
}

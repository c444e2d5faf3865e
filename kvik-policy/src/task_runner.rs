//! Running a request's tasks.
//!
//! Workers take tasks by index from one counter, so tasks start in file
//! order on every thread (the kernel's readahead sees one forward stream)
//! and nothing is materialised per task: a request costs memory in
//! proportion to its threads, not to its size ÷ task size. The first
//! failing task stops the others from starting (and running ones at their
//! next system call), and [`run_tasks`] returns only when none is left
//! running.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use rayon::ThreadPool;

use crate::error::{Error, Result};
use crate::plan::Execution;
use crate::task::{Task, TaskSplit};

/// What one task did.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TaskOutcome {
    pub bytes: u64,
    /// Of which with O_DIRECT.
    pub direct_bytes: u64,
    /// O_DIRECT was refused mid-task (the OS error), so the rest went buffered.
    pub direct_refused: Option<String>,
    /// The task found its range cold, and what was decided.
    pub cold: Option<crate::residency::ReadPathDecision>,
}

/// What all the tasks of a request did.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Totals {
    /// Bytes moved from the start of the request without a gap: up to the
    /// first task that came up short (a read that met the end of the file);
    /// anything after it would not be contiguous.
    pub bytes: u64,
    pub direct_bytes: u64,
    pub direct_refused: Option<String>,
    /// The first cold-read decision of the request's tasks, and how many
    /// tasks decided for O_DIRECT.
    pub cold: Option<crate::residency::ReadPathDecision>,
    pub cold_direct_tasks: u64,
}

/// A worker's own account, merged once when it stops.
#[derive(Default)]
struct Account {
    direct_bytes: u64,
    direct_refused: Option<String>,
    cold: Option<crate::residency::ReadPathDecision>,
    cold_direct_tasks: u64,
    /// The first task (by index) that moved fewer bytes than its size.
    first_short: Option<(u64, Task, u64)>,
}

impl Account {
    fn add(&mut self, index: u64, task: Task, outcome: TaskOutcome) {
        self.direct_bytes += outcome.direct_bytes;
        if let Some(decision) = outcome.cold {
            if decision.path == crate::residency::ReadPath::Direct {
                self.cold_direct_tasks += 1;
            }
            self.cold.get_or_insert(decision);
        }
        if self.direct_refused.is_none() {
            self.direct_refused = outcome.direct_refused;
        }
        if outcome.bytes < task.size && self.first_short.is_none_or(|(i, _, _)| index < i) {
            self.first_short = Some((index, task, outcome.bytes));
        }
    }

    fn merge(&mut self, other: Account) {
        self.direct_bytes += other.direct_bytes;
        self.cold_direct_tasks += other.cold_direct_tasks;
        if self.cold.is_none() {
            self.cold = other.cold;
        }
        if self.direct_refused.is_none() {
            self.direct_refused = other.direct_refused;
        }
        if let Some((index, task, bytes)) = other.first_short {
            if self.first_short.is_none_or(|(i, _, _)| index < i) {
                self.first_short = Some((index, task, bytes));
            }
        }
    }
}

/// Run every task of `tasks` with `run`, where `execution` says, and
/// account for them. `pool` is used for [`Execution::Pool`] only.
pub(crate) fn run_tasks(
    tasks: &TaskSplit,
    execution: Execution,
    pool: Option<&ThreadPool>,
    cancel: &AtomicBool,
    in_flight: &AtomicUsize,
    run: &(dyn Fn(Task) -> Result<TaskOutcome> + Sync),
) -> Result<Totals> {
    let next = AtomicU64::new(0);
    let account = Mutex::new(Account::default());
    let first_error: Mutex<Option<Error>> = Mutex::new(None);
    let worker = || {
        let mut mine = Account::default();
        while !cancel.load(Ordering::Relaxed) {
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(task) = tasks.task(index) else {
                break;
            };
            let running = Running::start(in_flight);
            let result = run(task);
            drop(running);
            match result {
                Ok(outcome) => mine.add(index, task, outcome),
                Err(e) => {
                    cancel.store(true, Ordering::Relaxed);
                    lock(&first_error).get_or_insert(e);
                    break;
                }
            }
        }
        lock(&account).merge(mine);
    };
    match (execution, pool) {
        (Execution::Pool { threads }, Some(pool)) if tasks.task_count() > 1 => {
            let workers = (threads as u64).min(tasks.task_count()).max(1);
            let worker = &worker;
            // FIFO: with rayon's default LIFO the owner would start the last
            // worker first; start order barely matters here (tasks come from
            // the counter), but FIFO keeps it obvious.
            pool.scope_fifo(|s| {
                for _ in 0..workers {
                    s.spawn_fifo(move |_| worker());
                }
            });
        }
        _ => worker(),
    }
    if let Some(e) = first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let account = account.into_inner().unwrap_or_else(|e| e.into_inner());
    let bytes = match account.first_short {
        Some((_, task, bytes)) => task.buffer_offset + bytes,
        None => tasks.size(),
    };
    Ok(Totals {
        bytes,
        direct_bytes: account.direct_bytes,
        direct_refused: account.direct_refused,
        cold: account.cold,
        cold_direct_tasks: account.cold_direct_tasks,
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One task counted in `tasks_in_flight` until dropped — also when the
/// task panics, so a bug in one request cannot leave the count wrong.
pub(crate) struct Running<'a>(&'a AtomicUsize);

impl<'a> Running<'a> {
    pub(crate) fn start(count: &'a AtomicUsize) -> Running<'a> {
        count.fetch_add(1, Ordering::SeqCst);
        Running(count)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A request's host memory, handed out to tasks as the disjoint pieces the
/// split cuts it into (tasks tile the request without overlapping).
pub(crate) struct DisjointSlices<'a> {
    ptr: *mut u8,
    len: usize,
    _memory: std::marker::PhantomData<&'a mut [u8]>,
}

// SAFETY: it hands out disjoint `&mut [u8]` pieces of memory borrowed
// mutably for 'a; `&mut [u8]` is Send and Sync.
unsafe impl Send for DisjointSlices<'_> {}
// SAFETY: as above: shared use only yields disjoint pieces.
unsafe impl Sync for DisjointSlices<'_> {}

impl<'a> DisjointSlices<'a> {
    pub(crate) fn new(memory: &'a mut [u8]) -> DisjointSlices<'a> {
        DisjointSlices {
            ptr: memory.as_mut_ptr(),
            len: memory.len(),
            _memory: std::marker::PhantomData,
        }
    }

    /// The piece of task `task`.
    ///
    /// # Safety
    /// No two live pieces may overlap: call it once per task of one split
    /// over this memory.
    pub(crate) unsafe fn piece(&self, task: &Task) -> &'a mut [u8] {
        let start = task.buffer_offset as usize;
        let len = task.size as usize;
        assert!(
            start <= self.len && len <= self.len - start,
            "a task outside its request's memory"
        );
        // SAFETY: in bounds (checked above) of memory borrowed mutably for
        // 'a; the caller guarantees no other piece overlaps this one.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::split_with_page_size;

    fn outcome(bytes: u64) -> TaskOutcome {
        TaskOutcome {
            bytes,
            ..Default::default()
        }
    }

    #[test]
    fn millions_of_tasks_cost_no_memory_per_task() {
        // 2^24 one-byte tasks on 4 threads: nothing is listed, every task
        // runs once, and the account is exact.
        let split = split_with_page_size(0, 1 << 24, 1, 1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(4)
            .build()
            .unwrap();
        let ran = AtomicU64::new(0);
        let in_flight = AtomicUsize::new(0);
        let totals = run_tasks(
            &split,
            Execution::Pool { threads: 4 },
            Some(&pool),
            &AtomicBool::new(false),
            &in_flight,
            &|t| {
                ran.fetch_add(1, Ordering::Relaxed);
                Ok(outcome(t.size))
            },
        )
        .unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), 1 << 24);
        assert_eq!(totals.bytes, 1 << 24);
        assert_eq!(in_flight.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn bytes_stop_at_the_first_short_task_whichever_thread_ran_it() {
        let split = split_with_page_size(0, 100, 10, 1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        // "End of file" at 47: task 4 is short, later ones read nothing.
        let totals = run_tasks(
            &split,
            Execution::Pool { threads: 3 },
            Some(&pool),
            &AtomicBool::new(false),
            &AtomicUsize::new(0),
            &|t| Ok(outcome(47u64.saturating_sub(t.file_offset).min(t.size))),
        )
        .unwrap();
        assert_eq!(totals.bytes, 47);
    }

    #[test]
    fn the_first_error_stops_the_rest() {
        let split = split_with_page_size(0, 1000, 10, 1);
        let ran = AtomicU64::new(0);
        let err = run_tasks(
            &split,
            Execution::CallingThread,
            None,
            &AtomicBool::new(false),
            &AtomicUsize::new(0),
            &|t| {
                ran.fetch_add(1, Ordering::Relaxed);
                if t.file_offset == 50 {
                    Err(Error::InvalidSetting {
                        setting: "test",
                        value: "50".into(),
                        rule: "fails at 50",
                    })
                } else {
                    Ok(outcome(t.size))
                }
            },
        )
        .unwrap_err();
        assert!(matches!(err, Error::InvalidSetting { .. }));
        assert_eq!(ran.load(Ordering::Relaxed), 6);
    }

    #[test]
    fn pieces_tile_the_memory() {
        let mut memory = vec![0u8; 100];
        let pieces = DisjointSlices::new(&mut memory);
        for task in split_with_page_size(0, 100, 30, 1) {
            // SAFETY: one piece per task of one split.
            let piece = unsafe { pieces.piece(&task) };
            piece.fill(task.file_offset as u8 / 30 + 1);
        }
        assert_eq!(&memory[..30], &[1; 30][..]);
        assert_eq!(&memory[90..], &[4; 10][..]);
    }
}

//! The task split: how one request is cut into pieces for the thread pool.
//!
//! KvikIO's rule: one task when `task_size >= size` or `page_size >= size`;
//! otherwise `task_size` chunks, the last one shorter. An empty request has
//! no tasks.
//!
//! ```
//! use kvik_policy::task;
//!
//! // 10 MiB + 1 byte at offset 4097, in 4 MiB tasks.
//! let split = task::split(4097, (10 << 20) + 1, 4 << 20);
//! assert_eq!(split.task_count(), 3);
//! let sizes: Vec<u64> = split.clone().map(|t| t.size).collect();
//! assert_eq!(sizes, [4 << 20, 4 << 20, (2 << 20) + 1]);
//! // Described as runs of equal tasks, whatever the count.
//! assert_eq!(split.runs().len(), 2);
//! assert_eq!(task::split(0, 1 << 40, 4096).runs().len(), 1);
//! ```

/// One piece of a request, handed to one pool worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Task {
    /// Where the piece starts in the file.
    pub file_offset: u64,
    /// Where the piece starts in the caller's buffer.
    pub buffer_offset: u64,
    pub size: u64,
}

/// The tasks of one request, in file order. Lazy: planning a 1 TiB request
/// allocates nothing.
#[derive(Debug, Clone)]
pub struct TaskSplit {
    file_offset: u64,
    size: u64,
    chunk: u64,
    next: u64,
}

/// Split `size` bytes at `file_offset` into tasks of `task_size`.
///
/// # Panics
/// Never: a `task_size` of 0 is treated as "one task" (settings reject 0 earlier).
pub fn split(file_offset: u64, size: u64, task_size: u64) -> TaskSplit {
    split_with_page_size(file_offset, size, task_size, page_size())
}

/// [`split`] with an explicit page size (for tests and plans of other machines).
pub fn split_with_page_size(
    file_offset: u64,
    size: u64,
    task_size: u64,
    page_size: u64,
) -> TaskSplit {
    let chunk = if task_size == 0 || task_size >= size || page_size >= size {
        size
    } else {
        task_size
    };
    TaskSplit {
        file_offset,
        size,
        chunk,
        next: 0,
    }
}

impl TaskSplit {
    /// The size of every task but (possibly) the last.
    pub fn chunk_size(&self) -> u64 {
        self.chunk
    }

    /// Where the request starts in the file.
    pub fn file_offset(&self) -> u64 {
        self.file_offset
    }

    /// The request's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// How many tasks the whole request has (from the start, whatever has
    /// been iterated), as a `u64`: a request of 2^63 bytes in 1-byte tasks
    /// has more tasks than a 32-bit `usize` counts.
    pub fn task_count(&self) -> u64 {
        if self.size == 0 {
            0
        } else {
            self.size.div_ceil(self.chunk)
        }
    }

    /// Task `index` of the request (`None` past the last), in constant time:
    /// workers take tasks by index, so nothing is materialised.
    pub fn task(&self, index: u64) -> Option<Task> {
        if index >= self.task_count() {
            return None;
        }
        let start = index * self.chunk;
        Some(Task {
            file_offset: self.file_offset + start,
            buffer_offset: start,
            size: self.chunk.min(self.size - start),
        })
    }

    /// The tasks as at most two runs of equal size (every task but the
    /// last has the chunk size): what a report shows instead of a list.
    pub fn runs(&self) -> Vec<TaskRun> {
        let count = self.task_count();
        if count == 0 {
            return Vec::new();
        }
        let last = self.task(count - 1).expect("count > 0");
        let full = if last.size == self.chunk {
            count
        } else {
            count - 1
        };
        let mut runs = Vec::with_capacity(2);
        if full > 0 {
            runs.push(TaskRun {
                count: full,
                first_file_offset: self.file_offset,
                size: self.chunk,
            });
        }
        if full < count {
            runs.push(TaskRun {
                count: 1,
                first_file_offset: last.file_offset,
                size: last.size,
            });
        }
        runs
    }
}

/// Consecutive tasks of one size, back to back in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct TaskRun {
    pub count: u64,
    pub first_file_offset: u64,
    /// The size of each task of the run.
    pub size: u64,
}

impl TaskRun {
    /// Where the last task of the run starts.
    pub fn last_file_offset(&self) -> u64 {
        self.first_file_offset + (self.count - 1) * self.size
    }

    /// Where the run ends in the file.
    pub fn end(&self) -> u64 {
        self.first_file_offset + self.count * self.size
    }

    /// Append `later` to a list of runs, merging it into the last run when
    /// it continues that run (same size, starting where it ends): a read
    /// done in a thousand windows of the same split reports as one run.
    pub fn push_merged(runs: &mut Vec<TaskRun>, later: TaskRun) {
        match runs.last_mut() {
            Some(last) if last.size == later.size && last.end() == later.first_file_offset => {
                last.count += later.count;
            }
            _ => runs.push(later),
        }
    }
}

impl Iterator for TaskSplit {
    type Item = Task;

    fn next(&mut self) -> Option<Task> {
        if self.next >= self.size {
            return None;
        }
        let size = self.chunk.min(self.size - self.next);
        let task = Task {
            file_offset: self.file_offset + self.next,
            buffer_offset: self.next,
            size,
        };
        self.next += size;
        Some(task)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let remaining = self.size - self.next;
        let n = if remaining == 0 {
            0
        } else {
            remaining.div_ceil(self.chunk)
        };
        match usize::try_from(n) {
            Ok(n) => (n, Some(n)),
            Err(_) => (usize::MAX, None),
        }
    }
}

/// The system page size.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 { size as u64 } else { 4096 }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn one_gib_in_four_mib_tasks() {
        let tasks: Vec<Task> = split_with_page_size(0, 1 << 30, 4 * MIB, 4096).collect();
        assert_eq!(tasks.len(), 256);
        assert!(tasks.iter().all(|t| t.size == 4 * MIB));
        assert_eq!(tasks[255].file_offset, 255 * 4 * MIB);
        assert_eq!(tasks[255].buffer_offset, 255 * 4 * MIB);
    }

    #[test]
    fn the_last_task_is_shorter_and_offsets_follow_the_file() {
        let tasks: Vec<Task> = split_with_page_size(100, 10 * MIB + 5, 4 * MIB, 4096).collect();
        let sizes: Vec<u64> = tasks.iter().map(|t| t.size).collect();
        assert_eq!(sizes, vec![4 * MIB, 4 * MIB, 2 * MIB + 5]);
        assert_eq!(tasks[1].file_offset, 100 + 4 * MIB);
        assert_eq!(tasks[2].buffer_offset, 8 * MIB);
    }

    #[test]
    fn small_requests_are_one_task() {
        // task_size >= size
        assert_eq!(split_with_page_size(0, 4 * MIB, 4 * MIB, 4096).count(), 1);
        // page_size >= size, even with a tiny task size (KvikIO's rule)
        let tasks: Vec<Task> = split_with_page_size(7, 4000, 199, 4096).collect();
        assert_eq!(
            tasks,
            vec![Task {
                file_offset: 7,
                buffer_offset: 0,
                size: 4000
            }]
        );
        // just over a page is split
        assert_eq!(split_with_page_size(0, 4097, 1024, 4096).count(), 5);
    }

    #[test]
    fn empty_requests_have_no_tasks_and_zero_task_size_does_not_loop() {
        assert_eq!(split_with_page_size(0, 0, 4 * MIB, 4096).count(), 0);
        assert_eq!(split_with_page_size(0, 10 * MIB, 0, 4096).count(), 1);
    }

    #[test]
    fn size_hint_count_and_random_access_agree_with_iteration() {
        for (size, task) in [
            (0, 5),
            (1, 5),
            (4096 * 3 + 1, 4096),
            (10 * MIB, 3 * MIB),
            (1 << 30, 4 * MIB),
        ] {
            let split = split_with_page_size(7, size, task, 4096);
            let tasks: Vec<Task> = split.clone().collect();
            assert_eq!(split.size_hint().0, tasks.len(), "size {size} task {task}");
            assert_eq!(split.task_count(), tasks.len() as u64);
            for (i, t) in tasks.iter().enumerate() {
                assert_eq!(split.task(i as u64), Some(*t));
            }
            assert_eq!(split.task(tasks.len() as u64), None);
            // The runs cover exactly the tasks.
            let from_runs: u64 = split.runs().iter().map(|r| r.count).sum();
            assert_eq!(from_runs, tasks.len() as u64);
            for run in split.runs() {
                let first = tasks
                    .iter()
                    .position(|t| t.file_offset == run.first_file_offset)
                    .unwrap();
                for t in &tasks[first..first + run.count as usize] {
                    assert_eq!(t.size, run.size);
                }
            }
        }
    }

    #[test]
    fn a_huge_request_in_one_byte_tasks_is_counted_not_listed() {
        let split = split_with_page_size(0, 1 << 62, 1, 4096);
        assert_eq!(split.task_count(), 1 << 62);
        assert_eq!(
            split.task((1 << 62) - 1).unwrap().file_offset,
            (1 << 62) - 1
        );
        assert_eq!(
            split.runs(),
            vec![TaskRun {
                count: 1 << 62,
                first_file_offset: 0,
                size: 1
            }]
        );
    }

    #[test]
    fn runs_merge_only_when_they_continue_each_other() {
        let mut runs = split_with_page_size(0, 8 * MIB, 4 * MIB, 4096).runs();
        TaskRun::push_merged(
            &mut runs,
            split_with_page_size(8 * MIB, 8 * MIB, 4 * MIB, 4096).runs()[0],
        );
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].count, 4);
        // A gap, or another size, starts a new run.
        TaskRun::push_merged(
            &mut runs,
            split_with_page_size(20 * MIB, 4 * MIB, 4 * MIB, 4096).runs()[0],
        );
        TaskRun::push_merged(
            &mut runs,
            split_with_page_size(24 * MIB, MIB, 4 * MIB, 4096).runs()[0],
        );
        assert_eq!(runs.len(), 3);
    }

    #[test]
    fn tasks_tile_the_request_exactly() {
        for size in [1u64, 10, 100, 1000, 1024, 4096, 40960, 4097 * 3] {
            for task_size in [199u64, 1024] {
                let tasks: Vec<Task> = split_with_page_size(13, size, task_size, 4096).collect();
                let mut next = 0;
                for t in &tasks {
                    assert_eq!(t.buffer_offset, next);
                    assert_eq!(t.file_offset, 13 + next);
                    assert!(t.size > 0);
                    next += t.size;
                }
                assert_eq!(next, size);
            }
        }
    }
}

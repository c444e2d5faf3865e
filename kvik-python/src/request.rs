//! One Python request (a `pread`, `pwrite`, or a `read`/`write` too large to
//! run as one piece), driven in the background and cancellable between
//! windows.
//!
//! kvik-policy runs a request to its end once it starts: its `PendingIo` has
//! no way to stop it. So a Python request is issued as consecutive
//! *windows* of `WINDOW_ROUNDS × threads × task_size` bytes, each one
//! kvik-policy request; two are in flight at a time (the pool never runs
//! dry between them), and the next is issued from the completion of the
//! previous — on the pool thread that finished it (`Wake`), so nothing but
//! the pool runs the request, and a future nobody waits on still completes.
//! Cancelling (Ctrl-C while waiting, or `IOFuture.cancel()`) stops issuing
//! windows; the ones in flight finish, and only then does the waiter return:
//! no task writes into the buffer after the call that gave up on it. A
//! request of one window (every request up to 16 rounds of tasks, so the
//! usual ones) is exactly one kvik-policy request.
//!
//! The windows' path reports are folded into one (`PathReport::absorb`).
//!
//! When kvik-policy's requests can be cancelled themselves, the windows go
//! and this becomes a thin wrapper around one `PendingIo`.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use kvik_policy::{CuFileLayer, FileHandle, PathReport, PendingIo, Settings};

use crate::memory::{Memory, Window};

/// Rounds of tasks (one task per thread each) in a window: large enough
/// that a window is one kvik-policy request for everyday sizes (1 GiB at 16
/// threads × 4 MiB), small enough that Ctrl-C stops a long read soon.
pub(crate) const WINDOW_ROUNDS: u64 = 16;

/// Windows in flight at once: the next one is queued before the current one
/// drains, so the pool's threads never wait between windows.
const IN_FLIGHT: usize = 2;

/// Read into, or write from, the memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Read,
    Write,
}

/// The size of one window under `settings`.
pub(crate) fn window_bytes(settings: &Settings) -> u64 {
    settings
        .task_size()
        .saturating_mul(settings.num_threads() as u64)
        .saturating_mul(WINDOW_ROUNDS)
        .max(1)
}

/// The path report of a Python request: kvik-policy's, folded over the
/// windows, with how many there were.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Report {
    #[serde(flatten)]
    pub path: PathReport,
    /// kvik-policy requests it took (1 unless larger than a window).
    pub windows: usize,
    /// cuFile's layer of each window when there were several (the folded
    /// report keeps the first window's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cufile_windows: Vec<CuFileLayer>,
}

impl Report {
    pub(crate) fn single(path: PathReport) -> Report {
        Report {
            path,
            windows: 1,
            cufile_windows: Vec::new(),
        }
    }
}

/// Where a handle keeps the report of its last finished request.
pub(crate) type LastReport = Arc<Mutex<Option<Arc<Report>>>>;

/// Record `report` as the handle's last.
pub(crate) fn remember(slot: &LastReport, report: Arc<Report>) {
    *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(report);
}

/// A request in flight (or finished).
#[derive(Debug)]
pub(crate) struct Request {
    state: Mutex<State>,
    finished: Condvar,
}

#[derive(Debug)]
struct State {
    file: FileHandle,
    direction: Direction,
    memory: Arc<Memory>,
    file_offset: u64,
    window: usize,
    /// Bytes of the memory handed to kvik-policy so far.
    issued: usize,
    /// Windows handed to kvik-policy so far.
    windows_issued: usize,
    in_flight: VecDeque<PendingIo<Window>>,
    /// Buffers of finished windows: released when the result is taken, by a
    /// thread that holds the GIL (see `memory.rs`).
    spent: Vec<Window>,
    outcome: Outcome,
    cancelled: bool,
    done: bool,
    last_report: LastReport,
}

/// What the windows have done so far.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Bytes asked for.
    pub requested: u64,
    /// Bytes moved, counted while contiguous from the start.
    pub bytes: u64,
    /// A read met the end of the file: later windows count for nothing.
    pub ended: bool,
    /// The windows' reports, folded as they finish.
    folded: Option<Report>,
    /// The report, once the request has finished.
    pub report: Option<Arc<Report>>,
    pub error: Option<Failure>,
    pub cancelled: bool,
}

/// Why a request failed.
#[derive(Debug)]
pub(crate) enum Failure {
    Policy(kvik_policy::Error),
    /// A bug: the request panicked (kvik-policy hands the panic on).
    Panic(String),
}

impl Request {
    /// Start `direction` of all of `memory` at `file_offset`.
    pub(crate) fn start(
        file: FileHandle,
        direction: Direction,
        memory: Arc<Memory>,
        file_offset: u64,
        last_report: LastReport,
    ) -> kvik_policy::Result<Arc<Request>> {
        let window = usize::try_from(window_bytes(&file.settings()?)).unwrap_or(usize::MAX);
        let memory_len = memory.len();
        let request = Arc::new(Request {
            state: Mutex::new(State {
                file,
                direction,
                memory,
                file_offset,
                window,
                issued: 0,
                windows_issued: 0,
                in_flight: VecDeque::new(),
                spent: Vec::new(),
                outcome: Outcome {
                    requested: memory_len as u64,
                    ..Outcome::default()
                },
                cancelled: false,
                done: false,
                last_report,
            }),
            finished: Condvar::new(),
        });
        request.advance_and_notify();
        Ok(request)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`Request::advance`], then wake the waiters if the request finished —
    /// after unlocking, so that they do not wake only to wait for the lock.
    fn advance_and_notify(self: &Arc<Self>) {
        let finished = self.advance(&mut self.lock());
        if finished {
            self.finished.notify_all();
        }
    }

    /// Issue windows while there is room, take finished ones in order, and
    /// register for the next completion. Whether the request has finished.
    fn advance(self: &Arc<Self>, state: &mut State) -> bool {
        loop {
            state.issue();
            let Some(front) = state.in_flight.front_mut() else {
                state.finish();
                return true;
            };
            let waker = Waker::from(self.clone());
            let mut cx = Context::from_waker(&waker);
            let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                Pin::new(front).poll(&mut cx)
            }));
            match polled {
                Ok(Poll::Pending) => return false,
                Ok(Poll::Ready(result)) => {
                    state.in_flight.pop_front();
                    state.fold(result);
                }
                Err(panic) => {
                    state.in_flight.pop_front();
                    state
                        .outcome
                        .error
                        .get_or_insert(Failure::Panic(panic_message(&panic)));
                }
            }
        }
    }

    /// Stop issuing windows; those in flight finish. Whether the request was
    /// still running.
    pub(crate) fn cancel(&self) -> bool {
        let mut state = self.lock();
        if state.done {
            return false;
        }
        state.cancelled = true;
        true
    }

    /// `read of 4096 bytes at offset 0 of /data/x`, for messages.
    pub(crate) fn what(&self) -> String {
        let state = self.lock();
        format!(
            "{} of {} bytes at offset {} of {}",
            match state.direction {
                Direction::Read => "read",
                Direction::Write => "write",
            },
            state.memory.len(),
            state.file_offset,
            state.file.path().display()
        )
    }

    pub(crate) fn is_done(&self) -> bool {
        self.lock().done
    }

    /// Wait up to `timeout`; whether the request has finished.
    pub(crate) fn wait_for(&self, timeout: Duration) -> bool {
        let state = self.lock();
        if state.done {
            return true;
        }
        let (state, _) = self
            .finished
            .wait_timeout_while(state, timeout, |s| !s.done)
            .unwrap_or_else(|e| e.into_inner());
        state.done
    }

    /// Wait until the request has finished.
    pub(crate) fn wait(&self) {
        let state = self.lock();
        drop(
            self.finished
                .wait_while(state, |s| !s.done)
                .unwrap_or_else(|e| e.into_inner()),
        );
    }

    /// Look at the outcome of a finished request (`None` while running),
    /// releasing the buffers of the finished windows.
    pub(crate) fn with_outcome<R>(&self, f: impl FnOnce(&Outcome) -> R) -> Option<R> {
        let (result, spent) = {
            let mut state = self.lock();
            if !state.done {
                return None;
            }
            (f(&state.outcome), std::mem::take(&mut state.spent))
        };
        // Released outside the lock: dropping them runs Python (the exporter's
        // buffer release).
        drop(spent);
        Some(result)
    }
}

impl Wake for Request {
    /// A window finished (on a pool thread).
    fn wake(self: Arc<Self>) {
        self.advance_and_notify();
    }
}

impl State {
    fn stopping(&self) -> bool {
        self.cancelled || self.outcome.error.is_some() || self.outcome.ended
    }

    fn issue(&mut self) {
        let len = self.memory.len();
        // An empty request is one empty window, so that it has a report.
        while !self.stopping()
            && self.in_flight.len() < IN_FLIGHT
            && (self.issued < len || self.windows_issued == 0)
        {
            let size = self.window.min(len - self.issued);
            let window = Window::new(self.memory.clone(), self.issued, size);
            let at = self.file_offset + self.issued as u64;
            let pending = match self.direction {
                Direction::Read => self.file.pread(window, at),
                Direction::Write => self.file.pwrite(window, at),
            };
            self.issued += size;
            self.windows_issued += 1;
            self.in_flight.push_back(pending);
        }
    }

    fn fold(&mut self, result: kvik_policy::Result<(Window, kvik_policy::Transfer)>) {
        let (window, transfer) = match result {
            Ok(done) => done,
            Err(e) => {
                self.outcome.error.get_or_insert(Failure::Policy(e));
                return;
            }
        };
        let out = &mut self.outcome;
        if !out.ended {
            out.bytes += transfer.bytes as u64;
            out.ended = transfer.bytes < window.len();
        }
        match &mut out.folded {
            None => out.folded = Some(Report::single(transfer.report)),
            Some(report) => {
                if report.cufile_windows.is_empty() {
                    report.cufile_windows.push(report.path.cufile.clone());
                }
                report.cufile_windows.push(transfer.report.cufile.clone());
                report.windows += 1;
                report.path.absorb(transfer.report);
            }
        }
        self.spent.push(window);
    }

    fn finish(&mut self) {
        self.done = true;
        self.outcome.cancelled = self.cancelled;
        if let Some(report) = self.outcome.folded.take() {
            let report = Arc::new(report);
            remember(&self.last_report, report.clone());
            self.outcome.report = Some(report);
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

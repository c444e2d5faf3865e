//! One read: its ranged GETs run on the runtime, at most `max_in_flight` at
//! a time, and `PendingRead` waits for them.
//!
//! The read is cut as kvik-policy cuts a file request (`task::split`, by
//! `KVIKIO_TASK_SIZE`). `max_in_flight` workers each take the next task
//! until none is left; the first failure stops the others from starting
//! tasks and cancels those in flight (a cancelled GET is dropped: its
//! connection closes). The read finishes when the last worker is gone, so
//! no worker outlives the memory it writes to — the same promise as
//! kvik-policy's `PendingIo`, which a blocking read relies on.

use std::any::Any;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use futures_util::FutureExt;
use kvik_policy::{MemoryKind, Operation};

use crate::error::{Error, Result};
use crate::file::FileInner;
use crate::report::{Backend, RemoteReport, RequestReport, RetryPolicy};
use crate::sink::HostDest;

/// A finished read: how many bytes, and the path they took.
#[derive(Debug, Clone)]
pub struct RemoteTransfer {
    /// Bytes read: always all that were asked for.
    pub bytes: usize,
    pub report: RemoteReport,
}

/// How a read is cut and run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub offset: u64,
    pub len: u64,
    pub task_size: u64,
    pub max_in_flight: usize,
    /// Where the bytes go.
    pub memory: MemoryKind,
}

/// The memory a read fills.
#[derive(Debug)]
pub(crate) enum Memory<'a> {
    Host(&'a mut [u8]),
    /// Device memory, checked and vouched for by the caller's typed buffer;
    /// staged through pinned buffers of `staging` bytes.
    Device {
        range: kvik_policy::DeviceRange,
        staging: usize,
        _memory: PhantomData<&'a mut [u8]>,
    },
}

impl Memory<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Memory::Host(host) => host.len(),
            Memory::Device { range, .. } => range.len,
        }
    }

    pub(crate) fn memory(&self) -> MemoryKind {
        match self {
            Memory::Host(_) => MemoryKind::Host,
            Memory::Device { range, .. } => MemoryKind::Device {
                ordinal: range.ordinal,
            },
        }
    }

    /// # Safety
    /// The memory must stay valid and untouched by anyone else until every
    /// worker of the read using the result is gone.
    unsafe fn dest(self) -> HostDest {
        match self {
            // SAFETY: the caller's contract.
            Memory::Host(host) => unsafe { HostDest::new(host.as_mut_ptr(), host.len()) },
            // SAFETY: the caller's contract.
            Memory::Device { range, staging, .. } => unsafe { HostDest::device(range, staging) },
        }
    }
}

struct Job {
    file: Arc<FileInner>,
    plan: Plan,
    /// The size of every task but the last.
    chunk: u64,
    tasks: u64,
    next_task: AtomicU64,
    /// Set once, before any worker starts.
    dest: OnceLock<HostDest>,
    cancel: tokio::sync::watch::Sender<bool>,
    started: Instant,
    state: Mutex<State>,
    finished: Condvar,
}

#[derive(Default)]
struct State {
    /// Workers not yet gone.
    live: usize,
    requests: Vec<RequestReport>,
    error: Option<Error>,
    panic: Option<Box<dyn Any + Send>>,
    /// Set when the last worker is gone.
    outcome: Option<Outcome>,
    taken: bool,
    waker: Option<Waker>,
    /// A background read's buffer, kept here so that it lives as long as
    /// any worker writing to it.
    owned: Option<Box<dyn Any + Send>>,
}

enum Outcome {
    Done(Result<RemoteTransfer>),
    Panicked(Box<dyn Any + Send>),
}

impl Job {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fail(&self, error: Error) {
        let mut state = self.lock();
        if state.error.is_none() {
            state.error = Some(error);
        }
        drop(state);
        self.cancel.send_replace(true);
    }

    /// The last worker is gone: settle the read.
    fn finish(&self, state: &mut State) {
        let outcome = if let Some(panic) = state.panic.take() {
            Outcome::Panicked(panic)
        } else if let Some(error) = state.error.take() {
            Outcome::Done(Err(error))
        } else if state.requests.len() as u64 != self.tasks {
            Outcome::Done(Err(Error::Runtime(format!(
                "only {} of {} ranges of a read finished",
                state.requests.len(),
                self.tasks
            ))))
        } else {
            let mut requests = std::mem::take(&mut state.requests);
            requests.sort_by_key(|r| r.range);
            Outcome::Done(Ok(self.transfer(requests)))
        };
        state.outcome = Some(outcome);
        if let Some(waker) = state.waker.take() {
            waker.wake();
        }
        self.finished.notify_all();
    }

    fn transfer(&self, requests: Vec<RequestReport>) -> RemoteTransfer {
        let bytes: u64 = requests.iter().map(|r| r.bytes).sum();
        RemoteTransfer {
            bytes: bytes as usize,
            report: report(&self.file, self.plan, requests, self.started),
        }
    }

    async fn work(self: Arc<Self>) {
        let dest = self
            .dest
            .get()
            .expect("the destination is set before workers start");
        let mut cancelled = self.cancel.subscribe();
        loop {
            if *cancelled.borrow() {
                return;
            }
            let task = self.next_task.fetch_add(1, Ordering::Relaxed);
            if task >= self.tasks {
                return;
            }
            let start = task * self.chunk;
            let size = self.chunk.min(self.plan.len - start);
            let range = crate::report::ByteRange {
                start: self.plan.offset + start,
                end: self.plan.offset + start + size,
            };
            let fetch = crate::fetch::get_range(
                &self.file.endpoint,
                &self.file.settings,
                range,
                dest.task(start, size),
            );
            let result = tokio::select! {
                result = fetch => result,
                _ = cancelled.wait_for(|c| *c) => return,
            };
            match result {
                Ok(report) => self.lock().requests.push(report),
                Err(error) => return self.fail(error),
            }
        }
    }
}

/// Counts a worker as live until dropped, however its future ends.
struct Live(Arc<Job>);

impl Drop for Live {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.live -= 1;
        if state.live == 0 {
            self.0.finish(&mut state);
        }
    }
}

/// Start a read of `plan` into the memory `dest` returns (it is given the
/// job's state, where `owned`, a background read's buffer, is kept). The
/// job's outcome is set only when every worker is gone: `HostDest::new`'s
/// callers rely on it.
fn start(
    file: Arc<FileInner>,
    plan: Plan,
    dest: impl FnOnce(&mut State) -> HostDest,
    owned: Option<Box<dyn Any + Send>>,
) -> Result<Arc<Job>> {
    let handle = crate::runtime::handle()?;
    let split = kvik_policy::task::split(plan.offset, plan.len, plan.task_size);
    let chunk = split.chunk_size().max(1);
    let tasks = split.task_count();
    let workers = plan.max_in_flight.max(1).min(tasks.max(1) as usize);
    let (cancel, _) = tokio::sync::watch::channel(false);
    let job = Arc::new(Job {
        file,
        plan,
        chunk,
        tasks,
        next_task: AtomicU64::new(0),
        dest: OnceLock::new(),
        cancel,
        started: Instant::now(),
        state: Mutex::new(State {
            live: workers,
            owned,
            ..State::default()
        }),
        finished: Condvar::new(),
    });
    {
        let mut state = job.lock();
        let _ = job.dest.set(dest(&mut state));
    }
    for _ in 0..workers {
        let live = Live(job.clone());
        let worker = job.clone();
        handle.spawn(async move {
            let job = live.0.clone();
            let result = std::panic::AssertUnwindSafe(worker.work())
                .catch_unwind()
                .await;
            if let Err(panic) = result {
                job.lock().panic.get_or_insert(panic);
                job.cancel.send_replace(true);
            }
            // `live` drops here, after a panic is recorded.
            drop(live);
        });
    }
    Ok(job)
}

/// Read into borrowed memory and wait.
pub(crate) fn read_blocking(
    file: Arc<FileInner>,
    plan: Plan,
    target: Memory<'_>,
) -> Result<RemoteTransfer> {
    // SAFETY: the memory is borrowed mutably for this whole call, and the
    // call returns only after the job's outcome is set (`wait`), that is
    // after every worker writing to it is gone.
    let dest = unsafe { target.dest() };
    let job = start(file, plan, |_| dest, None)?;
    wait(&job).map(|(transfer, _)| transfer)
}

/// A read's transfer, and a background read's buffer.
type Finished = (RemoteTransfer, Option<Box<dyn Any + Send>>);

fn wait(job: &Job) -> Result<Finished> {
    let mut state = job.lock();
    while state.outcome.is_none() {
        state = job.finished.wait(state).unwrap_or_else(|e| e.into_inner());
    }
    take(&mut state).expect("the outcome is set")
}

/// The outcome, once; a worker's panic goes on in the caller.
fn take(state: &mut State) -> Option<Result<Finished>> {
    assert!(!state.taken, "the result of this read was already taken");
    let outcome = state.outcome.take()?;
    state.taken = true;
    match outcome {
        Outcome::Done(result) => Some(result.map(|t| (t, state.owned.take()))),
        Outcome::Panicked(panic) => std::panic::resume_unwind(panic),
    }
}

/// A remote read running in the background: wait on it, poll it, or
/// `.await` it (from any async runtime). It owns the buffer until the read
/// finishes and hands it back with the result. Dropping it does not stop
/// the read; the buffer is freed when the read ends.
#[must_use = "a PendingRead does nothing to your buffer you can see until you wait on it"]
pub struct PendingRead<B> {
    inner: Pending,
    _buffer: PhantomData<fn() -> B>,
}

enum Pending {
    Running(Arc<Job>),
    Ready(Option<Result<(RemoteTransfer, Box<dyn Any + Send>)>>),
}

impl<B> std::fmt::Debug for PendingRead<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingRead")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

impl<B: Send + 'static> PendingRead<B> {
    /// Start reading into `buffer`, whose host memory `memory` returns.
    pub(crate) fn start(
        file: Arc<FileInner>,
        plan: Plan,
        buffer: B,
        memory: impl FnOnce(&mut B) -> Memory<'_>,
    ) -> PendingRead<B> {
        let owned: Box<dyn Any + Send> = Box::new(buffer);
        let dest = |state: &mut State| {
            let buffer = state
                .owned
                .as_mut()
                .and_then(|b| b.downcast_mut::<B>())
                .expect("the buffer is in the job");
            // SAFETY: the buffer stays in the job, unmoved, until the outcome is
            // set (after every worker is gone); only then does `take` hand it
            // back. Nothing else reaches it meanwhile.
            unsafe { memory(buffer).dest() }
        };
        match start(file, plan, dest, Some(owned)) {
            Ok(job) => PendingRead {
                inner: Pending::Running(job),
                _buffer: PhantomData,
            },
            Err(error) => PendingRead::failed(error),
        }
    }

    /// A read that finished before it needed the runtime: empty, or failed.
    pub(crate) fn ready(result: Result<(RemoteTransfer, B)>) -> PendingRead<B> {
        PendingRead {
            inner: Pending::Ready(Some(
                result.map(|(t, b)| (t, Box::new(b) as Box<dyn Any + Send>)),
            )),
            _buffer: PhantomData,
        }
    }

    pub(crate) fn failed(error: Error) -> PendingRead<B> {
        PendingRead {
            inner: Pending::Ready(Some(Err(error))),
            _buffer: PhantomData,
        }
    }

    fn unpack(result: Result<Finished>) -> Result<(B, RemoteTransfer)> {
        let (transfer, owned) = result?;
        let buffer = owned
            .and_then(|b| b.downcast::<B>().ok())
            .expect("a finished read hands its buffer back");
        Ok((*buffer, transfer))
    }

    /// Block until the read finishes; the buffer comes back with the
    /// transfer.
    ///
    /// # Panics
    /// When the result was already taken (`try_wait`, `.await`), or a
    /// worker panicked (its panic goes on here).
    pub fn wait(mut self) -> Result<(B, RemoteTransfer)> {
        match &mut self.inner {
            Pending::Running(job) => Self::unpack(wait(job)),
            Pending::Ready(result) => Self::unpack(
                result
                    .take()
                    .expect("the result was already taken")
                    .map(|(t, b)| (t, Some(b))),
            ),
        }
    }

    /// The result if the read has finished, without blocking.
    ///
    /// # Panics
    /// As [`PendingRead::wait`].
    pub fn try_wait(&mut self) -> Option<Result<(B, RemoteTransfer)>> {
        match &mut self.inner {
            Pending::Running(job) => take(&mut job.lock()).map(Self::unpack),
            Pending::Ready(result) => Some(Self::unpack(
                result
                    .take()
                    .expect("the result was already taken")
                    .map(|(t, b)| (t, Some(b))),
            )),
        }
    }
}

impl<B> PendingRead<B> {
    /// Whether the read has finished (successfully or not).
    pub fn is_finished(&self) -> bool {
        match &self.inner {
            Pending::Running(job) => {
                let state = job.lock();
                state.outcome.is_some() || state.taken
            }
            Pending::Ready(_) => true,
        }
    }
}

impl<B: Send + 'static> Future for PendingRead<B> {
    type Output = Result<(B, RemoteTransfer)>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Pending::Running(job) = &self.inner {
            let mut state = job.lock();
            if state.outcome.is_none() {
                state.waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
        }
        match self.try_wait() {
            Some(result) => Poll::Ready(result),
            None => unreachable!("the outcome was set"),
        }
    }
}

// PendingRead holds no pinned data.
impl<B> Unpin for PendingRead<B> {}

/// The plan's requests in a report, for the file's open settings.
pub(crate) fn report(
    file: &FileInner,
    plan: Plan,
    requests: Vec<RequestReport>,
    started: Instant,
) -> RemoteReport {
    let settings = &file.settings;
    RemoteReport {
        backend: Backend::Remote,
        operation: Operation::Read,
        url: file.endpoint.url.clone(),
        endpoint: file.endpoint.kind,
        file_offset: plan.offset,
        requested_bytes: plan.len,
        bytes: requests.iter().map(|r| r.bytes).sum(),
        object_size: file.nbytes,
        memory: plan.memory,
        task_size: plan.task_size,
        // No more GETs are in flight than there are.
        max_in_flight: plan.max_in_flight.min(requests.len()),
        policy: RetryPolicy {
            max_attempts: settings.http_max_attempts(),
            timeout_seconds: settings.http_timeout().as_secs_f64(),
            retry_status_codes: settings.http_status_codes().0.clone(),
        },
        requests,
        seconds: started.elapsed().as_secs_f64(),
    }
}

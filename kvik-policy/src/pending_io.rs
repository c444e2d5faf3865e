//! `PendingIo`: a read or write running on the I/O pool, that you can wait
//! on, poll, or `.await`.
//!
//! It owns the buffer until the request finishes and hands it back with the
//! result, so no task can outlive the memory it fills. Dropping it does not
//! stop the request (a `pwrite` you drop still writes); it only drops the
//! result.
//!
//! A panic inside the request (a bug) is caught on the pool and raised again
//! in whoever takes the result, as `JoinHandle::join` hands a thread's panic
//! on; left on the pool it would abort the process.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use rayon::ThreadPool;

use crate::error::Result;
use crate::file_handle::Transfer;

/// A request in flight. `B` is the buffer it hands back.
#[must_use = "a PendingIo does nothing to your buffer you can see until you wait on it"]
pub struct PendingIo<B> {
    shared: Arc<Shared<B>>,
    pool: Option<Arc<ThreadPool>>,
}

struct Shared<B> {
    state: Mutex<State<B>>,
    finished: Condvar,
}

enum State<B> {
    Running(Option<Waker>),
    /// The result (boxed: it is large), or the panic that ended the request.
    Finished(std::thread::Result<Box<Result<(B, Transfer)>>>),
    Taken,
}

impl<B> std::fmt::Debug for PendingIo<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingIo")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

impl<B: Send + 'static> PendingIo<B> {
    /// Run `job` on `pool`.
    pub(crate) fn spawn(
        pool: Arc<ThreadPool>,
        job: impl FnOnce() -> Result<(B, Transfer)> + Send + 'static,
    ) -> PendingIo<B> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::Running(None)),
            finished: Condvar::new(),
        });
        let done = shared.clone();
        pool.spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).map(Box::new);
            let waker = {
                let mut state = done.lock();
                let previous = std::mem::replace(&mut *state, State::Finished(result));
                match previous {
                    State::Running(waker) => waker,
                    _ => None,
                }
            };
            done.finished.notify_all();
            if let Some(waker) = waker {
                waker.wake();
            }
        });
        PendingIo {
            shared,
            pool: Some(pool),
        }
    }

    /// A request that failed (or finished) before it needed the pool.
    pub(crate) fn ready(result: Result<(B, Transfer)>) -> PendingIo<B> {
        PendingIo {
            shared: Arc::new(Shared {
                state: Mutex::new(State::Finished(Ok(Box::new(result)))),
                finished: Condvar::new(),
            }),
            pool: None,
        }
    }
}

impl<B> Shared<B> {
    fn lock(&self) -> MutexGuard<'_, State<B>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<B> PendingIo<B> {
    /// Whether the request has finished (successfully or not).
    pub fn is_finished(&self) -> bool {
        !matches!(*self.shared.lock(), State::Running(_))
    }

    /// The result if the request has finished, without blocking.
    ///
    /// # Panics
    /// When the result was already taken, or the request panicked.
    pub fn try_wait(&mut self) -> Option<Result<(B, Transfer)>> {
        let mut state = self.shared.lock();
        take_finished(&mut state)
    }

    /// Block until the request finishes; the buffer comes back with the
    /// transfer (bytes moved and the path report).
    ///
    /// Safe to call from inside a task of the same pool: the waiting thread
    /// runs pending pool work (ours included) instead of sleeping, so a pool
    /// of one thread cannot deadlock.
    ///
    /// # Panics
    /// When the result was already taken (through `try_wait` or `.await`),
    /// or the request panicked (its panic goes on here).
    pub fn wait(self) -> Result<(B, Transfer)> {
        let in_pool = self
            .pool
            .as_ref()
            .filter(|p| p.current_thread_index().is_some());
        let mut state = self.shared.lock();
        loop {
            if let Some(result) = take_finished(&mut state) {
                return result;
            }
            match in_pool {
                None => {
                    state = self
                        .shared
                        .finished
                        .wait(state)
                        .unwrap_or_else(|e| e.into_inner());
                }
                Some(pool) => {
                    drop(state);
                    if !matches!(pool.yield_now(), Some(rayon::Yield::Executed)) {
                        // Nothing to help with: our job runs on another worker.
                        let guard = self.shared.lock();
                        let (guard, _) = self
                            .shared
                            .finished
                            .wait_timeout(guard, Duration::from_millis(1))
                            .unwrap_or_else(|e| e.into_inner());
                        drop(guard);
                    }
                    state = self.shared.lock();
                }
            }
        }
    }

    /// [`PendingIo::wait`], then fail if a read met the end of the file
    /// before the buffer was full.
    pub fn wait_exact(self) -> Result<(B, Transfer)> {
        let (buffer, transfer) = self.wait()?;
        Ok((buffer, transfer.exact()?))
    }
}

fn take_finished<B>(state: &mut State<B>) -> Option<Result<(B, Transfer)>> {
    match state {
        State::Running(_) => None,
        State::Finished(_) => match std::mem::replace(state, State::Taken) {
            State::Finished(Ok(result)) => Some(*result),
            State::Finished(Err(panic)) => std::panic::resume_unwind(panic),
            _ => unreachable!(),
        },
        State::Taken => panic!("the result of this PendingIo was already taken"),
    }
}

impl<B> Future for PendingIo<B> {
    type Output = Result<(B, Transfer)>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.shared.lock();
        if let Some(result) = take_finished(&mut state) {
            return Poll::Ready(result);
        }
        *state = State::Running(Some(cx.waker().clone()));
        Poll::Pending
    }
}

// PendingIo holds no pinned data.
impl<B> Unpin for PendingIo<B> {}

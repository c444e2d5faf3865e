//! `PendingIo`: a read or write running on the I/O pool, that you can wait
//! on, poll, or `.await`.
//!
//! It owns the buffer until the request finishes and hands it back with the
//! result, so no task can outlive the memory it fills. Dropping it does not
//! stop the request (a `pwrite` you drop still writes); it only drops the
//! result.
//!
//! The result is handed out once: by [`PendingIo::try_wait`], by
//! [`PendingIo::wait`], or by `.await`. Asked for again after that, each of
//! them answers [`Error::ResultTaken`] (never a panic, never a second copy).
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

use crate::error::{Error, Result};
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

    /// The result if the request has finished, without blocking: `None`
    /// while it runs. Once the result has been taken (here or by `.await`),
    /// `Some(Err(Error::ResultTaken))`.
    ///
    /// # Panics
    /// When the request panicked (its panic goes on here).
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
    /// When the result was already taken (through `try_wait` or `.await`),
    /// [`Error::ResultTaken`].
    ///
    /// # Panics
    /// When the request panicked (its panic goes on here).
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

/// The result once finished (`None` while running), leaving `Taken`.
fn take_finished<B>(state: &mut State<B>) -> Option<Result<(B, Transfer)>> {
    if matches!(state, State::Running(_)) {
        return None;
    }
    match std::mem::replace(state, State::Taken) {
        State::Finished(Ok(result)) => Some(*result),
        State::Finished(Err(panic)) => std::panic::resume_unwind(panic),
        State::Taken => Some(Err(Error::ResultTaken)),
        State::Running(_) => unreachable!("checked above"),
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

#[cfg(test)]
mod tests {
    use std::task::Waker;

    use super::*;

    fn refused() -> Error {
        Error::InvalidSetting {
            setting: "task_size",
            value: "0".into(),
            rule: "must be greater than 0",
        }
    }

    fn poll<B>(pending: &mut PendingIo<B>) -> Poll<Result<(B, Transfer)>> {
        Pin::new(pending).poll(&mut Context::from_waker(Waker::noop()))
    }

    fn is_taken<B>(result: Option<Result<(B, Transfer)>>) -> bool {
        matches!(result, Some(Err(Error::ResultTaken)))
    }

    #[test]
    fn try_wait_hands_the_result_out_once_then_says_taken() {
        let mut pending = PendingIo::<Vec<u8>>::ready(Err(refused()));
        assert!(pending.is_finished());
        assert!(matches!(
            pending.try_wait(),
            Some(Err(Error::InvalidSetting { .. }))
        ));
        assert!(is_taken(pending.try_wait()));
        assert!(is_taken(pending.try_wait()));
        assert!(matches!(
            poll(&mut pending),
            Poll::Ready(Err(Error::ResultTaken))
        ));
        assert!(matches!(pending.wait(), Err(Error::ResultTaken)));
    }

    #[test]
    fn await_then_try_wait_or_wait_says_taken() {
        let mut pending = PendingIo::<Vec<u8>>::ready(Err(refused()));
        assert!(matches!(
            poll(&mut pending),
            Poll::Ready(Err(Error::InvalidSetting { .. }))
        ));
        assert!(is_taken(pending.try_wait()));
        assert!(matches!(pending.wait_exact(), Err(Error::ResultTaken)));
    }

    #[test]
    fn a_request_on_the_pool_is_taken_once() {
        let pool = crate::thread_pool::get(1).unwrap();
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let mut pending = PendingIo::<Vec<u8>>::spawn(pool, move || {
            gate.recv().unwrap();
            Err(refused())
        });
        assert!(pending.try_wait().is_none(), "still running");
        assert!(poll(&mut pending).is_pending());
        release.send(()).unwrap();
        let first = loop {
            if let Some(result) = pending.try_wait() {
                break result;
            }
            std::thread::yield_now();
        };
        assert!(matches!(first, Err(Error::InvalidSetting { .. })));
        assert!(matches!(pending.wait(), Err(Error::ResultTaken)));
    }

    #[test]
    fn a_panic_goes_on_once_then_the_result_is_taken() {
        let pool = crate::thread_pool::get(1).unwrap();
        let mut pending = PendingIo::<Vec<u8>>::spawn(pool, || panic!("a bug inside the request"));
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            loop {
                if pending.try_wait().is_some() {
                    break;
                }
                std::thread::yield_now();
            }
        }));
        assert!(panicked.is_err(), "the request's panic reaches the caller");
        assert!(is_taken(pending.try_wait()));
        assert!(matches!(pending.wait(), Err(Error::ResultTaken)));
    }
}

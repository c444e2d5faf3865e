//! The one tokio runtime remote requests run on: multi-threaded, started on
//! first use, owned by this crate and never shut down (it lives as long as
//! the process).
//!
//! Callers never enter it: every request is spawned onto it, and a blocking
//! call waits on a condition variable, not with `block_on`. So a caller that
//! is itself inside a tokio runtime (any flavour) does not panic with "cannot
//! start a runtime from within a runtime", and its own runtime's timers and
//! I/O are not involved. Async callers `.await` a [`crate::PendingRead`]
//! instead of blocking.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};

use crate::error::{Error, Result};

static RUNTIME: OnceLock<std::result::Result<Runtime, String>> = OnceLock::new();

/// The runtime's handle, starting it on first use.
pub(crate) fn handle() -> Result<&'static Handle> {
    RUNTIME
        .get_or_init(|| {
            Builder::new_multi_thread()
                .thread_name("kvik-remote")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map(Runtime::handle)
        .map_err(|e| Error::Runtime(e.clone()))
}

/// Run `future` on the runtime and block until it is done.
pub(crate) fn run<T: Send + 'static>(
    future: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T> {
    let handle = handle()?;
    let (send, receive) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        // The receiver waits for this; it is only gone if the caller is.
        let _ = send.send(future.await);
    });
    receive
        .recv()
        .map_err(|_| Error::Runtime("a remote request ended without a result".into()))
}

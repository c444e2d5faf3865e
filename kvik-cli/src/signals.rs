//! Named temporary files are removed when a signal ends the process.
//!
//! An output file normally has no name until it is complete (`O_TMPFILE`),
//! and then nothing can be left behind. Where it must have one — a
//! filesystem without `O_TMPFILE`, `KVIK_NO_TMPFILE=1`, and the instant
//! between `linkat` and `renameat` when an existing file is replaced — that
//! name is registered here while it exists. On SIGHUP, SIGINT, SIGQUIT,
//! SIGTERM, SIGALRM, SIGUSR1, SIGUSR2, SIGXCPU or SIGXFSZ the handler
//! removes every registered name, then the signal takes its default action:
//! the process ends as it would have, and its status names the signal.
//!
//! A signal that was ignored when the process started (`nohup`'s SIGHUP)
//! stays ignored. SIGPIPE is ignored by Rust's runtime (a write to a closed
//! pipe fails with EPIPE instead). Not covered: SIGKILL (it cannot be
//! caught), a crash (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT: Rust's own
//! handlers stay in place) and power loss.
//!
//! Written with `sigaction` directly rather than a crate: the handler must
//! leave ignored signals alone and end with the default action, which is
//! what a chaining registry (signal-hook) does not do by itself.

use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd as _, BorrowedFd, RawFd};
use std::sync::Once;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The signals whose default action ends the process and that can be
/// caught, except SIGPIPE (see the module's documentation).
const SIGNALS: [libc::c_int; 9] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGALRM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGXCPU,
    libc::SIGXFSZ,
];

/// A name to remove: `name` in the directory open as `dir`.
#[derive(Debug)]
struct Entry {
    dir: RawFd,
    name: CString,
}

/// More than a command ever has at once (it has at most two).
const SLOTS: usize = 16;

/// The registered names. An entry, once published here, is never freed (a
/// handler may be reading it on another thread): each costs a few dozen
/// bytes, and a command registers a handful at most.
static REGISTERED: [AtomicPtr<Entry>; SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

static INSTALL: Once = Once::new();

/// A registered name; dropping it unregisters the name (it does not
/// remove the file).
#[derive(Debug)]
pub struct Registration {
    slot: Option<usize>,
}

/// Remove `name` in `dir` if a signal ends the process before the returned
/// [`Registration`] is dropped.
///
/// # Safety
/// `dir` must stay open until the registration is dropped: the handler
/// uses its number.
pub unsafe fn register(dir: BorrowedFd<'_>, name: &CStr) -> Registration {
    INSTALL.call_once(install);
    let entry = Box::into_raw(Box::new(Entry {
        dir: dir.as_raw_fd(),
        name: name.to_owned(),
    }));
    let slot = REGISTERED.iter().position(|slot| {
        slot.compare_exchange(
            std::ptr::null_mut(),
            entry,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_ok()
    });
    // With every slot taken (never seen: a command registers at most two
    // names) this name is not covered; the entry is not published.
    Registration { slot }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            REGISTERED[slot].store(std::ptr::null_mut(), Ordering::Release);
        }
    }
}

/// Install the handler for every signal in [`SIGNALS`] that is not ignored.
fn install() {
    for signal in SIGNALS {
        // SAFETY: an all-zero sigaction is valid (SIG_DFL, no flags, empty
        // mask); sigaction fills it.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: reads the current action into `old`, changes nothing.
        if unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) } != 0
            || old.sa_sigaction == libc::SIG_IGN
        {
            continue;
        }
        // SAFETY: as above.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = remove_and_end as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: `remove_and_end` only makes async-signal-safe calls.
        unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) };
    }
}

/// The handler: remove every registered name, then let `signal` take its
/// default action. Only async-signal-safe calls: `unlinkat`, `sigaction`,
/// `raise`.
extern "C" fn remove_and_end(signal: libc::c_int) {
    for slot in &REGISTERED {
        let entry = slot.load(Ordering::Acquire);
        if entry.is_null() {
            continue;
        }
        // SAFETY: published entries are never freed.
        let entry = unsafe { &*entry };
        // SAFETY: the directory stays open while its name is registered
        // (the contract of `register`).
        let dir = unsafe { BorrowedFd::borrow_raw(entry.dir) };
        let _ = rustix::fs::unlinkat(dir, entry.name.as_c_str(), rustix::fs::AtFlags::empty());
    }
    // SAFETY: as in `install`.
    let mut default: libc::sigaction = unsafe { std::mem::zeroed() };
    default.sa_sigaction = libc::SIG_DFL;
    // SAFETY: restores the default action; async-signal-safe.
    unsafe { libc::sigaction(signal, &default, std::ptr::null_mut()) };
    // The signal is blocked while its handler runs: raised again, it stays
    // pending until the handler returns, then ends the process.
    // SAFETY: async-signal-safe.
    unsafe { libc::raise(signal) };
}

//! The I/O thread pools: one rayon pool per thread count, alive while
//! anyone uses it.
//!
//! A pool lives as long as something holds it — a request in flight, a
//! [`PendingIo`](crate::PendingIo), a handle — and the registry keeps one
//! more: the pool asked for last, so that a process using one thread count
//! (the usual case, and KvikIO's, whose one pool lives for the process)
//! never starts its threads twice. Every other pool is released when its
//! last user lets go: a program that tries 1 to 64 threads in turn keeps
//! the threads of one pool, not 2,080.
//!
//! They are our own pools, not rayon's global one, so an application's
//! `par_iter` and our reads do not queue behind each other; and a request
//! made from inside one of our tasks runs its tasks in place (rayon's scopes
//! and `yield_now`), so nesting never deadlocks.

use std::sync::{Arc, Mutex, Weak};

use rayon::ThreadPool;

use crate::error::{Error, Result};

/// The pools made and not yet released, and the one asked for last.
struct Registry {
    // A short list: a process uses one or two thread counts at a time.
    pools: Vec<(usize, Weak<ThreadPool>)>,
    last: Option<Arc<ThreadPool>>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    pools: Vec::new(),
    last: None,
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    // A poisoned lock only means a thread panicked while holding it; the
    // list inside is still consistent (every change is one push or retain).
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// The pool with `threads` workers (named `kvik-io-N`): the live one, or a
/// new one. Hold the `Arc` for as long as the pool should stay.
pub fn get(threads: usize) -> Result<Arc<ThreadPool>> {
    let mut registry = registry();
    registry.pools.retain(|(_, pool)| pool.strong_count() > 0);
    let live = registry
        .pools
        .iter()
        .find(|(n, _)| *n == threads)
        .and_then(|(_, pool)| pool.upgrade());
    let pool = match live {
        Some(pool) => pool,
        None => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("kvik-io-{i}"))
                .build()
                .map_err(|source| Error::ThreadPool { threads, source })?;
            let pool = Arc::new(pool);
            registry.pools.push((threads, Arc::downgrade(&pool)));
            pool
        }
    };
    let previous = registry.last.replace(pool.clone());
    drop(registry);
    // Released outside the lock: dropping a pool signals its threads to
    // end (without waiting for them).
    drop(previous);
    Ok(pool)
}

/// The thread counts of the pools alive now, for diagnostics.
pub fn sizes() -> Vec<usize> {
    let registry = registry();
    let mut sizes: Vec<usize> = registry
        .pools
        .iter()
        .filter(|(_, pool)| pool.strong_count() > 0)
        .map(|(n, _)| *n)
        .collect();
    sizes.sort_unstable();
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pool_per_thread_count_while_held() {
        let a = get(3).unwrap();
        let b = get(3).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.current_num_threads(), 3);
        assert!(sizes().contains(&3));
        let name = a.install(|| std::thread::current().name().map(str::to_owned));
        assert!(name.unwrap().starts_with("kvik-io-"));
    }
}

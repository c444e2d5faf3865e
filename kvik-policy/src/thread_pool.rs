//! The I/O thread pools: one rayon pool per thread count, made on first use
//! and kept for the life of the process (as KvikIO keeps its pool).
//!
//! They are our own pools, not rayon's global one, so an application's
//! `par_iter` and our reads do not queue behind each other; and a request
//! made from inside one of our tasks runs its tasks in place (rayon's scopes
//! and `yield_now`), so nesting never deadlocks.

use std::sync::{Arc, Mutex};

use rayon::ThreadPool;

use crate::error::{Error, Result};

// A short list: a process uses one or two thread counts.
static POOLS: Mutex<Vec<(usize, Arc<ThreadPool>)>> = Mutex::new(Vec::new());

/// The pool with `threads` workers (named `kvik-io-N`).
pub fn get(threads: usize) -> Result<Arc<ThreadPool>> {
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, pool)) = pools.iter().find(|(n, _)| *n == threads) {
        return Ok(pool.clone());
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("kvik-io-{i}"))
        .build()
        .map_err(|source| Error::ThreadPool { threads, source })?;
    let pool = Arc::new(pool);
    pools.push((threads, pool.clone()));
    Ok(pool)
}

/// The thread counts of the pools made so far, for diagnostics.
pub fn sizes() -> Vec<usize> {
    let pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    let mut sizes: Vec<usize> = pools.iter().map(|(n, _)| *n).collect();
    sizes.sort_unstable();
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_pool_per_thread_count() {
        let a = get(3).unwrap();
        let b = get(3).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.current_num_threads(), 3);
        assert!(sizes().contains(&3));
        let name = a.install(|| std::thread::current().name().map(str::to_owned));
        assert!(name.unwrap().starts_with("kvik-io-"));
    }
}

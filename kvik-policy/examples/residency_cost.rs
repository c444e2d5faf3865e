//! What asking the page cache costs: `cachestat` against `mincore` over a
//! range of FILE, for several range sizes, median of many calls.
//!
//!     cargo run --release -p kvik-policy --example residency_cost -- FILE

use std::time::Instant;

use kvik_policy::residency::{ResidencyMethod, residency_by};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: residency_cost FILE")?;
    let file = std::fs::File::open(&path)?;
    let size = file.metadata()?.len();
    for len in [64u64 << 10, 4 << 20, 64 << 20, 1 << 30] {
        let len = len.min(size);
        for method in [ResidencyMethod::Cachestat, ResidencyMethod::Mincore] {
            let calls = if len > 64 << 20 { 50 } else { 500 };
            let mut times = Vec::with_capacity(calls);
            let mut last = None;
            for _ in 0..calls {
                let t = Instant::now();
                last = Some(residency_by(&file, 0, len, method)?);
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
            times.sort_by(f64::total_cmp);
            let r = last.expect("at least one call");
            println!(
                "{:>10} bytes  {:<9}  median {:>9.1} µs  ({}; asked {method})",
                len,
                r.method.to_string(),
                times[calls / 2],
                r
            );
        }
    }
    Ok(())
}

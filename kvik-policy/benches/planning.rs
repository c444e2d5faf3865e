//! The planning hot path: what runs before any byte moves.
//!
//! For a 1 GiB request in 4 MiB tasks (256 tasks, NVIDIA's worked
//! example): KvikIO's task split alone, cuFile's work-unit model for one
//! task, and both together (each task's units, as `kvik plan` and a cuFile
//! route compute them). The target is under 1 µs per task planned; criterion prints the time per iteration, and `per task` is that
//! divided by 256.
//!
//! ```sh
//! cargo bench -p kvik-policy --bench planning
//! ```

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use cufile_config::ExecutionConfig;
use gds_core::schedule::{self, Registration, Request};
use kvik_policy::task;

const GIB: u64 = 1 << 30;
const TASK: u64 = 4 << 20;
const TASKS: u64 = GIB / TASK;

fn planning(c: &mut Criterion) {
    let mut group = c.benchmark_group("1GiB_in_4MiB_tasks");
    group.throughput(Throughput::Elements(TASKS));

    group.bench_function("task_split", |b| {
        b.iter(|| {
            let mut bytes = 0u64;
            for t in task::split(black_box(0), black_box(GIB), black_box(TASK)) {
                bytes += t.size;
            }
            bytes
        })
    });

    let stock = ExecutionConfig::STOCK_FILE;
    group.bench_function("split_and_cufile_units", |b| {
        b.iter(|| {
            let mut units = 0u64;
            for t in task::split(black_box(0), black_box(GIB), black_box(TASK)) {
                let request = Request {
                    file_offset: t.file_offset,
                    buffer_offset: t.buffer_offset,
                    size: t.size,
                };
                for unit in schedule::plan(request, black_box(&stock), Registration::Unregistered) {
                    units += unit.size;
                }
            }
            units
        })
    });
    group.finish();

    // One cuFile request on its own: a 4 MiB task, and the whole 1 GiB as
    // one request (4 units of 256 MiB with the stock file).
    let mut group = c.benchmark_group("schedule_plan");
    for (name, size) in [("4MiB", TASK), ("1GiB", GIB)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let request = Request {
                    file_offset: 0,
                    buffer_offset: 0,
                    size: black_box(size),
                };
                schedule::plan(request, black_box(&stock), Registration::Registered)
                    .map(|u| u.size)
                    .sum::<u64>()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, planning);
criterion_main!(benches);

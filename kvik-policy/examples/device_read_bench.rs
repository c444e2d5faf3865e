//! Device-read throughput of a page-cached file, the way bench/kvikio_bench.py
//! measures KvikIO: one warm-up read, then `--reps` timed reads of the whole
//! file into one GPU allocation, for each thread count; one JSON object per
//! setting (median/min/max GB/s).
//!
//!     cargo run --release -p kvik-policy --example device_read_bench -- FILE \
//!         [--threads 1,4,8,16] [--task-size 4MiB] [--compat on] [--reps 5]

use std::time::Instant;

use kvik_policy::{CompatMode, FileHandle, Settings, gpu, parse_size};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let file = args.next().ok_or("usage: device_read_bench FILE [--threads 1,4,8,16] [--task-size 4MiB] [--compat on] [--reps 5]")?;
    let (mut threads, mut task_size, mut compat, mut reps) =
        ("1,4,8,16".to_string(), 4u64 << 20, CompatMode::On, 5);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--threads" => threads = value,
            "--task-size" => task_size = parse_size(&value)?,
            "--compat" => compat = value.parse()?,
            "--reps" => reps = value.parse()?,
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let stream = gpu::context(0)?.default_stream();
    for n in threads.split(',') {
        let n: usize = n.trim().parse()?;
        let mut settings = Settings::global()?;
        settings
            .set_compat_mode(compat)
            .set_num_threads(n)?
            .set_task_size(task_size)?;
        let handle = FileHandle::open_with(&file, "r", &settings)?;
        let size = handle.nbytes()? as usize;
        let mut buffer = stream.alloc_zeros::<u8>(size)?;
        handle.read_exact(&mut buffer, 0)?; // warm-up: pool, pinned buffers
        let mut rates = Vec::new();
        let mut backend = String::new();
        for _ in 0..reps {
            let start = Instant::now();
            let done = handle.read_with_report(&mut buffer, 0)?;
            let seconds = start.elapsed().as_secs_f64();
            assert_eq!(done.bytes, size);
            backend = done.report.kvik.route.backend.to_string();
            rates.push(size as f64 / seconds / 1e9);
        }
        rates.sort_by(f64::total_cmp);
        println!(
            "{{\"tool\": \"kvik-rs\", \"compat\": \"{compat}\", \"backend\": \"{backend}\", \"threads\": {n}, \
             \"task_size\": {task_size}, \"bytes\": {size}, \"gbps_median\": {:.2}, \"gbps_min\": {:.2}, \"gbps_max\": {:.2}}}",
            rates[rates.len() / 2],
            rates[0],
            rates[rates.len() - 1]
        );
    }
    Ok(())
}

//! Remote-read throughput on localhost: one object (1 GiB by default) served
//! from memory by the tests' HTTP server (`tests/common/server.rs`, ranges
//! answered with `write_all`), read whole into host memory by us, and in the
//! same run by `curl` with the same ranges in parallel (and, given a command,
//! by KvikIO's `RemoteFile.open_http`). One warm-up read, then `--reps`
//! timed reads each; median [min–max] GB/s (10⁹ B/s), and our ratio to each
//! peer.
//!
//!     cargo run --release -p kvik-remote --example remote_bench -- \
//!         [--size 1GiB] [--in-flight 2,8] [--task-size 4MiB] [--reps 5] \
//!         [--kvikio "python3 bench/remote_kvikio.py"] [--json OUT.json]
//!
//! curl runs two ways, writing to /dev/null: one `curl --parallel
//! --parallel-max N` over exactly our ranges (the task split, N in flight:
//! the same requests), and N `curl -r` processes of one range each (the
//! fewest, largest requests: curl at its fastest). Ours lands every byte in
//! one host buffer (touched once before timing), as an application needs.

#[path = "../tests/common/mod.rs"]
mod common;

use std::process::{Command, Stdio};
use std::time::Instant;

use common::server::{Server, serve_all};
use kvik_remote::RemoteOptions;

struct Args {
    size: u64,
    in_flight: Vec<usize>,
    task_size: u64,
    reps: usize,
    kvikio: Option<String>,
    json: Option<String>,
}

fn parse_args() -> Result<Args, Box<dyn std::error::Error>> {
    let mut args = Args {
        size: 1 << 30,
        in_flight: vec![2, 8],
        task_size: 4 << 20,
        reps: 5,
        kvikio: None,
        json: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--size" => args.size = kvik_policy::parse_size(&value)?,
            "--in-flight" => {
                args.in_flight = value
                    .split(',')
                    .map(|n| n.trim().parse())
                    .collect::<Result<_, _>>()?
            }
            "--task-size" => args.task_size = kvik_policy::parse_size(&value)?,
            "--reps" => args.reps = value.parse()?,
            "--kvikio" => args.kvikio = Some(value),
            "--json" => args.json = Some(value),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    Ok(args)
}

/// GB/s of each timed repetition of `run` (one warm-up first).
fn measure(
    reps: usize,
    bytes: u64,
    mut run: impl FnMut() -> Result<(), Box<dyn std::error::Error>>,
) -> Result<Vec<f64>, Box<dyn std::error::Error>> {
    run()?;
    let mut rates = Vec::new();
    for _ in 0..reps {
        let started = Instant::now();
        run()?;
        rates.push(bytes as f64 / started.elapsed().as_secs_f64() / 1e9);
    }
    Ok(rates)
}

fn median(rates: &[f64]) -> f64 {
    let mut sorted = rates.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

fn curl(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let status = Command::new("curl")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if !status.success() {
        return Err(format!("curl failed: {status}").into());
    }
    Ok(())
}

/// `curl --parallel` over the task split: the same ranged GETs as ours.
fn curl_parallel(url: &str, size: u64, task: u64, n: usize) -> Vec<String> {
    let mut args = vec![
        "-s".to_string(),
        "--fail".into(),
        "--parallel".into(),
        "--parallel-max".into(),
        n.to_string(),
    ];
    let mut start = 0;
    while start < size {
        let end = (start + task).min(size) - 1;
        if start > 0 {
            args.push("--next".into());
        }
        args.extend([
            "-r".into(),
            format!("{start}-{end}"),
            "-o".into(),
            "/dev/null".into(),
            url.into(),
        ]);
        start = end + 1;
    }
    args
}

/// N curl processes, one range of size/N each, all at once.
fn curl_processes(url: &str, size: u64, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    let part = size.div_ceil(n as u64);
    let children: Vec<_> = (0..n as u64)
        .filter(|i| i * part < size)
        .map(|i| {
            let (start, end) = (i * part, ((i + 1) * part).min(size) - 1);
            Command::new("curl")
                .args([
                    "-s",
                    "--fail",
                    "-r",
                    &format!("{start}-{end}"),
                    "-o",
                    "/dev/null",
                    url,
                ])
                .stderr(Stdio::null())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    for mut child in children {
        if !child.wait()?.success() {
            return Err("curl failed".into());
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let bytes = common::object(args.size as usize, 42);
    let checksum = crc32fast::hash(&bytes);
    let server = Server::start(vec![("/object.bin", bytes.clone())], serve_all());
    let url = server.url("/object.bin");
    let have_curl = Command::new("curl").arg("--version").output().is_ok();
    println!(
        "object {} bytes at {url}, task size {} bytes, {} reps, {} cores",
        args.size,
        args.task_size,
        args.reps,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let mut buffer = vec![0u8; args.size as usize];
    let mut rows = Vec::new();
    for &n in &args.in_flight {
        let file = RemoteOptions::new()
            .max_in_flight(n)
            .task_size(args.task_size)
            .nbytes(args.size)
            .open_http(&url)?;
        let ours = measure(args.reps, args.size, || {
            file.read(&mut buffer, 0)?;
            Ok(())
        })?;
        assert_eq!(crc32fast::hash(&buffer), checksum, "our bytes differ");
        let mut row = serde_json::json!({"in_flight": n, "ours": ours});
        // Into GPU memory, where there is a GPU (through pinned staging).
        if let Ok(ctx) = kvik_policy::gpu::context(0) {
            let stream = ctx.default_stream();
            let mut device = stream.alloc_zeros::<u8>(args.size as usize)?;
            let ours_device = measure(args.reps, args.size, || {
                file.read(&mut device, 0)?;
                Ok(())
            })?;
            let back = stream.clone_dtoh(&device)?;
            assert_eq!(crc32fast::hash(&back), checksum, "our device bytes differ");
            row["ours_device"] = ours_device.into();
        }
        if have_curl {
            let parallel = curl_parallel(&url, args.size, args.task_size, n);
            row["curl_parallel"] = measure(args.reps, args.size, || curl(&parallel))?.into();
            row["curl_processes"] =
                measure(args.reps, args.size, || curl_processes(&url, args.size, n))?.into();
        }
        if let Some(command) = &args.kvikio {
            let output = Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "{command} {url} --size {} --threads {n} --task-size {} --reps {}",
                    args.size, args.task_size, args.reps
                ))
                .stderr(Stdio::inherit())
                .output()?;
            for line in String::from_utf8_lossy(&output.stdout).lines() {
                if let Ok(result) = serde_json::from_str::<serde_json::Value>(line) {
                    let key = format!("kvikio_{}", result["memory"].as_str().unwrap_or("host"));
                    row[key] = result["rates"].clone();
                }
            }
        }
        print_row(&row);
        rows.push(row);
    }
    if let Some(path) = &args.json {
        let report = serde_json::json!({
            "command": std::env::args().collect::<Vec<_>>().join(" "),
            "size": args.size,
            "task_size": args.task_size,
            "reps": args.reps,
            "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
            "unit": "GB/s (1e9 bytes per second), one value per timed repetition",
            "rows": rows,
        });
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")?;
    }
    Ok(())
}

fn print_row(row: &serde_json::Value) {
    let rates = |key: &str| -> Option<Vec<f64>> {
        row[key]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
    };
    let ours = median(&rates("ours").unwrap());
    println!("in flight {}:", row["in_flight"]);
    for key in [
        "ours",
        "ours_device",
        "curl_parallel",
        "curl_processes",
        "kvikio_host",
        "kvikio_device",
    ] {
        let Some(r) = rates(key).filter(|r| !r.is_empty()) else {
            continue;
        };
        let (min, max) = r
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        let ratio = match key {
            "ours" | "ours_device" => String::new(),
            // Like for like: GPU memory against GPU memory.
            "kvikio_device" => match rates("ours_device").filter(|d| !d.is_empty()) {
                Some(d) => format!("   ours (device) / this = {:.2}×", median(&d) / median(&r)),
                None => format!("   ours / this = {:.2}×", ours / median(&r)),
            },
            _ => format!("   ours / this = {:.2}×", ours / median(&r)),
        };
        println!(
            "  {key:<15} {:>6.2} [{min:.2}–{max:.2}] GB/s{ratio}",
            median(&r)
        );
    }
}

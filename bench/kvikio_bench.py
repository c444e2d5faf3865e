#!/usr/bin/env python3
"""KvikIO's side of the device-read comparison (run on the GPU machine).

Reads a page-cached file into GPU memory with KvikIO (kvikio.CuFile.pread into
a CuPy array) for each thread count and task size, with the compat mode given,
and prints one JSON object per setting: median/min/max GB/s over --reps timed
reads after one warm-up read. KvikIO is installed from the pinned wheels
(kvikio-cu13 26.10.0); see bench/README.md.

    python3 bench/kvikio_bench.py FILE --threads 1,4,8,16 --task-size 4MiB --compat on

With --pattern random: for each --io-size, N reads (--reads; by default 256 MiB
/ size, between 256 and 20,000, as `kvik bench --pattern random`) at distinct
random offsets aligned to the size, each into its own slot of one CuPy buffer:
all issued as pread futures, then all waited (and the device synchronized).
One JSON object per (size, threads), with "pattern": "random"; feed the lines to
`kvik bench --pattern random --kvikio-random FILE`.

    python3 bench/kvikio_bench.py FILE --pattern random --io-size 4KiB,64KiB,1MiB --threads 1,16
"""

import argparse
import json
import statistics
import sys
import time


def parse_size(text: str) -> int:
    units = {"k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30}
    t = text.strip().lower()
    for suffix, mult in sorted(units.items(), key=lambda kv: -len(kv[0])):
        if t.endswith(suffix):
            return int(float(t[: -len(suffix)]) * mult)
    return int(t)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--threads", default="1,4,8,16")
    ap.add_argument("--task-size", default="4MiB")
    ap.add_argument("--compat", default="on", choices=["on", "off", "auto"])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pattern", default="sequential", choices=["sequential", "random"])
    ap.add_argument("--io-size", default="4KiB,64KiB,1MiB")
    ap.add_argument("--reads", type=int, default=None)
    args = ap.parse_args()

    import cupy
    import kvikio
    import kvikio.defaults

    import os

    size = os.path.getsize(args.file)
    buf = cupy.empty(size, dtype=cupy.uint8)
    compat = {"on": kvikio.CompatMode.ON, "off": kvikio.CompatMode.OFF, "auto": kvikio.CompatMode.AUTO}[args.compat]
    task_size = parse_size(args.task_size)
    if args.pattern == "random":
        return random_reads(args, size, compat, task_size)
    for threads in [int(t) for t in args.threads.split(",")]:
        with kvikio.defaults.set({"compat_mode": compat, "num_threads": threads, "task_size": task_size}):
            with kvikio.CuFile(args.file, "r") as f:
                f.pread(buf).get()  # warm-up (thread pool, bounce buffers)
                cupy.cuda.runtime.deviceSynchronize()
                rates = []
                for _ in range(args.reps):
                    t0 = time.perf_counter()
                    n = f.pread(buf).get()
                    cupy.cuda.runtime.deviceSynchronize()
                    dt = time.perf_counter() - t0
                    assert n == size, (n, size)
                    rates.append(size / dt / 1e9)
        print(json.dumps({
            "tool": "kvikio",
            "version": kvikio.__version__,
            "compat": args.compat,
            "threads": threads,
            "task_size": task_size,
            "bytes": size,
            "gbps_median": round(statistics.median(rates), 2),
            "gbps_min": round(min(rates), 2),
            "gbps_max": round(max(rates), 2),
        }), flush=True)
    return 0


def default_reads(io_size: int) -> int:
    return max(256, min(20_000, (256 << 20) // max(io_size, 1)))


def random_reads(args, size: int, compat, task_size: int) -> int:
    import random

    import cupy
    import kvikio
    import kvikio.defaults

    for io_size in [parse_size(s) for s in args.io_size.split(",")]:
        blocks = size // io_size
        n = min(args.reads or default_reads(io_size), blocks)
        offsets = [b * io_size for b in random.Random(0x6B76696B ^ io_size).sample(range(blocks), n)]
        buf = cupy.empty(n * io_size, dtype=cupy.uint8)
        for threads in [int(t) for t in args.threads.split(",")]:
            settings = {"compat_mode": compat, "num_threads": threads, "task_size": task_size}
            with kvikio.defaults.set(settings):
                with kvikio.CuFile(args.file, "r") as f:

                    def once() -> float:
                        t0 = time.perf_counter()
                        futures = [
                            f.pread(buf[i * io_size : (i + 1) * io_size], io_size, off)
                            for i, off in enumerate(offsets)
                        ]
                        got = sum(fut.get() for fut in futures)
                        cupy.cuda.runtime.deviceSynchronize()
                        dt = time.perf_counter() - t0
                        assert got == n * io_size, (got, n * io_size)
                        return dt

                    once()  # warm-up (thread pool, bounce buffers)
                    rates = [n * io_size / once() / 1e9 for _ in range(args.reps)]
            median = statistics.median(rates)
            print(json.dumps({
                "tool": "kvikio",
                "version": kvikio.__version__,
                "compat": args.compat,
                "pattern": "random",
                "threads": threads,
                # Not "task_size": these lines must not pass for sequential
                # results (kvik bench --kvikio refuses them).
                "kvikio_task_size": task_size,
                "io_size": io_size,
                "reads": n,
                "bytes": n * io_size,
                "gbps_median": round(median, 4),
                "gbps_min": round(min(rates), 4),
                "gbps_max": round(max(rates), 4),
                "kiops_median": round(median * 1e9 / io_size / 1e3, 2),
            }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""KvikIO's side of the device-read comparison (run on the GPU machine).

Reads a page-cached file into GPU memory with KvikIO (kvikio.CuFile.pread into
a CuPy array) for each thread count and task size, with the compat mode given,
and prints one JSON object per setting: median/min/max GB/s over --reps timed
reads after one warm-up read. KvikIO is installed from the pinned wheels
(kvikio-cu13 26.10.0); see bench/README.md.

    python3 bench/kvikio_bench.py FILE --threads 1,4,8,16 --task-size 4MiB --compat on
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
    args = ap.parse_args()

    import cupy
    import kvikio
    import kvikio.defaults

    import os

    size = os.path.getsize(args.file)
    buf = cupy.empty(size, dtype=cupy.uint8)
    compat = {"on": kvikio.CompatMode.ON, "off": kvikio.CompatMode.OFF, "auto": kvikio.CompatMode.AUTO}[args.compat]
    task_size = parse_size(args.task_size)
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


if __name__ == "__main__":
    sys.exit(main())

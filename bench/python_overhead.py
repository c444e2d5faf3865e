#!/usr/bin/env python3
"""What Python costs: the same kvik-policy calls made through the `kvik` package
and made from Rust, in the same process, on the same file and the same memory.

* a small read's round trip (4 KiB by default): `f.pread(buf).get()` and
  `f.read(buf)` from Python, against `FileHandle::pread(..).wait()` and
  `FileHandle::read_with_report` from Rust (`CuFile._time_in_rust`);
* a large read (1 GiB by default) of a page-cached file into one buffer, the
  same four ways.

Python and Rust repetitions alternate (ABAB), so drift on a busy machine hits
both. Each figure is the median over --reps repetitions, with min and max.
Host memory (numpy) by default; --memory cupy reads into a CuPy array (GPU 0).

    python3 bench/python_overhead.py --dir /tmp --size 1GiB --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

# numpy's BLAS threads would only compete for the cores being measured.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import kvik  # noqa: E402
from kvikio_bench import parse_size  # noqa: E402 (this directory)


def summary(samples: list[float]) -> dict:
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "samples": samples,
    }


def make_file(path: str, size: int) -> None:
    if os.path.exists(path) and os.path.getsize(path) == size:
        return
    chunk = np.random.default_rng(0).integers(0, 256, min(size, 64 << 20), dtype=np.uint8)
    with kvik.CuFile(path, "w") as f:
        for offset in range(0, size, chunk.nbytes):
            f.write(chunk, size=min(chunk.nbytes, size - offset), file_offset=offset)


def allocate(memory: str, size: int):
    if memory == "cupy":
        import cupy

        buf = cupy.zeros(size, dtype=cupy.uint8)
        cupy.cuda.runtime.deviceSynchronize()
        return buf
    buf = np.empty(size, dtype=np.uint8)
    buf.fill(0)  # fault the pages in before timing
    return buf


def synchronize(memory: str) -> None:
    if memory == "cupy":
        import cupy

        cupy.cuda.runtime.deviceSynchronize()


def small_round_trips(f, buf, reps: int, inner: int, memory: str) -> dict:
    """Seconds per call: Python pread().get(), read(); Rust pread().wait(), read."""
    out = {k: [] for k in ("python_pread_get", "rust_pread_wait", "python_read", "rust_read")}
    for _ in range(3):  # warm-up: thread pool, bounce buffers, caches
        f.pread(buf).get()
        f._time_in_rust(buf, "pread", 1, 10)
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(inner):
            f.pread(buf).get()
        out["python_pread_get"].append((time.perf_counter() - t) / inner)
        out["rust_pread_wait"] += f._time_in_rust(buf, "pread", 1, inner)
        t = time.perf_counter()
        for _ in range(inner):
            f.read(buf)
        out["python_read"].append((time.perf_counter() - t) / inner)
        out["rust_read"] += f._time_in_rust(buf, "read", 1, inner)
    synchronize(memory)
    return {k: summary(v) for k, v in out.items()}


def large_reads(f, buf, reps: int, memory: str) -> dict:
    """Seconds per read of all of buf, the four ways."""
    out = {k: [] for k in ("python_pread_get", "rust_pread_wait", "python_read", "rust_read")}
    f.read(buf)  # warm-up
    synchronize(memory)
    for _ in range(reps):
        t = time.perf_counter()
        f.pread(buf).get()
        synchronize(memory)
        out["python_pread_get"].append(time.perf_counter() - t)
        out["rust_pread_wait"] += f._time_in_rust(buf, "pread", 1, 1)
        t = time.perf_counter()
        f.read(buf)
        synchronize(memory)
        out["python_read"].append(time.perf_counter() - t)
        out["rust_read"] += f._time_in_rust(buf, "read", 1, 1)
    return {k: summary(v) for k, v in out.items()}


def run(args) -> dict:
    size = parse_size(args.size)
    small = parse_size(args.small)
    path = os.path.join(args.dir, f"kvik-python-overhead-{size}.bin")
    make_file(path, size)
    with open(path, "rb") as fh:  # page-cache the file
        while fh.read(64 << 20):
            pass
    result = {
        "schema": "kvik-python-overhead/1",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command_line": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load_average": os.getloadavg(),
        },
        "kvik_version": kvik.__version__,
        "memory": args.memory,
        "defaults": {d["name"]: d["value"] for d in kvik.defaults.describe()},
        "file": path,
    }
    with kvik.CuFile(path) as f:
        buf = allocate(args.memory, small)
        result["small"] = {"bytes": small, **small_round_trips(f, buf, args.reps, args.inner, args.memory)}
        result["small"]["report"] = f.last_report
        del buf
        buf = allocate(args.memory, size)
        result["large"] = {"bytes": size, **large_reads(f, buf, args.reps, args.memory)}
        kvik_layer = f.last_report["kvik"]
        result["large"]["report_summary"] = {
            "backend": kvik_layer["route"]["backend"],
            "execution": kvik_layer["execution"],
            "task_size": kvik_layer["task_size"],
            "windows": f.last_report["windows"],
        }
    result["machine"]["load_average_end"] = os.getloadavg()
    if not args.keep:
        os.unlink(path)
    return result


def print_table(r: dict) -> None:
    s, l = r["small"], r["large"]
    us = lambda k: s[k]["median"] * 1e6  # noqa: E731
    gbps = lambda k: l["bytes"] / l[k]["median"] / 1e9  # noqa: E731
    print(f"kvik {r['kvik_version']}, Python {r['machine']['python']}, {r['memory']} memory, "
          f"defaults {r['defaults']['num_threads']} threads × {r['defaults']['task_size']}")
    print(f"\n{s['bytes']} B round trip (median µs per call [min–max]):")
    for py, rs, name in (("python_pread_get", "rust_pread_wait", "pread().get() vs pread().wait()"),
                         ("python_read", "rust_read", "read() vs read_with_report()")):
        print(f"  {name:34} Python {us(py):7.2f} [{s[py]['min']*1e6:.2f}–{s[py]['max']*1e6:.2f}]"
              f"  Rust {us(rs):7.2f} [{s[rs]['min']*1e6:.2f}–{s[rs]['max']*1e6:.2f}]"
              f"  overhead {us(py) - us(rs):+.2f} µs ({us(py) / us(rs):.2f}×)")
    print(f"\n{l['bytes'] / (1 << 20):.0f} MiB read into one buffer (median GB/s):")
    for py, rs, name in (("python_pread_get", "rust_pread_wait", "pread().get() vs pread().wait()"),
                         ("python_read", "rust_read", "read() vs read_with_report()")):
        print(f"  {name:34} Python {gbps(py):6.2f}  Rust {gbps(rs):6.2f}"
              f"  Python/Rust {gbps(py) / gbps(rs):.3f}")
    print(f"  (large reads: {l['report_summary']})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--size", default="1GiB", help="the large read (and the file)")
    ap.add_argument("--small", default="4KiB", help="the small read")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--inner", type=int, default=2000, help="small calls per repetition")
    ap.add_argument("--memory", choices=["host", "cupy"], default="host")
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--keep", action="store_true", help="keep the file")
    args = ap.parse_args()
    result = run(args)
    print_table(result)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The Python package on the GPU machine: the guide's example through `kvik`
and through KvikIO, byte-exact reads into CuPy arrays and PyTorch tensors, and
ours against KvikIO through Python at the defaults and at 1/4/8/16 threads.

    python3 bench/python_gpu.py all --dir /root/kvik-py --out python-gpu.json

`all` runs every step in its own process (`kvik` and `kvikio` each load
libcufile and open the cuFile driver: they never share a process), on one 1 GiB
file written by the first step and page-cached before the timed reads. One JSON
object per step goes to stdout; `all` also prints the tables and writes every
result to --out. `bench/python_gpu.sh` installs the wheels and runs it.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import statistics
import subprocess
import sys
import time

GiB = 1 << 30
MiB = 1 << 20


def emit(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def sha256_of(array) -> str:
    import cupy

    return hashlib.sha256(cupy.asnumpy(array).view("uint8").tobytes()).hexdigest()


def defaults_of(kvikio) -> dict:
    d = kvikio.defaults
    return {
        "compat_mode": d.get("compat_mode").name,
        "num_threads": d.get("num_threads"),
        "task_size": d.get("task_size"),
        "gds_threshold": d.get("gds_threshold"),
        "bounce_buffer_size": d.get("bounce_buffer_size"),
    }


def guide(args) -> int:
    """The guide's example: write 1 GiB from a CuPy array, read it back with
    CuFile.read, print the defaults, check the path. `--impl kvik` runs it as
    `import kvik as kvikio`."""
    import cupy

    kvikio = importlib.import_module(args.impl)
    # KvikIO's defaults are a submodule its package does not import (ours
    # imports it): the same line a KvikIO user writes.
    importlib.import_module(args.impl + ".defaults")
    path = args.file
    result = {"step": "guide", "impl": args.impl, "defaults": defaults_of(kvikio)}
    print(f"{args.impl} {getattr(kvikio, '__version__', '?')} defaults: {result['defaults']}", file=sys.stderr)

    if not os.path.exists(path) or os.path.getsize(path) != GiB:
        a = cupy.random.default_rng(42).integers(0, 256, GiB, dtype=cupy.uint8)
        t = time.perf_counter()
        with kvikio.CuFile(path, "w") as f:
            written = f.write(a)
        result["write_seconds"] = time.perf_counter() - t
        assert written == GiB, written
        result["written_sha256"] = sha256_of(a)
        del a
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)  # page-cache it

    for mode in ["default", "OFF"]:
        ctx = kvikio.defaults.set({}) if mode == "default" else kvikio.defaults.set("compat_mode", kvikio.CompatMode.OFF)
        with ctx:
            b = cupy.empty(GiB, dtype=cupy.uint8)
            try:
                t = time.perf_counter()
                with kvikio.CuFile(path, "r") as f:
                    n = f.read(b)
                    cupy.cuda.runtime.deviceSynchronize()
                    seconds = time.perf_counter() - t
                    report = getattr(f, "last_report", None)
            except Exception as e:  # compat OFF refused where cuFile cannot run
                result[mode] = {"error": f"{type(e).__name__}: {e}"}
                continue
            entry = {"bytes": n, "seconds": seconds, "gbps": n / seconds / 1e9, "sha256": sha256_of(b)}
            if report is not None:
                cufile = report["cufile"]
                entry["path"] = {
                    "backend": report["kvik"]["route"]["backend"],
                    "effective_compat_mode": report["kvik"]["file"]["effective"],
                    "reason": report["kvik"]["route"]["reason"],
                    "file_routing": report["kvik"]["file"],
                    "tasks": sum(run["count"] for run in report["kvik"]["tasks"]),
                    "cufile": cufile,
                }
            result[mode] = entry
            print(f"{args.impl} compat {mode}: {n} bytes, {entry['gbps']:.2f} GB/s", file=sys.stderr)
            if report is not None:
                print(f"  backend {entry['path']['backend']}: {entry['path']['reason']}", file=sys.stderr)
                print(f"  cuFile: {json.dumps(cufile)[:600]}", file=sys.stderr)
            del b
    if args.impl == "kvik":
        result["check"] = kvikio.check(path)["verdict"]
    emit(result)
    return 0


def exact(args) -> int:
    """Byte-exact reads into CuPy arrays and torch tensors: whole, sliced,
    float32, odd sizes and offsets, under each compat mode."""
    import cupy
    import numpy as np

    import kvik

    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, 64 * MiB + 4093, dtype=np.uint8)
    path = os.path.join(args.dir, "kvik-exact.bin")
    with open(path, "wb") as fh:
        fh.write(data.tobytes())
    try:
        import torch

        have_torch = torch.cuda.is_available()
    except ImportError:
        have_torch = False
    cases = []

    def check(name, mode, n, offset, got_bytes, report):
        ok = got_bytes == data[offset : offset + n].tobytes()
        cases.append({"case": name, "compat": mode, "bytes": n, "offset": offset, "ok": ok,
                      "backend": report["kvik"]["route"]["backend"] if report else None})
        if not ok:
            print(f"MISMATCH {name} compat {mode}", file=sys.stderr)

    for mode in ["ON", "AUTO", "OFF"]:
        try:
            ctx = kvik.defaults.set("compat_mode", mode)
            with ctx, kvik.CuFile(path) as f:
                for n, offset in [(1, 0), (4095, 1), (1_000_003, 12_345), (16 * MiB + 7, 4096), (64 * MiB, 4093)]:
                    a = cupy.empty(n, cupy.uint8)
                    assert f.read(a, file_offset=offset) == n
                    check("cupy whole", mode, n, offset, cupy.asnumpy(a).tobytes(), f.last_report)
                big = cupy.full(8 * MiB + 8192, 0xAB, cupy.uint8)
                view = big[4097 : 4097 + 8 * MiB]
                assert f.pread(view, file_offset=100).get() == 8 * MiB
                host = cupy.asnumpy(big)
                check("cupy sliced", mode, 8 * MiB, 100, host[4097 : 4097 + 8 * MiB].tobytes(), f.last_report)
                assert (host[:4097] == 0xAB).all() and (host[4097 + 8 * MiB :] == 0xAB).all()
                fl = cupy.empty(4 * MiB, cupy.float32)
                assert f.read(fl, file_offset=3) == 16 * MiB
                check("cupy float32", mode, 16 * MiB, 3, cupy.asnumpy(fl).view(np.uint8).tobytes(), f.last_report)
                if have_torch:
                    for n, offset in [(3, 5), (1_000_001, 0), (32 * MiB + 1, 77)]:
                        t = torch.empty(n, dtype=torch.uint8, device="cuda")
                        assert f.read(t, file_offset=offset) == n
                        check("torch whole", mode, n, offset, t.cpu().numpy().tobytes(), f.last_report)
                    tb = torch.zeros(4 * MiB + 1024, dtype=torch.float32, device="cuda")
                    tv = tb[512 : 512 + 4 * MiB]
                    assert f.read(tv, file_offset=9) == 16 * MiB
                    check("torch sliced float32", mode, 16 * MiB, 9, tv.cpu().numpy().view(np.uint8).tobytes(), f.last_report)
                    assert (tb[:512] == 0).all().item() and (tb[512 + 4 * MiB :] == 0).all().item()
        except RuntimeError as e:
            cases.append({"case": "open", "compat": mode, "ok": None, "error": str(e)})
    os.unlink(path)
    bad = [c for c in cases if c["ok"] is False]
    emit({"step": "exact", "torch": have_torch, "cases": cases, "mismatches": len(bad)})
    return 1 if bad else 0


def speed(args) -> int:
    """Page-cached 1 GiB → CuPy array: defaults, then compat ON at each thread count."""
    import cupy

    kvikio = importlib.import_module(args.impl)
    # KvikIO's defaults are a submodule its package does not import (ours
    # imports it): the same line a KvikIO user writes.
    importlib.import_module(args.impl + ".defaults")
    size = os.path.getsize(args.file)
    buf = cupy.empty(size, dtype=cupy.uint8)
    configs = [("defaults", {})] + [
        (f"ON x{t}", {"compat_mode": kvikio.CompatMode.ON, "num_threads": t, "task_size": 4 * MiB})
        for t in args.threads
    ]
    for name, config in configs:
        with kvikio.defaults.set(config):
            with kvikio.CuFile(args.file, "r") as f:
                f.read(buf)  # warm-up: thread pool, bounce buffers
                cupy.cuda.runtime.deviceSynchronize()
                rates = []
                for _ in range(args.reps):
                    t = time.perf_counter()
                    n = f.pread(buf).get()
                    cupy.cuda.runtime.deviceSynchronize()
                    dt = time.perf_counter() - t
                    assert n == size, (n, size)
                    rates.append(size / dt / 1e9)
                backend = None
                if args.impl == "kvik":
                    backend = f.last_report["kvik"]["route"]["backend"]
            emit({
                "step": "speed", "impl": args.impl, "config": name, "settings": defaults_of(kvikio),
                "backend": backend, "gbps_median": statistics.median(rates),
                "gbps_min": min(rates), "gbps_max": max(rates), "samples": rates,
            })
    return 0


def run_step(argv: list[str], timeout: int) -> list[dict]:
    cmd = [sys.executable, os.path.abspath(__file__)] + argv
    print(f"\n===== {' '.join(argv)} =====", flush=True)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        print(f"timed out after {timeout} s", flush=True)
        return [{"step": argv[0], "error": f"timed out after {timeout} s", "argv": argv,
                 "stderr": (e.stderr or b"")[-2000:].decode(errors="replace") if isinstance(e.stderr, bytes) else str(e.stderr)}]
    sys.stdout.write(out.stderr)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0:
        print(f"exit {out.returncode}", flush=True)
        rows.append({"step": argv[0], "argv": argv, "exit": out.returncode, "stderr": out.stderr[-2000:]})
    for row in rows:
        print(json.dumps(row)[:400], flush=True)
    return rows


def all_steps(args) -> int:
    os.makedirs(args.dir, exist_ok=True)
    file = os.path.join(args.dir, "kvik-python-gpu-1GiB.bin")
    threads = ",".join(str(t) for t in args.threads)
    rows = []
    rows += run_step(["guide", "--impl", "kvik", "--file", file], 90)
    rows += run_step(["guide", "--impl", "kvikio", "--file", file], 90)
    rows += run_step(["exact", "--dir", args.dir], 90)
    for rep in range(args.rounds):
        for impl in ("kvik", "kvikio"):
            rows += run_step(["speed", "--impl", impl, "--file", file, "--threads", threads, "--reps", str(args.reps)], 60)
    os.unlink(file)

    guides = {r["impl"]: r for r in rows if r.get("step") == "guide" and "impl" in r}
    print("\n===== the guide's example: same bytes? =====")
    for impl, g in guides.items():
        for mode in ("default", "OFF"):
            e = g.get(mode, {})
            print(f"{impl:7} compat {mode:7} {e.get('gbps', float('nan')):6.2f} GB/s sha256 {e.get('sha256', e.get('error', '?'))[:16]}")
    digests = {e.get("sha256") for g in guides.values() for m in ("default", "OFF") for e in [g.get(m, {})] if "sha256" in e}
    written = {g.get("written_sha256") for g in guides.values()} - {None}
    print(f"one digest for every read and the written data: {len(digests) == 1 and digests == written if written else len(digests) == 1}")

    speeds = [r for r in rows if r.get("step") == "speed" and "gbps_median" in r]
    print("\n===== ours vs KvikIO through Python, page-cached 1 GiB → CuPy (GB/s, median; best round) =====")
    print(f"{'config':12} {'kvik':>8} {'KvikIO':>8} {'kvik/KvikIO':>12}")
    best = {}
    for r in speeds:
        key = (r["impl"], r["config"])
        best[key] = max(best.get(key, 0), r["gbps_median"])
    for config in ["defaults"] + [f"ON x{t}" for t in args.threads]:
        ours, theirs = best.get(("kvik", config)), best.get(("kvikio", config))
        ratio = f"{ours / theirs:.2f}x" if ours and theirs else "-"
        print(f"{config:12} {ours or float('nan'):8.2f} {theirs or float('nan'):8.2f} {ratio:>12}")
    exact_rows = [r for r in rows if r.get("step") == "exact"]
    if exact_rows:
        e = exact_rows[0]
        print(f"\nbyte-exact cases: {sum(1 for c in e.get('cases', []) if c['ok'])} ok, {e.get('mismatches')} mismatched, torch {'yes' if e.get('torch') else 'no'}")
    with open(args.out, "w") as out:
        json.dump({"schema": "kvik-python-gpu/1", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "rows": rows}, out, indent=1)
    failed = [r for r in rows if r.get("exit") or r.get("error") or r.get("mismatches")]
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="step", required=True)
    g = sub.add_parser("guide")
    g.add_argument("--impl", choices=["kvik", "kvikio"], required=True)
    g.add_argument("--file", required=True)
    e = sub.add_parser("exact")
    e.add_argument("--dir", required=True)
    s = sub.add_parser("speed")
    s.add_argument("--impl", choices=["kvik", "kvikio"], required=True)
    s.add_argument("--file", required=True)
    s.add_argument("--threads", type=lambda t: [int(x) for x in t.split(",")], default=[1, 4, 8, 16])
    s.add_argument("--reps", type=int, default=5)
    a = sub.add_parser("all")
    a.add_argument("--dir", default="/root/kvik-python-gpu")
    a.add_argument("--out", default="python-gpu.json")
    a.add_argument("--threads", type=lambda t: [int(x) for x in t.split(",")], default=[1, 4, 8, 16])
    a.add_argument("--reps", type=int, default=5)
    a.add_argument("--rounds", type=int, default=2, help="speed rounds per implementation, alternating")
    args = ap.parse_args()
    return {"guide": guide, "exact": exact, "speed": speed, "all": all_steps}[args.step](args)


if __name__ == "__main__":
    sys.exit(main())

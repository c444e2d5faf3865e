#!/usr/bin/env python3
"""KvikIO's side of the remote-read comparison (kvik-remote's remote_bench).

Reads one object over HTTP with kvikio.RemoteFile.open_http into host memory
(a NumPy array) and, when CuPy and a GPU are there, into GPU memory (a CuPy
array): one warm-up read, then --reps timed reads, with KvikIO's thread pool
at --threads and its task size at --task-size. Prints one JSON object per
memory kind: {"memory": "host"|"device", "threads": N, "rates": [GB/s, ...]}.

    python3 bench/remote_kvikio.py URL --size BYTES --threads 16 --task-size 4194304 --reps 5
"""

import argparse
import json
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--task-size", type=int, default=4 << 20)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()

    import numpy
    import kvikio
    import kvikio.defaults

    targets = [("host", numpy.empty(args.size, dtype=numpy.uint8), lambda: None)]
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        targets.append(
            ("device", cupy.empty(args.size, dtype=cupy.uint8), cupy.cuda.runtime.deviceSynchronize)
        )
    except Exception as e:  # no CuPy or no GPU: host memory only
        print(f"remote_kvikio: no device memory ({e})", file=sys.stderr)

    settings = {"num_threads": args.threads, "task_size": args.task_size}
    with kvikio.defaults.set(settings):
        with kvikio.RemoteFile.open_http(args.url, nbytes=args.size) as f:
            for memory, buf, sync in targets:
                f.read(buf)  # warm-up: thread pool, connections, first touch
                sync()
                rates = []
                for _ in range(args.reps):
                    t0 = time.perf_counter()
                    n = f.read(buf)
                    sync()
                    dt = time.perf_counter() - t0
                    assert n == args.size, (n, args.size)
                    rates.append(args.size / dt / 1e9)
                print(json.dumps({"memory": memory, "threads": args.threads, "rates": rates}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

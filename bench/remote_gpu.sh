#!/usr/bin/env bash
# Remote reads on the GPU machine: kvik-remote vs KvikIO's RemoteFile vs curl,
# the same 1 GiB object from the same localhost HTTP server, in one run.
#
# Run from the repository root with the release example at .gpu/remote_bench
# (built on the development machine:
#   cargo build --release -p kvik-remote --example remote_bench
#   strip -o .gpu/remote_bench target/release/examples/remote_bench )   # 10 MB stripped, 56 MB not
# and KvikIO's wheels in .gpu/whl/ (kvikio-cu13, libkvikio-cu13, cupy, …):
#
#     OUT=/some/dir bash bench/remote_gpu.sh
#
# The machine has no network: remote_bench serves the object itself on
# 127.0.0.1 (from memory) and points every reader at it. KvikIO reads into
# host memory (NumPy) and GPU memory (CuPy); ours reads into host memory
# (reads into GPU memory wait for kvik-policy's host→device staging entry
# point). Writes under $OUT: remote-h200.json (every repetition),
# remote-h200.txt (the table with ratios), remote-gpu.log (everything).
# About 4 minutes.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kvik-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/remote-gpu.log") 2>&1
section() { printf '\n===== %s =====\n' "$*"; }

section "machine"
nvidia-smi -L 2>&1; uname -r; nproc; free -g | head -2
command -v curl >/dev/null && curl --version | head -1 || echo "curl: not installed (no curl rows)"

section "KvikIO from the wheels"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/*.whl 2>&1 | tail -3
PYTHONPATH=/tmp/site python3 -c 'import kvikio; print("kvikio", kvikio.__version__)'

section "1 GiB over HTTP on localhost: ours (host) vs KvikIO (host, device) vs curl; 4 MiB tasks"
timeout 420 .gpu/remote_bench --size 1GiB --in-flight ${REMOTE_IN_FLIGHT:-1,4,8,16} --task-size 4MiB --reps ${REMOTE_REPS:-5} \
  --kvikio "env PYTHONPATH=/tmp/site python3 bench/remote_kvikio.py" \
  --json "$OUT/remote-h200.json" | tee "$OUT/remote-h200.txt"
echo "exit=${PIPESTATUS[0]}"

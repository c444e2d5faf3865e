#!/usr/bin/env bash
# The Python package on the GPU machine (it has no cargo and no network: the
# wheels are built here and carried).
#
# Before, on the development machine, from the repository root:
#     target/python-venv/bin/maturin build --release -m kvik-python/Cargo.toml -o .gpu/py
#     target/python-venv/bin/pip download -d .gpu/py --only-binary=:all: \
#         --python-version 3.12 --platform manylinux2014_x86_64 pytest
# and KvikIO's wheels in .gpu/whl/ as for bench/gpu.sh. Then, on the GPU machine:
#     OUT=/some/dir bash bench/python_gpu.sh [all|compare|overhead|pytest]
# (all by default, about 6 minutes; the parts fit one 10-minute command each).
#
# Writes under $OUT: python-gpu.log (everything), python-gpu.json (the guide's
# example through kvik and KvikIO, byte-exact CuPy/torch reads, ours vs KvikIO
# at the defaults and 1/4/8/16 threads), python-overhead-{gpu,host}.json
# (Python vs Rust for the same calls), pytest.log (the suite, GPU tests
# required). About 6 minutes; every step has a timeout.
set -u
cd "$(dirname "$0")/.."
PART=${1:-all}
OUT=${OUT:-/tmp/kvik-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/python-gpu.log") 2>&1
want() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }
section() { printf '\n===== %s =====\n' "$*"; }
DIR=${BENCH_DIR:-/root/kvik-python-gpu}
mkdir -p "$DIR"

section "machine"
nvidia-smi -L 2>&1; uname -r; head -1 /etc/os-release; nproc; python3 --version
python3 -c 'import cupy, numpy; print("cupy", cupy.__version__, "numpy", numpy.__version__)'
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>&1

section "install: kvik (our wheel) and KvikIO (its wheels), separate directories"
rm -rf /tmp/kvik-site /tmp/site
python3 -m pip install -q --no-index --no-deps --target /tmp/kvik-site .gpu/py/*.whl 2>&1 | tail -3
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/*.whl 2>&1 | tail -3
export PYTHONPATH=/tmp/kvik-site:/tmp/site
python3 -c 'import kvik, kvikio; print("kvik", kvik.__version__, kvik.__file__); print("kvikio", kvikio.__version__)'

section "udev entry (cuFile registers files on this VM only with it)"
d=$(mountpoint -d /); mkdir -p /run/udev/data
printf 'E:ID_FS_TYPE=ext4\nE:ID_FS_USAGE=filesystem\n' > /run/udev/data/b$d
python3 -c 'import kvik, json; print(json.dumps(kvik.check("'"$DIR"'")["verdict"], indent=1))'

if want compare; then
  section "the guide's example, byte-exact reads, ours vs KvikIO (bench/python_gpu.py all)"
  # shellcheck disable=SC2086
  timeout 420 python3 bench/python_gpu.py all --dir "$DIR" --out "$OUT/python-gpu.json" ${PY_GPU_ARGS:-}
  echo "exit=$?"
fi

if want overhead; then
  section "Python overhead: the same calls from Python and from Rust (GPU memory, then host)"
  timeout 150 python3 bench/python_overhead.py --dir "$DIR" --memory cupy --json "$OUT/python-overhead-gpu.json"
  timeout 150 python3 bench/python_overhead.py --dir "$DIR" --memory host --json "$OUT/python-overhead-host.json"
fi

if want pytest; then
  section "pytest suite, GPU tests required (KVIK_REQUIRE_GPU=1)"
  if python3 -c 'import pytest' 2>/dev/null; then
    KVIK_REQUIRE_GPU=1 timeout 300 python3 -m pytest kvik-python/tests -rs -p no:cacheprovider 2>&1 | tee "$OUT/pytest.log" | tail -40
  else
    echo "skipped: pytest is not installed here (carry its wheels in .gpu/py)"
  fi
fi
rm -rf "$DIR"

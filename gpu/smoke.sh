#!/usr/bin/env bash
# Early GPU smoke run (device machine, from the repository root, with .gpu/ carried):
# machine facts, `kvik check`, and the gds-core / cufile-sys tests against the
# machine's libcufile with the default configuration and with gpu/cufile-stock.json.
set -u
OUT=${OUT:-/tmp/kvik-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/smoke.log") 2>&1
section() { printf '\n===== %s =====\n' "$*"; }

section "udev entry (SPEC §8)"
d=$(mountpoint -d /); mkdir -p /run/udev/data
printf 'E:ID_FS_TYPE=ext4\nE:ID_FS_USAGE=filesystem\n' > /run/udev/data/b$d; echo "wrote /run/udev/data/b$d"

section "machine"
nvidia-smi -L; uname -r; head -2 /etc/os-release; nproc; df -hT / /tmp | cat
ls -la /usr/local/cuda/lib64/libcufile* 2>&1
python3 -m pip show -f nvidia-cufile 2>/dev/null | grep -iE "^(version|location)|libcufile"
ldconfig -p | grep -iE "cufile|libcuda\.so"
ls -la /etc/cufile.json 2>&1 && grep -vE '^\s*//' /etc/cufile.json | head -80
ls /proc/driver/nvidia-fs 2>&1

section "kvik check"
.gpu/kvik check /root; echo "exit=$?"
.gpu/kvik check --json /root > "$OUT/check.json"; echo "exit=$?"

PIPLIB=$(python3 -c "import nvidia.cufile, os; print(os.path.join(list(nvidia.cufile.__path__)[0], '..', 'cu13', 'lib', 'libcufile.so.0'))" 2>/dev/null)
echo "pip libcufile: $PIPLIB"; ls -la "$PIPLIB" 2>&1

section "cufile-sys real library (1.15 from the machine)"
KVIK_CUFILE_LIBRARY_1_15=$(readlink -f /usr/local/cuda/lib64/libcufile.so.0) .gpu/real_library --nocapture 2>&1 | tail -8

export KVIK_TEST_DIR=/root
section "gds-core on GPU, default configuration"
timeout 300 .gpu/gpu_cufile --nocapture --test-threads=1; echo "exit=$?"
section "gds-core on GPU, gpu/cufile-stock.json"
CUFILE_ENV_PATH_JSON=$PWD/gpu/cufile-stock.json timeout 300 .gpu/gpu_cufile --nocapture --test-threads=1; echo "exit=$?"

section "cufile logs"
ls -la /tmp/kvik-*/ 2>&1; for f in /tmp/kvik-*/*.log cufile.log; do echo "--- $f"; tail -20 "$f"; done

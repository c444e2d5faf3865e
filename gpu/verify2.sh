#!/usr/bin/env bash
# Second GPU run: the exit-code fixes (driver closed at exit), where cuFile's
# log goes, the gds-core GPU test in full, a one-shot `kvik read` with
# prepared bounce buffers, a task-size sweep at 16 threads, then bench/gpu.sh.
set -u
OUT=${OUT:-/tmp/kvik-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/verify2.log") 2>&1
section() { printf '\n===== %s =====\n' "$*"; }
K=.gpu/kvik
D=/root/kvik-verify
mkdir -p "$D"

section "before the udev entry: --compat off must exit 1 (not crash) with cuFile's reason"
$K write "$D/small.bin" --size 64MiB --host >/dev/null
$K read "$D/small.bin" --device 0 --compat off; echo "exit=$? (expect 1)"
ls -la /tmp/kvik-0/ 2>&1; for f in /tmp/kvik-0/*.log cufile.log; do [ -f "$f" ] && { echo "--- $f"; tail -8 "$f"; }; done

section "udev entry (SPEC §8)"
d=$(mountpoint -d /); mkdir -p /run/udev/data
printf 'E:ID_FS_TYPE=ext4\nE:ID_FS_USAGE=filesystem\n' > /run/udev/data/b$d

section "CUFILE_FORCE_COMPAT_MODE=true must exit 0"
$K write "$D/f1g" --size 1GiB --host >/dev/null && cat "$D/f1g" >/dev/null
CUFILE_FORCE_COMPAT_MODE=true KVIKIO_COMPAT_MODE=off $K read "$D/f1g" --device 0 | sed -n '1,3p;/cuFile/p'; echo "exit=${PIPESTATUS[0]}"

section "gds-core GPU test"
KVIK_TEST_DIR="$D" timeout 200 .gpu/gpu_cufile --nocapture --test-threads=1 2>&1 | grep -E "^ +[0-9]+ +[0-9]+ +[0-9]+ |^file_offset|^test |test result|panicked|assert"

section "one-shot kvik read into GPU 0 (bounce buffers prepared before timing), defaults and compat on"
for i in 1 2 3; do $K read "$D/f1g" --device 0 | sed -n '2p'; done
KVIKIO_NTHREADS=8 $K read "$D/f1g" --device 0 | sed -n '2p'

section "task size sweep at 16 and 12 threads (device_read_bench, compat on, median of 7)"
for ts in 2MiB 4MiB 8MiB; do .gpu/device_read_bench "$D/f1g" --threads 16 --task-size $ts --compat on --reps 7; done
.gpu/device_read_bench "$D/f1g" --threads 12 --task-size 4MiB --compat on --reps 7
rm -rf "$D"

section "bench/gpu.sh"
OUT="$OUT" bash bench/gpu.sh
rm -f "$OUT/gpu-hot.txt" "$OUT/gpu-cold.txt"

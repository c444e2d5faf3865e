#!/usr/bin/env bash
# The benchmarks on the GPU machine, in one device call, each part bounded:
#
#     bash gpu/bench-run.sh [random] [python] [remote]    (all three by default)
#
# random: bench/gpu-random.sh (random small reads: ours vs KvikIO vs fio;
#         cuFile's batch API; cold reads);
# python: bench/python_gpu.sh compare + pytest (the Python package);
# remote: bench/remote_gpu.sh (HTTP reads: ours vs KvikIO's RemoteFile vs curl).
#
# Needs in .gpu/ (carried): kvik and bundle.tar.xz (gpu/stage.sh), whl/
# (KvikIO's wheels), py/ (our wheel and pytest's: see bench/python_gpu.sh),
# remote_bench (see bench/remote_gpu.sh). Everything each part writes goes
# under $OUT/PART/, packed at the end into $OUT/bench.tar.gz, with the log
# of the whole run as $OUT/bench-run.log.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kvik-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/bench-run.log") 2>&1
PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(random python remote)
START=$SECONDS

# The test binaries gpu-random.sh runs, from the bundle.
B=/tmp/run-all-bin
if [ ! -d "$B/tests" ]; then
  mkdir -p "$B" && tar xJf .gpu/bundle.tar.xz -C "$B"
fi
ln -sf "$B/tests/gds-core--gpu_batch" .gpu/gpu_batch
ln -sf "$B/tests/kvik-policy--gpu_batch_read" .gpu/gpu_batch_read
d=$(mountpoint -d /); mkdir -p /run/udev/data
printf 'E:ID_FS_TYPE=ext4\nE:ID_FS_USAGE=filesystem\n' > /run/udev/data/b$d

for part in "${PARTS[@]}"; do
  mkdir -p "$OUT/$part"
  printf '\n########## %s (at %ss) ##########\n' "$part" $((SECONDS - START))
  case "$part" in
    # Shorter than the scripts' own defaults, to fit one device call.
    random) OUT=$OUT/$part RANDOM_THREADS=${RANDOM_THREADS:-16} RANDOM_REPS=${RANDOM_REPS:-3} \
              COLD_ROUNDS=${COLD_ROUNDS:-1} COLD_THREADS=${COLD_THREADS:-16} \
              timeout "${RANDOM_TIMEOUT:-330}" bash bench/gpu-random.sh ;;
    python) OUT=$OUT/$part PY_GPU_ARGS="--reps 3 --rounds 1" timeout "${PYTHON_TIMEOUT:-300}" bash bench/python_gpu.sh compare
            [ -n "${SKIP_PYTEST:-}" ] || OUT=$OUT/$part timeout 100 bash bench/python_gpu.sh pytest ;;
    remote) OUT=$OUT/$part REMOTE_IN_FLIGHT=4,16 REMOTE_REPS=3 timeout 200 bash bench/remote_gpu.sh ;;
    *) echo "unknown part $part" ;;
  esac
  echo "$part: exit $? after $((SECONDS - START))s"
done
tar czf "$OUT/bench.tar.gz" -C "$OUT" "${PARTS[@]}"
echo "done in $((SECONDS - START))s"

#!/usr/bin/env bash
# Every test and every GPU example on the GPU machine, with GPU skips turned
# into failures.
#
# Here (a machine with cargo):   bash gpu/stage.sh
# There (device tool, repository root, .gpu/ carried, as root):
#                                bash gpu/run-all.sh
#
# The GPU machine has no cargo and no internet: it runs what gpu/stage.sh
# built. This script
#   1. points KVIK_CUFILE_LIBRARY (and KVIK_CUFILE_LIBRARY_1_15) at the
#      machine's libcufile and sets KVIK_REQUIRE_GPU=1 KVIK_REQUIRE_CUFILE=1,
#      so a test that would say "skipped" for want of a GPU or libcufile fails;
#   2. recreates the build machine's paths that the test binaries have
#      compiled in (the repository root, for snapshots and fixtures; the kvik
#      binary the CLI tests run) as links to this copy;
#   3. on a fresh machine, checks kvik before the udev entry exists (cuFile
#      cannot register files: compat OFF must fail with exit 1, AUTO fall
#      back), then writes the udev entry of the root block device;
#   4. runs every test binary of .gpu/bundle.tar.xz (GPU ones one test at a time:
#      cuFile's statistics are process-wide);
#   5. checks kvik on the GPU: CRC-32 of device reads against zlib (compat
#      ON and OFF, whole and unaligned), a copy through GPU memory, device
#      out-of-memory as an error;
#   6. runs the examples and `kvik demo`;
#   7. prints a summary table: test binary → passed / failed / ignored /
#      skip lines, exit status and seconds; a row per check and example.
# Every step has a timeout, and the run goes on after a failure.
#
# Under $OUT (default /tmp/kvik-out), four files: run-all.log (the run, with
# each binary's skip lines and failures; what goes under bench/results/),
# summary.txt (the table), safetensors.jsonl (the showcase's figures) and
# logs.tar.gz (the whole output of every binary, check and example). Exit status: 0 when everything passed.
# Takes about 5 minutes on the H200 machine (16 cores); the whole stays under 8.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kvik-out}
# One log per binary and check, outside $OUT (the device tool returns at
# most 8 files): they come back as $OUT/logs.tar.gz.
LOGS=/tmp/run-all-logs
rm -rf "$LOGS"; mkdir -p "$OUT" "$LOGS"
exec > >(tee "$OUT/run-all.log") 2>&1
G=$PWD/.gpu
section() { printf '\n===== %s =====\n' "$*"; }
START=$SECONDS
[ -f "$G/build.env" ] || { echo "no $G/build.env: run gpu/stage.sh on the build machine and carry .gpu"; exit 2; }
# shellcheck disable=SC1091
. "$G/build.env"
# The test binaries and examples, from gpu/stage.sh's bundle.
B=/tmp/run-all-bin
rm -rf "$B"; mkdir -p "$B" && tar xJf "$G/bundle.tar.xz" -C "$B" || { echo "cannot unpack $G/bundle.tar.xz"; exit 2; }

section "machine and build"
date -u; nvidia-smi -L 2>&1; uname -r; nproc; free -g | head -2; df -hT / | cat
echo "built from $BUILD_COMMIT in $BUILD_ROOT; running in $PWD"

section "libcufile"
LIB=$(readlink -f /usr/local/cuda/lib64/libcufile.so.0 2>/dev/null)
if [ ! -f "$LIB" ]; then
  LIB=$(python3 -c 'import nvidia.cufile, glob, os; d = list(nvidia.cufile.__path__)[0]; print(sorted(glob.glob(os.path.join(d, "..", "**", "libcufile.so.0"), recursive=True))[0])' 2>/dev/null)
fi
echo "KVIK_CUFILE_LIBRARY=$LIB"
export KVIK_CUFILE_LIBRARY=$LIB KVIK_CUFILE_LIBRARY_1_15=$LIB
export KVIK_REQUIRE_GPU=1 KVIK_REQUIRE_CUFILE=1 RUST_BACKTRACE=1
# Snapshot tests find their files from the workspace root (there is no
# cargo here to ask).
export INSTA_WORKSPACE_ROOT=$BUILD_ROOT
export KVIK_TEST_DIR=/root/kvik-run-all
rm -rf "$KVIK_TEST_DIR"; mkdir -p "$KVIK_TEST_DIR"

section "paths compiled into the test binaries"
if [ "$(readlink -f "$BUILD_ROOT" 2>/dev/null)" = "$(readlink -f "$PWD")" ]; then
  echo "$BUILD_ROOT is this copy"
elif [ ! -e "$BUILD_ROOT" ]; then
  mkdir -p "$(dirname "$BUILD_ROOT")" && ln -s "$PWD" "$BUILD_ROOT" && echo "linked $BUILD_ROOT -> $PWD"
else
  echo "WARNING: $BUILD_ROOT exists here and is not this copy: snapshot and CLI tests may fail"
fi
if [ -n "${KVIK_BIN_PATH:-}" ] && { [ ! -e "$KVIK_BIN_PATH" ] || [ -L "$KVIK_BIN_PATH" ]; }; then
  mkdir -p "$(dirname "$KVIK_BIN_PATH")" && ln -sf "$G/kvik" "$KVIK_BIN_PATH" && echo "linked $KVIK_BIN_PATH -> $G/kvik"
fi

ROWS=()
row() { ROWS+=("$(printf '%-44s %6s %6s %7s %5s  %4s   %s' "$1" - - - - - "$2")"); }
# expect NAME STATUS COMMAND...: a CLI check that must exit with STATUS.
expect() {
  local name=$1 want=$2; shift 2
  local log="$LOGS/$name.log"
  timeout -k 10 120 "$@" > "$log" 2>&1
  local status=$?
  if [ "$status" -eq "$want" ]; then row "$name" ok; else row "$name" "FAILED (exit $status, expected $want)"; fi
  printf '%-44s exit %s (expected %s)\n' "$name" "$status" "$want"
  tail -3 "$log" | sed 's/^/    /'
}
D=$KVIK_TEST_DIR
K=$G/kvik
UDEV=/run/udev/data/b$(mountpoint -d /)

section "kvik before the udev entry: cuFile cannot register files"
if [ -e "$UDEV" ]; then
  row "cli-before-udev" "not run: $UDEV exists already (a machine used before)"
else
  timeout 60 "$K" write "$D/small.bin" --size 64MiB --host > /dev/null
  # OFF cannot be served on this machine as it is (exit 2, not a crash)
  # with cuFile's reason; AUTO must fall back to POSIX.
  expect cli-before-udev-compat-off 2 "$K" read "$D/small.bin" --device 0 --compat off
  expect cli-before-udev-compat-auto 0 "$K" read "$D/small.bin" --device 0 --compat auto
  rm -f "$D/small.bin"
fi

section "udev entry of the root block device"
mkdir -p /run/udev/data
printf 'E:ID_FS_TYPE=ext4\nE:ID_FS_USAGE=filesystem\n' > "$UDEV" && echo "wrote $UDEV"

# run NAME SECONDS COMMAND...: run with a timeout, log to logs/NAME.log, add a summary row.
run() {
  local name=$1 limit=$2; shift 2
  local log="$LOGS/$name.log" t0=$SECONDS
  timeout -k 10 "$limit" "$@" > "$log" 2>&1
  local status=$? seconds=$((SECONDS - t0))
  local passed=0 failed=0 ignored=0
  while read -r p f i; do
    passed=$((passed + p)); failed=$((failed + f)); ignored=$((ignored + i))
  done < <(sed -nE 's/^test result: [A-Za-z]+\. ([0-9]+) passed; ([0-9]+) failed; ([0-9]+) ignored.*/\1 \2 \3/p' "$log")
  local skips; skips=$(grep -c '^skipped: ' "$log")
  local verdict=ok
  [ "$status" -eq 0 ] || verdict="FAILED (exit $status$([ "$status" -eq 124 ] && echo ", timed out after ${limit}s"))"
  # A failure's whole output comes back at once (a later timeout of the
  # device tool would lose logs.tar.gz).
  [ "$status" -eq 0 ] || { echo "===== $name: $verdict"; cat "$log"; } >> "$OUT/failures.log"
  ROWS+=("$(printf '%-44s %6s %6s %7s %5s  %4ss  %s' "$name" "$passed" "$failed" "$ignored" "$skips" "$seconds" "$verdict")")
  printf '%-44s %s (%ss)\n' "$name" "$verdict" "$seconds"
  grep -E '^skipped: |^test .* FAILED$|panicked at' "$log" | head -20 | sed 's/^/    /'
}

section "test binaries (KVIK_REQUIRE_GPU=1, KVIK_REQUIRE_CUFILE=1)"
# RUN_ONLY=REGEX runs only the binaries whose names match (a rerun of what
# failed); SKIP_EXAMPLES=1 stops after the CLI checks.
for bin in "$B"/tests/*; do
  name=$(basename "$bin")
  if [ -n "${RUN_ONLY:-}" ] && ! [[ $name =~ $RUN_ONLY ]]; then continue; fi
  case "$name" in
    # Runs `cargo metadata`: there is no cargo here (it runs in CI).
    kvik-tests--layering) row "$name" "not run: needs cargo"; continue ;;
    # cuFile's statistics are process-wide: GPU tests one at a time.
    *gpu*|*plan_agreement*|kvik-policy--lib) threads=1 ;;
    *) threads=$(nproc) ;;
  esac
  run "$name" 300 "$bin" --test-threads="$threads"
done

section "kvik on the GPU: bytes in GPU memory match the file (CRC-32 vs zlib), copies, errors"
timeout 120 "$K" write "$D/1g.bin" --size 1GiB --host > /dev/null && cat "$D/1g.bin" > /dev/null
# crc_check NAME ARGS...: kvik's CRC-32 of a device read against Python's zlib on the same range.
crc_check() {
  local name=$1; shift
  local got want
  got=$(timeout 120 "$K" read "$D/1g.bin" --device 0 "$@" --checksum --json 2> "$LOGS/$name.log" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["checksum_crc32"])' 2>> "$LOGS/$name.log")
  want=$(python3 - "$D/1g.bin" "$@" <<'PY'
import os, sys, zlib
path, args = sys.argv[1], sys.argv[2:]
opt = dict(zip(args[::2], args[1::2]))
off = int(opt.get("--offset", 0)); size = int(opt.get("--size", os.path.getsize(path) - off))
with open(path, "rb") as f:
    f.seek(off); print("%08x" % zlib.crc32(f.read(size)))
PY
)
  if [ -n "$got" ] && [ "$got" = "$want" ]; then row "$name" ok; else row "$name" "FAILED (kvik ${got:-none}, zlib $want)"; fi
  echo "$name: kvik ${got:-none} zlib $want"
}
for compat in on off; do
  crc_check "cli-crc-compat-$compat-whole" --compat $compat
  crc_check "cli-crc-compat-$compat-unaligned" --compat $compat --offset 4097 --size 100000003
done
expect cli-copy-through-gpu-cufile 0 "$K" copy "$D/1g.bin" "$D/1g.copy" --device 0 --compat off
expect cli-copy-identical 0 cmp "$D/1g.bin" "$D/1g.copy"
rm -f "$D/1g.copy"
# A cufile.json that is a FIFO: cuFile would wait on it inside
# cuFileDriverOpen; kvik must answer instead (check: exit 0 naming it; a read
# that needs cuFile: an error, not a hang).
mkfifo "$D/cufile.fifo"
expect cli-config-fifo-check 0 env CUFILE_ENV_PATH_JSON="$D/cufile.fifo" "$K" check
expect cli-config-fifo-read-compat-off 2 env CUFILE_ENV_PATH_JSON="$D/cufile.fifo" "$K" read "$D/1g.bin" --device 0 --compat off
rm -f "$D/cufile.fifo"
truncate -s 300G "$D/sparse"
expect cli-device-out-of-memory-is-an-error 1 "$K" read "$D/sparse" --device 0 --buffer 300GiB
rm -f "$D/sparse"

if [ "${SKIP_EXAMPLES:-0}" = 1 ]; then
  printf '%s\n' "${ROWS[@]}" > "$OUT/summary.txt"
  exit 0
fi

section "examples and kvik demo"
# QUICK=1 (a rerun): only what changed since a full run.
[ -n "${QUICK:-}" ] || run kvik-demo 120 "$K" demo --size 1GiB --dir "$D"
run example-read_to_gpu 60 "$B/examples/read_to_gpu" "$D/1g.bin"
[ -n "${QUICK:-}" ] || run example-device_read_bench 120 "$B/examples/device_read_bench" "$D/1g.bin" --threads 1,16 --reps 3
rm -f "$D/1g.bin"
# The safetensors showcase: a synthetic 4 GiB checkpoint (a few hundred
# tensors, 4 KiB to 200 MiB), loaded tensor by tensor into CudaSlices through
# kvik-policy and the way Rust ML frameworks load it today (mmap + pageable
# cuMemcpyHtoD per tensor), page-cached and cold, in the same run.
run example-safetensors_load 300 "$B/examples/safetensors_load" "$D/model.safetensors" \
  --make --size "${KVIK_SAFETENSORS_SIZE:-4GiB}" --reps 3 --cold --json "$OUT/safetensors.jsonl"
sed -n '/^summary/,$p' "$LOGS/example-safetensors_load.log"
for ex in "$B"/examples/*; do
  case "$(basename "$ex")" in
    read_to_gpu|device_read_bench|safetensors_load) ;;
    *) row "example-$(basename "$ex")" "not run: add its arguments to gpu/run-all.sh" ;;
  esac
done
rm -rf "$D"

section "cuFile logs"
# gds-core sends each process's log to $XDG_RUNTIME_DIR/kvik/ or /tmp/kvik-UID/.
for f in "${XDG_RUNTIME_DIR:-/nonexistent}"/kvik/cufile-*.log /tmp/kvik-[0-9]*/cufile-*.log cufile.log; do
  [ -f "$f" ] && { echo "--- $f"; tail -3 "$f"; }
done 2>/dev/null | tail -60

tar czf "$OUT/logs.tar.gz" -C "$LOGS" . && echo "every log: \$OUT/logs.tar.gz"

section "summary ($((SECONDS - START)) s, built from $BUILD_COMMIT)"
{
  printf '%-44s %6s %6s %7s %5s  %5s  %s\n' "binary / example" passed failed ignored skips time status
  printf '%s\n' "${ROWS[@]}"
} | tee "$OUT/summary.txt"
if grep -q 'FAILED' "$OUT/summary.txt"; then echo "SOME FAILED"; exit 1; fi
echo "ALL PASSED"

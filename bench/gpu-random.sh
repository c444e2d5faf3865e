#!/usr/bin/env bash
# Issue 13 on the GPU machine: random small reads (ours, fio randread, KvikIO's
# pread futures, on the same page-cached file, in one run), what libcufile does
# with its batch API, batch reads into GPU memory checked byte for byte, and
# cold 1 GiB reads through the page cache against O_DIRECT.
#
# Run from the repository root with, under .gpu/: the release binary `kvik`,
# the test binaries `gpu_batch` (gds-core) and `gpu_batch_read` (kvik-policy)
# — `cargo test --release -p gds-core --test gpu_batch --no-run` and
# `cargo test --release -p kvik-policy --test gpu_batch_read --no-run` print
# their paths — and KvikIO's wheels in .gpu/whl/:
#
#     OUT=/some/dir bash bench/gpu-random.sh
#
# Writes under $OUT: kvikio-random.jsonl, gpu-random.{json,txt,svg},
# cold-direct.txt, gpu-random.log (everything). About 6 minutes; every step
# has a timeout.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kvik-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-random.log") 2>&1
KVIK=${KVIK:-.gpu/kvik}
FILE=${BENCH_FILE:-/root/kvik-bench-1GiB.bin}
D=${KVIK_TEST_DIR:-/root/kvik-verify}
section() { printf '\n===== %s =====\n' "$*"; }
START=$SECONDS
mkdir -p "$D"

# The GPU machine has no fio and no network. A static fio in .gpu/tools/
# (built here from fio's source: ./configure --build-static --disable-native
# && make; copy the stripped `fio` there) is the host reference then.
[ -x .gpu/tools/fio ] && export PATH=$PWD/.gpu/tools:$PATH

section "machine"
nvidia-smi -L 2>&1; uname -r; nproc; free -g | head -2
command -v fio >/dev/null && fio --version || echo "fio: not installed (no fio reference)"

section "udev entry (cuFile registers files only with it on this VM)"
d=$(mountpoint -d /); mkdir -p /run/udev/data
printf 'E:ID_FS_TYPE=ext4\nE:ID_FS_USAGE=filesystem\n' > /run/udev/data/b$d

section "cuFile's batch API in compatibility mode (gds-core gpu_batch: RESULT lines)"
KVIK_TEST_DIR="$D" KVIK_REQUIRE_GPU=1 timeout 180 .gpu/gpu_batch --nocapture --test-threads=1 2>&1 \
  | grep -E "RESULT|libcufile|batch counters|per-GPU|bytes at|^test |test result|panicked|assert"

section "batch reads into GPU memory against single reads (kvik-policy gpu_batch_read)"
KVIK_TEST_DIR="$D" KVIK_REQUIRE_GPU=1 timeout 180 .gpu/gpu_batch_read --nocapture --test-threads=1 2>&1 \
  | grep -E "GB/s|staging|reads |^test |test result|panicked|assert"

section "the file: 1 GiB of random bytes, page-cached"
if [ "$(stat -c %s "$FILE" 2>/dev/null || echo 0)" -lt 1073741824 ]; then
  timeout 120 "$KVIK" write "$FILE" --size 1GiB --host || { echo "cannot create $FILE"; exit 1; }
fi
cat "$FILE" > /dev/null

section "KvikIO pread futures: random 4 KiB / 64 KiB / 1 MiB, compat ON, 1 and 16 threads"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/*.whl 2>&1 | tail -3
PYTHONPATH=/tmp/site timeout 300 python3 bench/kvikio_bench.py "$FILE" --pattern random \
  --io-size 4KiB,64KiB,1MiB --threads ${RANDOM_THREADS:-1,16} --compat on --reps ${RANDOM_REPS:-5} | tee "$OUT/kvikio-random.jsonl"
KVIKIO_ARG=()
if [ -s "$OUT/kvikio-random.jsonl" ]; then KVIKIO_ARG=(--kvikio-random "$OUT/kvikio-random.jsonl"); fi

section "kvik bench --pattern random: host and GPU memory, 1 and 16 threads, fio randread in turn"
timeout 300 "$KVIK" bench --pattern random --file "$FILE" --size 1GiB \
  --memory host,device:0 --threads ${RANDOM_THREADS:-1,16} --window all,16MiB --io-size 4KiB,64KiB,1MiB \
  --cache hot --reps ${RANDOM_REPS:-5} --compat on "${KVIKIO_ARG[@]}" \
  --save "$OUT/gpu-random.json" --plot "$OUT/gpu-random.svg" | tee "$OUT/gpu-random.txt"
echo "exit=${PIPESTATUS[0]}"

section "cold 1 GiB reads: defaults (cold tasks with O_DIRECT), the page cache only, O_DIRECT throughout; host and GPU memory"
# drop_caches between runs (root); the JSON's page_cache_resident_before shows 0.
# defaults: cold_reads_direct on; page-cache: KVIK_COLD_READS_DIRECT=0 (before
# cold routing); o_direct: KVIKIO_AUTO_DIRECT_IO_READ=1 (every aligned byte).
{
  for round in $(seq "${COLD_ROUNDS:-3}"); do
    for threads in ${COLD_THREADS:-4 16}; do
      for memory in --host --device=0; do
        for mode in defaults page-cache o_direct; do
          case $mode in
            defaults) env=() ;;
            page-cache) env=(KVIK_COLD_READS_DIRECT=0) ;;
            o_direct) env=(KVIKIO_AUTO_DIRECT_IO_READ=1) ;;
          esac
          [ "$mode" = o_direct ] && [ "$memory" != --host ] && continue
          sync; echo 3 > /proc/sys/vm/drop_caches
          env "${env[@]}" timeout 60 "$KVIK" read "$FILE" "$memory" \
            --threads $threads --compat on --json > "$D/cold.json" 2>/dev/null
          python3 - "$D/cold.json" "$mode" "$threads" "$memory" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<10} {sys.argv[4]:<10} threads={sys.argv[3]} {d['bytes_per_second'] / 1e9:.3f} GB/s "
      f"resident_before={d.get('page_cache_resident_before')} "
      f"direct_bytes={d['report']['kvik']['direct_io']['bytes']}")
PY
        done
      done
    done
  done
  command -v fio >/dev/null && for threads in ${COLD_THREADS:-4 16}; do
    sync; echo 3 > /proc/sys/vm/drop_caches
    fio --name=cold --filename="$FILE" --readonly --rw=read --bs=4M --ioengine=psync --direct=1 \
      --numjobs=$threads --size=$((1073741824 / threads)) --offset_increment=$((1073741824 / threads)) \
      --thread --group_reporting --output-format=json 2>/dev/null \
      | python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print('fio psync O_DIRECT threads=$threads', round(j['read']['bw_bytes']/1e9, 3), 'GB/s')"
  done
} | tee "$OUT/cold-direct.txt"

section "hot 1 GiB reads into GPU memory: defaults against cold routing off (KVIK_COLD_READS_DIRECT=0), alternating, 5 runs each"
cat "$FILE" > /dev/null
for i in 1 2 3 4 5; do
  for cold in default 0; do
    if [ "$cold" = default ]; then env=(); else env=(KVIK_COLD_READS_DIRECT=0); fi
    env "${env[@]}" timeout 60 "$KVIK" read "$FILE" --json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print("hot cold_reads_direct='"$cold"'", d["memory"]["kind"], round(d["bytes_per_second"]/1e9, 2), "GB/s", d["report"]["kvik"]["direct_io"]["status"]["kind"])'
  done
done | tee "$OUT/hot-defaults.txt"

rm -rf "$D"
section "done in $((SECONDS - START)) s"
ls -la "$OUT"

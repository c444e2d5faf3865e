#!/usr/bin/env bash
# kvik bench on the GPU machine, with KvikIO's side on the same page-cached file.
#
# Run from the repository root with the release binary at .gpu/kvik and
# KvikIO's wheels in .gpu/whl/ (kvikio-cu13, libkvikio-cu13, cupy, …):
#
#     OUT=/some/dir bash bench/gpu.sh
#
# Writes under $OUT: kvikio.jsonl (KvikIO, one JSON line per thread count),
# gpu-hot.{json,txt,svg} (page-cached 1 GiB file into GPU and host memory, with
# KvikIO as the peer, dd/fio/memcpy/pinned host→device as references),
# gpu-cold.{json,txt,svg} (cold cache and writes), gpu-bench.log (everything).
# Takes about 4 minutes; every step has a timeout, the whole stays under 8.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kvik-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-bench.log") 2>&1
KVIK=${KVIK:-.gpu/kvik}
FILE=${BENCH_FILE:-/root/kvik-bench-1GiB.bin}
section() { printf '\n===== %s =====\n' "$*"; }
START=$SECONDS

section "machine"
nvidia-smi -L 2>&1; uname -r; head -1 /etc/os-release; nproc; free -g | head -2
df -hT "$(dirname "$FILE")" | cat
command -v fio >/dev/null && fio --version || echo "fio: not installed (kvik bench says so; no fio reference)"
"$KVIK" --version

section "the file: 1 GiB of random bytes, then page-cached"
if [ "$(stat -c %s "$FILE" 2>/dev/null || echo 0)" -lt 1073741824 ]; then
  timeout 120 "$KVIK" write "$FILE" --size 1GiB --host || { echo "cannot create $FILE"; exit 1; }
fi
cat "$FILE" > /dev/null

section "KvikIO: compat ON, 4 MiB tasks, threads 1,4,8,16 (5 timed reads each)"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/*.whl 2>&1 | tail -3
PYTHONPATH=/tmp/site timeout 180 python3 bench/kvikio_bench.py "$FILE" \
  --threads 1,4,8,16 --task-size 4MiB --compat on --reps 5 | tee "$OUT/kvikio.jsonl"
KVIKIO_ARG=()
if [ -s "$OUT/kvikio.jsonl" ]; then KVIKIO_ARG=(--kvikio "$OUT/kvikio.jsonl"); else echo "no KvikIO results: ours alone"; fi

section "kvik bench: page-cached file → GPU and host memory (compat ON, as KvikIO)"
# 16 threads × 4 MiB tasks × 16 MiB bounce buffers are our defaults on a
# 16-core machine: the row marked '*' is what a user gets without settings.
timeout 240 "$KVIK" bench --file "$FILE" --size 1GiB --memory host,device:0 \
  --threads 1,4,8,16 --task-size 4MiB,16MiB --bounce-buffer 4MiB,16MiB \
  --ops read --cache hot --reps 5 --compat on "${KVIKIO_ARG[@]}" \
  --save "$OUT/gpu-hot.json" --plot "$OUT/gpu-hot.svg" | tee "$OUT/gpu-hot.txt"
echo "exit=${PIPESTATUS[0]}"

section "ours vs KvikIO (device:0, page-cached, same thread count; 4 MiB tasks)"
python3 - "$OUT/gpu-hot.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
peers = {x["threads"]: x for x in r["references"] if x["kind"] == "peer" and x["throughput"]}
print(f'{"threads":>7} {"bounce":>8} {"ours GB/s":>10} {"KvikIO GB/s":>12} {"ours/KvikIO":>12}')
for c in r["cases"]:
    if c["memory"] != "device:0" or c["task_size"] != 4 << 20 or not c["throughput"]:
        continue
    k = peers.get(c["threads"])
    ours = c["throughput"]["median"] / 1e9
    kv = k["throughput"]["median"] / 1e9 if k else None
    print(f'{c["threads"]:>7} {c["bounce_buffer_size"] >> 20:>6}Mi {ours:>10.2f} '
          + (f'{kv:>12.2f} {ours / kv:>11.2f}x' if kv else f'{"-":>12} {"-":>12}')
          + ("  (our defaults)" if c["defaults"] else ""))
for c in r["cases"]:
    if c["error"]:
        print(f'error: {c["memory"]} {c["threads"]} threads: {c["error"]}'); break
for t in r["targets"]:
    print(f'[{"met" if t["met"] else "NOT met"}] {t["name"]}: {t["ratio"]:.2f}x')
PY

section "kvik bench: cold cache and writes (host and GPU memory)"
timeout 240 "$KVIK" bench --file "$FILE" --size 1GiB --memory host,device:0 \
  --threads 4,16 --task-size 4MiB --ops read,write --cache cold --reps 3 \
  --references dd,fio --compat on \
  --save "$OUT/gpu-cold.json" --plot "$OUT/gpu-cold.svg" | tee "$OUT/gpu-cold.txt"
echo "exit=${PIPESTATUS[0]}"

section "done in $((SECONDS - START)) s"
ls -la "$OUT"

#!/usr/bin/env bash
# GPU verification run (device machine, from the repository root, with .gpu/
# carried: kvik, the GPU test binaries, device_read_bench, KvikIO wheels).
# Covers issues 4 and 6: registration failure before the udev entry, kvik
# check, the GPU tests, kvik demo (AUTO and --compat off), the tutorial's
# settings, correctness, device OOM, and throughput against KvikIO 26.10.
set -u
OUT=${OUT:-/tmp/kvik-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/verify.log") 2>&1
section() { printf '\n===== %s =====\n' "$*"; }
K=.gpu/kvik
D=/root/kvik-verify
mkdir -p "$D"
summ() { python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = d.get("report") or d.get("read", {}).get("report")
c = r["cufile"]
line = {"GB/s": round((d.get("bytes_per_second") or d["read"]["bytes_per_second"]) / 1e9, 2),
        "memory": r["memory"], "backend": r["kvik"]["backend"], "effective": r["kvik"]["effective_compat_mode"],
        "tasks": len(r["kvik"]["tasks"]), "cufile": c["status"]}
if c["status"] == "called":
    rd = {"n": 0, "nvfs": 0, "posix": 0}
    for g in (c["stats"] or {}).get("gpus", []):
        for k in rd: rd[k] += g["reads"][k]
    line.update(predicted=c["predicted_units"], **rd, verdict=c["verdict"])
else:
    line["why"] = c["reason"]
print(json.dumps(line))
PY
}

section "machine"
nvidia-smi -L; nproc; free -g | head -2; ls -d /run/udev 2>&1; ls /run/udev/data 2>&1 | head -3

section "before the udev entry: OFF must fail with cuFile's reason, AUTO must fall back"
$K write "$D/small.bin" --size 64MiB --host >/dev/null; echo "write exit=$?"
$K check "$D/small.bin" | sed -n '/path/,$p'
$K read "$D/small.bin" --device 0 --compat off; echo "exit=$? (expect 1)"
$K read "$D/small.bin" --device 0 --compat auto --json > "$OUT/auto-before-udev.json"; echo "exit=$?"; summ "$OUT/auto-before-udev.json"

section "udev entry (SPEC §8)"
d=$(mountpoint -d /); mkdir -p /run/udev/data
printf 'E:ID_FS_TYPE=ext4\nE:ID_FS_USAGE=filesystem\n' > /run/udev/data/b$d; echo "wrote /run/udev/data/b$d"

section "kvik check"
$K check "$D"; $K check --json "$D" > "$OUT/check.json"

section "kvik plan (stock /etc/cufile.json)"
$K plan --size 1GiB --task-size 4MiB --compat off | sed -n '/^plan/,$p'
$K plan --size 1GiB --task-size 1GiB --compat off | sed -n '/^plan/,$p'

section "GPU tests"
export KVIK_TEST_DIR="$D"
timeout 300 .gpu/gpu_cufile --nocapture --test-threads=1 2>&1 | grep -vE '^\s+[0-9]+: |^ +at ' | tail -40
timeout 200 .gpu/gpu_staging --nocapture 2>&1 | tail -4
timeout 300 .gpu/gpu_file_handle --nocapture --test-threads=1 2>&1 | grep -vE '^\s+[0-9]+: |^ +at ' | tail -60

section "kvik demo: AUTO, then --compat off"
$K demo --size 1GiB --dir "$D"; echo "exit=$?"
$K demo --size 1GiB --dir "$D" --compat off --json > "$OUT/demo-off.json"; echo "exit=$?"; summ "$OUT/demo-off.json"

section "tutorial settings, 1 GiB page-cached file, GPU 0"
$K write "$D/f1g" --size 1GiB --host >/dev/null && cat "$D/f1g" > /dev/null
for setting in "KVIKIO_COMPAT_MODE=off" "KVIKIO_COMPAT_MODE=off CUFILE_FORCE_COMPAT_MODE=true" "KVIKIO_COMPAT_MODE=on" "KVIKIO_COMPAT_MODE=off KVIKIO_TASK_SIZE=1GiB" "KVIKIO_COMPAT_MODE=off KVIKIO_TASK_SIZE=4MiB"; do
  env $setting $K read "$D/f1g" --device 0 --json > "$OUT/t.json"; echo "$setting exit=$? $(summ "$OUT/t.json")"
done

section "correctness: CRC-32 in GPU memory vs zlib, unaligned ranges; copy through GPU memory"
for compat in on off; do
  for range in "--offset 0" "--offset 4097 --size 100000003" "--offset 1073741000"; do
    got=$($K read "$D/f1g" --device 0 --compat $compat $range --checksum --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["checksum_crc32"])')
    want=$(python3 - "$D/f1g" $range <<'PY'
import sys, zlib, os
path = sys.argv[1]; a = sys.argv[2:]; off = int(a[1]); size = int(a[3]) if len(a) > 2 else os.path.getsize(path) - off
with open(path, 'rb') as f: f.seek(off); print('%08x' % zlib.crc32(f.read(size)))
PY
)
    echo "compat $compat $range: kvik $got zlib $want $([ "$got" = "$want" ] && echo OK || echo MISMATCH)"
  done
done
$K copy "$D/f1g" "$D/f1g.copy" --device 0 --compat off >/dev/null; echo "copy (cuFile) exit=$?"; cmp "$D/f1g" "$D/f1g.copy" && echo "copy identical"
$K copy "$D/f1g" "$D/f1g.copy2" --device 0 --compat on >/dev/null; echo "copy (POSIX) exit=$?"; cmp "$D/f1g" "$D/f1g.copy2" && echo "copy identical"
rm -f "$D/f1g.copy" "$D/f1g.copy2"

section "device out of memory is an error, not a crash"
truncate -s 300G "$D/sparse"; $K read "$D/sparse" --device 0 --buffer 300GiB; echo "exit=$? (expect 1)"; rm -f "$D/sparse"

section "throughput: page-cached 1 GiB into GPU 0, 4 MiB tasks (ours, then KvikIO 26.10)"
cat "$D/f1g" > /dev/null
.gpu/device_read_bench "$D/f1g" --threads 1,4,8,16 --task-size 4MiB --compat on --reps 7 | tee "$OUT/bench.jsonl"
.gpu/device_read_bench "$D/f1g" --threads 16 --task-size 4MiB --compat auto --reps 7 | sed 's/"tool": "kvik-rs"/"tool": "kvik-rs defaults"/' | tee -a "$OUT/bench.jsonl"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/whl/*.whl 2>&1 | tail -2
PYTHONPATH=/tmp/site python3 bench/kvikio_bench.py "$D/f1g" --threads 1,4,8,16 --task-size 4MiB --compat on --reps 7 | tee -a "$OUT/bench.jsonl"
PYTHONPATH=/tmp/site python3 bench/kvikio_bench.py "$D/f1g" --threads 1 --task-size 4MiB --compat auto --reps 7 | sed 's/"tool": "kvikio"/"tool": "kvikio defaults"/' | tee -a "$OUT/bench.jsonl"
python3 - <<'PY'
import torch, time
n = 1 << 30
h = torch.empty(n, dtype=torch.uint8).pin_memory(); d = torch.empty(n, dtype=torch.uint8, device='cuda')
d.copy_(h, non_blocking=True); torch.cuda.synchronize()
ts = []
for _ in range(7):
    t = time.perf_counter(); d.copy_(h, non_blocking=True); torch.cuda.synchronize(); ts.append(time.perf_counter() - t)
ts.sort(); print('{"tool": "pinned h2d copy", "gbps_median": %.2f}' % (n / ts[3] / 1e9))
PY
section "ratios"
python3 - "$OUT/bench.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
kv = {r["threads"]: r["gbps_median"] for r in rows if r["tool"] == "kvikio"}
for r in rows:
    if r["tool"] == "kvik-rs":
        k = kv.get(r["threads"])
        print(f'threads {r["threads"]:>2}: kvik-rs {r["gbps_median"]:6.2f} GB/s  KvikIO {k} GB/s  ratio {r["gbps_median"]/k:.2f}' if k else r)
PY
rm -rf "$D"

#!/usr/bin/env bash
# Issue 11 (items 1-7) on the GPU machine, from the repository root with
# .gpu/kvik (release build) carried: write, copy and demo through GPU memory
# into unnamed temporaries adopted by FileHandle::from_file (cuFile registers
# them through /proc/self/fd/N), streams copied through GPU windows, and the
# same bytes as host memory gives. Every check prints PASS or FAIL.
set -u
OUT=${OUT:-/tmp/kvik-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/safe-output.log") 2>&1
K=.gpu/kvik
D=$(mktemp -d /root/kvik-safe-XXXXXX)
trap 'rm -rf "$D"' EXIT
fails=0
check() { if [ "$1" = "$2" ]; then echo "PASS $3"; else echo "FAIL $3: '$1' != '$2'"; fails=$((fails + 1)); fi; }
crc() { python3 -c "import sys, zlib; print('%08x' % zlib.crc32(open(sys.argv[1], 'rb').read()))" "$1"; }

for cfg in default stock; do
  if [ $cfg = stock ]; then export CUFILE_ENV_PATH_JSON=$PWD/gpu/cufile-stock.json; fi
  # compat OFF needs cuFile's compatibility mode allowed: the stock config.
  modes="auto on"; [ $cfg = stock ] && modes="auto off on"
  for compat in $modes; do
    tag="$cfg/compat-$compat"
    rm -f "$D"/*
    # A new file and a replaced one (mode 0600 kept), written from GPU 0.
    $K write "$D/w.bin" --size 64MiB --compat $compat --json > "$OUT/w-$cfg-$compat.json"; check $? 0 "$tag write new"
    chmod 600 "$D/w.bin"
    $K write "$D/w.bin" --size 40MiB --seed 3 --compat $compat --checksum --json > "$OUT/w2-$cfg-$compat.json"; check $? 0 "$tag write replace"
    check "$(stat -c %a "$D/w.bin")" 600 "$tag mode kept"
    check "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['checksum_crc32'])" "$OUT/w2-$cfg-$compat.json")" "$(crc "$D/w.bin")" "$tag write CRC"
    check "$(ls -A "$D" | wc -l)" 1 "$tag no temporaries"
    # Copy through GPU memory, then a pipe through GPU windows.
    $K copy "$D/w.bin" "$D/c.bin" --compat $compat --buffer 16MiB > /dev/null; check $? 0 "$tag copy"
    check "$(crc "$D/c.bin")" "$(crc "$D/w.bin")" "$tag copy bytes"
    head -c 50000000 "$D/w.bin" | $K copy /dev/stdin "$D/p.bin" --compat $compat --buffer 8MiB > /dev/null; check $? 0 "$tag pipe copy"
    check "$(crc "$D/p.bin")" "$(head -c 50000000 "$D/w.bin" | python3 -c "import sys, zlib; print('%08x' % zlib.crc32(sys.stdin.buffer.read()))")" "$tag pipe bytes"
    $K copy /dev/zero "$D/z.bin" --size 8MiB --compat $compat > /dev/null; check $? 0 "$tag /dev/zero --size"
    check "$(stat -c %s "$D/z.bin")" 8388608 "$tag /dev/zero size"
    # The demo: nothing left behind, with and without O_TMPFILE.
    $K demo --dir "$D/" --size 256MiB --compat $compat > "$OUT/demo-$cfg-$compat.txt"; check $? 0 "$tag demo"
    KVIK_NO_TMPFILE=1 $K demo --dir "$D/" --size 64MiB --compat $compat > /dev/null; check $? 0 "$tag demo, named"
    check "$(ls -A "$D" | grep -c kvik)" 0 "$tag demo leaves nothing"
  done
  unset CUFILE_ENV_PATH_JSON
done
echo "failures: $fails"

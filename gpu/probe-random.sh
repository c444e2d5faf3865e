#!/usr/bin/env bash
# Where random small host reads lose to fio on the GPU machine's 16 cores:
# a batch against a plain pread loop at 1, 4 and 16 threads
# (examples/batch_overhead), and kvik bench against fio randread at 1, 4 and
# 16 threads for 20,000 and 200,000 reads of 4 KiB (fixed costs of a batch
# weigh less in a longer one). Run after gpu/run-all.sh (its unpacked
# bundle) from the repository root:
#
#     OUT=/some/dir bash gpu/probe-random.sh
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/kvik-out}
F=/root/kvik-bench-1GiB.bin
[ -x .gpu/tools/fio ] && export PATH=$PWD/.gpu/tools:$PATH
[ "$(stat -c %s "$F" 2>/dev/null || echo 0)" -ge 1073741824 ] || .gpu/kvik write "$F" --size 1GiB --host > /dev/null
cat "$F" > /dev/null
{
  for t in 1 4 16; do timeout 60 /tmp/run-all-bin/examples/batch_overhead "$F" 20000 "$t"; done
  for reads in 20000 200000; do
    timeout 120 .gpu/kvik bench --pattern random --file "$F" --size 1GiB --memory host --threads 1,4,16 \
      --window all,16MiB --io-size 4KiB --reads "$reads" --cache hot --reps 5 | sed -n '/^random reads/,/^  targets/p'
  done
} 2>&1 | tee "$OUT/probe-random.txt"

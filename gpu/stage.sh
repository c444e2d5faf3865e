#!/usr/bin/env bash
# Build what the GPU machine runs (it has no cargo) into .gpu/, for
# gpu/run-all.sh:
#
#     bash gpu/stage.sh          # here, from anywhere in the repository
#
# .gpu/kvik                the kvik binary (bench/gpu.sh uses it too)
# .gpu/bundle.tar.xz       tests/PACKAGE--TARGET: every test binary of the
#                          workspace, release build (PACKAGE--lib: a
#                          library's unit tests; PACKAGE--bin-NAME: a
#                          binary's); examples/NAME: every example
# .gpu/build.env           the commit, and the paths compiled into the test
#                          binaries (CARGO_MANIFEST_DIR, CARGO_BIN_EXE_kvik),
#                          which run-all.sh recreates on the GPU machine
#
# The device tool carries at most 64 MiB: debug info is stripped (symbols
# stay, so panics still name functions) and the binaries are compressed
# (about 75 MiB -> 28 MiB). Everything else in .gpu/ is removed first,
# except whl/ (KvikIO's wheels, for bench/gpu.sh) and tools/ (programs the
# GPU machine lacks: a static fio, see bench/gpu-random.sh). Then:
#     run(command="bash gpu/run-all.sh", carry=[".gpu"])
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
GPU=$ROOT/.gpu
STAGE=$GPU/.stage
# Everything else in .gpu/ goes (it would be carried too), except whl/
# (KvikIO's wheels for bench/gpu.sh) and tools/.
mkdir -p "$GPU"
find "$GPU" -mindepth 1 -maxdepth 1 ! -name whl ! -name tools -exec rm -rf {} +
mkdir -p "$STAGE/tests" "$STAGE/examples"

# The artifacts cargo reports, as lines: KIND NAME PACKAGE PATH.
artifacts() {
  python3 -c '
import json, sys
for line in sys.stdin:
    if not line.startswith("{"):
        continue
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    t = m["target"]
    kind = "test" if m["profile"]["test"] else t["kind"][0]
    url, _, fragment = m["package_id"].partition("#")
    package = fragment.split("@")[0] if "@" in fragment else url.rstrip("/").split("/")[-1]
    print(kind, t["kind"][0], t["name"], package, m["executable"])
'
}

echo "building test binaries (cargo test --release --no-run) ..."
cargo test --workspace --release --no-run --message-format=json-render-diagnostics |
  artifacts > "$STAGE/tests.txt"
echo "building kvik and the examples ..."
cargo build --workspace --release --bins --examples --message-format=json-render-diagnostics |
  artifacts > "$STAGE/build.txt"

copy() { # SRC DST
  cp "$1" "$2"
  strip --strip-debug "$2" 2>/dev/null || true
}

# Left out to fit the device tool's 64 MiB: kvik-remote's CPU-only test
# binaries (object_store and TLS make each one 12 MiB; they run in CI, and
# its GPU test is kept), and remote_bench (bench/remote_gpu.sh stages it).
left_out() {
  case "$1" in
    kvik-remote--gpu_*) return 1 ;;
    kvik-remote--*) return 0 ;;
    remote_bench) return 0 ;;
  esac
  return 1
}

while read -r kind target_kind name package path; do
  [ "$kind" = test ] || continue
  case "$target_kind" in
    lib) stable="$package--lib" ;;
    bin) stable="$package--bin-$name" ;;
    *) stable="$package--$name" ;;
  esac
  left_out "$stable" && { echo "left out: $stable"; continue; }
  copy "$path" "$STAGE/tests/$stable"
done < "$STAGE/tests.txt"

KVIK_BIN=
while read -r kind target_kind name package path; do
  case "$kind:$name" in
    bin:kvik) copy "$path" "$GPU/kvik"; KVIK_BIN=$path ;;
    example:*) left_out "$name" || copy "$path" "$STAGE/examples/$name" ;;
  esac
done < "$STAGE/build.txt"
tar cf - -C "$STAGE" tests examples | xz -T0 -6 > "$GPU/bundle.tar.xz"

cat > "$GPU/build.env" <<EOF
# Written by gpu/stage.sh; read by gpu/run-all.sh.
BUILD_COMMIT=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!.gpu' || echo "+changes")
BUILD_ROOT=$ROOT
KVIK_BIN_PATH=$KVIK_BIN
EOF
echo
cat "$GPU/build.env"
echo "$(ls "$STAGE/tests" | wc -l) test binaries, $(ls "$STAGE/examples" | wc -l) examples ($(du -sm "$STAGE" | cut -f1) MiB) in bundle.tar.xz:"
rm -rf "$STAGE"
du -sh "$GPU/bundle.tar.xz" "$GPU/kvik"
total=$(du -sm --exclude=whl --exclude=tools "$GPU" | cut -f1)
echo "total ${total} MiB to carry (the device tool carries at most 64 MiB, the repository included)"
[ "$total" -le 56 ] || { echo "too large for the device tool" >&2; exit 1; }

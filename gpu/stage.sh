#!/usr/bin/env bash
# Build what the GPU machine runs (it has no cargo) and copy it into .gpu/,
# with stable names, for gpu/run-all.sh:
#
#     bash gpu/stage.sh          # here, from anywhere in the repository
#
# .gpu/tests/PACKAGE--TARGET     every test binary of the workspace, release
#                                build (PACKAGE--lib: a library's unit tests;
#                                PACKAGE--bin-NAME: a binary's unit tests)
# .gpu/examples/NAME             every example
# .gpu/kvik                      the kvik binary
# .gpu/build.env                 the commit, and the paths compiled into the
#                                test binaries (CARGO_MANIFEST_DIR,
#                                CARGO_BIN_EXE_kvik), which run-all.sh
#                                recreates on the GPU machine
#
# Debug info is stripped (symbols stay, so panics still name functions):
# the device tool carries at most 64 MiB. Then hand .gpu to the run:
#     run(command="bash gpu/run-all.sh", carry=[".gpu"])
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
GPU=$ROOT/.gpu
rm -rf "$GPU/tests" "$GPU/examples" "$GPU/kvik" "$GPU/build.env"
mkdir -p "$GPU/tests" "$GPU/examples"

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
  artifacts > "$GPU/.tests.txt"
echo "building kvik and the examples ..."
cargo build --workspace --release --bins --examples --message-format=json-render-diagnostics |
  artifacts > "$GPU/.build.txt"

copy() { # SRC DST
  cp "$1" "$2"
  strip --strip-debug "$2" 2>/dev/null || true
}

while read -r kind target_kind name package path; do
  [ "$kind" = test ] || continue
  case "$target_kind" in
    lib) stable="$package--lib" ;;
    bin) stable="$package--bin-$name" ;;
    *) stable="$package--$name" ;;
  esac
  copy "$path" "$GPU/tests/$stable"
done < "$GPU/.tests.txt"

KVIK_BIN=
while read -r kind target_kind name package path; do
  case "$kind:$name" in
    bin:kvik) copy "$path" "$GPU/kvik"; KVIK_BIN=$path ;;
    example:*) copy "$path" "$GPU/examples/$name" ;;
  esac
done < "$GPU/.build.txt"
rm -f "$GPU/.tests.txt" "$GPU/.build.txt"

cat > "$GPU/build.env" <<EOF
# Written by gpu/stage.sh; read by gpu/run-all.sh.
BUILD_COMMIT=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!.gpu' || echo "+changes")
BUILD_ROOT=$ROOT
KVIK_BIN_PATH=$KVIK_BIN
EOF
echo
cat "$GPU/build.env"
echo "$(ls "$GPU/tests" | wc -l) test binaries, $(ls "$GPU/examples" | wc -l) examples, kvik:"
du -sh "$GPU/tests" "$GPU/examples" "$GPU/kvik"
total=$(du -sm --exclude=whl "$GPU" | cut -f1)
echo "total ${total} MiB (the device tool carries at most 64 MiB)"
[ "$total" -le 64 ] || { echo "too large for the device tool" >&2; exit 1; }

#!/bin/sh
# Short libFuzzer run of the safetensors reader (tests/fuzz/fuzz_safetensors.cpp), for CI.
#
#   tools/fuzz_smoke.sh [build_dir] [seconds]
#
# Compiles the target with Debian's clang (-fsanitize=fuzzer,address,undefined): the parser
# sources are compiled into it with instrumentation, the rest links against build_dir's
# libshardlight.so (already built, any compiler). Seeds: the safetensors fixtures. Exits non-zero
# when the fuzzer finds a crash, leak, sanitizer error or timeout; the reproducer is left in
# $FUZZ_OUT (default build_dir/fuzz), replay it with: $FUZZ_OUT/fuzz_safetensors <file>.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
SECONDS_TO_RUN=${2:-30}
OUT=${FUZZ_OUT:-$BUILD/fuzz}
CLANG=${CLANG:-clang++}
command -v "$CLANG" >/dev/null || { echo "fuzz_smoke: $CLANG not found (apt install clang)" >&2; exit 1; }
[ -e "$BUILD/libshardlight.so" ] || { echo "fuzz_smoke: build $BUILD first (ninja -C $BUILD)" >&2; exit 1; }
mkdir -p "$OUT/corpus"
FLAGS="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1"
# shellcheck disable=SC2086
"$CLANG" -std=c++20 $FLAGS -I"$ROOT" -I"$BUILD" -I"$BUILD/include" -I/usr/include/eigen3 \
  "$ROOT/tests/fuzz/fuzz_safetensors.cpp" "$ROOT/nn/serialize/json.cpp" \
  "$ROOT/nn/serialize/safetensors.cpp" "$ROOT/nn/serialize/safetensors_io.cpp" \
  -L"$BUILD" -lshardlight -Wl,-rpath,"$BUILD" -o "$OUT/fuzz_safetensors"
cd "$OUT"
SL_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 ./fuzz_safetensors -max_total_time="$SECONDS_TO_RUN" \
  -timeout=10 -rss_limit_mb=2048 -max_len=16384 -dict="$ROOT/tests/fuzz/safetensors.dict" \
  -print_final_stats=1 corpus "$ROOT/tests/fixtures/serialize"

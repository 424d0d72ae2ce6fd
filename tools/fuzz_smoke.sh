#!/bin/sh
# Short libFuzzer runs of the safetensors reader (tests/fuzz/fuzz_safetensors.cpp) and of the
# WordPiece tokenizer (tests/fuzz/fuzz_tokenizer.cpp), for CI: each for the given seconds.
#
#   tools/fuzz_smoke.sh [build_dir] [seconds]
#
# Compiles each target with Debian's clang (-fsanitize=fuzzer,address,undefined): the sources
# under test are compiled into it with instrumentation, the rest links against build_dir's
# libshardlight.so (already built, any compiler). Seeds: the safetensors fixtures, tokenizer
# texts. Exits non-zero
# when the fuzzer finds a crash, leak, sanitizer error or timeout; the reproducer is left in
# $FUZZ_OUT (default build_dir/fuzz), replay it with: $FUZZ_OUT/fuzz_<target> <file>.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
SECONDS_TO_RUN=${2:-30}
OUT=${FUZZ_OUT:-$BUILD/fuzz}
CLANG=${CLANG:-clang++}
command -v "$CLANG" >/dev/null || { echo "fuzz_smoke: $CLANG not found (apt install clang)" >&2; exit 1; }
[ -e "$BUILD/libshardlight.so" ] || { echo "fuzz_smoke: build $BUILD first (ninja -C $BUILD)" >&2; exit 1; }
mkdir -p "$OUT/corpus" "$OUT/corpus_tokenizer"
FLAGS="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1"
# build_fuzzer NAME SOURCES...: tests/fuzz/NAME.cpp plus the sources under test, instrumented.
build_fuzzer() {
  name=$1
  shift
  # shellcheck disable=SC2086
  "$CLANG" -std=c++20 $FLAGS -I"$ROOT" -I"$BUILD" -I"$BUILD/include" -I/usr/include/eigen3 \
    "$ROOT/tests/fuzz/$name.cpp" "$@" -L"$BUILD" -lshardlight -Wl,-rpath,"$BUILD" -o "$OUT/$name"
}
build_fuzzer fuzz_safetensors "$ROOT/nn/serialize/json.cpp" "$ROOT/nn/serialize/safetensors.cpp" \
  "$ROOT/nn/serialize/safetensors_io.cpp"
build_fuzzer fuzz_tokenizer "$ROOT/models/tokenizer.cpp" "$ROOT/models/unicode_text.cpp" \
  "$ROOT/models/wordpiece_vocab.cpp"
cd "$OUT"
SL_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 ./fuzz_safetensors -max_total_time="$SECONDS_TO_RUN" \
  -timeout=10 -rss_limit_mb=2048 -max_len=16384 -dict="$ROOT/tests/fuzz/safetensors.dict" \
  -print_final_stats=1 corpus "$ROOT/tests/fixtures/serialize"
# Seeds: the tokenizer fixture's 160 strings (accents, CJK, control characters, emoji), 10 a
# file (tests/fuzz/tokenizer_seeds; a mode byte, 9 lines, a NUL, the 10th).
SL_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1 ./fuzz_tokenizer -max_total_time="$SECONDS_TO_RUN" \
  -timeout=10 -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 corpus_tokenizer \
  "$ROOT/tests/fuzz/tokenizer_seeds"

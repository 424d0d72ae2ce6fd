#!/bin/sh
# AdamW step over 10M f32 parameters: Shardlight's fused kernel vs PyTorch (1.13 CPU, both its
# single-tensor default and foreach), 1 and 2 threads, in the same run. Prints a table with the
# ratio PyTorch time / Shardlight time (> 1: Shardlight is faster).
#
#   tools/bench_optim.sh [build_dir] [n]
set -eu
BUILD=${1:-build}
N=${2:-10000000}
ITERS=${ITERS:-20}
BIN="$BUILD/tools/bench_optim"
[ -x "$BIN" ] || { echo "missing $BIN: build with ninja -C $BUILD tools/bench_optim" >&2; exit 1; }
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
OMP_WAIT_POLICY=PASSIVE "$BIN" --n "$N" --threads 1,2 --iters "$ITERS" >>"$OUT"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 "$(dirname "$0")/bench_optim.py" --n "$N" --threads 1,2 --iters "$ITERS" >>"$OUT"
else
  echo "(python3-torch not installed: PyTorch side skipped)" >&2
fi
awk '
  { split($3, a, "="); split($4, b, "="); split($5, c, "="); t = b[2]; ms[$1, t] = c[2]; n = a[2] }
  END {
    printf "AdamW step, n=%s f32 parameters (median ms)\n", n
    printf "%-8s %12s %14s %15s %10s %12s\n", "threads", "shardlight", "torch single", "torch foreach", "ratio", "ratio(fe)"
    for (t = 1; t <= 2; t++) {
      s = ms["shardlight", t]; p = ms["torch-single", t]; f = ms["torch-foreach", t]
      if (p == "") { printf "%-8d %12s %14s %15s\n", t, s, "-", "-"; continue }
      printf "%-8d %12.2f %14.2f %15.2f %9.2fx %11.2fx\n", t, s, p, f, p / s, f / s
    }
  }' "$OUT"

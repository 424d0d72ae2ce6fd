#!/bin/bash
# nn benchmark (issue 3, section 9): Shardlight next to PyTorch on this machine, in the same run,
# single-threaded and with 2 threads. Each case runs in Shardlight and then in PyTorch right
# after (so both see the same machine load), R rounds in a row (--rounds, default 3): this
# machine's speed drifts from one process to the next (2-thread runs of one case took 12-18 ms),
# so one pair alone can land either way. The table gives each side's median over the rounds and
# the median and range of the per-round ratios Shardlight / PyTorch (< 1: Shardlight is faster).
# Times: median ms of forward + backward (AdamW: one step) within each process.
#
#   tools/bench_nn.sh [build-dir] [--filter SUBSTR] [--threads "1 2"] [--rounds R]
#
# The PyTorch side runs when /usr/bin/python3 can import torch; otherwise its column says n/a.
set -euo pipefail
BUILD=build
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then BUILD=$1; shift; fi
FILTER=""
THREADS="1 2"
ROUNDS=3
while [ $# -gt 0 ]; do
  case "$1" in
    --filter) FILTER=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    *) echo "usage: $0 [build-dir] [--filter SUBSTR] [--threads \"1 2\"] [--rounds R]" >&2; exit 2 ;;
  esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="$BUILD/tools/bench_nn"
[ -x "$BIN" ] || { echo "bench_nn.sh: $BIN not found; build first (ninja -C $BUILD)" >&2; exit 1; }
have_torch=0
/usr/bin/python3 -c "import torch" 2>/dev/null && have_torch=1
# PyTorch's matmuls go through the same OpenBLAS (Debian's libblas.so.3). Where Shardlight
# replaced OpenBLAS's kernel set at load (Note [BLAS kernel selection]: a CPU model OpenBLAS does
# not know gets SSE kernels), PyTorch gets the same set through OPENBLAS_CORETYPE, so both sides
# run the same BLAS kernels. A kernel set the user forced applies to both anyway.
torch_env=()
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  core=$("$BIN" --blas-core)
  [ -n "$core" ] && torch_env=(env "OPENBLAS_CORETYPE=$core")
  echo "BLAS kernels: ${core:-unknown} (Shardlight's; PyTorch runs with OPENBLAS_CORETYPE=${core:-unset})"
else
  echo "BLAS kernels: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE for both"
fi
echo
# median of the words on stdin
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "| case | threads | shardlight ms | pytorch ms | ratio (median) | ratio (range, $ROUNDS rounds) |"
echo "|---|---|---|---|---|---|"
"$BIN" --list --filter "$FILTER" | while IFS= read -r name; do
  for t in $THREADS; do
    export OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t SL_NUM_THREADS=$t MKL_NUM_THREADS=$t
    sls="" pts="" ratios=""
    for ((r = 0; r < ROUNDS; r++)); do
      ms=$("$BIN" --threads "$t" --case "$name" | cut -f2)
      sls="$sls $ms"
      if [ $have_torch = 1 ]; then
        pt=$("${torch_env[@]}" /usr/bin/python3 "$ROOT/tools/bench_nn.py" --threads "$t" --case "$name" | cut -f2)
        pts="$pts $pt"
        ratios="$ratios $(awk -v a="$ms" -v b="$pt" 'BEGIN { printf "%.2f", a / b }')"
      fi
    done
    range="n/a"
    [ -n "$ratios" ] && range=$(echo $ratios | tr ' ' '\n' | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo "-" hi }')
    echo "| $name | $t | $(echo $sls | median) | $(echo $pts | median) | $(echo $ratios | median) | $range |"
  done
done

#!/bin/bash
# The driver of the CPU benchmarks that run next to PyTorch (tools/bench_nn.sh, tools/bench_zoo.sh):
# each case runs in Shardlight (build/tools/PROGRAM) and then in PyTorch (tools/SCRIPT, the same
# cases with the same protocol) right after, so both see the same machine load, R rounds of that
# pair in a row (--rounds, default 3), at each thread count. This machine's speed drifts from one
# process to the next, so one pair alone can land either way: the table gives each side's median
# over the rounds and the median and range of the per-round ratios Shardlight / PyTorch (< 1:
# Shardlight is faster). Times: what each program prints, median ms within each process.
#
#   tools/bench_pairs.sh PROGRAM SCRIPT [build-dir] [--filter SUBSTR] [--threads "1 2"] [--rounds R]
#
# The PyTorch side runs with $PYTHON (default /usr/bin/python3) when it can import torch;
# otherwise its column says n/a. A case the script cannot run prints "n/a" as its time (and says
# why on stderr); its ratio is n/a too.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 PROGRAM SCRIPT [build-dir] [options]" >&2; exit 2; }
PROGRAM=$1 SCRIPT=$2
shift 2
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
    *) echo "usage: $0 $PROGRAM $SCRIPT [build-dir] [--filter SUBSTR] [--threads \"1 2\"] [--rounds R]" >&2; exit 2 ;;
  esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-/usr/bin/python3}
BIN="$BUILD/tools/$PROGRAM"
[ -x "$BIN" ] || { echo "$PROGRAM: $BIN not found; build first (ninja -C $BUILD)" >&2; exit 1; }
have_torch=0
"$PYTHON" -c "import torch" 2>/dev/null && have_torch=1
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
# median of the numbers among the words on stdin ("n/a" when there are none)
median() { tr ' ' '\n' | awk '/^[0-9.]+$/' | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "| case | threads | shardlight ms | pytorch ms | ratio (median) | ratio (range, $ROUNDS rounds) |"
echo "|---|---|---|---|---|---|"
"$BIN" --list --filter "$FILTER" | while IFS= read -r name; do
  for t in $THREADS; do
    # OPENBLAS_NUM_THREADS too: without it PyTorch's OpenBLAS uses every core even under
    # torch.set_num_threads(1)
    export OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t SL_NUM_THREADS=$t MKL_NUM_THREADS=$t
    sls="" pts="" ratios=""
    for ((r = 0; r < ROUNDS; r++)); do
      ms=$("$BIN" --threads "$t" --case "$name" | cut -f2)
      sls="$sls $ms"
      if [ $have_torch = 1 ]; then
        pt=$("${torch_env[@]}" "$PYTHON" "$ROOT/tools/$SCRIPT" --threads "$t" --case "$name" | cut -f2)
        pts="$pts $pt"
        ratios="$ratios $(awk -v a="$ms" -v b="$pt" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "n/a" }')"
      fi
    done
    range=$(echo $ratios | tr ' ' '\n' | awk '/^[0-9.]+$/' | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print NR ? lo "-" hi : "n/a" }')
    echo "| $name | $t | $(echo $sls | median) | $(echo $pts | median) | $(echo $ratios | median) | $range |"
  done
done

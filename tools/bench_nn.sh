#!/bin/bash
# nn benchmark (issue 3, section 9): Shardlight next to PyTorch on this machine, in the same run,
# single-threaded and with 2 threads. Each case runs in Shardlight and then in PyTorch right
# after (so both see the same machine load), and the table gives ratio = Shardlight / PyTorch
# (< 1: Shardlight is faster). Times: median ms of forward + backward (AdamW: one step).
#
#   tools/bench_nn.sh [build-dir] [--filter SUBSTR] [--threads "1 2"]
#
# The PyTorch side runs when /usr/bin/python3 can import torch; otherwise its column says n/a.
set -euo pipefail
BUILD=build
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then BUILD=$1; shift; fi
FILTER=""
THREADS="1 2"
while [ $# -gt 0 ]; do
  case "$1" in
    --filter) FILTER=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    *) echo "usage: $0 [build-dir] [--filter SUBSTR] [--threads \"1 2\"]" >&2; exit 2 ;;
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
echo "| case | threads | shardlight ms | pytorch ms | ratio |"
echo "|---|---|---|---|---|"
"$BIN" --list --filter "$FILTER" | while IFS= read -r name; do
  for t in $THREADS; do
    export OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t SL_NUM_THREADS=$t MKL_NUM_THREADS=$t
    ms=$("$BIN" --threads "$t" --case "$name" | cut -f2)
    pt="n/a"
    if [ $have_torch = 1 ]; then
      pt=$("${torch_env[@]}" /usr/bin/python3 "$ROOT/tools/bench_nn.py" --threads "$t" --case "$name" | cut -f2)
    fi
    ratio="n/a"
    [ "$pt" != "n/a" ] && ratio=$(awk -v a="$ms" -v b="$pt" 'BEGIN { printf "%.2f", a / b }')
    echo "| $name | $t | $ms | $pt | $ratio |"
  done
done

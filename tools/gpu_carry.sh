#!/usr/bin/env bash
# Fills .carry/ (git-ignored) with the headers tools/gpu_check.sh needs on a GPU machine that
# has none of them and cannot download: Eigen's (the folder holding Eigen/Core) and doctest's.
# That machine's image has nvcc, cuDNN, NCCL, meson and ninja (device README, KINDS.md), not
# these. Run it here after tools/setup.sh (which installs libeigen3-dev and doctest-dev), then:
#
#   tools/gpu_carry.sh
#   device run: command "SL_GPU_CHECK_BUDGET_S=480 tools/gpu_check.sh", carry [".carry"]
#
# About 7 MiB; the device tool carries at most 64 MiB with the working tree.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
carry="$root/.carry"
eigen=/usr/include/eigen3
doctest=/usr/include/doctest
for d in "$eigen/Eigen" "$doctest"; do
  [[ -d "$d" ]] || { echo "gpu_carry: $d not found: run tools/setup.sh build first" >&2; exit 1; }
done
# a fresh copy each time, built beside the old one and swapped in, so a failed copy leaves the
# previous .carry whole
tmp="$(mktemp -d "$root/.carry.new.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/eigen3" "$tmp/doctest"
cp -r "$eigen/Eigen" "$tmp/eigen3/"  # Eigen/ only: unsupported/ is not used
cp -r "$doctest" "$tmp/doctest/"
rm -rf "$carry"
mv "$tmp" "$carry"
trap - EXIT
echo "gpu_carry: $(du -sh "$carry" | cut -f1) in $carry:" \
  "$(find "$carry" -path '*Eigen/Core' -type f), $(find "$carry" -name doctest.h -type f)"

#!/bin/bash
# nn benchmark (issue 3, section 9): Shardlight next to PyTorch on this machine, in the same run,
# single-threaded and with 2 threads: build/tools/bench_nn against tools/bench_nn.py, driven by
# tools/bench_pairs.sh (R rounds of alternating pairs; medians and ranges of the ratios).
# Times: median ms of forward + backward (AdamW: one step) within each process.
#
#   tools/bench_nn.sh [build-dir] [--filter SUBSTR] [--threads "1 2"] [--rounds R]
#
# The PyTorch side runs when /usr/bin/python3 can import torch; otherwise its column says n/a.
exec env PYTHON=/usr/bin/python3 "$(dirname "$0")/bench_pairs.sh" bench_nn bench_nn.py "$@"

#!/bin/bash
# Model zoo benchmark: one training step (forward, loss, backward, AdamW step) of zoo models in
# Shardlight next to the same model in PyTorch on this machine, in the same run, at 1 and 2
# threads: build/tools/bench_zoo against tools/bench_zoo.py, driven by tools/bench_pairs.sh
# (R rounds of alternating pairs; medians and ranges of the ratios Shardlight / PyTorch).
#
#   tools/bench_zoo.sh [build-dir] [--filter SUBSTR] [--threads "1 2"] [--rounds R]
#
# The PyTorch side runs with /tmp/hfvenv/bin/python, a venv over Debian's PyTorch 1.13 and
# torchvision 0.14 with Hugging Face transformers 4.30.2 added for the BERT rows. Make it with
#   /usr/bin/python3 -m venv --system-site-packages /tmp/hfvenv
#   /tmp/hfvenv/bin/pip install transformers==4.30.2
# (set PYTHON to use another interpreter). Without transformers the BERT rows' PyTorch column
# says n/a, and the line above the table says why.
PYTHON=${PYTHON:-/tmp/hfvenv/bin/python}
if ! "$PYTHON" -c "import transformers" 2>/dev/null; then
  echo "BERT rows: no PyTorch time ($PYTHON cannot import transformers; make the venv as tools/bench_zoo.sh says)"
  [ -x "$PYTHON" ] || PYTHON=/usr/bin/python3
fi
export PYTHON
exec "$(dirname "$0")/bench_pairs.sh" bench_zoo bench_zoo.py "$@"

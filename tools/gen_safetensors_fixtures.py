#!/usr/bin/python3
"""Writes the safetensors compatibility fixtures (tests/fixtures/serialize/) with Python's
reference `safetensors` package, so tests/serialize/test_safetensors.cpp can check that
Shardlight reads files written by Python and writes byte-identical files.

    /usr/bin/python3 -m pip install --break-system-packages safetensors
    /usr/bin/python3 tools/gen_safetensors_fixtures.py

The tensors are simple formulas that the C++ test recomputes (keep the two in sync):
  all_dtypes:  f32 = arange(6).reshape(2, 3) * 0.5 - 1     f64 = arange(4) / 3
               f16 = arange(5) * 0.25                        bf16 = arange(5) - 2
               i64 = arange(3) * 10**12                      i32 = -arange(4)
               bool = [True, False, True]                    scalar = 3.5 (0-d f32)
               empty = zeros(0, 3) f32                       "ünïcödé/weight" = ones(2) f32
               metadata {"format": "pt"}
  escapes:     "quote\\"name" = ones(1) f32, metadata {"note": <the NOTE string below>}
  no_metadata: "b" = arange(3) i64, "a" = arange(2) f32, "c10" = zeros(1) f32, "c9" = ones(1) f32,
               "y" = arange(2) bf16 - everything sorted by the writer (dtype, then name)
  empty:       no tensors, no metadata
Only one metadata entry per file: with several, the reference writer's order is a hash order.
"""
import os

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "serialize")
NOTE = 'quote" backslash\\ newline\n tab\t cr\r ctrl\x01\x1f del\x7f e\u0301 \u00e9 \U0001F600 /slash'


def main():
    os.makedirs(OUT, exist_ok=True)
    all_dtypes = {
        "f32": torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.5 - 1,
        "f64": torch.arange(4, dtype=torch.float64) / 3,
        "f16": torch.arange(5, dtype=torch.float16) * 0.25,
        "bf16": torch.arange(5, dtype=torch.bfloat16) - 2,
        "i64": torch.arange(3, dtype=torch.int64) * 10**12,
        "i32": -torch.arange(4, dtype=torch.int32),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros(0, 3),
        "\u00fcn\u00efc\u00f6d\u00e9/weight": torch.ones(2),
    }
    save_file(all_dtypes, os.path.join(OUT, "all_dtypes.safetensors"), metadata={"format": "pt"})
    save_file({'quote"name': torch.ones(1)}, os.path.join(OUT, "escapes.safetensors"), metadata={"note": NOTE})
    save_file({"b": torch.arange(3), "a": torch.arange(2, dtype=torch.float32), "c10": torch.zeros(1),
               "c9": torch.ones(1), "y": torch.arange(2, dtype=torch.bfloat16)},
              os.path.join(OUT, "no_metadata.safetensors"))
    save_file({}, os.path.join(OUT, "empty.safetensors"))
    for f in sorted(os.listdir(OUT)):
        print(f, os.path.getsize(os.path.join(OUT, f)), "bytes")


if __name__ == "__main__":
    main()

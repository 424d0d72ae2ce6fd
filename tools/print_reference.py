"""PyTorch's repr of the tensors in tests/core/test_print.cpp (the expected strings there).

Run with PyTorch 1.13 (Debian's python3-torch): /usr/bin/python3 tools/print_reference.py
Each line prints a case name and the repr as a C++ string literal, ready to compare.
"""
import torch

torch.set_printoptions(profile="default")

CASES = [
    ("int64 above 2^53", torch.tensor([2**53 + 1, -(2**53) - 3])),
    ("int64 extremes", torch.tensor([2**62, -(2**63), 5])),
    ("int64 max 0-d", torch.tensor(2**63 - 1)),
    ("int32", torch.tensor([7, -2147483648], dtype=torch.int32)),
    ("empty int64", torch.tensor([], dtype=torch.int64)),
    ("empty int32", torch.tensor([], dtype=torch.int32)),
    ("empty bool", torch.tensor([], dtype=torch.bool)),
    ("empty float64", torch.tensor([], dtype=torch.float64)),
    ("empty float32", torch.tensor([], dtype=torch.float32)),
    ("empty 2-d int64", torch.zeros(2, 0, dtype=torch.int64)),
    ("bool", torch.tensor([True, False])),
    ("float int mode", torch.tensor([1.0, -20.0, 300.0])),
    ("float fixed", torch.tensor([0.5, -1.25])),
    ("float sci", torch.tensor([1e-5, 1.0])),
    ("float64 nonfinite", torch.tensor([float("nan"), float("inf"), 2.0], dtype=torch.float64)),
    ("float nonfinite wide", torch.tensor([float("-inf"), 0.0, 1234.5, float("nan")])),
    ("float zeros and nan", torch.tensor([0.0, float("nan")])),
    ("float sci with inf", torch.tensor([1e-6, -float("inf"), 20.0])),
    # summarised (more than 1000 elements): 3 edge items each side of "..."
    ("summarised 1-d", torch.arange(2000)),
    ("summarised 1-d wrapped", torch.arange(1001, dtype=torch.float64) * 1e10),
    ("summarised rows", torch.arange(3000).reshape(1000, 3)),
    ("summarised rows and columns", torch.arange(2000).reshape(10, 200)),
    ("summarised 3-d", torch.arange(2000, dtype=torch.float32).reshape(10, 10, 20) / 8),
]


def literal(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


for name, t in CASES:
    print(f"{{{literal(name)}, {literal(repr(t))}}},")

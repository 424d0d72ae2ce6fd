#!/usr/bin/python3
"""Offline check that a consolidated checkpoint (tools/ckpt_consolidate) loads in PyTorch.

    /usr/bin/python3 tools/ckpt_consolidate_check.py OUT.safetensors [--tiny]

Loads the file with safetensors.torch.load_file and prints every tensor. With --tiny, the file
must come from the test model of tests/dist/support/tiny_training.h (fc1: Linear(5, 7), fc2:
Linear(7, 3), a float64 `scale`): the same module is built in PyTorch, loaded with
load_state_dict(strict=True) and run on one input, so names, shapes and dtypes are exactly what
PyTorch expects. Needs python3-torch and `pip install safetensors`. Not part of the test suite.
"""
import sys

import torch
from safetensors.torch import load_file


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.full((1,), 0.9, dtype=torch.float64))
        self.fc1 = torch.nn.Linear(5, 7)
        self.fc2 = torch.nn.Linear(7, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x))) * self.scale


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sd = load_file(sys.argv[1])
    for name, t in sd.items():
        print(f"{name}: {tuple(t.shape)} {t.dtype}")
    if "--tiny" in sys.argv:
        net = TinyNet()
        net.load_state_dict(sd, strict=True)
        out = net(torch.ones(2, 5))
        print("forward ok:", tuple(out.shape), out.dtype)
    print("OK")


if __name__ == "__main__":
    main()

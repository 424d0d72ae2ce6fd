#!/usr/bin/python3
"""Checks that files written by Shardlight load in Python's `safetensors` (and are byte-identical
to what Python writes for the same tensors), and that checkpoint directories verify with zlib.

    /usr/bin/python3 tools/check_safetensors.py FILE.safetensors ...   load, print, compare bytes
    /usr/bin/python3 tools/check_safetensors.py --checkpoint DIR       sizes, CRC-32s, sections
    /usr/bin/python3 tools/check_safetensors.py --sample build/tools/safetensors_sample
        runs the sample writer into a temporary directory and checks everything it wrote,
        including the values of all_dtypes.safetensors against the formulas of
        tools/gen_safetensors_fixtures.py.

Needs `/usr/bin/python3 -m pip install --break-system-packages safetensors` (and python3-torch).
Exits 1 on the first failure.
"""
import json
import os
import subprocess
import sys
import tempfile
import zlib

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save, save_file


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check_file(path, quiet=False):
    tensors = load_file(path)
    with safe_open(path, framework="pt") as f:
        meta = f.metadata() or {}
    if not quiet:
        print(f"{path}: {len(tensors)} tensors, metadata keys {sorted(meta)}")
        for k, v in tensors.items():
            print(f"  {k!r}: {v.dtype} {list(v.shape)}")
    data = open(path, "rb").read()
    if len(meta) <= 1:  # with several keys Python's metadata order is a hash order
        if save(tensors, metadata=meta or None) != data:
            fail(f"{path}: Python writes different bytes for the same tensors")
        if not quiet:
            print("  byte-identical to Python's writer")
    return tensors, meta


def check_checkpoint(d):
    manifest = json.load(open(os.path.join(d, "manifest.json")))
    if manifest.get("format") != "shardlight.checkpoint":
        fail(f"{d}: not a shardlight checkpoint")
    for s in manifest["sections"]:
        path = os.path.join(d, s["file"])
        data = open(path, "rb").read()
        if len(data) != s["size"] or zlib.crc32(data) != s["crc32"]:
            fail(f"{path}: size/CRC differ from the manifest")
        tensors, meta = check_file(path, quiet=True)
        section_meta = json.loads(meta.get("shardlight.meta", "null"))
        print(f"{d}/{s['file']}: ok ({len(tensors)} tensors, meta {json.dumps(section_meta)[:100]})")
    return manifest


def expected_all_dtypes():
    return {
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


def check_sample(writer):
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([writer, d], check=True)
        got, meta = check_file(os.path.join(d, "all_dtypes.safetensors"))
        exp = expected_all_dtypes()
        if meta != {"format": "pt"} or sorted(got) != sorted(exp):
            fail("all_dtypes: wrong names or metadata")
        for k, v in exp.items():
            if got[k].dtype != v.dtype or not torch.equal(got[k], v):
                fail(f"all_dtypes: tensor {k!r} differs")
        with tempfile.NamedTemporaryFile(suffix=".safetensors") as ref:
            save_file(exp, ref.name, metadata={"format": "pt"})
            if open(ref.name, "rb").read() != open(os.path.join(d, "all_dtypes.safetensors"), "rb").read():
                fail("all_dtypes: not byte-identical to Python's file for the same tensors")
        views, _ = check_file(os.path.join(d, "views.safetensors"))
        base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        if not (torch.equal(views["transposed"], base.t()) and torch.equal(views["row1"], base[1])):
            fail("views: wrong values")
        check_checkpoint(os.path.join(d, "checkpoint"))
    print("all checks passed")


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        sys.exit(2)
    if args[0] == "--sample":
        check_sample(args[1])
    elif args[0] == "--checkpoint":
        check_checkpoint(args[1])
    else:
        for p in args:
            check_file(p)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Regenerates tests/fixtures/optim/lamb.safetensors, the LAMB reference of
tests/optim/test_lamb.cpp, with plain PyTorch (no optimizer class of shardlight or torch is used):

    /usr/bin/python3 tools/gen_lamb_fixture.py        (Debian's python3-torch 1.13 + safetensors)

The rule, from You et al. 2019 (arXiv 1904.00962, Algorithm 2), per parameter tensor w:
    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
    m^ = m / (1 - b1^t), v^ = v / (1 - b2^t)   (m^ = m, v^ = v without bias correction)
    u = m^ / (sqrt(v^) + eps) + weight_decay * w
    r = ||w|| / ||u|| if both norms > 0 else 1;  w -= lr * r * u
computed in float64 from float32-representable inputs.

Layout, for each case <c>: "<c>/init/<k>" the initial parameters (float64 holding float32
values), for steps s = 1..STEPS "<c>/grad/<s>/<k>" the gradient, "<c>/param/<s>/<k>" the
parameters after the step, "<c>/state/<s>/<k>/exp_avg" and ".../exp_avg_sq", and
"<c>/ratio/<s>/<k>" (a 1-element float64) the trust ratio used. Metadata "cases": a JSON list of
{"name", "bias_correction", "groups": [{"params": [k...], "lr", "betas", "eps", "weight_decay"}]}.
Parameter 2 starts at all zeros (its first ratio is 1: the ||w|| = 0 branch).
"""
import json
import os
import struct

import torch


def save_file(tensors, path, metadata):
    """safetensors.torch.save_file for float64 tensors (the format: an 8-byte little-endian
    header size, a JSON header of dtype / shape / data_offsets per tensor plus __metadata__, the
    raw little-endian data), so the script needs no package beyond torch."""
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for key in sorted(tensors):
        t = tensors[key].contiguous()
        assert t.dtype == torch.float64
        data = t.numpy().astype("<f8").tobytes()
        header[key] = {"dtype": "F64", "shape": list(t.shape),
                       "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "optim",
                   "lamb.safetensors")
STEPS = 5
SHAPES = [(3, 4), (5,), (2, 3, 2), (7,)]
GRAD_SCALES = [1.0, 0.1, 2.0, 0.5, 0.05]

CASES = [
    dict(name="lamb_groups", bias_correction=True,
         groups=[dict(params=[0, 2], lr=0.02, betas=[0.9, 0.999], eps=1e-6, weight_decay=0.05),
                 dict(params=[1, 3], lr=0.01, betas=[0.9, 0.999], eps=1e-6, weight_decay=0.0)]),
    dict(name="lamb_no_bias_correction", bias_correction=False,
         groups=[dict(params=[0, 1, 2, 3], lr=0.005, betas=[0.8, 0.99], eps=1e-4,
                      weight_decay=0.01)]),
]


def lamb_step(w, g, m, v, t, lr, b1, b2, eps, wd, bias_correction):
    m.mul_(b1).add_((1 - b1) * g)
    v.mul_(b2).add_((1 - b2) * g * g)
    if bias_correction:
        m_hat = m / (1 - b1 ** t)
        v_hat = v / (1 - b2 ** t)
    else:
        m_hat, v_hat = m, v
    u = m_hat / (v_hat.sqrt() + eps) + wd * w
    w_norm = torch.sqrt((w * w).sum()).item()
    u_norm = torch.sqrt((u * u).sum()).item()
    r = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
    w.sub_(lr * r * u)
    return r


def main():
    tensors = {}
    g = torch.Generator().manual_seed(1904)
    for c in CASES:
        name = c["name"]
        init = [torch.randn(s, generator=g).float().double() for s in SHAPES]
        init[2].zero_()
        for k, p in enumerate(init):
            tensors[f"{name}/init/{k}"] = p.clone()
        w = [p.clone() for p in init]
        m = [torch.zeros_like(p) for p in init]
        v = [torch.zeros_like(p) for p in init]
        hyper = {}
        for grp in c["groups"]:
            for k in grp["params"]:
                hyper[k] = grp
        for s in range(1, STEPS + 1):
            for k in range(len(SHAPES)):
                grad = (torch.randn(SHAPES[k], generator=g) * GRAD_SCALES[s - 1]).float().double()
                h = hyper[k]
                r = lamb_step(w[k], grad, m[k], v[k], s, h["lr"], h["betas"][0], h["betas"][1],
                              h["eps"], h["weight_decay"], c["bias_correction"])
                tensors[f"{name}/grad/{s}/{k}"] = grad
                tensors[f"{name}/param/{s}/{k}"] = w[k].clone()
                tensors[f"{name}/state/{s}/{k}/exp_avg"] = m[k].clone()
                tensors[f"{name}/state/{s}/{k}/exp_avg_sq"] = v[k].clone()
                tensors[f"{name}/ratio/{s}/{k}"] = torch.tensor([r], dtype=torch.float64)
                if s == 1 and k == 2:
                    assert r == 1.0, "parameter 2 starts at zero: its first ratio must be 1"
    save_file(tensors, OUT, metadata={"cases": json.dumps(CASES),
                                      "generator": "tools/gen_lamb_fixture.py",
                                      "torch": torch.__version__})
    print(f"wrote {OUT}: {len(tensors)} tensors")


if __name__ == "__main__":
    main()

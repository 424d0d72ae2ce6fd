#!/usr/bin/python3
"""Regenerates the PyTorch parity fixtures of tests/ops/ (tests/fixtures/ops/*.safetensors).

Run from the repository root with Debian's PyTorch (1.13, CPU):
    /usr/bin/python3 tools/gen_op_fixtures.py            # all families
    /usr/bin/python3 tools/gen_op_fixtures.py conv pool  # some of them

Format: one safetensors file per op family (8-byte little-endian header length, JSON header
{"name": {"dtype", "shape", "data_offsets"}}, raw little-endian data), written here with the
standard library only, so the `safetensors` package is not needed. Tensor names are
"<case>/<what>": inputs ("x", "w", "b", ...), the upstream gradient "gy" used for the backward
(the backward computes the gradients of sum(y * gy)), the outputs ("y", ...) and the gradients
("grad_x", "grad_w", ...). Options of a case are stored as small int64 / float64 tensors
("<case>/stride", ...), so the C++ tests read them instead of repeating the case table. Values
are float32 unless the case says otherwise; every case is seeded, so rerunning the script
reproduces the files byte for byte.
"""
import json
import os
import struct
import sys

import torch
import torch.nn.functional as F

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "ops")

_DTYPES = {torch.float32: ("F32", "<f4"), torch.float64: ("F64", "<f8"),
           torch.int64: ("I64", "<i8"), torch.bool: ("BOOL", "?")}


def write_safetensors(path, tensors):
    """Writes {name: tensor} as safetensors (tensors packed in name order)."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        code, _ = _DTYPES[t.dtype]
        data = t.numpy().tobytes()
        header[name] = {"dtype": code, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


class Family:
    """Collects the tensors of one fixture file."""

    def __init__(self, name):
        self.name, self.tensors = name, {}

    def put(self, case, what, t):
        key = f"{case}/{what}"
        assert key not in self.tensors, key
        if not torch.is_tensor(t):
            t = torch.tensor(t, dtype=torch.float64 if isinstance(t, float) else torch.int64)
        self.tensors[key] = t

    def save(self):
        write_safetensors(os.path.join(OUT_DIR, self.name + ".safetensors"), self.tensors)
        print(f"{self.name}: {len(self.tensors)} tensors")


def leaf(*shape, dtype=torch.float32, scale=1.0):
    return (torch.randn(*shape, dtype=dtype) * scale).requires_grad_()


def backward_with(fam, case, y, inputs):
    """Stores gy and the gradients of sum(y * gy) w.r.t. inputs {name: tensor}."""
    gy = torch.randn_like(y)
    fam.put(case, "gy", gy)
    named = [(k, v) for k, v in inputs.items() if v is not None and v.requires_grad]
    grads = torch.autograd.grad(y, [v for _, v in named], gy)
    for (k, _), g in zip(named, grads):
        fam.put(case, "grad_" + k, g)


# ---- conv ----------------------------------------------------------------------------------

def gen_conv():
    fam = Family("conv")
    torch.manual_seed(1)
    # (case, dims, N, C, spatial, O, kernel, stride, padding, dilation, groups, bias)
    cases = [
        ("c2_basic", 2, 2, 3, (7, 6), 4, (3, 3), (1, 1), (1, 1), (1, 1), 1, True),
        ("c2_strided", 2, 2, 3, (9, 8), 5, (3, 2), (2, 3), (1, 2), (2, 1), 1, False),
        ("c2_groups", 2, 2, 4, (6, 7), 6, (3, 2), (2, 1), (0, 1), (1, 1), 2, True),
        ("c2_depthwise", 2, 1, 4, (5, 5), 8, (3, 3), (1, 1), (1, 1), (1, 1), 4, True),
        ("c2_same_even", 2, 2, 3, (6, 5), 4, (4, 2), (1, 1), "same", (1, 1), 1, True),
        ("c2_same_dilated", 2, 1, 2, (7, 6), 3, (3, 4), (1, 1), "same", (2, 3), 1, False),
        ("c2_valid", 2, 2, 3, (5, 6), 2, (2, 3), (1, 1), "valid", (1, 1), 1, True),
        ("c2_pointwise", 2, 2, 6, (4, 5), 4, (1, 1), (1, 1), (0, 0), (1, 1), 2, True),
        ("c2_1x1_strided", 2, 2, 3, (5, 5), 4, (1, 1), (2, 2), (1, 1), (1, 1), 1, True),
        ("c1_basic", 1, 2, 4, (10,), 3, (3,), (2,), (1,), (2,), 1, True),
        ("c1_same_even", 1, 2, 4, (9,), 6, (4,), (1,), "same", (1,), 2, True),
        ("c1_valid", 1, 3, 2, (6,), 2, (6,), (1,), "valid", (1,), 1, False),
    ]
    for case, dims, N, C, sp, O, k, s, p, d, g, bias in cases:
        x = leaf(N, C, *sp)
        w = leaf(O, C // g, *k, scale=0.5)
        b = leaf(O) if bias else None
        conv = F.conv2d if dims == 2 else F.conv1d
        y = conv(x, w, b, stride=s, padding=p, dilation=d, groups=g)
        for name, t in (("x", x), ("w", w), ("y", y)):
            fam.put(case, name, t)
        if b is not None:
            fam.put(case, "b", b)
        fam.put(case, "stride", list(s))
        fam.put(case, "dilation", list(d))
        fam.put(case, "groups", [g])
        # padding: [mode, values...] with mode 0 explicit, 1 same, 2 valid
        mode = {"same": 1, "valid": 2}.get(p, 0) if isinstance(p, str) else 0
        fam.put(case, "padding", [mode] + (list(p) if mode == 0 else [0] * dims))
        backward_with(fam, case, y, {"x": x, "w": w, "b": b})
    fam.save()


# ---- conv_r1: second derivatives of the convolutions --------------------------------------

def r1_penalty(d_of_x, x, params):
    """R1 (gamma = 2): mean over the batch of |dD/dx|^2, D summed per sample, and its gradient
    w.r.t. params: a second derivative of every layer of D (create_graph)."""
    (gx,) = torch.autograd.grad(d_of_x(x).sum(), x, create_graph=True)
    penalty = gx.square().sum() / x.shape[0]
    return penalty, torch.autograd.grad(penalty, params)


def gen_conv_r1():
    """R1 penalties of two tiny CNNs in float64 (tests/autograd/test_double_backward_conv.cpp):
    "cnn2d": conv2d -> tanh -> conv_transpose2d -> tanh -> conv2d; "cnn1d": conv1d -> tanh ->
    conv_transpose1d. Stores the inputs, the parameters ("p0", "p1", ...), the penalty and its
    gradient w.r.t. each parameter ("grad_p0", ...)."""
    fam = Family("conv_r1")
    torch.manual_seed(7)
    f64 = dict(dtype=torch.float64)
    x = torch.randn(2, 2, 6, 5, **f64).requires_grad_()
    ps = [leaf(4, 2, 3, 3, scale=0.5, **f64), leaf(4, **f64),            # conv2d, stride 2
          leaf(4, 2, 2, 3, scale=0.5, **f64), leaf(4, **f64),            # conv_transpose2d
          leaf(2, 2, 2, 2, scale=0.5, **f64)]                            # conv2d, groups 2

    def cnn2d(xi):
        h = torch.tanh(F.conv2d(xi, ps[0], ps[1], stride=2, padding=1))
        h = torch.tanh(F.conv_transpose2d(h, ps[2], ps[3], stride=2, padding=1, output_padding=1,
                                          groups=2, dilation=(2, 1)))
        return F.conv2d(h, ps[4], None, stride=1, padding=(1, 0), dilation=(1, 2), groups=2)

    x1 = torch.randn(2, 4, 9, **f64).requires_grad_()
    qs = [leaf(6, 2, 3, scale=0.5, **f64), leaf(6, **f64),               # conv1d, groups 2
          leaf(6, 1, 3, scale=0.5, **f64)]                               # conv_transpose1d, groups 3

    def cnn1d(xi):
        h = torch.tanh(F.conv1d(xi, qs[0], qs[1], stride=2, padding=1, dilation=2, groups=2))
        return F.conv_transpose1d(h, qs[2], None, stride=2, padding=1, output_padding=1, groups=3,
                                  dilation=2)

    for case, net, xi, params in (("cnn2d", cnn2d, x, ps), ("cnn1d", cnn1d, x1, qs)):
        penalty, grads = r1_penalty(net, xi, params)
        fam.put(case, "x", xi)
        fam.put(case, "penalty", penalty)
        for i, (p, g) in enumerate(zip(params, grads)):
            fam.put(case, f"p{i}", p)
            fam.put(case, f"grad_p{i}", g)
    fam.save()


# ---- pool ----------------------------------------------------------------------------------

def gen_pool():
    fam = Family("pool")
    torch.manual_seed(2)
    # max: (case, shape, kernel, stride, padding, dilation, ceil_mode)
    for case, shape, k, s, p, d, ceil in [
        ("max_basic", (2, 3, 7, 6), (3, 3), (2, 2), (1, 1), (1, 1), False),
        ("max_ceil", (2, 2, 8, 7), (3, 2), (2, 2), (1, 0), (1, 1), True),
        ("max_dilated", (1, 3, 9, 8), (3, 2), (1, 2), (0, 1), (2, 3), False),
        ("max_rect_ceil", (2, 2, 5, 9), (2, 3), (3, 2), (0, 1), (1, 1), True),
        ("max_unbatched", (3, 6, 6), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ]:
        x = leaf(*shape)
        y, idx = F.max_pool2d(x, k, s, p, d, ceil_mode=ceil, return_indices=True)
        fam.put(case, "x", x)
        fam.put(case, "y", y)
        fam.put(case, "indices", idx)
        fam.put(case, "kernel", list(k))
        fam.put(case, "stride", list(s))
        fam.put(case, "padding", list(p))
        fam.put(case, "dilation", list(d))
        fam.put(case, "ceil_mode", [int(ceil)])
        backward_with(fam, case, y, {"x": x})
    # avg: (case, shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    for case, shape, k, s, p, ceil, cip, div in [
        ("avg_basic", (2, 3, 7, 6), (3, 3), (2, 2), (1, 1), False, True, 0),
        ("avg_exclude_pad", (2, 3, 7, 6), (3, 3), (2, 2), (1, 1), False, False, 0),
        ("avg_ceil", (2, 2, 8, 7), (3, 2), (2, 2), (1, 1), True, True, 0),
        ("avg_ceil_exclude", (2, 2, 8, 7), (3, 3), (2, 2), (1, 1), True, False, 0),
        ("avg_divisor", (1, 2, 6, 6), (2, 3), (2, 1), (1, 0), False, True, 5),
    ]:
        x = leaf(*shape)
        y = F.avg_pool2d(x, k, s, p, ceil_mode=ceil, count_include_pad=cip,
                         divisor_override=div if div else None)
        fam.put(case, "x", x)
        fam.put(case, "y", y)
        fam.put(case, "kernel", list(k))
        fam.put(case, "stride", list(s))
        fam.put(case, "padding", list(p))
        fam.put(case, "ceil_mode", [int(ceil)])
        fam.put(case, "count_include_pad", [int(cip)])
        fam.put(case, "divisor_override", [div])
        backward_with(fam, case, y, {"x": x})
    for case, shape, out in [
        ("adaptive_shrink", (2, 3, 7, 5), (3, 2)),
        ("adaptive_global", (2, 4, 5, 6), (1, 1)),
        ("adaptive_grow", (1, 2, 3, 4), (5, 7)),
    ]:
        x = leaf(*shape)
        y = F.adaptive_avg_pool2d(x, out)
        fam.put(case, "x", x)
        fam.put(case, "y", y)
        fam.put(case, "output_size", list(out))
        backward_with(fam, case, y, {"x": x})
    fam.save()


# ---- norm ----------------------------------------------------------------------------------

def gen_norm():
    fam = Family("norm")
    torch.manual_seed(3)
    for case, shape, nshape, affine in [
        ("ln_last", (4, 5, 6), (6,), True),
        ("ln_two_dims", (3, 4, 5), (4, 5), True),
        ("ln_plain", (6, 7), (7,), False),
    ]:
        x = leaf(*shape, scale=2.0)
        with torch.no_grad():
            x += 0.5
        w = leaf(*nshape) if affine else None
        b = leaf(*nshape) if affine else None
        y = F.layer_norm(x, nshape, w, b, eps=1e-5)
        fam.put(case, "x", x)
        fam.put(case, "y", y)
        fam.put(case, "normalized_shape", list(nshape))
        if affine:
            fam.put(case, "w", w)
            fam.put(case, "b", b)
        backward_with(fam, case, y, {"x": x, "w": w, "b": b})
    for case, shape, training, affine, momentum in [
        ("bn2d_train", (3, 4, 5, 5), True, True, 0.1),
        ("bn2d_eval", (3, 4, 5, 5), False, True, 0.1),
        ("bn1d_train", (8, 4), True, True, 0.3),
        ("bn1d_seq_train", (4, 3, 7), True, False, 0.1),
        ("bn1d_seq_eval", (4, 3, 7), False, False, 0.1),
    ]:
        C = shape[1]
        x = leaf(*shape, scale=1.5)
        with torch.no_grad():
            x += 0.7
        w = leaf(C) if affine else None
        b = leaf(C) if affine else None
        rm = torch.randn(C) * 0.2
        rv = torch.rand(C) + 0.5
        fam.put(case, "running_mean", rm.clone())
        fam.put(case, "running_var", rv.clone())
        y = F.batch_norm(x, rm, rv, w, b, training=training, momentum=momentum, eps=1e-5)
        fam.put(case, "x", x)
        fam.put(case, "y", y)
        fam.put(case, "running_mean_after", rm)
        fam.put(case, "running_var_after", rv)
        fam.put(case, "training", [int(training)])
        fam.put(case, "momentum", float(momentum))
        if affine:
            fam.put(case, "w", w)
            fam.put(case, "b", b)
        backward_with(fam, case, y, {"x": x, "w": w, "b": b})
    fam.save()


# ---- attention -----------------------------------------------------------------------------

def sdpa_reference(q, k, v, mask, causal, scale):
    """torch.nn.functional.scaled_dot_product_attention's documented math (PyTorch 2.x), which
    torch 1.13 lacks: softmax(q k^T * scale + mask) @ v, bool masks keeping the true entries."""
    scores = q @ k.transpose(-2, -1) * scale
    L, S = scores.shape[-2:]
    if causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask
    return torch.softmax(scores, dim=-1) @ v


def gen_attention():
    fam = Family("attention")
    torch.manual_seed(4)
    # (case, q shape, S, Ev, mask kind, causal, scale)
    for case, qs, S, Ev, mask_kind, causal, scale in [
        ("plain", (2, 3, 5, 4), 6, 5, None, False, None),
        ("bool_mask", (2, 3, 5, 4), 6, 5, "bool_ls", False, None),
        ("key_padding", (2, 3, 5, 4), 6, 5, "bool_pad", False, None),
        ("float_mask", (2, 3, 5, 4), 6, 3, "float_pad", False, None),
        ("causal", (2, 2, 5, 4), 5, 4, None, True, None),
        ("causal_rect", (1, 2, 4, 3), 6, 3, None, True, None),
        ("causal_and_mask", (2, 2, 5, 4), 5, 4, "bool_pad", True, None),
        ("three_d_scaled", (4, 5, 8), 7, 6, "float_ls", False, 0.3),
    ]:
        batch, L, E = qs[:-2], qs[-2], qs[-1]
        q = leaf(*qs)
        k = leaf(*batch, S, E)
        v = leaf(*batch, S, Ev)
        mask = None
        if mask_kind == "bool_ls":
            mask = torch.rand(L, S) > 0.3
            mask[:, 0] = True  # no fully masked row
        elif mask_kind == "bool_pad":
            mask = torch.ones(batch[0], 1, 1, S, dtype=torch.bool)
            mask[0, ..., S - 2:] = False
        elif mask_kind == "float_pad":
            mask = torch.randn(batch[0], 1, 1, S)
            mask[1, ..., -1] = float("-inf")
        elif mask_kind == "float_ls":
            mask = torch.randn(L, S)
        sc = scale if scale is not None else 1.0 / E ** 0.5
        y = sdpa_reference(q, k, v, mask, causal, sc)
        for name, t in (("q", q), ("k", k), ("v", v), ("y", y)):
            fam.put(case, name, t)
        if mask is not None:
            fam.put(case, "mask", mask)
        fam.put(case, "causal", [int(causal)])
        fam.put(case, "scale", float(scale) if scale is not None else -1.0)
        backward_with(fam, case, y, {"q": q, "k": k, "v": v})
    fam.save()


# ---- rnn -----------------------------------------------------------------------------------

def gen_rnn():
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    fam = Family("rnn")
    torch.manual_seed(5)
    # cells: (case, kind, N or None (unbatched), I, H, bias)
    for case, kind, N, I, H, bias in [
        ("lstm_cell", "lstm", 3, 4, 5, True),
        ("lstm_cell_nobias", "lstm", 2, 3, 4, False),
        ("gru_cell", "gru", 3, 4, 5, True),
        ("gru_cell_unbatched", "gru", None, 3, 4, True),
    ]:
        cell = (torch.nn.LSTMCell if kind == "lstm" else torch.nn.GRUCell)(I, H, bias=bias)
        shape = (N,) if N else ()
        x = leaf(*shape, I)
        h = leaf(*shape, H)
        inputs = {"x": x, "h": h}
        for name, p in cell.named_parameters():
            inputs[name] = p
        if kind == "lstm":
            c = leaf(*shape, H)
            inputs["c"] = c
            h1, c1 = cell(x, (h, c))
            outs = [h1, c1]
        else:
            outs = [cell(x, h)]
        for k, v in inputs.items():
            fam.put(case, k, v)
        grads_out = []
        for i, o in enumerate(outs):
            fam.put(case, f"y{i}", o)
            g = torch.randn_like(o)
            fam.put(case, f"gy{i}", g)
            grads_out.append(g)
        names = list(inputs)
        grads = torch.autograd.grad(outs, [inputs[k] for k in names], grads_out)
        for k, g in zip(names, grads):
            fam.put(case, "grad_" + k, g)
    # sequences: (case, kind, T, N, I, H, layers, bidirectional, batch_first, bias, states,
    #             lengths)
    for case, kind, T, N, I, H, L, bidi, bf, bias, states, lengths in [
        ("lstm_1l", "lstm", 5, 3, 4, 6, 1, False, False, True, True, None),
        ("lstm_2l_bidi_bf", "lstm", 4, 2, 3, 5, 2, True, True, True, False, None),
        ("lstm_bidi_lengths", "lstm", 6, 3, 4, 5, 1, True, False, True, True, [6, 2, 4]),
        ("lstm_2l_lengths_bf", "lstm", 5, 4, 3, 4, 2, False, True, False, True, [3, 5, 1, 4]),
        ("gru_1l", "gru", 5, 3, 4, 6, 1, False, False, True, True, None),
        ("gru_2l_bidi_lengths", "gru", 6, 3, 4, 5, 2, True, False, True, True, [4, 6, 1]),
        ("gru_nobias_bf", "gru", 4, 2, 3, 4, 1, True, True, False, False, None),
    ]:
        mod = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(
            I, H, num_layers=L, bias=bias, batch_first=bf, bidirectional=bidi)
        D = 2 if bidi else 1
        x = leaf(*((N, T, I) if bf else (T, N, I)))
        inputs = {"x": x}
        for name, p in mod.named_parameters():
            inputs[name] = p
        hx = None
        if states:
            h0 = leaf(L * D, N, H)
            inputs["h0"] = h0
            if kind == "lstm":
                c0 = leaf(L * D, N, H)
                inputs["c0"] = c0
                hx = (h0, c0)
            else:
                hx = h0
        if lengths is None:
            out, hn = mod(x, hx)
        else:
            packed = pack_padded_sequence(x, torch.tensor(lengths), batch_first=bf,
                                          enforce_sorted=False)
            out, hn = mod(packed, hx)
            out, _ = pad_packed_sequence(out, batch_first=bf, total_length=T)
            fam.put(case, "lengths", lengths)
        outs = [out] + (list(hn) if kind == "lstm" else [hn])
        for k, v in inputs.items():
            fam.put(case, k, v)
        fam.put(case, "config", [L, int(bidi), int(bf), int(bias)])
        grads_out = []
        for i, o in enumerate(outs):
            fam.put(case, f"y{i}", o)
            g = torch.randn_like(o)
            fam.put(case, f"gy{i}", g)
            grads_out.append(g)
        names = list(inputs)
        grads = torch.autograd.grad(outs, [inputs[k] for k in names], grads_out)
        for k, g in zip(names, grads):
            fam.put(case, "grad_" + k, g)
    fam.save()


# ---- ctc -----------------------------------------------------------------------------------

def gen_ctc():
    fam = Family("ctc")
    torch.manual_seed(6)
    # (case, T, N, C, targets per sample, input lengths, blank, reduction, layout, zero_inf)
    for case, T, N, C, tgts, ilens, blank, red, layout, zinf in [
        ("mean_padded", 8, 3, 5, [[1, 2, 3, 4], [2, 2], [4, 1, 4]], [8, 6, 7], 0, "mean",
         "padded", False),
        ("sum_concat_blank_last", 7, 2, 4, [[0, 1, 1], [2]], [7, 5], 3, "sum", "concat", False),
        ("none_repeats", 6, 3, 4, [[1, 1, 2], [3, 3], []], [6, 4, 3], 0, "none", "padded", False),
        ("infeasible", 5, 2, 3, [[1, 1, 1], [2, 1]], [3, 5], 0, "none", "padded", False),
        ("zero_infinity", 5, 2, 3, [[1, 1, 1], [2, 1]], [3, 5], 0, "mean", "padded", True),
        ("unbatched", 6, None, 5, [[3, 1, 2]], [6], 0, "mean", "padded", False),
    ]:
        logits = torch.randn(T, N or 1, C) * 2
        lp = logits.log_softmax(-1).detach()
        if N is None:
            lp = lp[:, 0]
        lp.requires_grad_()
        tl = [len(t) for t in tgts]
        if layout == "concat":
            targets = torch.tensor([v for t in tgts for v in t], dtype=torch.int64)
        else:
            S = max(max(tl), 1)
            targets = torch.zeros(len(tgts), S, dtype=torch.int64)
            for b, t in enumerate(tgts):
                targets[b, :len(t)] = torch.tensor(t, dtype=torch.int64)
            if N is None:
                targets = targets[0]
        il_t = torch.tensor(ilens if N else ilens[0])
        tl_t = torch.tensor(tl if N else tl[0])
        y = F.ctc_loss(lp, targets, il_t, tl_t, blank=blank, reduction=red, zero_infinity=zinf)
        fam.put(case, "log_probs", lp)
        fam.put(case, "targets", targets)
        fam.put(case, "input_lengths", il_t)
        fam.put(case, "target_lengths", tl_t)
        fam.put(case, "y", y)
        fam.put(case, "blank", [blank])
        fam.put(case, "reduction", [["none", "sum", "mean"].index(red)])
        fam.put(case, "zero_infinity", [int(zinf)])
        if torch.isfinite(y).all():
            backward_with(fam, case, y, {"log_probs": lp})
    gen_ctc_impossible(fam)
    fam.save()


def gen_ctc_impossible(fam):
    """Batches mixing possible samples with targets longer than their inputs (PyTorch: loss +inf;
    zero_infinity: loss and gradient 0; otherwise NaN gradient rows for t < input length).

    Appended after the cases above with a seed of their own, so those keep their values. Stores
    the logits too, with the gradients w.r.t. log_probs (the kernel's, Note [CTC gradient]) and
    w.r.t. the logits through log_softmax, of sum(y * gy). Input lengths are >= 1: PyTorch 1.13
    returns an uninitialized loss for an input of length 0.
    """
    torch.manual_seed(61)
    T, N, C = 6, 4, 5
    # sample 0 possible; 1: 4 labels in 3 steps; 2: 2 labels in 2 steps (possible, L == T_b);
    # 3: 5 labels in 4 steps (with a repeat)
    tgts, ilens = [[1, 2, 3], [1, 2, 3, 4], [3, 1], [4, 4, 2, 1, 3]], [6, 3, 2, 4]
    cases = []
    for red in ["none", "sum", "mean"]:
        for zinf in [False, True]:
            # both layouts for every reduction: padded / concatenated alternate with zinf
            layout = "padded" if (red != "sum") != zinf else "concat"
            cases.append((f"impossible_{red}_{'zinf' if zinf else 'inf'}", red, zinf, layout,
                          False))
    cases += [("impossible_unbatched_inf", "mean", False, "padded", True),
              ("impossible_unbatched_zinf", "mean", True, "padded", True)]
    for case, red, zinf, layout, unbatched in cases:
        if unbatched:
            tg_list, il_list = [[1, 2, 3, 4, 2]], [3]  # 5 labels, 3 of the 4 steps
            logits = (torch.randn(4, C) * 2).requires_grad_()
        else:
            tg_list, il_list = tgts, ilens
            logits = (torch.randn(T, N, C) * 2).requires_grad_()
        lp = logits.log_softmax(-1)
        lp.retain_grad()
        tl = [len(t) for t in tg_list]
        if layout == "concat":
            targets = torch.tensor([v for t in tg_list for v in t], dtype=torch.int64)
        else:
            targets = torch.zeros(len(tg_list), max(tl), dtype=torch.int64)
            for b, t in enumerate(tg_list):
                targets[b, :len(t)] = torch.tensor(t, dtype=torch.int64)
        if unbatched:
            targets = targets.reshape(-1)
            il_t, tl_t = torch.tensor(il_list[0]), torch.tensor(tl[0])
        else:
            il_t, tl_t = torch.tensor(il_list), torch.tensor(tl)
        y = F.ctc_loss(lp, targets, il_t, tl_t, blank=0, reduction=red, zero_infinity=zinf)
        gy = torch.randn_like(y)
        y.backward(gy)
        fam.put(case, "logits", logits)
        fam.put(case, "log_probs", lp)
        fam.put(case, "targets", targets)
        fam.put(case, "input_lengths", il_t)
        fam.put(case, "target_lengths", tl_t)
        fam.put(case, "y", y)
        fam.put(case, "blank", [0])
        fam.put(case, "reduction", [["none", "sum", "mean"].index(red)])
        fam.put(case, "zero_infinity", [int(zinf)])
        fam.put(case, "gy", gy)
        fam.put(case, "grad_log_probs", lp.grad)
        fam.put(case, "grad_logits", logits.grad)


GENERATORS = {"ctc": gen_ctc, "conv": gen_conv, "conv_r1": gen_conv_r1, "pool": gen_pool, "norm": gen_norm, "attention": gen_attention,
              "rnn": gen_rnn}

if __name__ == "__main__":
    torch.set_num_threads(1)
    os.makedirs(OUT_DIR, exist_ok=True)
    for name in sys.argv[1:] or GENERATORS:
        GENERATORS[name]()

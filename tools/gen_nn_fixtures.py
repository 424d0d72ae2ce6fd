#!/usr/bin/python3
"""Regenerates the PyTorch reference fixtures for Shardlight's nn parity tests.

    /usr/bin/python3 tools/gen_nn_fixtures.py [--out DIR] [--keep-existing] [family...]

Needs PyTorch (Debian's python3-torch 1.13 is what the committed fixtures were made with) and
the `safetensors` package. Each layer family gets one small file <family>.safetensors. Every case
is stored under a prefix "<case>." with these keys (all float32 unless noted):

    <case>.param.<name>        the module's state dict (parameters and buffers) BEFORE forward,
                               under PyTorch's names; the C++ test loads it into its module by
                               name, which also checks that the names agree
    <case>.in.<i>              forward input i (integer inputs keep their dtype: int64 / bool)
    <case>.out.<j>             forward output j
    <case>.gout.<j>            the upstream gradient used for output j (random, so backward is
                               checked with a non-trivial cotangent)
    <case>.gin.<i>             gradient of input i (floating inputs only)
    <case>.gparam.<name>       gradient of parameter <name>
    <case>.after.<name>        a buffer's value after forward (BatchNorm and InstanceNorm running
                               statistics)
    <case>.<other>             a constant of the case that is not a forward input (the
                               transformer cases' attention masks: tgt_mask, memory_mask, ...)

Strings go to the file's __metadata__ (a string -> string map), for the cases that record them:

    <case>.state_dict_keys     the module's state dict keys in PyTorch's order, one per line
    <case>.repr                the module's repr, as print() shows it

The layer configuration of each case is written out in both this script and the C++ test, next
to the case name. Inputs are drawn from torch.manual_seed(<fixed seed per case>), so rerunning
reproduces the files bit for bit on the same PyTorch build and machine. Computed values can
differ in the last bits on another machine (the conv family's did by up to 2e-6: PyTorch's CPU
convolution picks its kernels, and so its summation order, by the CPU's instruction set; the
transformer family's two TransformerEncoderLayer cases by up to 1e-6), so adding cases to a
family is done with --keep-existing: tensors already in the file are kept bit for bit and only
new keys are taken from this run.
"""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

torch.set_num_threads(1)


class Writer:
    def __init__(self):
        self.tensors = {}
        self.meta = {}

    def put(self, key, t):
        assert key not in self.tensors, key
        self.tensors[key] = t.detach().contiguous().clone()

    def put_meta(self, key, text):
        assert key not in self.meta, key
        self.meta[key] = text

    def put_module_strings(self, name, m):
        """The key order and repr of m, so the C++ test compares them with PyTorch's own."""
        self.put_meta(f"{name}.state_dict_keys", "\n".join(m.state_dict().keys()))
        self.put_meta(f"{name}.repr", repr(m))

    def save(self, path, keep_existing=False):
        if keep_existing and os.path.exists(path):
            from safetensors.torch import load_file
            old = load_file(path)
            kept = sum(1 for k in old if k in self.tensors)
            self.tensors.update(old)
            print(f"kept {kept} existing tensors of {path} as they were")
        save_file(self.tensors, path, metadata=self.meta or None)
        print(f"wrote {path}: {len(self.tensors)} tensors, {os.path.getsize(path)} bytes")


def run_case(w, name, fn, inputs, params=None, buffers_after=(), seed=0):
    """fn(*inputs) -> tensor or tuple; params: a module whose state dict / grads are stored."""
    torch.manual_seed(seed + 1000)
    if params is not None:
        for k, v in params.state_dict().items():
            w.put(f"{name}.param.{k}", v)
    for i, x in enumerate(inputs):
        if x is None:
            continue
        if x.is_floating_point():
            x.requires_grad_(True)
        w.put(f"{name}.in.{i}", x)
    outs = fn(*inputs)
    def flatten(o):
        if isinstance(o, (tuple, list)):
            return [y for x in o for y in flatten(x)]
        return [o]

    outs = flatten(outs)  # LSTM's (out, (h, c)) becomes out.0, out.1, out.2
    total = 0
    for j, o in enumerate(outs):
        if o is None:
            continue
        w.put(f"{name}.out.{j}", o)
        if o.requires_grad:
            g = torch.randn_like(o)
            w.put(f"{name}.gout.{j}", g)
            total = total + (o * g).sum()
    if isinstance(total, torch.Tensor):
        total.backward()
    for i, x in enumerate(inputs):
        if x is not None and x.is_floating_point() and x.grad is not None:
            w.put(f"{name}.gin.{i}", x.grad)
    if params is not None:
        for k, p in params.named_parameters():
            if p.grad is not None:
                w.put(f"{name}.gparam.{k}", p.grad)
        for k in buffers_after:
            w.put(f"{name}.after.{k}", params.state_dict()[k])


def seeded(seed):
    torch.manual_seed(seed)


# ---- layers ------------------------------------------------------------------------------------


def gen_linear(w):
    seeded(1)
    m = nn.Linear(5, 3)
    run_case(w, "linear", m, [torch.randn(4, 5)], m)
    seeded(2)
    m = nn.Linear(6, 4, bias=False)
    run_case(w, "linear_nobias_3d", m, [torch.randn(2, 3, 6)], m)


def gen_embedding(w):
    seeded(3)
    m = nn.Embedding(10, 4, padding_idx=2)
    idx = torch.tensor([[1, 2, 3, 2], [9, 0, 2, 1]])
    run_case(w, "embedding_pad", m, [idx], m)
    seeded(4)
    m = nn.Embedding(7, 3)
    run_case(w, "embedding", m, [torch.tensor([6, 0, 6, 3])], m)


def gen_embedding_bag(w):
    """nn.Embedding's options and nn.EmbeddingBag: tools/gen_nn_fixtures_embedding_bag.py."""
    import gen_nn_fixtures_embedding_bag
    gen_nn_fixtures_embedding_bag.gen_embedding_bag(w, run_case, seeded)


def gen_normalization(w):
    seeded(5)
    m = nn.LayerNorm(6)
    with torch.no_grad():
        m.weight.normal_()
        m.bias.normal_()
    run_case(w, "layer_norm", m, [torch.randn(3, 4, 6) * 3 + 1], m)
    seeded(6)
    m = nn.LayerNorm([3, 4], eps=1e-12)
    with torch.no_grad():
        m.weight.normal_()
        m.bias.normal_()
    run_case(w, "layer_norm_2d_eps", m, [torch.randn(2, 3, 4)], m)
    seeded(7)
    m = nn.LayerNorm(5, elementwise_affine=False)
    run_case(w, "layer_norm_noaffine", m, [torch.randn(4, 5)], m)
    # BatchNorm: training (batch statistics, running stats updated) and eval (running stats).
    for case, dims, shape, training in [("batch_norm1d_train", 1, (6, 3), True),
                                        ("batch_norm1d_3d_train", 1, (4, 3, 5), True),
                                        ("batch_norm2d_train", 2, (3, 4, 5, 5), True),
                                        ("batch_norm2d_eval", 2, (3, 4, 5, 5), False)]:
        seeded(8)
        c = shape[1]
        m = nn.BatchNorm1d(c, momentum=0.2) if dims == 1 else nn.BatchNorm2d(c)
        with torch.no_grad():
            m.weight.normal_()
            m.bias.normal_()
            m.running_mean.normal_()
            m.running_var.uniform_(0.5, 2.0)
        m.train(training)
        run_case(w, case, m, [torch.randn(*shape) * 2 + 0.5], m,
                 buffers_after=["running_mean", "running_var", "num_batches_tracked"])
    # momentum=None: the cumulative average, factor 1 / num_batches_tracked after the count is
    # raised; the count starts at 3 (so the factor is 1/4) from the loaded state dict.
    seeded(9)
    m = nn.BatchNorm1d(3, momentum=None)
    with torch.no_grad():
        m.weight.normal_()
        m.bias.normal_()
        m.running_mean.normal_()
        m.running_var.uniform_(0.5, 2.0)
        m.num_batches_tracked.fill_(3)
    run_case(w, "batch_norm1d_cma_train", m, [torch.randn(5, 3, 4) * 2 + 0.5], m,
             buffers_after=["running_mean", "running_var", "num_batches_tracked"])
    # GroupNorm: 2 groups of 2 channels over [2, 4, 3, 5]; 3 groups of 4 over [4, 12] (no
    # spatial dims, no affine); one group (LayerNorm over C and L, per-channel affine).
    for case, groups, channels, shape, affine, seed in [
            ("group_norm", 2, 4, (2, 4, 3, 5), True, 150),
            ("group_norm_2d_noaffine", 3, 12, (4, 12), False, 151),
            ("group_norm_1group", 1, 4, (2, 4, 7), True, 152)]:
        seeded(seed)
        m = nn.GroupNorm(groups, channels, affine=affine)
        if affine:
            with torch.no_grad():
                m.weight.normal_()
                m.bias.normal_()
        run_case(w, case, m, [torch.randn(*shape) * 2 + 0.5], m)
    # InstanceNorm: per (sample, channel) over the spatial dims. The tracked cases run the same
    # module in training (running stats updated: unbiased variance averaged over the batch) and
    # then in eval (the running stats from training normalise), so "<eval case>.param.*" holds
    # the statistics the training case left.
    for case, dims, channels, shape, affine, seed in [
            ("instance_norm1d", 1, 3, (2, 3, 6), False, 300),
            ("instance_norm2d", 2, 4, (2, 4, 3, 5), False, 301),
            ("instance_norm2d_affine", 2, 4, (3, 4, 2, 3), True, 302),
            ("instance_norm2d_unbatched_affine", 2, 3, (3, 4, 5), True, 303),
            ("instance_norm1d_unbatched", 1, 5, (3, 6), False, 304)]:
        seeded(seed)
        m = nn.InstanceNorm1d(channels, affine=affine) if dims == 1 else \
            nn.InstanceNorm2d(channels, affine=affine)
        if affine:
            with torch.no_grad():
                m.weight.normal_()
                m.bias.normal_()
        run_case(w, case, m, [torch.randn(*shape) * 2 + 0.5], m)
    for prefix, dims, shape, eval_shape, seed in [
            ("instance_norm1d_track", 1, (4, 3, 5), (2, 3, 4), 305),
            ("instance_norm2d_track", 2, (2, 3, 4, 3), (3, 4, 2), 306)]:
        seeded(seed)
        m = nn.InstanceNorm1d(3, momentum=0.2, affine=True, track_running_stats=True) \
            if dims == 1 else nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
        with torch.no_grad():
            m.weight.normal_()
            m.bias.normal_()
            m.running_mean.normal_()
            m.running_var.uniform_(0.5, 2.0)
        after = ["running_mean", "running_var", "num_batches_tracked"]
        m.train()
        run_case(w, prefix + "_train", m, [torch.randn(*shape) * 2 + 0.5], m,
                 buffers_after=after)
        for p in m.parameters():
            p.grad = None
        m.eval()  # eval_shape is unbatched for 2d: [C, H, W]
        run_case(w, prefix + "_eval", m, [torch.randn(*eval_shape) * 2 + 0.5], m,
                 buffers_after=after)
        w.put_module_strings(prefix + "_eval", m)
    w.put_module_strings("instance_norm1d", nn.InstanceNorm1d(3))
    gen_instance_norm3d(w)


def gen_instance_norm3d(w):
    """InstanceNorm3d over [N, C, D, H, W] and unbatched [C, D, H, W]."""
    # affine, batched: forward, input / weight / bias gradients, repr and state dict keys
    seeded(307)
    m = nn.InstanceNorm3d(3, affine=True)
    with torch.no_grad():
        m.weight.normal_()
        m.bias.normal_()
    run_case(w, "instance_norm3d_affine", m, [torch.randn(2, 3, 2, 3, 4) * 2 + 0.5], m)
    w.put_module_strings("instance_norm3d_affine", m)
    # no affine, no running statistics, unbatched
    seeded(308)
    m = nn.InstanceNorm3d(2)
    run_case(w, "instance_norm3d_unbatched", m, [torch.randn(2, 3, 2, 4) * 2 - 1], m)
    w.put_module_strings("instance_norm3d_unbatched", m)
    # running statistics (momentum 0.3): two training steps on batches of different sizes (the
    # second starts from the statistics the first left), then eval batched and unbatched (the
    # running statistics normalise). "<case>.param.*" holds the state before each step.
    seeded(309)
    m = nn.InstanceNorm3d(3, momentum=0.3, affine=True, track_running_stats=True)
    with torch.no_grad():
        m.weight.normal_()
        m.bias.normal_()
        m.running_mean.normal_()
        m.running_var.uniform_(0.5, 2.0)
    after = ["running_mean", "running_var", "num_batches_tracked"]
    for case, training, shape in [("instance_norm3d_track_train1", True, (2, 3, 2, 3, 2)),
                                  ("instance_norm3d_track_train2", True, (3, 3, 2, 2, 3)),
                                  ("instance_norm3d_track_eval", False, (2, 3, 3, 2, 2)),
                                  ("instance_norm3d_track_eval_unbatched", False, (3, 2, 3, 2))]:
        for p in m.parameters():
            p.grad = None
        m.train(training)
        run_case(w, case, m, [torch.randn(*shape) * 2 + 0.5], m, buffers_after=after)
    w.put_module_strings("instance_norm3d_track_eval", m)


def gen_conv(w):
    cases = [
        ("conv2d", dict(in_channels=3, out_channels=4, kernel_size=3), (2, 3, 7, 6)),
        ("conv2d_stride_pad", dict(in_channels=2, out_channels=3, kernel_size=(3, 2), stride=2,
                                   padding=1), (2, 2, 8, 7)),
        ("conv2d_same_dil", dict(in_channels=2, out_channels=2, kernel_size=3, padding="same",
                                 dilation=2, bias=False), (1, 2, 7, 7)),
        ("conv2d_groups", dict(in_channels=4, out_channels=6, kernel_size=3, groups=2,
                               padding=1), (2, 4, 5, 5)),
        # "same" with an odd total padding dilation * (k - 1) on both axes (3 and 3: PyTorch
        # pads 1 before, 2 after): an even kernel height, a dilated even kernel width
        ("conv2d_same_even", dict(in_channels=3, out_channels=4, kernel_size=(4, 2),
                                  padding="same", dilation=(1, 3)), (2, 3, 6, 7)),
    ]
    for i, (name, kw, shape) in enumerate(cases):
        seeded(10 + i)
        m = nn.Conv2d(**kw)
        run_case(w, name, m, [torch.randn(*shape)], m)
    cases1 = [
        ("conv1d", dict(in_channels=3, out_channels=5, kernel_size=3, stride=2, padding=1),
         (2, 3, 11)),
        ("conv1d_same", dict(in_channels=2, out_channels=2, kernel_size=4, padding="same"),
         (1, 2, 9)),
        # dilated even kernel: total padding 3 * (4 - 1) = 9, 4 before and 5 after
        ("conv1d_same_dil", dict(in_channels=3, out_channels=2, kernel_size=4, padding="same",
                                 dilation=3), (2, 3, 10)),
    ]
    for i, (name, kw, shape) in enumerate(cases1):
        seeded(20 + i)
        m = nn.Conv1d(**kw)
        run_case(w, name, m, [torch.randn(*shape)], m)
    # Transposed convolutions (weight [in, out / groups, *k]). "op": output_padding; the
    # dilated ones with output_padding >= stride take the padded-input path (Note [Transposed
    # convolution] in core/ops/conv.h). None as dtype means float32.
    cases_t = [
        ("conv_transpose2d_s2_op1", nn.ConvTranspose2d,
         dict(in_channels=3, out_channels=4, kernel_size=3, stride=2, padding=1,
              output_padding=1), (2, 3, 5, 4), None),
        ("conv_transpose2d_groups_dil", nn.ConvTranspose2d,
         dict(in_channels=4, out_channels=6, kernel_size=(3, 2), stride=(1, 2), padding=(2, 0),
              groups=2, dilation=2), (2, 4, 5, 6), None),
        ("conv_transpose2d_dil_op_nobias", nn.ConvTranspose2d,
         dict(in_channels=2, out_channels=3, kernel_size=3, stride=(1, 2), output_padding=(1, 2),
              dilation=(2, 3), bias=False), (1, 2, 4, 5), None),
        ("conv_transpose1d_s3_op2", nn.ConvTranspose1d,
         dict(in_channels=3, out_channels=2, kernel_size=4, stride=3, padding=1,
              output_padding=2), (2, 3, 6), None),
        ("conv_transpose1d_unbatched_groups", nn.ConvTranspose1d,
         dict(in_channels=4, out_channels=2, kernel_size=3, padding=1, groups=2, dilation=2),
         (4, 7), None),
        ("conv_transpose2d_f64", nn.ConvTranspose2d,
         dict(in_channels=2, out_channels=4, kernel_size=(2, 3), stride=(2, 3), padding=(0, 1),
              output_padding=(1, 2), groups=2), (2, 2, 3, 4), torch.float64),
    ]
    for i, (name, cls, kw, shape, dtype) in enumerate(cases_t):
        seeded(40 + i)
        m = cls(**kw, dtype=dtype)
        run_case(w, name, m, [torch.randn(*shape, dtype=dtype)], m)
    # forward(x, output_size): sizes 12 x 14 within [10, 12] x [13, 15] give output_padding
    # (2, 1) (the module's own output_padding is ignored, as PyTorch does)
    seeded(50)
    m = nn.ConvTranspose2d(2, 3, 3, stride=3, padding=1)
    run_case(w, "conv_transpose2d_output_size", lambda x: m(x, output_size=[12, 14]),
             [torch.randn(1, 2, 4, 5)], m)


def gen_pooling(w):
    seeded(30)
    run_case(w, "max_pool2d", nn.MaxPool2d(2), [torch.randn(2, 3, 6, 7)])
    seeded(31)
    run_case(w, "max_pool2d_stride_pad", nn.MaxPool2d(3, stride=2, padding=1),
             [torch.randn(1, 2, 7, 7)])
    seeded(32)
    run_case(w, "avg_pool2d", nn.AvgPool2d(2), [torch.randn(2, 3, 6, 6)])
    seeded(33)
    run_case(w, "avg_pool2d_pad", nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
             [torch.randn(1, 2, 7, 6)])
    seeded(34)
    run_case(w, "adaptive_avg_pool2d", nn.AdaptiveAvgPool2d((3, 2)), [torch.randn(2, 3, 7, 5)])
    seeded(35)
    run_case(w, "adaptive_avg_pool2d_1", nn.AdaptiveAvgPool2d(1), [torch.randn(2, 3, 4, 4)])
    # 1-d pooling (the 2-d ops over a height of 1 in Shardlight): [N, C, L] and unbatched [C, L].
    # Inputs from randn (distinct almost surely), so no max ties steer the gradient.
    for i, (name, m, shape) in enumerate([
            ("max_pool1d", nn.MaxPool1d(2), (2, 3, 7)),
            ("max_pool1d_pad_dil_ceil", nn.MaxPool1d(3, stride=2, padding=1, dilation=2,
                                                     ceil_mode=True), (2, 3, 10)),
            ("max_pool1d_ceil_unbatched", nn.MaxPool1d(3, stride=2, ceil_mode=True), (3, 8)),
            ("avg_pool1d", nn.AvgPool1d(3), (2, 3, 7)),
            ("avg_pool1d_pad_incl", nn.AvgPool1d(3, stride=2, padding=1), (2, 3, 8)),
            ("avg_pool1d_pad_excl_ceil", nn.AvgPool1d(3, stride=2, padding=1, ceil_mode=True,
                                                      count_include_pad=False), (2, 3, 8)),
            ("avg_pool1d_unbatched", nn.AvgPool1d(2, stride=1, padding=1), (3, 5)),
            ("adaptive_avg_pool1d", nn.AdaptiveAvgPool1d(3), (2, 3, 7)),
            ("adaptive_avg_pool1d_up_unbatched", nn.AdaptiveAvgPool1d(5), (3, 3))]):
        seeded(200 + i)
        run_case(w, name, m, [torch.randn(*shape)])
        w.put_module_strings(name, m)
    # F.max_pool1d(..., return_indices=True): the indices are the second output (no gradient)
    seeded(210)
    run_case(w, "max_pool1d_indices",
             lambda x: F.max_pool1d(x, 3, stride=2, padding=1, return_indices=True),
             [torch.randn(2, 3, 9)])
    # Adaptive max pooling (windows [floor(i L / Lo), ceil((i + 1) L / Lo)) per dim): 2-d with an
    # int, a pair, a None entry (that dim keeps the input's size), upsampling (overlapping windows:
    # an input element that is the max of several windows sums their gradients), unbatched, 1-d.
    for i, (name, m, shape) in enumerate([
            ("adaptive_max_pool2d", nn.AdaptiveMaxPool2d((3, 2)), (2, 3, 7, 5)),
            ("adaptive_max_pool2d_none", nn.AdaptiveMaxPool2d((None, 3)), (2, 2, 4, 7)),
            ("adaptive_max_pool2d_up_unbatched", nn.AdaptiveMaxPool2d(5), (3, 3, 4)),
            ("adaptive_max_pool1d", nn.AdaptiveMaxPool1d(3), (2, 3, 8)),
            ("adaptive_max_pool1d_up_unbatched", nn.AdaptiveMaxPool1d(6), (3, 4))]):
        seeded(220 + i)
        run_case(w, name, m, [torch.randn(*shape)])
        w.put_module_strings(name, m)
    # return_indices=True: the indices (int64, flat h * W + w per plane) are the second output
    seeded(230)
    run_case(w, "adaptive_max_pool2d_indices",
             lambda x: F.adaptive_max_pool2d(x, (4, 3), return_indices=True),
             [torch.randn(2, 3, 9, 7)])
    seeded(231)
    run_case(w, "adaptive_max_pool1d_indices",
             lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True), [torch.randn(2, 3, 10)])
    # PyTorch's tie rule: integer values in {0, 1, 2} tie often; the first maximum of a window (in
    # row-major order) takes the index and the gradient
    seeded(232)
    run_case(w, "adaptive_max_pool2d_ties",
             lambda x: F.adaptive_max_pool2d(x, (4, 3), return_indices=True),
             [torch.randint(0, 3, (2, 2, 6, 5)).float()])
    # NaN propagates: a window holding a NaN gives NaN, indexing its last NaN (window (0, 0) of
    # plane 0 holds two)
    seeded(233)
    x = torch.randn(1, 2, 6, 6)
    x[0, 0, 0, 1] = x[0, 0, 1, 0] = x[0, 0, 1, 2] = x[0, 1, 4, 0] = float("nan")
    run_case(w, "adaptive_max_pool2d_nan",
             lambda x: F.adaptive_max_pool2d(x, 3, return_indices=True), [x])


def gen_activation(w):
    x = lambda: torch.randn(3, 7) * 3  # noqa: E731
    for i, (name, m) in enumerate([("relu", nn.ReLU()), ("gelu", nn.GELU()),
                                   ("gelu_tanh", nn.GELU(approximate="tanh")),
                                   ("tanh", nn.Tanh()), ("sigmoid", nn.Sigmoid()),
                                   ("silu", nn.SiLU()), ("hardtanh", nn.Hardtanh(0.0, 2.0)),
                                   ("leaky_relu", nn.LeakyReLU(0.1))]):
        seeded(40 + i)
        run_case(w, name, m, [x()])
    # Composed activations (nn/activation.cpp); inputs of spread 3 cross every kink's side.
    for i, (name, m) in enumerate([("softplus", nn.Softplus()),
                                   ("softplus_beta2_th3", nn.Softplus(beta=2, threshold=3)),
                                   ("elu", nn.ELU()), ("elu_alpha05", nn.ELU(alpha=0.5)),
                                   ("selu", nn.SELU()), ("mish", nn.Mish()),
                                   ("hardswish", nn.Hardswish()),
                                   ("hardsigmoid", nn.Hardsigmoid())]):
        seeded(160 + i)
        run_case(w, name, m, [x()])
    # PReLU: x > 0 ? x : weight * x, one shared slope or one per channel (dim 1; rank < 2 has one
    # channel). Every third input is exactly 0, the kink: PyTorch's gradient there is weight for
    # the input and 0 for the weight.
    for name, params, shape, seed in [("prelu_shared", 1, (3, 7), 320),
                                      ("prelu_channels", 4, (2, 4, 3), 321),
                                      ("prelu_channels_2d", 3, (5, 3), 322),
                                      ("prelu_1d", 1, (7,), 323),
                                      ("prelu_channels_4d", 2, (2, 2, 3, 2), 324)]:
        seeded(seed)
        m = nn.PReLU(params)
        with torch.no_grad():
            m.weight.uniform_(-1.0, 1.0)
        xin = torch.randn(*shape) * 3
        xin.view(-1)[::3] = 0.0
        run_case(w, name, m, [xin], m)
        w.put_module_strings(name, m)
    # every input exactly 0: PyTorch's kink gradients alone (input: weight * gout; weight: 0)
    seeded(325)
    m = nn.PReLU(3)
    with torch.no_grad():
        m.weight.uniform_(-1.0, 1.0)
    run_case(w, "prelu_at_zero", m, [torch.zeros(2, 3, 2)], m)
    # Softmax-family modules over one dim, on [2, 3, 4] (dims 1, -1 and 0 each used once).
    for i, (name, m) in enumerate([("softmax_dim1", nn.Softmax(dim=1)),
                                   ("log_softmax_dim_neg1", nn.LogSoftmax(dim=-1)),
                                   ("softmin_dim0", nn.Softmin(dim=0))]):
        seeded(220 + i)
        run_case(w, name, m, [torch.randn(2, 3, 4) * 2])
        w.put_module_strings(name, m)


def gen_attention(w):
    # batch_first, no dropout; key_padding_mask (bool, True = ignore); causal float mask.
    seeded(50)
    m = nn.MultiheadAttention(8, 2, batch_first=True)
    q = torch.randn(2, 5, 8)
    kpm = torch.tensor([[False, False, False, True, True], [False] * 5])
    run_case(w, "mha_self_kpm", lambda x, mask: m(x, x, x, key_padding_mask=mask), [q, kpm], m)
    seeded(51)
    m = nn.MultiheadAttention(8, 4, batch_first=True)
    x = torch.randn(2, 4, 8)
    causal = torch.triu(torch.full((4, 4), float("-inf")), diagonal=1)
    run_case(w, "mha_causal", lambda x: m(x, x, x, attn_mask=causal), [x], m)
    seeded(52)
    m = nn.MultiheadAttention(6, 3)  # sequence-first, cross attention
    qq, kk = torch.randn(3, 2, 6), torch.randn(4, 2, 6)
    vv = torch.randn(4, 2, 6)
    run_case(w, "mha_cross_seqfirst", lambda a, b, c: m(a, b, c), [qq, kk, vv], m)
    seeded(53)
    m = nn.MultiheadAttention(8, 2, batch_first=True, bias=False)
    x = torch.randn(1, 3, 8)
    bmask = torch.tensor([[False, True, True], [False, False, True], [False, False, False]])
    run_case(w, "mha_bool_mask_nobias", lambda x: m(x, x, x, attn_mask=bmask), [x], m)


def gen_transformer(w):
    for i, norm_first in enumerate([False, True]):
        seeded(60 + i)
        m = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=norm_first)
        x = torch.randn(2, 5, 8)
        kpm = torch.tensor([[False, False, False, False, True], [False] * 5])
        name = "transformer_pre_ln" if norm_first else "transformer_post_ln"
        run_case(w, name, lambda x, mask: m(x, src_key_padding_mask=mask), [x, kpm], m)

    # TransformerDecoderLayer: post-LN (relu, sequence-first) with all four masks (a float causal
    # tgt_mask, a bool memory_mask, bool key padding masks), pre-LN (gelu, batch_first) with a
    # bool causal tgt_mask and key padding masks, and an unbatched post-LN case. No query has all
    # its keys masked (that row would be NaN). dropout=0, so training mode is deterministic.
    T, S = 4, 5
    tgt_kpm = torch.tensor([[False, False, False, True], [False] * T])
    mem_kpm = torch.tensor([[False] * S, [False, False, False, True, True]])
    causal_float = nn.Transformer.generate_square_subsequent_mask(T)
    w.put("square_subsequent_mask_4", causal_float)
    causal_bool = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    mem_mask = torch.zeros(T, S, dtype=torch.bool)
    mem_mask[0, 1] = mem_mask[2, 0] = mem_mask[3, 2] = True

    # The attention masks are constants of each case (a float mask passed as an input would be
    # differentiated); each case stores the ones it uses under <case>.tgt_mask / .memory_mask /
    # .src_mask. Inputs: 0 tgt (or src), 1 memory (or tgt), then the key padding masks.
    def dec_fn(m, name, tm, mm):
        if tm is not None:
            w.put(f"{name}.tgt_mask", tm)
        if mm is not None:
            w.put(f"{name}.memory_mask", mm)
        return lambda t, mem, tk, mk: m(t, mem, tgt_mask=tm, memory_mask=mm,
                                        tgt_key_padding_mask=tk, memory_key_padding_mask=mk)

    seeded(62)
    m = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="relu")
    run_case(w, "decoder_post_ln", dec_fn(m, "decoder_post_ln", causal_float, mem_mask),
             [torch.randn(T, 2, 8), torch.randn(S, 2, 8), tgt_kpm, mem_kpm], m)
    w.put_module_strings("decoder_post_ln", m)
    seeded(63)
    m = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu",
                                   batch_first=True, norm_first=True)
    run_case(w, "decoder_pre_ln", dec_fn(m, "decoder_pre_ln", causal_bool, None),
             [torch.randn(2, T, 8), torch.randn(2, S + 1, 8), tgt_kpm,
              torch.tensor([[False] * 5 + [True], [True] + [False] * 5])], m)
    seeded(64)
    m = nn.TransformerDecoderLayer(8, 4, dim_feedforward=12, dropout=0.0)
    run_case(w, "decoder_unbatched", dec_fn(m, "decoder_unbatched", None, None),
             [torch.randn(T, 8), torch.randn(S, 8), None, mem_kpm[1]], m)

    # Perturbs every parameter (LayerNorm's ones and zeros too) so no two layers of a stack are
    # equal: a layer loaded under another layer's name, or a final norm left out, shows.
    def perturb(m):
        with torch.no_grad():
            for p in m.parameters():
                p.add_(torch.randn_like(p) * 0.1)

    # TransformerDecoder: 2 post-LN layers and a final LayerNorm, sequence-first.
    seeded(65)
    layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
    m = nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(8))
    perturb(m)
    run_case(w, "decoder_stack", dec_fn(m, "decoder_stack", causal_float, None),
             [torch.randn(T, 2, 8), torch.randn(S, 2, 8), None, mem_kpm], m)
    w.put_module_strings("decoder_stack", m)

    # TransformerEncoder: 2 pre-LN layers and a final LayerNorm, batch_first.
    seeded(66)
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True,
                                       norm_first=True)
    m = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8))
    perturb(m)
    enc_mask = nn.Transformer.generate_square_subsequent_mask(T)
    w.put("encoder_stack.src_mask", enc_mask)
    run_case(w, "encoder_stack", lambda x, kpm: m(x, mask=enc_mask, src_key_padding_mask=kpm),
             [torch.randn(2, T, 8), tgt_kpm], m)
    w.put_module_strings("encoder_stack", m)

    # nn.Transformer: 2 encoder layers, 1 decoder layer, batch_first, its own xavier reset.
    seeded(67)
    m = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
                       dim_feedforward=16, dropout=0.0, batch_first=True)
    perturb(m)
    src_kpm = torch.tensor([[False] * S, [False, False, True, True, True]])
    w.put("transformer_model.tgt_mask", causal_float)
    run_case(w, "transformer_model",
             lambda src, tgt, sk, tk: m(src, tgt, tgt_mask=causal_float, src_key_padding_mask=sk,
                                        tgt_key_padding_mask=tk, memory_key_padding_mask=sk),
             [torch.randn(2, S, 8), torch.randn(2, T, 8), src_kpm, tgt_kpm], m)
    w.put_module_strings("transformer_model", m)


def gen_rnn(w):
    for i, (kind, layers, bidir, batch_first) in enumerate([("gru", 1, False, True),
                                                            ("gru", 2, True, False),
                                                            ("lstm", 1, False, True),
                                                            ("lstm", 2, True, True)]):
        seeded(70 + i)
        cls = nn.GRU if kind == "gru" else nn.LSTM
        m = cls(3, 4, num_layers=layers, bidirectional=bidir, batch_first=batch_first)
        T, B = 5, 2
        x = torch.randn(B, T, 3) if batch_first else torch.randn(T, B, 3)
        name = f"{kind}_l{layers}{'_bi' if bidir else ''}{'_bf' if batch_first else ''}"
        run_case(w, name, lambda x: m(x), [x], m)
        # Same module, variable lengths (padded steps must leak into nothing) and initial states.
        seeded(80 + i)
        lengths = torch.tensor([5, 3])
        nd = layers * (2 if bidir else 1)
        h0 = torch.randn(nd, B, 4)
        c0 = torch.randn(nd, B, 4)

        def fn(x, h0, c0, lengths=lengths, m=m, batch_first=batch_first, kind=kind):
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=batch_first)
            out, state = m(packed, h0 if kind == "gru" else (h0, c0))
            out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=batch_first,
                                                      total_length=T)
            return (out, state) if kind == "gru" else (out, state[0], state[1])

        m.zero_grad()
        xs = torch.randn(B, T, 3) if batch_first else torch.randn(T, B, 3)
        run_case(w, name + "_lengths", fn, [xs, h0, c0 if kind == "lstm" else None], m)
        w.put(f"{name}_lengths.lengths", lengths)


# ---- losses -------------------------------------------------------------------------------------


def gen_loss(w):
    seeded(90)
    x = torch.randn(6, 5)
    t = torch.tensor([0, 4, 2, -100, 1, 4])
    wt = torch.rand(5) + 0.5
    w.put("ce.weight", wt)
    for red in ["mean", "sum", "none"]:
        run_case(w, f"ce_{red}", lambda a, b, red=red: F.cross_entropy(a, b, reduction=red),
                 [x.clone(), t])
        run_case(w, f"ce_w_ls_{red}",
                 lambda a, b, red=red: F.cross_entropy(a, b, weight=wt, ignore_index=-100,
                                                       label_smoothing=0.1, reduction=red),
                 [x.clone(), t])
    t2 = torch.tensor([0, 4, 2, 3, 1, 4])
    run_case(w, "ce_ignore3_ls", lambda a, b: F.cross_entropy(a, b, ignore_index=3,
                                                              label_smoothing=0.2),
             [x.clone(), t2])
    seeded(91)
    xs = torch.randn(2, 4, 3, 2)  # spatial: [N, C, d1, d2]
    ts = torch.randint(0, 4, (2, 3, 2))
    run_case(w, "ce_spatial_w", lambda a, b: F.cross_entropy(a, b, weight=wt[:4]), [xs, ts])
    seeded(92)
    probs = torch.softmax(torch.randn(6, 5), dim=1)
    run_case(w, "ce_probs_w_ls", lambda a, b: F.cross_entropy(a, b, weight=wt,
                                                               label_smoothing=0.15),
             [x.clone(), probs])
    run_case(w, "ce_probs_sum", lambda a, b: F.cross_entropy(a, b, reduction="sum"),
             [x.clone(), probs.detach().clone()])
    seeded(93)
    lp = torch.log_softmax(torch.randn(6, 5), 1)
    run_case(w, "nll_w", lambda a, b: F.nll_loss(a, b, weight=wt), [lp, t])
    seeded(94)
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    for red in ["mean", "sum", "none"]:
        run_case(w, f"mse_{red}", lambda a, b, red=red: F.mse_loss(a, b, reduction=red),
                 [a.clone(), b.clone()])
        run_case(w, f"l1_{red}", lambda a, b, red=red: F.l1_loss(a, b, reduction=red),
                 [a.clone(), b.clone()])
    seeded(95)
    logits = torch.randn(4, 3) * 4
    tgt = torch.rand(4, 3)
    pw = torch.tensor([0.5, 1.0, 3.0])
    bw = torch.rand(4, 3)
    w.put("bce.pos_weight", pw)
    w.put("bce.weight", bw)
    run_case(w, "bce_logits", lambda a, b: F.binary_cross_entropy_with_logits(a, b),
             [logits.clone(), tgt.clone()])
    run_case(w, "bce_logits_pw_w_sum",
             lambda a, b: F.binary_cross_entropy_with_logits(a, b, weight=bw, pos_weight=pw,
                                                             reduction="sum"),
             [logits.clone(), tgt.clone()])
    # Probabilities in (0, 1) for binary_cross_entropy, a weight over the last dim.
    seeded(170)
    p = torch.rand(4, 3) * 0.98 + 0.01
    tb = torch.rand(4, 3)
    bw3 = torch.rand(3) + 0.5
    w.put("bce_probs.weight", bw3)
    for red in ["mean", "sum", "none"]:
        run_case(w, f"bce_probs_{red}",
                 lambda a, b, red=red: F.binary_cross_entropy(a, b, reduction=red),
                 [p.clone(), tb.clone()])
    run_case(w, "bce_probs_w", lambda a, b: F.binary_cross_entropy(a, b, weight=bw3),
             [p.clone(), tb.clone()])
    # smooth_l1 / huber: differences of spread 2 fall on both sides of beta / delta.
    seeded(171)
    a, b = torch.randn(4, 5) * 2, torch.randn(4, 5)
    for case, fn in [("smooth_l1_mean", lambda a, b: F.smooth_l1_loss(a, b)),
                     ("smooth_l1_b05_none",
                      lambda a, b: F.smooth_l1_loss(a, b, beta=0.5, reduction="none")),
                     ("smooth_l1_b0_sum",
                      lambda a, b: F.smooth_l1_loss(a, b, beta=0.0, reduction="sum")),
                     ("huber_mean", lambda a, b: F.huber_loss(a, b)),
                     ("huber_d2_none", lambda a, b: F.huber_loss(a, b, delta=2.0,
                                                                 reduction="none"))]:
        run_case(w, case, fn, [a.clone(), b.clone()])
    # kl_div: log-probabilities against probabilities or log-probabilities. (A zero target is
    # tested with literal values: PyTorch's target gradient is NaN there, ours is not.)
    seeded(172)
    lq = torch.log_softmax(torch.randn(3, 4), 1)
    pt = torch.softmax(torch.randn(3, 4), 1)
    lt = torch.log_softmax(torch.randn(3, 4), 1)
    for red in ["batchmean", "sum", "mean", "none"]:
        run_case(w, f"kl_{red}", lambda a, b, red=red: F.kl_div(a, b, reduction=red),
                 [lq.clone(), pt.clone()])
    run_case(w, "kl_log_target", lambda a, b: F.kl_div(a, b, reduction="batchmean",
                                                       log_target=True),
             [lq.clone(), lt.clone()])
    # CTC: [T, N, C] log-probs, padded targets [N, S], per-sample lengths.
    seeded(96)
    T, N, C = 8, 3, 5
    lp = torch.randn(T, N, C).log_softmax(2)
    targets = torch.tensor([[1, 2, 2, 0], [3, 1, 0, 0], [4, 4, 4, 1]])
    il = torch.tensor([8, 6, 7])
    tl = torch.tensor([3, 2, 4])
    w.put("ctc.input_lengths", il)
    w.put("ctc.target_lengths", tl)
    for red in ["mean", "sum", "none"]:
        run_case(w, f"ctc_{red}", lambda a, b, red=red: F.ctc_loss(a, b, il, tl, blank=0,
                                                                   reduction=red),
                 [lp.clone(), targets])
    # An impossible alignment (target longer than the input allows) gives inf; zero_infinity
    # turns it into 0 with a zero gradient.
    il2 = torch.tensor([8, 2, 7])
    w.put("ctc_inf.input_lengths", il2)
    run_case(w, "ctc_zero_inf", lambda a, b: F.ctc_loss(a, b, il2, tl, blank=0,
                                                        reduction="mean", zero_infinity=True),
             [lp.clone(), targets])
    # Ignored rows contribute exactly nothing: rows 0 and 2 are ignored and hold a masked logit
    # (-inf), at class 0 (the placeholder class an ignored row gathers) and at class 2 (which
    # label smoothing sums over). PyTorch returns a finite loss and a zero gradient for them.
    inf = float("inf")
    xi = torch.tensor([[-inf, 1.0, 2.0], [0.5, 1.0, 2.0], [0.3, -0.4, -inf]])
    ti = torch.tensor([-100, 1, -100])
    run_case(w, "ce_ignored_neginf", lambda a, b: F.cross_entropy(a, b), [xi.clone(), ti])
    for red in ["mean", "none"]:
        run_case(w, f"ce_ignored_neginf_ls_{red}",
                 lambda a, b, red=red: F.cross_entropy(a, b, label_smoothing=0.1, reduction=red),
                 [xi.clone(), ti])
    run_case(w, "nll_ignored_neginf", lambda a, b: F.nll_loss(a, b, reduction="none"),
             [torch.log_softmax(xi, 1), ti])
    # Every target ignored: the mean is 0/0 = NaN, but the gradient is exactly zero.
    seeded(97)
    xa = torch.randn(3, 4)
    ta = torch.full((3,), -100)
    run_case(w, "ce_all_ignored", lambda a, b: F.cross_entropy(a, b), [xa.clone(), ta])
    run_case(w, "ce_all_ignored_w_ls",
             lambda a, b: F.cross_entropy(a, b, weight=wt[:4], label_smoothing=0.2),
             [xa.clone(), ta])


def gen_upsample(w):
    """F.interpolate / nn.Upsample: tools/gen_nn_fixtures_upsample.py."""
    import gen_nn_fixtures_upsample
    gen_nn_fixtures_upsample.gen_upsample(w, run_case, seeded)


FAMILIES = {
    "linear": gen_linear, "embedding": gen_embedding, "normalization": gen_normalization,
    "conv": gen_conv, "pooling": gen_pooling, "activation": gen_activation,
    "attention": gen_attention, "transformer": gen_transformer, "rnn": gen_rnn, "loss": gen_loss,
    "upsample": gen_upsample, "embedding_bag": gen_embedding_bag,
}


def main(families=None):
    """The command line of this script, over `families` (name -> generator; default: FAMILIES)."""
    families = families or FAMILIES
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "fixtures", "nn"))
    ap.add_argument("--keep-existing", action="store_true",
                    help="keep tensors already in the output files bit for bit")
    ap.add_argument("families", nargs="*", default=sorted(families))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print(f"torch {torch.__version__}")
    for fam in args.families:
        w = Writer()
        families[fam](w)
        w.save(os.path.join(args.out, f"{fam}.safetensors"), args.keep_existing)


if __name__ == "__main__":
    main()

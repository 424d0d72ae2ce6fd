#!/usr/bin/python3
"""PyTorch side of tools/bench_nn.cpp: the same cases with the same protocol, "case<TAB>ms"
lines (one warm-up, then the median of R iterations of forward -> backward(ones), gradients set
to none first).

    /usr/bin/python3 tools/bench_nn.py [--threads N] [--filter SUBSTR | --case NAME] [--reps R]

The layers are PyTorch's modules (nn.Conv2d, nn.GRU / nn.LSTM, nn.MultiheadAttention with
need_weights=False, nn.TransformerEncoderLayer in training mode with dropout 0; nn.MaxPool2d and
nn.BatchNorm2d in training mode; attention at a
long sequence written out, as 1.13 has no scaled_dot_product_attention; softmax / log_softmax
over the last dim and over a dim that is not the last, also forward alone; cumsum over dim 0, forward alone); AdamW is
timed with both implementations of 1.13 (single-tensor, the default, and foreach) and the faster
one is reported.
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn


def module_iteration(m, forward, x):
    def it():
        m.zero_grad(set_to_none=True)
        x.grad = None
        y = forward()
        y.backward(torch.ones_like(y))
    return it


def cases():
    cs = []
    for c_in, c_out, hw, stride in [(64, 64, 56, 1), (128, 128, 28, 1), (256, 256, 14, 1),
                                    (512, 512, 7, 1), (128, 256, 28, 2)]:
        def setup(c_in=c_in, c_out=c_out, hw=hw, stride=stride):
            m = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
            x = torch.randn(8, c_in, hw, hw, requires_grad=True)
            return module_iteration(m, lambda: m(x), x)
        cs.append((f"conv2d b8 {c_in}->{c_out} {hw}x{hw} k3 s{stride}", 5, setup))
    for b, c, hw, k, stride, pad in [(8, 64, 112, 3, 2, 1), (128, 32, 28, 2, 2, 0)]:
        def setup(b=b, c=c, hw=hw, k=k, stride=stride, pad=pad):
            m = nn.MaxPool2d(k, stride, pad)
            x = torch.randn(b, c, hw, hw, requires_grad=True)
            return module_iteration(m, lambda: m(x), x)
        cs.append((f"max_pool2d b{b} {c}x{hw}x{hw} k{k} s{stride} p{pad}", 10, setup))
    for b, c, hw in [(8, 64, 56), (128, 32, 28)]:
        def setup(b=b, c=c, hw=hw):
            m = nn.BatchNorm2d(c)
            m.train()
            x = torch.randn(b, c, hw, hw, requires_grad=True)
            return module_iteration(m, lambda: m(x), x)
        cs.append((f"batch_norm2d train b{b} {c}x{hw}x{hw}", 10, setup))
    # 1.13 has no SyncBatchNorm on the CPU; on one rank its math is BatchNorm2d's
    def sync_bn_setup():
        m = nn.BatchNorm2d(64)
        m.train()
        x = torch.randn(8, 64, 56, 56, requires_grad=True)
        return module_iteration(m, lambda: m(x), x)
    cs.append(("sync_batch_norm2d train b8 64x56x56 (1 rank)", 10, sync_bn_setup))
    for kind in ["gru", "lstm"]:
        for h in [256, 512, 1024]:
            def setup(kind=kind, h=h):
                m = (nn.GRU if kind == "gru" else nn.LSTM)(h, h, bidirectional=True)
                x = torch.randn(200, 8, h, requires_grad=True)
                return module_iteration(m, lambda: m(x)[0], x)
            cs.append((f"{kind} bi b8 T200 h{h}", 1 if h >= 1024 else 3, setup))
    for e, heads in [(256, 4), (512, 8), (768, 12)]:
        def setup(e=e, heads=heads):
            m = nn.MultiheadAttention(e, heads, batch_first=True)
            x = torch.randn(16, 128, e, requires_grad=True)
            return module_iteration(m, lambda: m(x, x, x, need_weights=False)[0], x)
        cs.append((f"mha b16 L128 E{e} h{heads}", 7, setup))

    # PyTorch 1.13 has no scaled_dot_product_attention: both names time the math written out
    # (what Shardlight's unfused path computes)
    for path in ["fused", "unfused"]:
        def sdpa_setup():
            q, k, v = (torch.randn(2, 8, 2048, 64, requires_grad=True) for _ in range(3))

            def it():
                for t in (q, k, v):
                    t.grad = None
                p = torch.softmax(q @ k.transpose(-2, -1) * (1 / 8), dim=-1)
                y = p @ v
                y.backward(torch.ones_like(y))
            return it
        cs.append((f"sdpa b2 h8 L2048 E64 {path}", 3, sdpa_setup))

    def encoder_setup():
        m = nn.TransformerEncoderLayer(768, 12, dim_feedforward=3072, dropout=0.0,
                                       activation="gelu", batch_first=True)
        x = torch.randn(8, 128, 768, requires_grad=True)
        return module_iteration(m, lambda: m(x), x)
    cs.append(("encoder b8 L128 E768 h12 ff3072", 7, encoder_setup))

    # softmax / log_softmax over the last dim and over a dim that is not the last: the forward
    # alone (under no_grad), and forward + backward as the other cases
    for name, shape, dim, log in [("softmax dim1 [1024,1024]", (1024, 1024), 1, False),
                                  ("log_softmax dim1 [4096,250]", (4096, 250), 1, True),
                                  ("softmax dim0 [1024,1024]", (1024, 1024), 0, False),
                                  ("log_softmax dim1 [64,256,64]", (64, 256, 64), 1, True)]:
        for backward in [False, True]:
            def setup(shape=shape, dim=dim, log=log, backward=backward):
                x = torch.randn(*shape, requires_grad=True)
                f = torch.log_softmax if log else torch.softmax

                def fwd():
                    with torch.no_grad():
                        f(x, dim)
                return module_iteration(nn.Identity(), lambda: f(x, dim), x) if backward else fwd
            cs.append((f"{name} {'fwd+bwd' if backward else 'fwd'}", 20, setup))

    def cumsum_setup():
        x = torch.randn(4096, 1024)
        return lambda: torch.cumsum(x, 0)
    cs.append(("cumsum dim0 [4096,1024] fwd", 10, cumsum_setup))

    def adamw_setup():
        p = torch.randn(10_000_000, requires_grad=True)
        p.grad = torch.randn(10_000_000)
        opts = [torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01, foreach=f) for f in (False, True)]
        for o in opts:
            o.step()
        return opts
    cs.append(("adamw step 10M params", 10, adamw_setup))
    return cs


def median_ms(it, reps):
    it()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        it()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def main(make_cases=cases):
    """The command line shared with tools/bench_zoo.py: times the selected cases of
    make_cases(), a list of (name, reps, setup); setup() returns one iteration (a callable), a
    list of alternatives (the fastest is reported), or None when this environment cannot run the
    case (the setup says why on stderr; the time is printed as n/a). With --profile ROWS, each
    selected case instead runs one warm-up iteration and one under torch.profiler, and prints its
    ROWS ops of most self CPU time (bench_cases.h's --profile, for comparing op by op)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--filter", default="")
    ap.add_argument("--case", default="")
    ap.add_argument("--reps", type=int, default=0)
    ap.add_argument("--profile", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    for name, reps, setup in make_cases():
        if a.filter not in name or (a.case and name != a.case):
            continue
        made = setup()
        if made is None:
            print(f"{name}\tn/a", flush=True)
            continue
        if a.profile > 0:
            it = made[0].step if isinstance(made, list) else made
            it()
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                it()
            print(name)
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=a.profile),
                  flush=True)
            continue
        if isinstance(made, list):  # AdamW: the faster of single-tensor and foreach
            ms = min(median_ms(o.step, a.reps or reps) for o in made)
        else:
            ms = median_ms(made, a.reps or reps)
        print(f"{name}\t{ms:.2f}", flush=True)


if __name__ == "__main__":
    main()

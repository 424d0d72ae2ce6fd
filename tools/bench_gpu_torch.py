#!/usr/bin/env python3
"""PyTorch's side of the GPU benchmark (tools/bench_gpu.cpp), on the same GPU in the same run:
the same matmul shapes and memory-bound ops, and one training step of a small transformer
encoder and of a small ResNet (the models Shardlight's benchmark steps mirror). Prints markdown.

Usage: bench_gpu_torch.py [--quick]. Offline only (tools/gpu_check.sh runs it); nothing in the
library or tests needs Python.
"""
import sys
import time

import torch
import torch.nn as nn

QUICK = "--quick" in sys.argv
WARMUP, ITERS = (1, 3) if QUICK else (3, 20)
dev = torch.device("cuda:0")


def time_ms(f):
    for _ in range(WARMUP):
        f()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(ITERS):
        f()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / ITERS


def matmul():
    print("\n### PyTorch matmul (TFLOP/s)\n")
    print("| dtype | M x K x N | PyTorch |\n|---|---|---|")
    cases = [(1024, 1024, 1024), (2048, 768, 3072)] if QUICK else [
        (4096, 4096, 4096), (8192, 768, 3072), (8192, 3072, 768), (16384, 256, 256)]
    for name, dt, tf32 in [("float32", torch.float32, False), ("float32 (TF32)", torch.float32, True),
                           ("float16", torch.float16, False), ("bfloat16", torch.bfloat16, False)]:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for m, k, n in cases:
            a = torch.randn(m, k, device=dev, dtype=dt)
            b = torch.randn(k, n, device=dev, dtype=dt)
            ms = time_ms(lambda: torch.mm(a, b))
            print(f"| {name} | {m} x {k} x {n} | {2 * m * k * n / ms / 1e9:.1f} TFLOP/s |")
    torch.backends.cuda.matmul.allow_tf32 = False


def bandwidth():
    print("\n### PyTorch memory-bound ops (GB/s of bytes read + written)\n")
    print("| op | dtype | shape | PyTorch |\n|---|---|---|---|")
    n = 1 << 22 if QUICK else 1 << 26
    d = 1024
    for dt in (torch.float32, torch.bfloat16):
        es = torch.finfo(dt).bits // 8
        x = torch.randn(n // d, d, device=dev, dtype=dt)
        y = torch.randn(n // d, d, device=dev, dtype=dt)
        w = torch.randn(d, device=dev, dtype=dt)
        out = torch.empty_like(x)
        ops = [
            ("copy_", 2 * n * es, lambda: out.copy_(x)),
            ("add", 3 * n * es, lambda: x + y),
            ("mul by scalar", 2 * n * es, lambda: x * 1.5),
            ("add row bias (broadcast)", 2 * n * es, lambda: x + w),
            ("gelu", 2 * n * es, lambda: torch.nn.functional.gelu(x)),
            ("sum (all)", n * es, lambda: x.sum()),
            ("sum (last dim)", n * es, lambda: x.sum(1)),
            ("sum (first dim)", n * es, lambda: x.sum(0)),
            ("max (last dim)", n * es, lambda: x.amax(1)),
            ("layer_norm forward", 2 * n * es,
             lambda: torch.nn.functional.layer_norm(x, (d,), w, w, 1e-5)),
            ("softmax (last dim)", 2 * n * es, lambda: torch.softmax(x, -1)),
        ]
        for name, nbytes, f in ops:
            ms = time_ms(f)
            print(f"| {name} | {str(dt).replace('torch.', '')} | [{n // d}, {d}] | "
                  f"{nbytes / ms / 1e6:.1f} GB/s |")


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


def small_resnet():
    """ResNet-18 layout (2 blocks per stage) at CIFAR size: 32x32 inputs, widths 64..512."""
    layers = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)]
    return nn.Sequential(*layers)


def training_steps():
    print("\n### PyTorch training step (ms per step, forward + backward + optimizer)\n")
    print("| model | batch | dtype | PyTorch |\n|---|---|---|---|")
    torch.manual_seed(0)
    # Transformer encoder: 4 layers, d_model 256, 4 heads, FFN 1024, sequence 128, GELU, AdamW.
    b, s, d = (8, 64, 256) if QUICK else (32, 128, 256)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 4, 1024, 0.0, "gelu",
                                                           batch_first=True), 4).to(dev)
    head = nn.Linear(d, 1000).to(dev)
    opt = torch.optim.AdamW(list(enc.parameters()) + list(head.parameters()), 1e-4)
    x = torch.randn(b, s, d, device=dev)
    t = torch.randint(0, 1000, (b, s), device=dev)

    def enc_step():
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(head(enc(x)).flatten(0, 1), t.flatten())
        loss.backward()
        opt.step()

    print(f"| transformer encoder (4 x 256, seq {s}) | {b} | float32 | {time_ms(enc_step):.2f} ms |")
    # ResNet-18 layout on 32x32 images, SGD with momentum.
    b = 16 if QUICK else 128
    net = small_resnet().to(dev)
    opt2 = torch.optim.SGD(net.parameters(), 0.1, momentum=0.9)
    xi = torch.randn(b, 3, 32, 32, device=dev)
    ti = torch.randint(0, 10, (b,), device=dev)

    def res_step():
        opt2.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(net(xi), ti)
        loss.backward()
        opt2.step()

    # cuDNN convolutions in plain float32, as Shardlight's default, then with TF32: PyTorch's
    # default for cuDNN (torch.backends.cudnn.allow_tf32 True, deterministic False); each with
    # cuDNN's heuristics (benchmark False, the default) and then with algorithms chosen by timing
    # them (benchmark True), as bench_gpu_train.cpp's rows
    for bench in (False, True):
        torch.backends.cudnn.benchmark = bench
        for tf32 in (False, True):
            torch.backends.cudnn.allow_tf32 = tf32
            name = "float32 (TF32, any cuDNN algorithm" if tf32 else "float32 (any cuDNN algorithm"
            name += ", cuDNN benchmark)" if bench else ")"
            print(f"| ResNet-18 layout, 32x32 | {b} | {name} | {time_ms(res_step):.2f} ms |")
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = False


def attention():
    print("\n### PyTorch scaled_dot_product_attention (its own choice of kernel)\n")
    print("| dtype | N x H x L x E | causal | fwd TFLOP/s | fwd+bwd |\n|---|---|---|---|---|")
    F = torch.nn.functional
    # the configurations of bench_gpu.cpp's attention table
    configs = [(8, 16, 512, 64, torch.bfloat16), (8, 16, 512, 64, torch.float16),
               (8, 16, 512, 64, torch.float32), (2, 16, 4096, 64, torch.bfloat16)]
    if QUICK:
        configs = [(2, 4, 256, 64, torch.bfloat16)]
    for n, h, l, e, dt in configs:
        for causal in (False, True):
            q, k, v = (torch.randn(n, h, l, e, device="cuda", dtype=dt, requires_grad=True)
                       for _ in range(3))
            gy = torch.randn(n, h, l, e, device="cuda", dtype=dt)

            def fwd():
                with torch.no_grad():
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)

            def fwd_bwd():
                for t in (q, k, v):
                    t.grad = None
                F.scaled_dot_product_attention(q, k, v, is_causal=causal).backward(gy)
            flops = 4 * n * h * l * l * e / (2 if causal else 1)
            print(f"| {str(dt).replace('torch.', '')} | {n} x {h} x {l} x {e} | "
                  f"{'yes' if causal else 'no'} | {flops / time_ms(fwd) / 1e9:.1f} | "
                  f"{time_ms(fwd_bwd):.2f} ms |")


def time_ms_det(f, deterministic):
    """time_ms(f) under torch.use_deterministic_algorithms(deterministic), as text; an op that
    has no deterministic CUDA implementation raises, which the table shows."""
    torch.use_deterministic_algorithms(deterministic)
    try:
        return f"{time_ms(f):.3f}"
    except RuntimeError as e:
        return f"n/a ({str(e).splitlines()[0][:60]})"
    finally:
        torch.use_deterministic_algorithms(False)


def index_add():
    print("\n### PyTorch index_add_ / scatter_add_ with few columns (ms per call, in place; "
          "default: atomic adds, deterministic: torch.use_deterministic_algorithms(True))\n")
    print("| op | dtype | shape | default | deterministic |\n|---|---|---|---|---|")
    # the shapes of bench_gpu.cpp's index_add table
    V, D = 32768, 768
    ks = [64, 255, 400, 1024, 8192] + ([] if QUICK else [65536])
    for dt in (torch.float32, torch.bfloat16):
        for k in ks:
            base = torch.zeros(V, D, device="cuda", dtype=dt)
            ids = torch.randint(0, V, (k,), device="cuda")
            rows = torch.randn(k, D, device="cuda", dtype=dt)
            times = [time_ms_det(lambda: base.index_add_(0, ids, rows), det)
                     for det in (False, True)]
            print(f"| index_add (embedding backward) | {str(dt).replace('torch.', '')} | "
                  f"V {V}, D {D}, k {k} | {times[0]} | {times[1]} |")
    n = (1 << 16) if QUICK else (1 << 20)
    base = torch.zeros(V, device="cuda")
    ids = torch.randint(0, V, (n,), device="cuda")
    src = torch.randn(n, device="cuda")
    times = [time_ms_det(lambda: base.scatter_add_(0, ids, src), det) for det in (False, True)]
    print(f"| scatter_add (1-d) | float32 | {n} into {V} | {times[0]} | {times[1]} |")


def main():
    if not torch.cuda.is_available():
        print("bench_gpu_torch: no GPU visible; skipped")
        return 77
    print(f"## PyTorch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    t0 = time.time()
    matmul()
    bandwidth()
    attention()
    index_add()
    training_steps()
    print(f"\n(PyTorch side took {time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

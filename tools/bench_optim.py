#!/usr/bin/python3
"""PyTorch side of tools/bench_optim.sh: median time of torch.optim.AdamW.step() over N f32
parameters (one tensor), for each thread count. Prints lines shaped like bench_optim's:
"torch-<impl> adamw n=<N> threads=<t> ms=<median>" for impl in single (foreach=False, the 1.13
default) and foreach."""
import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(0)
    for t in [int(x) for x in args.threads.split(",")]:
        torch.set_num_threads(t)
        for impl, foreach in (("single", False), ("foreach", True)):
            p = torch.randn(args.n, generator=gen).requires_grad_()
            p.grad = torch.randn(args.n, generator=gen)
            opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01, foreach=foreach)
            opt.step()
            ms = []
            for _ in range(args.iters):
                t0 = time.perf_counter()
                opt.step()
                ms.append((time.perf_counter() - t0) * 1e3)
            ms.sort()
            print(f"torch-{impl} adamw n={args.n} threads={t} ms={ms[len(ms) // 2]:.3f}", flush=True)


if __name__ == "__main__":
    main()

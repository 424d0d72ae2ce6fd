"""The "embedding_bag" family of tools/gen_nn_fixtures.py (nn.Embedding's options and
nn.EmbeddingBag), kept apart for size; run it through that script (`/usr/bin/python3
tools/gen_nn_fixtures.py --keep-existing embedding_bag`), which passes its run_case and seeded
helpers in. Keys and seeds: see its docstring.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def gen_embedding_bag(w, run_case, seeded):
    """Embedding's options (max_norm, norm_type, scale_grad_by_freq, from_pretrained) and
    EmbeddingBag: every mode over 1-d input + offsets (an empty bag among them), 2-d input,
    include_last_offset, padding_idx (a bag of padding
    entries only), max_norm, per_sample_weights (sum), scale_grad_by_freq (sum, mean), and ties
    in max (small integer weights). Each case in float32 and, suffixed _f64, float64 (module and
    per_sample_weights converted with .double() after the float32 init). Cases with max_norm
    also store <case>.after.weight, the weight renormalised in place by forward."""
    def both(name, seed, make, inputs_fn, after=(), fn_of=None):
        for suffix, dt in (("", torch.float32), ("_f64", torch.float64)):
            seeded(seed)
            m = make().to(dt)
            inputs = [t.to(dt) if t is not None and t.is_floating_point() else t
                      for t in inputs_fn()]
            run_case(w, name + suffix, fn_of(m) if fn_of else m, inputs, m, buffers_after=after)
            if not suffix:
                w.put_module_strings(name, m)

    # Embedding: max_norm rows (indices repeat) renormalised before the lookup
    def emb(**kw):
        def make():
            m = nn.Embedding(10, 4, **kw)
            with torch.no_grad():
                m.weight.mul_(1.5)
            return m
        return make
    both("emb_max_norm", 300, emb(max_norm=1.0),
         lambda: [torch.tensor([[1, 2, 1], [5, 9, 2]])], after=["weight"])
    both("emb_max_norm_p1_pad", 301, emb(max_norm=1.5, norm_type=1.0, padding_idx=0),
         lambda: [torch.tensor([0, 3, 3, 7, 0, 8])], after=["weight"])
    both("emb_max_norm_inf", 302, emb(max_norm=0.8, norm_type=float("inf")),
         lambda: [torch.tensor([4, 6, 4])], after=["weight"])
    both("emb_scale_freq_pad", 303, emb(scale_grad_by_freq=True, padding_idx=1),
         lambda: [torch.tensor([[1, 2, 2, 5], [2, 1, 7, 5]])])
    both("emb_pretrained_max_norm", 304,
         lambda: nn.Embedding.from_pretrained(torch.randn(6, 3) * 2, freeze=False,
                                              padding_idx=2, max_norm=1.2),
         lambda: [torch.tensor([2, 0, 5, 0])], after=["weight"])

    # EmbeddingBag over 10 x 4: bags [0, 3), [3, 3) (empty), [3, 7), [7, 10). include_last_offset
    # cases end at L: PyTorch 1.13's backward writes out of bounds for entries past the last offset
    idx1 = [1, 4, 1, 0, 9, 2, 4, 7, 2, 3]
    offs = [0, 3, 3, 7]
    for mode in ("sum", "mean", "max"):
        bag = lambda **kw: (lambda: nn.EmbeddingBag(10, 4, mode=mode, **kw))
        both(f"bag_{mode}_offsets", 310, bag(),
             lambda: [torch.tensor(idx1), torch.tensor(offs)])
        both(f"bag_{mode}_2d", 311, bag(), lambda: [torch.tensor([[1, 3, 3, 0], [8, 2, 5, 9],
                                                                  [4, 4, 4, 4]])])
        both(f"bag_{mode}_last_offset", 312, bag(include_last_offset=True),
             lambda: [torch.tensor(idx1), torch.tensor([0, 2, 5, 10])])
        # padding_idx 2: bag [5, 7) holds padding only; bag [7, 10) one padding entry
        both(f"bag_{mode}_pad", 313, bag(padding_idx=2),
             lambda: [torch.tensor([1, 2, 3, 0, 2, 2, 2, 7, 2, 3]),
                      torch.tensor([0, 3, 5, 7])])
        both(f"bag_{mode}_max_norm", 314, bag(max_norm=1.0),
             lambda: [torch.tensor(idx1), torch.tensor(offs)], after=["weight"])
        both(f"bag_{mode}_2d_pad_neg", 315, bag(padding_idx=-1),
             lambda: [torch.tensor([[9, 9, 9], [9, 1, 2]])])
    # scale_grad_by_freq: PyTorch 1.13's CPU embedding_bag backward divides by the wrong count
    # (counts[indices_data[i]] with i the unique-run counter: pytorch/pytorch#190063, fixed by
    # #190264; CUDA was right), so the reference is F.embedding(scale_grad_by_freq=True), whose
    # backward is right, summed (averaged) per bag without the padding entries.
    def bag_via_embedding(m):
        def fn(idx, offsets):
            e = F.embedding(idx, m.weight, m.padding_idx, scale_grad_by_freq=True)
            bounds = offsets.tolist() + [idx.numel()]
            keep = (idx != m.padding_idx).to(e.dtype).unsqueeze(1)
            rows = []
            for b in range(len(offsets)):
                s, t = bounds[b], bounds[b + 1]
                total = (e[s:t] * keep[s:t]).sum(0)
                if m.mode == "mean":
                    total = total / keep[s:t].sum().clamp(min=1)
                rows.append(total)
            return torch.stack(rows)
        return fn
    for mode in ("sum", "mean"):
        both(f"bag_{mode}_freq", 316,
             lambda: nn.EmbeddingBag(10, 4, mode=mode, scale_grad_by_freq=True, padding_idx=0),
             lambda: [torch.tensor(idx1), torch.tensor(offs)], fn_of=bag_via_embedding)
    both("bag_sum_psw", 317, lambda: nn.EmbeddingBag(10, 4, mode="sum"),
         lambda: [torch.tensor(idx1), torch.tensor(offs), torch.randn(10)])
    both("bag_sum_psw_2d_pad", 318, lambda: nn.EmbeddingBag(10, 4, mode="sum", padding_idx=3),
         lambda: [torch.tensor([[3, 1, 4], [5, 3, 3]]), None, torch.randn(2, 3)])
    both("bag_sum_psw_last_offset_max_norm", 319,
         lambda: nn.EmbeddingBag(10, 4, mode="sum", include_last_offset=True, max_norm=1.3),
         lambda: [torch.tensor(idx1), torch.tensor([0, 4, 4, 10]), torch.randn(10)],
         after=["weight"])

    # max with ties: weight entries in {-1, 0, 1}; the first entry of a bag wins a tie
    def tied():
        m = nn.EmbeddingBag(5, 3, mode="max")
        with torch.no_grad():
            m.weight.copy_(torch.randint(-1, 2, (5, 3)).float())
        return m
    both("bag_max_ties", 320, tied,
         lambda: [torch.tensor([0, 1, 2, 3, 4, 4, 0, 2, 1, 3]), torch.tensor([0, 5, 7])])
    for mode in ("sum", "mean", "max"):
        both(f"bag_{mode}_empty_input", 322, lambda: nn.EmbeddingBag(3, 2, mode=mode),
             lambda: [torch.zeros(0, dtype=torch.long), torch.tensor([0, 0])])
    both("bag_pretrained_mean", 321,
         lambda: nn.EmbeddingBag.from_pretrained(torch.randn(7, 2), freeze=False, mode="mean",
                                                 padding_idx=6),
         lambda: [torch.tensor([6, 1, 2, 6, 0]), torch.tensor([0, 1, 4])])

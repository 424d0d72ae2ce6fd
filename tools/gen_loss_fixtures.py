#!/usr/bin/python3
"""PyTorch reference fixtures for the margin, likelihood and distance losses (nn/loss_margin.h,
nn/loss_likelihood.h, nn/distance.h), in the key layout of tools/gen_nn_fixtures.py (whose
run_case and command line this script uses):

    /usr/bin/python3 tools/gen_loss_fixtures.py [--out DIR] [--keep-existing] [family...]

Families: loss_margin, loss_likelihood, distance (one tests/fixtures/nn/<family>.safetensors
each). Every floating input of a case is differentiated (its gradient is stored as gin.<i>);
targets that PyTorch only compares (hinge, cosine embedding, multi-class and multi-label margin)
or does not differentiate (soft margin; Poisson's with Stirling's term, NaN at 0) are captured
by the case's function (soft margin's and Poisson's are stored as <case>.target), so that only
the gradients PyTorch defines are stored. The configuration of each case is written out here
and in tests/nn/test_loss_*.cpp and test_distance.cpp beside its name.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from gen_nn_fixtures import main, run_case, seeded  # noqa: E402

torch.set_num_threads(1)


def signs(*shape):
    return torch.randint(0, 2, shape).to(torch.float32) * 2 - 1


def gen_loss_margin(w):
    for dt, sfx in [(torch.float32, ""), (torch.float64, "_f64")]:
        seeded(300)
        a, b = torch.randn(5, 3, dtype=dt), torch.randn(5, 3, dtype=dt)
        y = signs(5, 3).to(dt)
        for red in ["mean", "sum", "none"]:
            run_case(w, f"margin_ranking_{red}{sfx}",
                     lambda p, q, t, red=red: F.margin_ranking_loss(p, q, t, margin=0.3,
                                                                    reduction=red),
                     [a.clone(), b.clone(), y.clone()])
        # broadcasting: [5, 1] against [1, 3] and a [5, 3] target
        run_case(w, f"margin_ranking_bcast{sfx}",
                 lambda p, q, t: F.margin_ranking_loss(p, q, t, reduction="none"),
                 [a[:, :1].clone(), b[:1, :].clone(), y.clone()])
        seeded(301)
        x = torch.randn(4, 5, dtype=dt) * 2
        yh = torch.tensor([[1, -1, 0, 1, -1]] * 4)  # 0: PyTorch adds both terms
        for red in ["mean", "none"]:
            run_case(w, f"hinge_{red}{sfx}",
                     lambda p, red=red: F.hinge_embedding_loss(p, yh, margin=1.5, reduction=red),
                     [x.clone()])
        seeded(302)
        x = torch.randn(4, 6, dtype=dt) * 3
        ys = signs(4, 6).to(dt)
        # PyTorch does not differentiate soft_margin_loss's target: captured, stored as .target
        for red in ["mean", "sum", "none"]:
            run_case(w, f"soft_margin_{red}{sfx}",
                     lambda p, red=red: F.soft_margin_loss(p, ys, reduction=red), [x.clone()])
            w.put(f"soft_margin_{red}{sfx}.target", ys)
        seeded(303)
        x = torch.randn(4, 5, dtype=dt)
        t = torch.rand(4, 5, dtype=dt)
        wt = torch.rand(5, dtype=dt) + 0.5
        w.put(f"mlsm_w{sfx}.weight", wt)
        for red in ["mean", "none"]:
            run_case(w, f"mlsm_{red}{sfx}",
                     lambda p, q, red=red: F.multilabel_soft_margin_loss(p, q, reduction=red),
                     [x.clone(), t.clone()])
        run_case(w, f"mlsm_w{sfx}",
                 lambda p, q: F.multilabel_soft_margin_loss(p, q, weight=wt, reduction="sum"),
                 [x.clone(), t.clone()])
        run_case(w, f"mlsm_1d{sfx}", lambda p, q: F.multilabel_soft_margin_loss(p, q),
                 [x[0].clone(), t[0].clone()])
        seeded(304)
        a, b = torch.randn(6, 4, dtype=dt), torch.randn(6, 4, dtype=dt)
        yc = torch.tensor([1, -1, 1, -1, -1, 1])
        for red in ["mean", "none"]:
            run_case(w, f"cosine_emb_{red}{sfx}",
                     lambda p, q, red=red: F.cosine_embedding_loss(p, q, yc, margin=-0.2,
                                                                   reduction=red),
                     [a.clone(), b.clone()])
        run_case(w, f"cosine_emb_1d{sfx}",
                 lambda p, q: F.cosine_embedding_loss(p, q, torch.tensor(-1), margin=0.1),
                 [a[0].clone(), b[0].clone()])
        seeded(305)
        an, po, ne = (torch.randn(5, 4, dtype=dt) for _ in range(3))
        run_case(w, f"triplet_default{sfx}", lambda p, q, r: F.triplet_margin_loss(p, q, r),
                 [an.clone(), po.clone(), ne.clone()])
        run_case(w, f"triplet_p1_swap_none{sfx}",
                 lambda p, q, r: F.triplet_margin_loss(p, q, r, margin=2.0, p=1.0, eps=1e-3,
                                                       swap=True, reduction="none"),
                 [an.clone(), po.clone(), ne.clone()])
        run_case(w, f"triplet_p3_sum{sfx}",
                 lambda p, q, r: F.triplet_margin_loss(p, q, r, p=3.0, reduction="sum"),
                 [an.clone(), po.clone(), ne.clone()])
        seeded(306)
        x = torch.randn(5, 4, dtype=dt)
        tm = torch.tensor([0, 3, 1, 1, 2])
        wm = torch.rand(4, dtype=dt) + 0.5
        w.put(f"multi_margin_p2_w{sfx}.weight", wm)
        for red in ["mean", "none"]:
            run_case(w, f"multi_margin_{red}{sfx}",
                     lambda p, red=red: F.multi_margin_loss(p, tm, reduction=red), [x.clone()])
        run_case(w, f"multi_margin_p2_w{sfx}",
                 lambda p: F.multi_margin_loss(p, tm, p=2, margin=0.7, weight=wm,
                                               reduction="sum"), [x.clone()])
        run_case(w, f"multi_margin_1d{sfx}",
                 lambda p: F.multi_margin_loss(p, torch.tensor(2), reduction="none"),
                 [x[0].clone()])
        seeded(307)
        x = torch.randn(4, 5, dtype=dt)
        # row 1: a class listed twice counts twice; row 2: nothing listed; row 3: values after -1
        tl = torch.tensor([[3, 0, -1, 1, 1], [2, 2, 4, -1, 0], [-1, 1, 2, 3, 4], [0, 1, 2, 3, 4]])
        for red in ["mean", "none"]:
            run_case(w, f"multilabel_margin_{red}{sfx}",
                     lambda p, red=red: F.multilabel_margin_loss(p, tl, reduction=red),
                     [x.clone()])
        run_case(w, f"multilabel_margin_1d{sfx}",
                 lambda p: F.multilabel_margin_loss(p, tl[0], reduction="none"), [x[0].clone()])


def gen_loss_likelihood(w):
    for dt, sfx in [(torch.float32, ""), (torch.float64, "_f64")]:
        seeded(320)
        x = torch.randn(4, 5, dtype=dt)
        t = torch.poisson(torch.rand(4, 5, dtype=dt) * 4)
        for red in ["mean", "sum", "none"]:
            run_case(w, f"poisson_log_{red}{sfx}",
                     lambda p, q, red=red: F.poisson_nll_loss(p, q, reduction=red),
                     [x.clone(), t.clone()])
        rate = torch.rand(4, 5, dtype=dt) * 3 + 0.1
        run_case(w, f"poisson_rate{sfx}",
                 lambda p, q: F.poisson_nll_loss(p, q, log_input=False, eps=1e-4),
                 [rate.clone(), t.clone()])
        # full: the target is captured, not differentiated (PyTorch's gradient at 0 is NaN)
        run_case(w, f"poisson_full{sfx}",
                 lambda p: F.poisson_nll_loss(p, t, full=True, reduction="none"), [x.clone()])
        w.put(f"poisson_full{sfx}.target", t)
        seeded(321)
        x, y = torch.randn(4, 3, dtype=dt), torch.randn(4, 3, dtype=dt)
        var = torch.rand(4, 3, dtype=dt) + 0.05
        var[0, 0] = 1e-8  # below eps: clamped, its gradient passes through
        var[1, 2] = 0.0
        for red in ["mean", "sum", "none"]:
            run_case(w, f"gaussian_{red}{sfx}",
                     lambda p, q, v, red=red: F.gaussian_nll_loss(p, q, v, reduction=red),
                     [x.clone(), y.clone(), var.clone()])
        run_case(w, f"gaussian_full_eps{sfx}",
                 lambda p, q, v: F.gaussian_nll_loss(p, q, v, full=True, eps=1e-3),
                 [x.clone(), y.clone(), var.clone()])
        run_case(w, f"gaussian_var_short{sfx}",
                 lambda p, q, v: F.gaussian_nll_loss(p, q, v, reduction="none"),
                 [x.clone(), y.clone(), var[:, 0].clone()])
        run_case(w, f"gaussian_var_one{sfx}",
                 lambda p, q, v: F.gaussian_nll_loss(p, q, v, reduction="none"),
                 [x.clone(), y.clone(), var[:, :1].clone()])
        run_case(w, f"gaussian_target_bcast{sfx}",
                 lambda p, q, v: F.gaussian_nll_loss(p, q, v, reduction="none"),
                 [x.clone(), y[:1].clone(), var.clone()])


def gen_distance(w):
    for dt, sfx in [(torch.float32, ""), (torch.float64, "_f64")]:
        seeded(340)
        a, b = torch.randn(4, 5, dtype=dt), torch.randn(4, 5, dtype=dt)
        a[1] = 1e-10  # a norm below eps: clamped
        run_case(w, f"cos_sim{sfx}", lambda p, q: F.cosine_similarity(p, q),
                 [a.clone(), b.clone()])
        c, d = torch.randn(2, 3, 4, dtype=dt), torch.randn(3, 1, dtype=dt)
        run_case(w, f"cos_sim_bcast{sfx}", lambda p, q: F.cosine_similarity(p, q, dim=-1),
                 [c.clone(), d.clone()])
        run_case(w, f"cos_sim_dim0_eps{sfx}",
                 lambda p, q: F.cosine_similarity(p, q, dim=0, eps=0.5),
                 [a.clone(), b.clone()])
        run_case(w, f"pdist{sfx}", lambda p, q: F.pairwise_distance(p, q),
                 [a.clone(), b.clone()])
        run_case(w, f"pdist_p1_keep{sfx}",
                 lambda p, q: F.pairwise_distance(p, q, p=1.0, eps=1e-3, keepdim=True),
                 [a.clone(), b.clone()])
        run_case(w, f"pdist_inf_bcast{sfx}",
                 lambda p, q: F.pairwise_distance(p, q, p=float("inf")),
                 [c.clone(), b[0, :4].clone()])
        run_case(w, f"pdist_1d{sfx}", lambda p, q: F.pairwise_distance(p, q, p=3.0),
                 [a[0].clone(), b[0].clone()])


FAMILIES = {"loss_margin": gen_loss_margin, "loss_likelihood": gen_loss_likelihood,
            "distance": gen_distance}


if __name__ == "__main__":
    main(FAMILIES)

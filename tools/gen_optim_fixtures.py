#!/usr/bin/python3
"""Regenerates the optimizer parity fixtures under tests/fixtures/optim/ with PyTorch.

    /usr/bin/python3 tools/gen_optim_fixtures.py        (Debian's python3-torch 1.13 + safetensors)

Writes three small safetensors files, read by tests/optim/test_optim_parity.cpp:

optimizers.safetensors
    For each case <c>: "<c>/init/<k>" the initial parameters, and for steps s = 1..5 (1..steps
    when the case has "steps") "<c>/grad/<s>/<k>" the gradient fed to step s, "<c>/param/<s>/<k>"
    the parameters after it and "<c>/state/<s>/<k>/<name>" the optimizer state after it (PyTorch's
    state keys; SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, NAdam, RAdam; NAdam's 0-d float32
    mu_product too); for Adagrad also "<c>/state/0/<k>/sum", the state its constructor creates
    (with step 0). The metadata key "cases" holds a JSON list of {"name", "optimizer", "dtype",
    ["steps",] "groups": [{"params": [k...], <hyperparameters>}][, "changes": [{"step": s,
    "group": g, <hyperparameters>}]]}; hyperparameter names are PyTorch's, and a group without one
    takes PyTorch's default. A change sets group g's hyperparameters before step s (NAdam only).
schedulers.safetensors
    For each case <c>: "<c>/lr" (f64, [steps + 1, groups]) the lrs after construction and after
    each scheduler step, and for OneCycle "<c>/momentum" (SGD momentum or Adam beta1) likewise.
    Metadata "cases": [{"name", "scheduler", "optimizer", "base_lrs", "steps", <arguments>}];
    ReduceLROnPlateau's "metrics" holds the value passed to step s (NaN written as null).
clip_grad.safetensors
    For each case <c>: "<c>/grad/<k>" the gradients before, "<c>/clipped/<k>" after, and
    "<c>/total_norm" (f64 scalar) the returned norm. Metadata "cases": [{"name", "max_norm",
    "norm_type" (a number, or "inf")}] or {"name", "clip_value"} for clip_grad_value_.

Optimizers run with foreach=False (PyTorch 1.13's default), the single-tensor code path whose
order of operations shardlight's kernels follow.
"""
import json
import math
import os

import torch
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "optim")
STEPS = 5
SHAPES = [(3, 4), (5,)]
# Gradient magnitude per step: varying scales exercise amsgrad's running max and the moments.
GRAD_SCALES = [1.0, 0.1, 2.0, 0.5, 0.05]


def optimizer_cases():
    c = []
    sgd = lambda name, **kw: c.append(dict(name=name, optimizer="SGD", groups=[dict(params=[0, 1], **kw)]))
    sgd("sgd_plain", lr=0.1)
    sgd("sgd_momentum", lr=0.1, momentum=0.9)
    sgd("sgd_dampening", lr=0.1, momentum=0.9, dampening=0.3)
    sgd("sgd_nesterov", lr=0.1, momentum=0.9, nesterov=True)
    sgd("sgd_weight_decay", lr=0.1, momentum=0.9, weight_decay=0.05)
    sgd("sgd_nesterov_wd", lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)
    sgd("sgd_maximize", lr=0.1, momentum=0.5, maximize=True)
    c.append(dict(name="sgd_groups", optimizer="SGD",
                  groups=[dict(params=[0], lr=0.1, momentum=0.9, weight_decay=0.1),
                          dict(params=[1], lr=0.3, momentum=0.5)]))
    for opt in ("Adam", "AdamW"):
        p = opt.lower()
        add = lambda name, **kw: c.append(dict(name=name, optimizer=opt, groups=[dict(params=[0, 1], **kw)]))
        add(p + "_default", lr=0.01)
        add(p + "_weight_decay", lr=0.01, weight_decay=0.1)
        add(p + "_amsgrad", lr=0.01, amsgrad=True)
        add(p + "_amsgrad_wd", lr=0.02, weight_decay=0.05, amsgrad=True)
        add(p + "_betas_eps", lr=0.05, betas=[0.8, 0.99], eps=1e-6)
        add(p + "_maximize", lr=0.01, maximize=True, weight_decay=0.02)
        c.append(dict(name=p + "_groups", optimizer=opt,
                      groups=[dict(params=[0], lr=0.01, weight_decay=0.1),
                              dict(params=[1], lr=0.03, weight_decay=0.0)]))
    for case in c:
        case["dtype"] = "float32"
    c.append(dict(name="adam_f64", optimizer="Adam", dtype="float64",
                  groups=[dict(params=[0, 1], lr=0.01, weight_decay=0.1, amsgrad=True)]))
    c.append(dict(name="sgd_f64", optimizer="SGD", dtype="float64",
                  groups=[dict(params=[0, 1], lr=0.1, momentum=0.9, weight_decay=0.05, nesterov=True)]))
    # Appended after the older cases, which draw from the same generator first: their tensors stay
    # bit-identical. Large eps values (1e-3, 0.1) make eps's place in the denominator visible.
    more = []
    add = lambda name, opt, **kw: more.append(dict(name=name, optimizer=opt, dtype="float32",
                                                   groups=[dict(params=[0, 1], **kw)]))
    add("rmsprop_default", "RMSprop", lr=0.01)
    add("rmsprop_momentum", "RMSprop", lr=0.02, momentum=0.5)
    add("rmsprop_centered", "RMSprop", lr=0.01, alpha=0.9, centered=True, eps=0.1)
    add("rmsprop_centered_momentum", "RMSprop", lr=0.01, momentum=0.9, centered=True)
    add("rmsprop_weight_decay", "RMSprop", lr=0.01, alpha=0.8, weight_decay=0.1, eps=1e-3)
    add("rmsprop_maximize", "RMSprop", lr=0.01, maximize=True, momentum=0.3, weight_decay=0.02)
    more.append(dict(name="rmsprop_groups", optimizer="RMSprop", dtype="float32",
                     groups=[dict(params=[0], lr=0.01, centered=True, weight_decay=0.05),
                             dict(params=[1], lr=0.03, momentum=0.9)]))
    add("adagrad_default", "Adagrad", lr=0.01)
    add("adagrad_lr_decay", "Adagrad", lr=0.1, lr_decay=0.5)
    add("adagrad_initial_accumulator", "Adagrad", lr=0.1, initial_accumulator_value=0.5, eps=1e-3)
    add("adagrad_weight_decay", "Adagrad", lr=0.05, weight_decay=0.1, eps=0.1)
    add("adagrad_maximize", "Adagrad", lr=0.05, maximize=True, lr_decay=0.1)
    more.append(dict(name="adagrad_groups", optimizer="Adagrad", dtype="float32",
                     groups=[dict(params=[0], lr=0.1, lr_decay=0.2, initial_accumulator_value=0.1),
                             dict(params=[1], lr=0.03, weight_decay=0.05,
                                  initial_accumulator_value=0.1)]))
    more.append(dict(name="rmsprop_f64", optimizer="RMSprop", dtype="float64",
                     groups=[dict(params=[0, 1], lr=0.01, momentum=0.9, centered=True,
                                  weight_decay=0.05, eps=1e-4)]))
    more.append(dict(name="adagrad_f64", optimizer="Adagrad", dtype="float64",
                     groups=[dict(params=[0, 1], lr=0.1, lr_decay=0.3, weight_decay=0.05,
                                  initial_accumulator_value=0.2)]))
    # Adamax, NAdam, RAdam: appended after the cases above (whose tensors stay bit-identical).
    # RAdam's rho_t exceeds 5 from step 6 for beta2 = 0.999, 0.9 or 0.85 (rho_5 < 5 for any beta2),
    # so its cases take 8 steps: the unrectified branch first, then the rectified one.
    last = []
    add = lambda name, opt, steps=None, dtype="float32", **kw: last.append(
        dict(name=name, optimizer=opt, dtype=dtype, groups=[dict(params=[0, 1], **kw)],
             **({"steps": steps} if steps else {})))
    add("adamax_default", "Adamax")
    add("adamax_weight_decay", "Adamax", lr=0.01, weight_decay=0.1)
    add("adamax_betas_eps", "Adamax", lr=0.05, betas=[0.8, 0.9], eps=0.1)
    add("adamax_maximize", "Adamax", lr=0.01, maximize=True, weight_decay=0.02)
    last.append(dict(name="adamax_groups", optimizer="Adamax", dtype="float32",
                     groups=[dict(params=[0], lr=0.01, weight_decay=0.1),
                             dict(params=[1], lr=0.03, betas=[0.5, 0.99])]))
    add("adamax_f64", "Adamax", dtype="float64", lr=0.01, weight_decay=0.05, eps=1e-3)
    add("nadam_default", "NAdam")
    add("nadam_weight_decay", "NAdam", lr=0.01, weight_decay=0.1)
    add("nadam_momentum_decay", "NAdam", lr=0.01, momentum_decay=0.3)
    add("nadam_betas_eps", "NAdam", lr=0.05, betas=[0.8, 0.9], eps=0.1, momentum_decay=0.05)
    last.append(dict(name="nadam_groups", optimizer="NAdam", dtype="float32",
                     groups=[dict(params=[0], lr=0.01, weight_decay=0.1, momentum_decay=0.01),
                             dict(params=[1], lr=0.03, betas=[0.5, 0.99])]))
    add("nadam_f64", "NAdam", dtype="float64", lr=0.01, weight_decay=0.05, momentum_decay=0.2)
    add("radam_default", "RAdam", steps=8)
    add("radam_weight_decay", "RAdam", steps=8, lr=0.01, weight_decay=0.1)
    add("radam_betas_eps", "RAdam", steps=8, lr=0.05, betas=[0.8, 0.9], eps=0.1)
    last.append(dict(name="radam_groups", optimizer="RAdam", dtype="float32", steps=8,
                     groups=[dict(params=[0], lr=0.01, weight_decay=0.1),
                             dict(params=[1], lr=0.03, betas=[0.5, 0.85])]))
    add("radam_f64", "RAdam", steps=8, dtype="float64", lr=0.01, weight_decay=0.05)
    # A group's hyperparameters changed between steps (as a scheduler or a user does): NAdam reads
    # group["momentum_decay"] and group["betas"] at every step, so its mu_product is the product of
    # mu_t under the values each step saw, which the step count alone cannot rebuild. Appended last
    # (the cases above stay bit-identical).
    last.append(dict(name="nadam_changes", optimizer="NAdam", dtype="float32", steps=6,
                     groups=[dict(params=[0], lr=0.01, momentum_decay=0.004),
                             dict(params=[1], lr=0.02, betas=[0.9, 0.99], momentum_decay=0.1)],
                     changes=[dict(step=3, group=0, momentum_decay=0.5),
                              dict(step=4, group=1, betas=[0.7, 0.99]),
                              dict(step=5, group=0, betas=[0.8, 0.999], momentum_decay=0.05)]))
    return c + more + last


def gen_optimizers(tensors, meta_cases):
    gen = torch.Generator().manual_seed(1234)
    for case in optimizer_cases():
        dtype = getattr(torch, case["dtype"])
        name = case["name"]
        params = [torch.randn(s, generator=gen, dtype=torch.float64).to(dtype).requires_grad_() for s in SHAPES]
        for k, p in enumerate(params):
            tensors[f"{name}/init/{k}"] = p.detach().clone()
        groups = []
        for g in case["groups"]:
            hyper = {key: (tuple(v) if key == "betas" else v) for key, v in g.items() if key != "params"}
            groups.append(dict(params=[params[k] for k in g["params"]], **hyper))
        kw = {}
        if case["optimizer"] == "Adagrad":
            # PyTorch 1.13's Adagrad fills every sum from the constructor's initial_accumulator_value,
            # not the group's: pass it there, the same for all groups
            inits = {g.get("initial_accumulator_value", 0.0) for g in case["groups"]}
            assert len(inits) == 1, case["name"]
            kw["initial_accumulator_value"] = inits.pop()
        opt = getattr(torch.optim, case["optimizer"])(groups, foreach=False, **kw)
        if case["optimizer"] == "Adagrad":
            # PyTorch's Adagrad creates its state in the constructor (step 0, sum filled)
            for k, p in enumerate(params):
                assert float(opt.state[p]["step"]) == 0.0
                tensors[f"{name}/state/0/{k}/sum"] = opt.state[p]["sum"].detach().clone()
        for s in range(1, case.get("steps", STEPS) + 1):
            for ch in case.get("changes", []):
                if ch["step"] == s:  # before step s, set the group's options
                    for key, v in ch.items():
                        if key not in ("step", "group"):
                            opt.param_groups[ch["group"]][key] = tuple(v) if key == "betas" else v
            for k, p in enumerate(params):
                scale = GRAD_SCALES[(s - 1) % len(GRAD_SCALES)]
                grad = (torch.randn(p.shape, generator=gen, dtype=torch.float64) * scale).to(dtype)
                p.grad = grad
                tensors[f"{name}/grad/{s}/{k}"] = grad.clone()
            opt.step()
            for k, p in enumerate(params):
                tensors[f"{name}/param/{s}/{k}"] = p.detach().clone()
                for key, v in opt.state[p].items():
                    if key == "step" or v is None:
                        continue  # the step count is s; checked by the test without a tensor
                    tensors[f"{name}/state/{s}/{k}/{key}"] = v.detach().clone()
        meta_cases.append(case)


def scheduler_cases():
    return [
        dict(name="steplr", scheduler="StepLR", optimizer="SGD", base_lrs=[0.1], steps=12,
             step_size=3, gamma=0.5),
        dict(name="steplr_groups", scheduler="StepLR", optimizer="SGD", base_lrs=[0.1, 0.02],
             steps=8, step_size=2, gamma=0.3),
        dict(name="cosine", scheduler="CosineAnnealingLR", optimizer="SGD", base_lrs=[0.1], steps=12,
             T_max=5, eta_min=0.001),
        dict(name="cosine_groups", scheduler="CosineAnnealingLR", optimizer="AdamW",
             base_lrs=[0.01, 0.003], steps=25, T_max=10, eta_min=0.0),
        dict(name="linear_warmup", scheduler="LinearWarmupLR", optimizer="AdamW", base_lrs=[5e-5],
             steps=12, num_warmup_steps=3, num_training_steps=10),
        dict(name="linear_warmup_groups", scheduler="LinearWarmupLR", optimizer="AdamW",
             base_lrs=[1e-4, 2e-5], steps=7, num_warmup_steps=0, num_training_steps=6),
        dict(name="onecycle_sgd", scheduler="OneCycleLR", optimizer="SGD", base_lrs=[0.1], steps=10,
             max_lr=[0.1], total_steps=10, momentum=0.9),
        dict(name="onecycle_adamw", scheduler="OneCycleLR", optimizer="AdamW", base_lrs=[0.01, 0.01],
             steps=20, max_lr=[0.01, 0.004], total_steps=20),
        dict(name="onecycle_linear", scheduler="OneCycleLR", optimizer="Adam", base_lrs=[0.01], steps=15,
             max_lr=[0.02], total_steps=15, anneal_strategy="linear", pct_start=0.4),
        dict(name="onecycle_three_phase", scheduler="OneCycleLR", optimizer="SGD", base_lrs=[0.1],
             steps=16, max_lr=[0.5], total_steps=16, three_phase=True, momentum=0.9,
             div_factor=10.0, final_div_factor=100.0),
        dict(name="onecycle_no_momentum", scheduler="OneCycleLR", optimizer="SGD", base_lrs=[0.1],
             steps=8, max_lr=[0.3], total_steps=8, cycle_momentum=False),
    ] + plateau_cases() + onecycle_grid_cases() + chained_cases() + more_epoch_cases() + \
        sequential_cases()


def more_epoch_cases():
    """MultiStepLR, ExponentialLR, ConstantLR, LinearLR, PolynomialLR and SGDR, each past the end
    of its schedule, some with several groups."""
    return [
        dict(name="multistep", scheduler="MultiStepLR", optimizer="SGD", base_lrs=[0.1, 0.02],
             steps=12, milestones=[2, 5, 5, 9], gamma=0.5),
        dict(name="multistep_unsorted_zero", scheduler="MultiStepLR", optimizer="AdamW",
             base_lrs=[0.01], steps=8, milestones=[6, 0, 3], gamma=0.3),
        dict(name="exponential", scheduler="ExponentialLR", optimizer="Adam", base_lrs=[0.01, 0.5],
             steps=10, gamma=0.9),
        dict(name="constant", scheduler="ConstantLR", optimizer="SGD", base_lrs=[0.1], steps=8,
             factor=0.25, total_iters=4),
        dict(name="constant_defaults", scheduler="ConstantLR", optimizer="AdamW", base_lrs=[0.003],
             steps=7),
        dict(name="linear", scheduler="LinearLR", optimizer="SGD", base_lrs=[0.1, 0.3], steps=9,
             start_factor=0.1, end_factor=1.0, total_iters=6),
        dict(name="linear_decay", scheduler="LinearLR", optimizer="Adam", base_lrs=[0.01], steps=8,
             start_factor=1.0, end_factor=0.2, total_iters=5),
        dict(name="polynomial", scheduler="PolynomialLR", optimizer="SGD", base_lrs=[0.1], steps=8,
             total_iters=6, power=2.0),
        dict(name="polynomial_sqrt", scheduler="PolynomialLR", optimizer="AdamW",
             base_lrs=[0.01, 0.004], steps=6, total_iters=4, power=0.5),
        dict(name="warm_restarts", scheduler="CosineAnnealingWarmRestarts", optimizer="SGD",
             base_lrs=[0.1], steps=14, T_0=4, eta_min=0.001),
        dict(name="warm_restarts_mult", scheduler="CosineAnnealingWarmRestarts", optimizer="AdamW",
             base_lrs=[0.01, 0.002], steps=25, T_0=3, T_mult=2),
    ]


def sequential_cases():
    """SequentialLR: a warmup into a decay (the usual use), and three schedulers whose later ones
    restart from the initial lr at their milestones."""
    return [
        dict(name="sequential_warmup_cosine", scheduler="SequentialLR", optimizer="AdamW",
             base_lrs=[0.01, 0.004], steps=16, milestones=[4],
             schedulers=[dict(scheduler="LinearLR", start_factor=0.25, total_iters=4),
                         dict(scheduler="CosineAnnealingLR", T_max=8, eta_min=0.0005)]),
        dict(name="sequential_three", scheduler="SequentialLR", optimizer="SGD", base_lrs=[0.1],
             steps=14, milestones=[3, 8],
             schedulers=[dict(scheduler="ConstantLR", factor=0.5, total_iters=2),
                         dict(scheduler="ExponentialLR", gamma=0.8),
                         dict(scheduler="StepLR", step_size=2, gamma=0.5)]),
        dict(name="sequential_restarts_multistep", scheduler="SequentialLR", optimizer="SGD",
             base_lrs=[0.2, 0.05], steps=12, milestones=[5],
             schedulers=[dict(scheduler="CosineAnnealingWarmRestarts", T_0=2, eta_min=0.01),
                         dict(scheduler="MultiStepLR", milestones=[0, 2, 4], gamma=0.1)]),
    ]


def chained_cases():
    """Two schedulers on one optimizer, stepped in order each iteration (what ChainedScheduler
    does). The second is created after the first has already changed the lr, so it must start
    from the group's initial_lr, not from the current lr. (PyTorch lets such chains drive the lr
    below zero, e.g. warmup decaying to 0 under a cosine with eta_min > 0; our optimizers refuse
    negative lrs, so the cases keep it non-negative.)"""
    return [
        dict(name="chain_warmup_cosine", scheduler="Chain", optimizer="SGD", base_lrs=[0.1, 0.05],
             steps=14, chain=[dict(scheduler="LinearWarmupLR", num_warmup_steps=3,
                                   num_training_steps=20),
                              dict(scheduler="CosineAnnealingLR", T_max=6, eta_min=0.0)]),
        dict(name="chain_step_step", scheduler="Chain", optimizer="AdamW", base_lrs=[0.01],
             steps=9, chain=[dict(scheduler="StepLR", step_size=2, gamma=0.5),
                             dict(scheduler="StepLR", step_size=3, gamma=0.1)]),
    ]


def onecycle_grid_cases():
    """Short OneCycle schedules over a grid of total_steps and pct_start, stepped to the end.

    Some leave a phase zero steps wide and PyTorch then divides by zero (ZeroDivisionError, in
    the constructor or at a later step); those cases carry raises=True and no tensors (our
    constructor must refuse them), the others the lrs and momenta PyTorch gives."""
    cases = []
    for total in range(1, 9):
        for pct in (0.0, 0.125, 0.25, 0.3, 0.5, 0.75, 1.0):
            for three in (False, True):
                cases.append(dict(name=f"onecycle_grid_{total}_{pct}_{int(three)}",
                                  scheduler="OneCycleLR", optimizer="SGD", base_lrs=[0.1],
                                  steps=total, max_lr=[0.2], total_steps=total, pct_start=pct,
                                  three_phase=three, momentum=0.9))
    return cases


# A loss that improves, stalls (changes below the threshold), improves again, then turns NaN; an
# accuracy likewise; each case takes metrics[s] at step s.
PLATEAU_LOSS = [1.0, 0.8, 0.79995, 0.8, 0.81, 0.7, 0.7, 0.69, 0.69, 0.69, 0.69, float("nan"),
                0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
PLATEAU_ACC = [0.5, 0.6, 0.6, 0.60005, 0.59, 0.7, 0.7, 0.7, 0.71, 0.71, 0.71, 0.71]


def plateau_cases():
    return [
        dict(name="plateau_min_rel", scheduler="ReduceLROnPlateau", optimizer="SGD", base_lrs=[0.1],
             steps=len(PLATEAU_LOSS), metrics=PLATEAU_LOSS, patience=1),
        dict(name="plateau_min_abs_cooldown", scheduler="ReduceLROnPlateau", optimizer="AdamW",
             base_lrs=[0.01, 0.004], steps=len(PLATEAU_LOSS), metrics=PLATEAU_LOSS, patience=0,
             threshold=0.005, threshold_mode="abs", cooldown=2, factor=0.5, min_lr=[0.002, 0.0]),
        dict(name="plateau_max_rel", scheduler="ReduceLROnPlateau", optimizer="Adam", base_lrs=[0.01],
             steps=len(PLATEAU_ACC), metrics=PLATEAU_ACC, mode="max", patience=2, factor=0.3),
        dict(name="plateau_max_abs_eps", scheduler="ReduceLROnPlateau", optimizer="SGD",
             base_lrs=[1e-3, 2e-8], steps=len(PLATEAU_ACC), metrics=PLATEAU_ACC, mode="max",
             patience=0, threshold=0.0, threshold_mode="abs", factor=0.1, eps=1e-7),
    ]


def linear_warmup_lambda(num_warmup_steps, num_training_steps):
    # transformers.get_linear_schedule_with_warmup's lr_lambda, verbatim
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) /
                   float(max(1, num_training_steps - num_warmup_steps)))
    return lr_lambda


def gen_schedulers(tensors, meta_cases):
    S = torch.optim.lr_scheduler
    for case in scheduler_cases():
        extra = {"momentum": case["momentum"]} if "momentum" in case else {}

        def make_opt():
            groups = [dict(params=[torch.zeros(1, requires_grad=True)], lr=lr)
                      for lr in case["base_lrs"]]
            return getattr(torch.optim, case["optimizer"])(groups, **extra)

        kind = case["scheduler"]
        if kind == "OneCycleLR":  # a dry run: does PyTorch divide by zero anywhere?
            try:
                probe = make_scheduler(S, make_opt(), case)
                for _ in range(case["steps"]):
                    probe.step()
            except ZeroDivisionError:
                meta_cases.append(dict(case, raises=True))
                continue
        opt = make_opt()
        scheds = [make_scheduler(S, opt, sub) for sub in case.get("chain", [case])]
        lrs, moms = [], []

        def record():
            lrs.append([g["lr"] for g in opt.param_groups])
            moms.append([g["betas"][0] if "betas" in g else g["momentum"] for g in opt.param_groups])

        record()
        for step in range(case["steps"]):
            opt.step()
            for sched in scheds:
                if kind == "ReduceLROnPlateau":
                    sched.step(case["metrics"][step])
                else:
                    sched.step()
            record()
        tensors[f"{case['name']}/lr"] = torch.tensor(lrs, dtype=torch.float64)
        if kind == "OneCycleLR":
            tensors[f"{case['name']}/momentum"] = torch.tensor(moms, dtype=torch.float64)
        if "metrics" in case:  # JSON has no NaN
            case = dict(case, metrics=[None if math.isnan(m) else m for m in case["metrics"]])
        meta_cases.append(case)


def make_scheduler(S, opt, case):
    kind = case["scheduler"]
    if kind == "StepLR":
        return S.StepLR(opt, step_size=case["step_size"], gamma=case["gamma"])
    if kind == "CosineAnnealingLR":
        return S.CosineAnnealingLR(opt, T_max=case["T_max"], eta_min=case["eta_min"])
    if kind == "LinearWarmupLR":
        return S.LambdaLR(opt, linear_warmup_lambda(case["num_warmup_steps"],
                                                    case["num_training_steps"]))
    simple = {"MultiStepLR": ("milestones", "gamma"), "ExponentialLR": ("gamma",),
              "ConstantLR": ("factor", "total_iters"),
              "LinearLR": ("start_factor", "end_factor", "total_iters"),
              "PolynomialLR": ("total_iters", "power"),
              "CosineAnnealingWarmRestarts": ("T_0", "T_mult", "eta_min")}
    if kind in simple:
        return getattr(S, kind)(opt, **{k: case[k] for k in simple[kind] if k in case})
    if kind == "SequentialLR":
        subs = [make_scheduler(S, opt, sub) for sub in case["schedulers"]]
        return S.SequentialLR(opt, subs, milestones=case["milestones"])
    if kind == "ReduceLROnPlateau":
        kw = {k: case[k] for k in ("mode", "factor", "patience", "threshold", "threshold_mode",
                                   "cooldown", "min_lr", "eps") if k in case}
        return S.ReduceLROnPlateau(opt, **kw)
    assert kind == "OneCycleLR", kind
    kw = {k: case[k] for k in ("total_steps", "anneal_strategy", "pct_start", "three_phase",
                               "div_factor", "final_div_factor", "cycle_momentum") if k in case}
    return S.OneCycleLR(opt, max_lr=case["max_lr"], **kw)


def gen_clip(tensors, meta_cases):
    gen = torch.Generator().manual_seed(99)
    shapes = [(4, 3), (7,), (2, 2, 2)]
    cases = [
        dict(name="norm2_clipped", max_norm=1.0, norm_type=2.0),
        dict(name="norm2_unclipped", max_norm=100.0, norm_type=2.0),
        dict(name="norm1", max_norm=2.0, norm_type=1.0),
        dict(name="norm3", max_norm=0.5, norm_type=3.0),
        dict(name="norm_inf", max_norm=0.5, norm_type="inf"),
        dict(name="value", clip_value=0.7),
    ]
    for case in cases:
        params = [torch.zeros(s, requires_grad=True) for s in shapes]
        for k, p in enumerate(params):
            p.grad = torch.randn(p.shape, generator=gen) * (k + 1)
            tensors[f"{case['name']}/grad/{k}"] = p.grad.clone()
        if "clip_value" in case:
            torch.nn.utils.clip_grad_value_(params, case["clip_value"])
            total = 0.0
        else:
            nt = math.inf if case["norm_type"] == "inf" else case["norm_type"]
            total = float(torch.nn.utils.clip_grad_norm_(params, case["max_norm"], norm_type=nt))
        for k, p in enumerate(params):
            tensors[f"{case['name']}/clipped/{k}"] = p.grad.clone()
        tensors[f"{case['name']}/total_norm"] = torch.tensor(total, dtype=torch.float64)
        meta_cases.append(case)


def main():
    os.makedirs(OUT, exist_ok=True)
    for fname, fn in (("optimizers.safetensors", gen_optimizers),
                      ("schedulers.safetensors", gen_schedulers),
                      ("clip_grad.safetensors", gen_clip)):
        tensors, cases = {}, []
        fn(tensors, cases)
        tensors = {k: v.contiguous() for k, v in tensors.items()}
        path = os.path.join(OUT, fname)
        save_file(tensors, path, metadata={"cases": json.dumps(cases),
                                           "generator": f"tools/gen_optim_fixtures.py, torch {torch.__version__}"})
        print(f"wrote {path}: {len(cases)} cases, {len(tensors)} tensors, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()

"""The "upsample" family of tools/gen_nn_fixtures.py (F.interpolate / nn.Upsample), kept apart
for size; run it through that script (`/usr/bin/python3 tools/gen_nn_fixtures.py --keep-existing
upsample`), which passes its run_case and seeded helpers in. Keys and seeds: see its docstring.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def gen_upsample(w, run_case, seeded):
    """F.interpolate / nn.Upsample: nearest, nearest-exact, area, linear, bilinear (trilinear,
    bicubic and antialias: gen_upsample_cubic); each case's
    call is repeated in tests/nn/test_upsample.cpp next to its name."""
    def interp(**kw):
        return lambda x: F.interpolate(x, **kw)

    cases = [
        ("nearest_2x", nn.Upsample(scale_factor=2, mode="nearest"), (2, 3, 4, 5)),
        ("nearest_scale_1_7", interp(scale_factor=1.7, mode="nearest"), (1, 2, 5, 6)),
        ("nearest_shrink", interp(size=(3, 4), mode="nearest"), (1, 2, 5, 7)),
        ("nearest_1d_2_05", interp(scale_factor=2.05, mode="nearest"), (1, 2, 10)),
        ("nearest_recompute", interp(scale_factor=1.7, mode="nearest",
                                     recompute_scale_factor=True), (1, 2, 5, 6)),
        ("bilinear_up", interp(scale_factor=1.7, mode="bilinear", align_corners=False),
         (1, 2, 4, 5)),
        ("bilinear_up_ac", interp(scale_factor=1.7, mode="bilinear", align_corners=True),
         (1, 2, 4, 5)),
        ("bilinear_down", interp(size=(3, 2), mode="bilinear", align_corners=False), (2, 2, 7, 5)),
        ("bilinear_down_ac", interp(size=(3, 2), mode="bilinear", align_corners=True),
         (2, 2, 7, 5)),
        ("bilinear_size_per_dim", nn.Upsample(size=(6, 9), mode="bilinear"), (1, 3, 4, 4)),
        ("bilinear_scale_per_dim", interp(scale_factor=(0.6, 2.5), mode="bilinear"),
         (1, 2, 5, 3)),
        ("bilinear_recompute", interp(scale_factor=1.7, mode="bilinear",
                                      recompute_scale_factor=True), (1, 2, 4, 5)),
        ("linear_1d", interp(scale_factor=2.5, mode="linear"), (2, 3, 5)),
        ("linear_1d_ac", interp(size=8, mode="linear", align_corners=True), (2, 3, 5)),
        ("linear_1d_same", interp(scale_factor=1.1, mode="linear"), (1, 2, 5)),
        ("nearest_2d_scale_kept", interp(scale_factor=(1.1, 2.05), mode="nearest"), (2, 3, 4, 10)),
    ]
    for i, (name, fn, shape) in enumerate(cases):
        seeded(70 + i)
        run_case(w, name, fn, [torch.randn(*shape)], seed=70 + i)
    seeded(90)
    run_case(w, "bilinear_f64", interp(scale_factor=1.5, mode="bilinear"),
             [torch.randn(1, 2, 3, 4, dtype=torch.float64)], seed=90)
    # nearest-exact (pixel centres) and area (adaptive average pooling to the output size)
    more = [
        ("nearest_exact_up", interp(scale_factor=1.7, mode="nearest-exact"), (1, 2, 5, 6)),
        ("nearest_exact_shrink", interp(size=(3, 4), mode="nearest-exact"), (1, 2, 5, 7)),
        ("nearest_exact_1d", interp(scale_factor=2.05, mode="nearest-exact"), (1, 2, 10)),
        ("nearest_exact_module", nn.Upsample(size=(7, 3), mode="nearest-exact"), (2, 2, 4, 5)),
        ("area_down", interp(size=(3, 2), mode="area"), (2, 2, 7, 5)),
        ("area_scale", interp(scale_factor=0.6, mode="area"), (1, 2, 5, 8)),
        ("area_up", nn.Upsample(size=(6, 9), mode="area"), (1, 2, 4, 4)),
        ("area_1d", interp(size=4, mode="area"), (2, 3, 10)),
    ]
    for i, (name, fn, shape) in enumerate(more):
        seeded(91 + i)
        run_case(w, name, fn, [torch.randn(*shape)], seed=91 + i)
    # float64 nearest-exact: PyTorch's CPU forward computes (o + 0.5) * (2 / 41) in double, which
    # reaches 1 at o = 20 (float arithmetic stays below 1 and reads index 0)
    w.put("nearest_exact_f64_41.in.0", torch.arange(2, dtype=torch.float64).view(1, 1, 2))
    w.put("nearest_exact_f64_41.out.0",
          F.interpolate(torch.arange(2, dtype=torch.float64).view(1, 1, 2), size=41,
                        mode="nearest-exact"))
    gen_upsample_cubic(w, run_case, seeded)
    gen_upsample_3d(w, run_case, seeded)


def gen_upsample_cubic(w, run_case, seeded):
    """The upsample family's trilinear, bicubic and antialias cases (part of "upsample")."""
    def interp(**kw):
        return lambda x: F.interpolate(x, **kw)

    f64 = torch.float64
    cases = [
        # trilinear: 5-d inputs, up / down, corners aligned or not, size or scale, per-dim values
        ("trilinear_up", interp(scale_factor=1.7, mode="trilinear"), (1, 2, 3, 4, 5)),
        ("trilinear_up_ac", interp(scale_factor=1.7, mode="trilinear", align_corners=True),
         (1, 2, 3, 4, 5)),
        ("trilinear_down", interp(size=(2, 3, 2), mode="trilinear"), (2, 2, 5, 6, 4)),
        ("trilinear_down_ac", interp(size=(2, 3, 2), mode="trilinear", align_corners=True),
         (2, 2, 5, 6, 4)),
        ("trilinear_scale_per_dim", interp(scale_factor=(0.6, 2.5, 1.3), mode="trilinear"),
         (1, 2, 5, 3, 4)),
        ("trilinear_recompute", interp(scale_factor=1.7, mode="trilinear",
                                       recompute_scale_factor=True), (1, 2, 3, 4, 5)),
        ("trilinear_module", nn.Upsample(size=(4, 6, 3), mode="trilinear"), (1, 2, 3, 4, 5)),
        # 5 * 1.1 = 5 along D: the copy rule there, resampled along H and W
        ("trilinear_same_d", interp(scale_factor=(1.1, 2.0, 0.5), mode="trilinear"),
         (1, 1, 5, 3, 6)),
        # bicubic: 4-d, taps read clamped at the borders
        ("bicubic_up", interp(scale_factor=1.7, mode="bicubic"), (1, 2, 4, 5)),
        ("bicubic_up_ac", interp(scale_factor=1.7, mode="bicubic", align_corners=True),
         (1, 2, 4, 5)),
        ("bicubic_down", interp(size=(3, 2), mode="bicubic"), (2, 2, 7, 5)),
        ("bicubic_down_ac", interp(size=(3, 2), mode="bicubic", align_corners=True), (2, 2, 7, 5)),
        ("bicubic_scale_per_dim", interp(scale_factor=(0.6, 2.5), mode="bicubic"), (1, 2, 5, 3)),
        ("bicubic_recompute", interp(scale_factor=1.7, mode="bicubic",
                                     recompute_scale_factor=True), (1, 2, 4, 5)),
        ("bicubic_module", nn.Upsample(size=(6, 9), mode="bicubic", align_corners=True),
         (1, 3, 4, 4)),
        ("bicubic_tiny", interp(size=(5, 4), mode="bicubic"), (1, 2, 1, 2)),
        # antialias: bilinear (triangle filter) and bicubic (Keys, A = -0.5), windows widened
        # by the downscale factor
        ("aa_bilinear_down", interp(size=(3, 2), mode="bilinear", antialias=True), (2, 2, 7, 5)),
        ("aa_bilinear_down_ac", interp(size=(3, 2), mode="bilinear", antialias=True,
                                       align_corners=True), (2, 2, 7, 5)),
        ("aa_bilinear_scale", interp(scale_factor=0.45, mode="bilinear", antialias=True),
         (1, 2, 9, 11)),
        ("aa_bilinear_up", interp(scale_factor=1.7, mode="bilinear", antialias=True),
         (1, 2, 4, 5)),
        ("aa_bicubic_down", interp(size=(3, 4), mode="bicubic", antialias=True), (2, 2, 10, 9)),
        ("aa_bicubic_down_ac", interp(size=(3, 4), mode="bicubic", antialias=True,
                                      align_corners=True), (2, 2, 10, 9)),
        ("aa_bicubic_scale_per_dim", interp(scale_factor=(0.3, 1.6), mode="bicubic",
                                            antialias=True), (1, 2, 12, 5)),
        ("aa_bicubic_up", interp(scale_factor=2, mode="bicubic", antialias=True), (1, 2, 3, 4)),
        ("aa_bicubic_recompute", interp(scale_factor=0.45, mode="bicubic", antialias=True,
                                        recompute_scale_factor=True), (1, 2, 9, 11)),
        # float64: the same arithmetic in double on both sides
        ("trilinear_f64", interp(scale_factor=1.5, mode="trilinear"), (1, 2, 3, 2, 4, f64)),
        ("bicubic_f64", interp(scale_factor=1.5, mode="bicubic"), (1, 2, 3, 4, f64)),
        ("bicubic_f64_ac", interp(size=(2, 3), mode="bicubic", align_corners=True),
         (1, 2, 5, 7, f64)),
        ("aa_bilinear_f64", interp(size=(3, 4), mode="bilinear", antialias=True),
         (1, 2, 8, 9, f64)),
        ("aa_bicubic_f64", interp(scale_factor=0.35, mode="bicubic", antialias=True),
         (1, 2, 12, 13, f64)),
    ]
    for i, (name, fn, shape) in enumerate(cases):
        seeded(200 + i)
        dtype = shape[-1] if isinstance(shape[-1], torch.dtype) else torch.float32
        dims = shape[:-1] if isinstance(shape[-1], torch.dtype) else shape
        run_case(w, name, fn, [torch.randn(*dims, dtype=dtype)], seed=200 + i)
    # bicubic with a given scale whose output size equals the input's (5 * 1.1 = 5): the forward
    # resamples at 1 / 1.1, but PyTorch 1.13's backward takes a copy shortcut, so only the
    # forward is stored (Shardlight's backward is the gradient of the forward, gradchecked)
    seeded(260)
    x = torch.randn(1, 2, 5, 6)
    w.put("bicubic_same_scale.in.0", x)
    w.put("bicubic_same_scale.out.0", F.interpolate(x, scale_factor=1.1, mode="bicubic"))


def gen_upsample_3d(w, run_case, seeded):
    """The upsample family's 5-d nearest, nearest-exact and area cases (PyTorch's
    upsample_nearest3d, _upsample_nearest_exact3d and adaptive_avg_pool3d); each case's call is
    repeated in tests/nn/test_upsample_3d.cpp next to its name."""
    def interp(**kw):
        return lambda x: F.interpolate(x, **kw)

    f64 = torch.float64
    cases = [
        ("nearest3d_2x", interp(scale_factor=2, mode="nearest"), (1, 2, 2, 3, 4)),
        ("nearest3d_scale_per_dim", interp(scale_factor=(1.7, 0.6, 2.5), mode="nearest"),
         (2, 2, 3, 5, 3)),
        ("nearest3d_shrink", interp(size=(2, 3, 2), mode="nearest"), (1, 2, 5, 6, 4)),
        ("nearest3d_recompute", interp(scale_factor=1.7, mode="nearest",
                                       recompute_scale_factor=True), (1, 2, 3, 4, 5)),
        ("nearest3d_module", nn.Upsample(size=(4, 6, 3), mode="nearest"), (1, 2, 3, 4, 5)),
        ("nearest_exact3d_up", interp(scale_factor=1.7, mode="nearest-exact"), (1, 2, 3, 4, 5)),
        ("nearest_exact3d_shrink", interp(size=(2, 3, 2), mode="nearest-exact"),
         (2, 2, 5, 6, 4)),
        ("nearest_exact3d_scale_per_dim",
         interp(scale_factor=(0.6, 2.5, 1.3), mode="nearest-exact"), (1, 2, 5, 3, 4)),
        ("nearest_exact3d_module", nn.Upsample(size=(5, 2, 7), mode="nearest-exact"),
         (1, 2, 3, 4, 5)),
        # area: adaptive_avg_pool3d, overlapping windows when the size does not divide
        ("area3d_down", interp(size=(2, 3, 2), mode="area"), (2, 2, 5, 7, 5)),
        ("area3d_scale", interp(scale_factor=0.6, mode="area"), (1, 2, 5, 8, 6)),
        ("area3d_up", interp(size=(4, 3, 5), mode="area"), (1, 2, 3, 2, 4)),
        ("area3d_module", nn.Upsample(size=(3, 3, 2), mode="area"), (1, 3, 4, 6, 5)),
        # float64
        ("nearest3d_f64", interp(scale_factor=(1.5, 0.7, 2.3), mode="nearest"),
         (1, 2, 3, 5, 4, f64)),
        ("nearest_exact3d_f64", interp(size=(5, 2, 7), mode="nearest-exact"),
         (1, 2, 3, 5, 4, f64)),
        ("area3d_f64", interp(size=(2, 3, 3), mode="area"), (1, 2, 5, 7, 4, f64)),
    ]
    for i, (name, fn, shape) in enumerate(cases):
        seeded(300 + i)
        dtype = shape[-1] if isinstance(shape[-1], torch.dtype) else torch.float32
        dims = shape[:-1] if isinstance(shape[-1], torch.dtype) else shape
        run_case(w, name, fn, [torch.randn(*dims, dtype=dtype)], seed=300 + i)
    # 5 * 1.1 = 5 along D: the forward still uses the given scale (reads 0, 0, 1, 2, 3), but
    # PyTorch 1.13's nearest backward copies where out == in and halves where out == 2 * in (so
    # its gradient is not that of its forward: the cases above avoid such sizes), so only the
    # forward is stored. C = 2: with C = 1 PyTorch picks its channels-last kernel, which copies
    # in the forward too (Note [Upsample source index]).
    seeded(330)
    x = torch.randn(1, 2, 5, 3, 2)
    w.put("nearest3d_scale_kept.in.0", x)
    w.put("nearest3d_scale_kept.out.0",
          F.interpolate(x, scale_factor=(1.1, 2.0, 1.5), mode="nearest"))

// Op cases of the convolutions (conv1d, conv2d, conv_transpose1d, conv_transpose2d) with every
// option: groups, stride, padding (explicit and "same" with an even kernel), dilation,
// output_padding (also past the stride, where dilation allows it), bias, 1-d forms and a
// non-contiguous input. The references are plain loops over the definitions written here (ref.h
// has no convolution): conv2d gathers, conv_transpose2d scatters, so the two are independent of
// each other and of the kernels (which compute both with the same GEMM machinery).
#include "core/op_cases.h"

namespace sl::testing {

namespace {

/// Options of one 2-d case; the 1-d cases use height 1 (kernel 1, stride 1, no padding).
struct ConvOpts {
  int64_t sh = 1, sw = 1;    // stride
  int64_t ph0 = 0, ph1 = 0;  // padding of H at the begin / end
  int64_t pw0 = 0, pw1 = 0;  // padding of W at the begin / end
  int64_t dh = 1, dw = 1;    // dilation
  int64_t oph = 0, opw = 0;  // output_padding (transposed only)
  int64_t groups = 1;
};

/// y[n, o, i, j] = b[o] + sum over the group's channels c and taps (p, q) of
/// x[n, c, i sh - ph0 + p dh, j sw - pw0 + q dw] w[o, c', p, q] (out-of-range taps are zero).
Ref conv2d_ref(const Ref& x, const Ref& w, const Ref* b, const ConvOpts& o) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t O = w.shape[0], Cg = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  const int64_t Og = O / o.groups;
  if (Cg * o.groups != C) throw std::logic_error("conv2d_ref: malformed case");
  const int64_t Ho = (H + o.ph0 + o.ph1 - o.dh * (kh - 1) - 1) / o.sh + 1;
  const int64_t Wo = (W + o.pw0 + o.pw1 - o.dw * (kw - 1) - 1) / o.sw + 1;
  Ref y({N, O, Ho, Wo});
  for_each_index(y.shape, [&](const Shape& idx) {
    const int64_t n = idx[0], oc = idx[1], i = idx[2], j = idx[3], grp = oc / Og;
    double acc = b ? b->v[static_cast<size_t>(oc)] : 0.0;
    for (int64_t c = 0; c < Cg; ++c)
      for (int64_t p = 0; p < kh; ++p)
        for (int64_t q = 0; q < kw; ++q) {
          const int64_t r = i * o.sh - o.ph0 + p * o.dh, s = j * o.sw - o.pw0 + q * o.dw;
          if (r < 0 || r >= H || s < 0 || s >= W) continue;
          acc += x.at({n, grp * Cg + c, r, s}) * w.at({oc, c, p, q});
        }
    y.at(idx) = acc;
  });
  return y;
}

/// Every x[n, ci, i, j] w[ci, oc, p, q] is added into y[n, grp Og + oc, i sh - ph0 + p dh,
/// j sw - pw0 + q dw] (dropped outside the output), then b; the output size is
/// (H - 1) sh - 2 ph0 + dh (kh - 1) + oph + 1.
Ref conv_transpose2d_ref(const Ref& x, const Ref& w, const Ref* b, const ConvOpts& o) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t Og = w.shape[1], kh = w.shape[2], kw = w.shape[3], Cg = C / o.groups;
  const int64_t Ho = (H - 1) * o.sh - 2 * o.ph0 + o.dh * (kh - 1) + o.oph + 1;
  const int64_t Wo = (W - 1) * o.sw - 2 * o.pw0 + o.dw * (kw - 1) + o.opw + 1;
  Ref y({N, Og * o.groups, Ho, Wo});
  for_each_index(x.shape, [&](const Shape& idx) {
    const int64_t n = idx[0], ci = idx[1], i = idx[2], j = idx[3], grp = ci / Cg;
    for (int64_t oc = 0; oc < Og; ++oc)
      for (int64_t p = 0; p < kh; ++p)
        for (int64_t q = 0; q < kw; ++q) {
          const int64_t r = i * o.sh - o.ph0 + p * o.dh, s = j * o.sw - o.pw0 + q * o.dw;
          if (r < 0 || r >= Ho || s < 0 || s >= Wo) continue;
          y.at({n, grp * Og + oc, r, s}) += x.at(idx) * w.at({ci, oc, p, q});
        }
  });
  if (b) {
    for_each_index(y.shape, [&](const Shape& idx) { y.at(idx) += b->v[size_t(idx[1])]; });
  }
  return y;
}

/// A 3-d [N, C, L] array as [N, C, 1, L] (and back).
Ref with_height(const Ref& a) {
  return Ref({a.shape[0], a.shape[1], 1, a.shape[2]}, a.v);
}
Ref without_height(const Ref& a) {
  return Ref({a.shape[0], a.shape[1], a.shape[3]}, a.v);
}

OpCase conv_case(const std::string& op, const std::string& what, std::vector<InputSpec> inputs,
                 std::function<Tensor(const TensorList&)> run,
                 std::function<Ref(const std::vector<Ref>&)> ref) {
  return OpCase{op,
                op + " " + what,
                std::move(inputs),
                kFloatDTypes,
                [run](const TensorList& x) -> TensorList { return {run(x)}; },
                [ref](const std::vector<Ref>& x) { return std::vector<Ref>{ref(x)}; }};
}

}  // namespace

std::vector<OpCase> conv_cases() {
  std::vector<OpCase> v;
  {
    ConvOpts o;
    o.sh = o.sw = 2;
    o.ph0 = o.ph1 = o.pw0 = o.pw1 = 1;
    o.dh = o.dw = 2;
    o.groups = 2;
    v.push_back(conv_case(
        "conv2d", "groups=2 stride 2 padding 1 dilation 2, bias",
        {in({2, 4, 7, 6}), in({6, 2, 3, 2}), in({6})},
        [](const TensorList& x) { return conv2d(x[0], x[1], x[2], 2, 1, 2, 2); },
        [o](const std::vector<Ref>& x) { return conv2d_ref(x[0], x[1], &x[2], o); }));
  }
  {
    ConvOpts o;  // per-dim options, no bias, a transposed-layout input
    o.sh = 1, o.sw = 2;
    o.ph0 = o.ph1 = 2;
    o.dh = 2, o.dw = 1;
    v.push_back(conv_case(
        "conv2d", "stride {1,2} padding {2,0} dilation {2,1}, transposed input",
        {in({1, 3, 5, 6}, Domain::any, Layout::transposed), in({2, 3, 3, 2})},
        [](const TensorList& x) {
          return conv2d(x[0], x[1], Tensor(), {1, 2}, {2, 0}, {2, 1});
        },
        [o](const std::vector<Ref>& x) { return conv2d_ref(x[0], x[1], nullptr, o); }));
  }
  {
    ConvOpts o;  // "same" with an even kernel: the odd extra row/column goes at the end
    o.ph0 = 0, o.ph1 = 1, o.pw0 = 1, o.pw1 = 2;
    v.push_back(conv_case(
        "conv2d", "padding same, kernel 2x4, bias", {in({2, 2, 4, 5}), in({3, 2, 2, 4}), in({3})},
        [](const TensorList& x) { return conv2d(x[0], x[1], x[2], 1, "same"); },
        [o](const std::vector<Ref>& x) { return conv2d_ref(x[0], x[1], &x[2], o); }));
  }
  {
    ConvOpts o;
    o.sw = 2, o.pw0 = o.pw1 = 1, o.dw = 2, o.groups = 2;
    v.push_back(conv_case(
        "conv1d", "groups=2 stride 2 padding 1 dilation 2, bias",
        {in({2, 4, 9}), in({6, 2, 3}), in({6})},
        [](const TensorList& x) { return conv1d(x[0], x[1], x[2], 2, 1, 2, 2); },
        [o](const std::vector<Ref>& x) {
          return without_height(conv2d_ref(with_height(x[0]), with_height(x[1]), &x[2], o));
        }));
  }
  {
    ConvOpts o;
    o.sh = o.sw = 2;
    o.ph0 = o.ph1 = o.pw0 = o.pw1 = 1;
    o.oph = o.opw = 1;
    o.dh = 2, o.dw = 1;
    o.groups = 2;
    v.push_back(conv_case(
        "conv_transpose2d", "groups=2 stride 2 padding 1 output_padding 1 dilation {2,1}, bias",
        {in({2, 4, 3, 3}), in({4, 3, 3, 2}), in({6})},
        [](const TensorList& x) {
          return conv_transpose2d(x[0], x[1], x[2], 2, 1, 1, 2, {2, 1});
        },
        [o](const std::vector<Ref>& x) { return conv_transpose2d_ref(x[0], x[1], &x[2], o); }));
  }
  {
    // output_padding 2 >= stride 1 (allowed by dilation 3): x is padded with two zero rows
    // inside the op (Note [Transposed convolution])
    ConvOpts o;
    o.sw = 2, o.oph = 2, o.opw = 1, o.dh = 3;
    v.push_back(conv_case(
        "conv_transpose2d", "output_padding {2,1} past stride {1,2}, dilation {3,1}",
        {in({1, 2, 3, 4}), in({2, 2, 2, 2})},
        [](const TensorList& x) {
          return conv_transpose2d(x[0], x[1], Tensor(), {1, 2}, 0, {2, 1}, 1, {3, 1});
        },
        [o](const std::vector<Ref>& x) { return conv_transpose2d_ref(x[0], x[1], nullptr, o); }));
  }
  {
    ConvOpts o;
    o.sw = 2, o.pw0 = o.pw1 = 1, o.opw = 1, o.dw = 2, o.groups = 2;
    v.push_back(conv_case(
        "conv_transpose1d", "groups=2 stride 2 padding 1 output_padding 1 dilation 2, bias",
        {in({2, 4, 5}), in({4, 3, 3}), in({6})},
        [](const TensorList& x) { return conv_transpose1d(x[0], x[1], x[2], 2, 1, 1, 2, 2); },
        [o](const std::vector<Ref>& x) {
          return without_height(
              conv_transpose2d_ref(with_height(x[0]), with_height(x[1]), &x[2], o));
        }));
  }
  return v;
}

}  // namespace sl::testing

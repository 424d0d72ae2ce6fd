// Edge cases where Shardlight disagreed with PyTorch 1.13, kept as regression tests. Every
// expected value is the one torch 1.13 (CPU) printed for the same input, or is derived by hand in
// a comment where PyTorch fails (and Shardlight deliberately gives a result or a clearer error).
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "core/ops/elementwise.h"
#include "support/testing.h"

using namespace sl;
using sl::testing::test_devices;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("logsumexp: a NaN anywhere in the slice gives NaN, inf and -inf as torch") {
  // torch.tensor(rows).logsumexp(1) = [nan, nan, nan, -inf, inf, inf] in f32, f64 and bf16
  // (its shift is amax, which propagates NaN); the first three were inf, -inf, -inf here.
  const std::vector<double> rows{kInf,  kNaN,  kNaN, kNaN, kNaN, -kInf,
                                 -kInf, -kInf, kInf, 1.0,  kInf, -kInf};
  const std::vector<double> want{kNaN, kNaN, kNaN, -kInf, kInf, kInf};
  for (Device dev : test_devices()) {
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      CAPTURE(dev);
      CAPTURE(dt);
      Tensor x = from_vector(rows, {6, 2}).to(dev, dt);
      Tensor expect = from_vector(want, {6}).to(dt);
      // exact: every expected value is NaN or +-inf
      SL_CHECK_CLOSE(x.logsumexp({1}).cpu(), expect, 0, 0);
      // the same slices as columns (the kernel's inner > 1 path)
      SL_CHECK_CLOSE(x.t().contiguous().logsumexp({0}).cpu(), expect, 0, 0);
    }
  }
}

TEST_CASE("norm(+-inf): a NaN result gives every element gradient 0, as torch's norm_backward") {
  // torch 1.13: x = [[2, nan, 1], [2, -2, 1]]; x.norm(inf, dim=1) = [nan, 2] and the gradient of
  // its sum is [[0, 0, 0], [0.5, -0.5, 0]]; x.norm(-inf, dim=1) = [nan, 1] with gradient
  // [[0, 0, 0], [0, 0, 1]]. (norm_backward masks |x| == norm or isnan(x), then multiplies by
  // sgn(x), which is 0 at NaN.) The NaN row's gradient was [nan, nan, nan] here. Exact values.
  for (double p : {kInf, -kInf}) {
    CAPTURE(p);
    Tensor x = tensor({2.0, kNaN, 1.0, 2.0, -2.0, 1.0}).view({2, 3}).requires_grad_();
    Tensor y = x.norm(p, {1});
    y.sum().backward();
    SL_CHECK_CLOSE(y, tensor({kNaN, p > 0 ? 2.0 : 1.0}), 0, 0);
    Tensor want =
        p > 0 ? tensor({0.0, 0.0, 0.0, 0.5, -0.5, 0.0}) : tensor({0.0, 0.0, 0.0, 0.0, 0.0, 1.0});
    SL_CHECK_CLOSE(x.grad(), want.view({2, 3}), 0, 0);
    // over every element: torch.tensor([2., nan, 1.]).norm(p) has gradient [0, 0, 0]
    Tensor v = tensor({2.0, kNaN, 1.0}).requires_grad_();
    v.norm(p).backward();
    SL_CHECK_CLOSE(v.grad(), tensor({0.0, 0.0, 0.0}), 0, 0);
  }
}

TEST_CASE("pad: negative reflect and replicate pads crop, as torch") {
  // torch 1.13, x = [[[1, 2, 3]]]: F.pad(x, (-1, 1), 'reflect') = [2, 3, 2], (-1, -1) = [2],
  // (2, -4) = [3], (-3, 2) = [2, 1]; F.pad(x, (-1, 2), 'replicate') = [2, 3, 3, 3], (2, -4) =
  // [1]. These threw "padding must be non-negative" here. Exact values.
  Tensor x = tensor({1.0f, 2.0f, 3.0f}).view({1, 1, 3});
  auto row = [](std::initializer_list<float> v) {
    return tensor(v).view({1, 1, static_cast<int64_t>(v.size())});
  };
  SL_CHECK_CLOSE(pad(x, {-1, 1}, "reflect"), row({2, 3, 2}), 0, 0);
  SL_CHECK_CLOSE(pad(x, {-1, -1}, "reflect"), row({2}), 0, 0);
  SL_CHECK_CLOSE(pad(x, {2, -4}, "reflect"), row({3}), 0, 0);
  SL_CHECK_CLOSE(pad(x, {-3, 2}, "reflect"), row({2, 1}), 0, 0);
  SL_CHECK_CLOSE(pad(x, {-1, 2}, "replicate"), row({2, 3, 3, 3}), 0, 0);
  SL_CHECK_CLOSE(pad(x, {2, -4}, "replicate"), row({1}), 0, 0);
  // two dims: F.pad(arange(9).view(1, 1, 3, 3), (-1, 1, 1, -1), 'reflect') and
  // (-1, 2, -2, 1) 'replicate'
  Tensor g = arange(9).to(DType::f32).view({1, 1, 3, 3});
  SL_CHECK_CLOSE(pad(g, {-1, 1, 1, -1}, "reflect"),
                 tensor({4.0f, 5.0f, 4.0f, 1.0f, 2.0f, 1.0f, 4.0f, 5.0f, 4.0f}).view({1, 1, 3, 3}),
                 0, 0);
  SL_CHECK_CLOSE(pad(g, {-1, 2, -2, 1}, "replicate"),
                 tensor({7.0f, 8.0f, 8.0f, 8.0f, 7.0f, 8.0f, 8.0f, 8.0f}).view({1, 1, 2, 4}), 0, 0);
  // torch: "input (W: 3) is too small. Calculated output W: 0" for both modes
  SL_CHECK_THROWS(pad(x, {-2, -1}, "replicate"), ValueError,
                  "pad: replicate padding (-2, -1) of dim 2 (size 3) leaves 0 elements");
  SL_CHECK_THROWS(pad(x, {-2, -1}, "reflect"), ValueError,
                  "pad: reflect padding (-2, -1) of dim 2 (size 3) leaves 0 elements");
  SL_CHECK_THROWS(pad(x, {3, 0}, "reflect"), ValueError,
                  "reflect padding (3, 0) must be less than the size 3");
  // the gradient of a cropping pad, against f64 central differences
  for (const char* mode : {"reflect", "replicate"}) {
    CAPTURE(mode);
    Tensor w = randn({2, 2, 4}, {.dtype = DType::f64}).requires_grad_();
    CHECK(gradcheck(
        [mode](const TensorList& in) {
          return pad(in[0], {-1, 2, 1, -1}, mode);
        },
        {w}));
  }
}

TEST_CASE("pad: constant padding whose kept range lies past the output fills it, and backward") {
  // Shardlight's rule, derived by hand: output j holds input j - l where 0 <= j - l < n.
  // [1, 2] padded by (5, -4): 2 + 5 - 4 = 3 outputs j = 0..2 read inputs -5..-3, none of them,
  // so all three are the fill value. (torch 1.13 raises from an inner narrow here; so did we,
  // naming narrow, and pad(x, (-5, 4))'s backward, which pads the gradient by (5, -4), threw too.)
  SL_CHECK_CLOSE(pad(tensor({1.0f, 2.0f}), {5, -4}, "constant", 7), tensor({7.0f, 7.0f, 7.0f}), 0,
                 0);
  // [1, 2, 3] padded by (-5, 4): 2 outputs reading inputs 5..6, none: the fill value; no input
  // element reaches the output, so its gradient is 0.
  Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
  Tensor y = pad(x, {-5, 4}, "constant", 9);
  SL_CHECK_CLOSE(y, tensor({9.0, 9.0}), 0, 0);
  y.sum().backward();
  SL_CHECK_CLOSE(x.grad(), tensor({0.0, 0.0, 0.0}), 0, 0);
  Tensor w = randn({3, 4}, {.dtype = DType::f64}).requires_grad_();
  CHECK(gradcheck([](const TensorList& in) { return pad(in[0], {2, -3, -1, 2}); }, {w}));
}

TEST_CASE("sort and argsort accept bool (false before true), as torch; topk still refuses it") {
  // torch 1.13, b = [[T, F, T, F], [F, F, T, T]]: b.sort(1, stable=True) gives values
  // [[F, F, T, T], [F, F, T, T]] and indices [[1, 3, 0, 2], [0, 1, 2, 3]]; descending, indices
  // [[0, 2, 1, 3], [2, 3, 0, 1]]; along dim 0, values [[F, F, T, F], [T, F, T, T]] and indices
  // [[1, 0, 0, 0], [0, 1, 1, 1]]. (Shardlight's sort is always stable.) This threw DTypeError.
  for (Device dev : test_devices()) {
    CAPTURE(dev);
    Tensor b = from_vector(std::vector<int64_t>{1, 0, 1, 0, 0, 0, 1, 1}, {2, 4}).to(dev, DType::b8);
    auto [v, i] = sort(b, 1);
    CHECK(v.dtype() == DType::b8);
    CHECK(v.cpu().to(DType::i64).to_vector<int64_t>() ==
          std::vector<int64_t>{0, 0, 1, 1, 0, 0, 1, 1});
    CHECK(i.cpu().to_vector<int64_t>() == std::vector<int64_t>{1, 3, 0, 2, 0, 1, 2, 3});
    CHECK(argsort(b, 1, true).cpu().to_vector<int64_t>() ==
          std::vector<int64_t>{0, 2, 1, 3, 2, 3, 0, 1});
    auto [v0, i0] = sort(b, 0);
    CHECK(v0.cpu().to(DType::i64).to_vector<int64_t>() ==
          std::vector<int64_t>{0, 0, 1, 0, 1, 0, 1, 1});
    CHECK(i0.cpu().to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 0, 0, 1, 1, 1});
  }
  // torch: "topk_cpu" not implemented for 'Bool'
  SL_CHECK_THROWS(topk(ones({2}).to(DType::b8), 1), DTypeError, "topk");
}

TEST_CASE("gather and scatter: 0-d operands count as 1-d and an empty index is not shape-checked") {
  // torch 1.13: torch.gather(tensor(5.), 0, tensor([0, 0])) = [5., 5.];
  // torch.gather(tensor([1., 2.]), 0, tensor(1)) = tensor(2.) (0-d);
  // torch.gather(ones(2, 3), 0, zeros(0, long)) = tensor([]) and with index zeros(0, 5) an empty
  // [0, 5]; ones(2, 3).scatter(0, zeros(0, long), ones(1)) = ones(2, 3) unchanged. Each of these
  // threw ShapeError here. Exact values.
  auto i64 = [](std::vector<int64_t> v, Shape s) { return from_vector(v, s); };
  auto i0 = [](int64_t v) { return scalar_tensor(v, {.dtype = DType::i64}); };  // 0-d index
  SL_CHECK_CLOSE(gather(scalar_tensor(5.0f), 0, i64({0, 0}, {2})), tensor({5.0f, 5.0f}), 0, 0);
  Tensor g0 = gather(tensor({1.0f, 2.0f}), 0, i0(1));
  CHECK(g0.dim() == 0);
  CHECK(g0.item<float>() == 2.0f);
  CHECK(gather(ones({2, 3}), 0, i64({}, {0})).sizes() == Shape{0});
  CHECK(gather(ones({2, 3}), 0, i64({}, {0, 5})).sizes() == Shape{0, 5});
  SL_CHECK_CLOSE(scatter(ones({2, 3}), 0, i64({}, {0}), ones({1})), ones({2, 3}), 0, 0);
  // torch.zeros(()).scatter(0, tensor([0]), tensor([3.])) = tensor(3.)
  SL_CHECK_CLOSE(scatter(zeros({}), 0, i64({0}, {1}), tensor({3.0f})), scalar_tensor(3.0f), 0, 0);
  // torch.zeros(3).scatter_add(0, tensor(1), tensor(2.)) = [0, 2, 0]
  SL_CHECK_CLOSE(scatter_add(zeros({3}), 0, i0(1), scalar_tensor(2.0f)), tensor({0.0f, 2.0f, 0.0f}),
                 0, 0);
  // the index dtype and values are still checked (torch raises for both too)
  SL_CHECK_THROWS(gather(ones({2}), 0, zeros({0}, {.dtype = DType::f32})), DTypeError,
                  "gather: index must be int64 or int32");
  SL_CHECK_THROWS(gather(scalar_tensor(5.0f), 0, i64({0, 1}, {2})), IndexError,
                  "gather: index 1 is out of range for dim 0 of size 1");
  // gradients across the 0-d / 1-d mix, against f64 central differences
  Tensor x0 = scalar_tensor(1.5, {.dtype = DType::f64}).requires_grad_();
  CHECK(gradcheck(
      [&](const TensorList& in) {
        return gather(in[0], 0, i64({0, 0, 0}, {3}));
      },
      {x0}));
  Tensor x1 = randn({4}, {.dtype = DType::f64}).requires_grad_();
  CHECK(gradcheck([&](const TensorList& in) { return gather(in[0], 0, i0(2)); }, {x1}));
  Tensor s0 = scalar_tensor(0.5, {.dtype = DType::f64}).requires_grad_();
  CHECK(gradcheck([&](const TensorList& in) { return scatter(in[0], 0, i64({1}, {1}), in[1]); },
                  {x1, s0}));
}

TEST_CASE("index_add: a 0-d source counts as [1], forward and backward, as torch") {
  // torch 1.13: zeros(3).index_add(0, tensor(1), tensor(2.)) = [0, 2, 0], and the same with a
  // [1] index; a 0-d source for two indices, or for a [2, 3] self, is refused. Exact values (one
  // addition to zero).
  const TensorOptions i64opt{.dtype = DType::i64};
  for (Device dev : test_devices()) {
    CAPTURE(dev);
    Tensor z = zeros({3}).to(dev);
    Tensor two = scalar_tensor(2.0f).to(dev);
    const Tensor want = tensor({0.0f, 2.0f, 0.0f});
    SL_CHECK_CLOSE(index_add(z, 0, scalar_tensor(1, i64opt).to(dev), two).cpu(), want, 0, 0);
    SL_CHECK_CLOSE(index_add(z, 0, zeros({1}, i64opt).add(1).to(dev), two).cpu(), want, 0, 0);
    SL_CHECK_THROWS(index_add(z, 0, zeros({2}, i64opt).to(dev), two), ShapeError,
                    "index_add: source of shape [] does not match [2]");
    SL_CHECK_THROWS(
        index_add(zeros({2, 3}).to(dev), 0, scalar_tensor(1, i64opt).to(dev), ones({3}).to(dev)),
        ShapeError, "index_add: source of shape [3] does not match [1, 3]");
  }
  // The 0-d source's gradient is 0-d: alpha times the output gradient at the index (and f64
  // central differences through a product, so that the gradient reaching it is not constant).
  Tensor self = randn({3}, {.dtype = DType::f64}).requires_grad_();
  Tensor src = scalar_tensor(0.5, {.dtype = DType::f64}).requires_grad_();
  Tensor idx = scalar_tensor(2, i64opt);
  CHECK(gradcheck(
      [&](const TensorList& in) { return mul(index_add(in[0], 0, idx, in[1], 3.0), in[0]); },
      {self, src}));
  index_add(self, 0, idx, src, 3.0).sum().backward();
  CHECK(src.grad().dim() == 0);
  CHECK(src.grad().item<double>() == 3.0);
}

TEST_CASE("masked_fill: a mask with more dims broadcasts self out of place; in place refuses") {
  // torch 1.13: torch.masked_fill(tensor([1., 2.]), tensor([[T, F], [F, F]]), 5.) is
  // [[5, 2], [1, 2]]; backward of [[1, 2], [3, 4]] gives a.grad [3, 6] (the unmasked entries of
  // each column summed). [[1.], [2.]].masked_fill([[T, F, T]], -1.) is [[-1, 1, -1], [-1, 2, -1]]
  // with a.grad [[2], [5]] for [[1, 2, 3], [4, 5, 6]] in; tensor(3.).masked_fill([T, F], 0.) is
  // [0., 3.]; tensor([1, 2]).masked_fill([[T, F], [F, T]], 9) is int64 [[9, 2], [1, 9]]. Each of
  // these threw ShapeError here. Exact values.
  const TensorOptions f64{.dtype = DType::f64};
  auto mask = [](std::vector<int64_t> v, Shape s) { return from_vector(v, s).to(DType::b8); };
  for (Device dev : test_devices()) {
    CAPTURE(dev);
    Tensor a = tensor({1.0, 2.0}).to(dev).requires_grad_();
    Tensor o = a.masked_fill(mask({1, 0, 0, 0}, {2, 2}).to(dev), 5.0);
    SL_CHECK_CLOSE(o.cpu(), tensor({5.0, 2.0, 1.0, 2.0}).view({2, 2}), 0, 0);
    o.backward(tensor({1.0, 2.0, 3.0, 4.0}).view({2, 2}).to(dev));
    CHECK(a.grad().sizes() == Shape{2});
    SL_CHECK_CLOSE(a.grad().cpu(), tensor({3.0, 6.0}), 0, 0);
    Tensor c = tensor({1.0, 2.0}).view({2, 1}).to(dev).requires_grad_();
    Tensor oc = masked_fill(c, mask({1, 0, 1}, {1, 3}).to(dev), -1.0);
    SL_CHECK_CLOSE(oc.cpu(), tensor({-1.0, 1.0, -1.0, -1.0, 2.0, -1.0}).view({2, 3}), 0, 0);
    oc.backward(tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}).view({2, 3}).to(dev));
    SL_CHECK_CLOSE(c.grad().cpu(), tensor({2.0, 5.0}).view({2, 1}), 0, 0);
    SL_CHECK_CLOSE(
        scalar_tensor(3.0, f64).to(dev).masked_fill(mask({1, 0}, {2}).to(dev), 0.0).cpu(),
        tensor({0.0, 3.0}), 0, 0);
    Tensor oi = arange(1, 3).to(dev).masked_fill(mask({1, 0, 0, 1}, {2, 2}).to(dev), 9);
    CHECK(oi.dtype() == DType::i64);
    CHECK(oi.cpu().to_vector<int64_t>() == std::vector<int64_t>{9, 2, 1, 9});
    // in place, self cannot grow: torch raises "output with shape [2] doesn't match the
    // broadcast shape [2, 2]"; self is left as it was
    Tensor s = ones({2}).to(dev);
    SL_CHECK_THROWS(s.masked_fill_(mask({1, 0, 0, 0}, {2, 2}).to(dev), 0), ShapeError,
                    "masked_fill_: output of shape [2] does not match the broadcast shape [2, 2]");
    SL_CHECK_THROWS(
        ones({2, 1}).to(dev).masked_fill_(mask({1, 0, 1}, {3}).to(dev), 0), ShapeError,
        "masked_fill_: output of shape [2, 1] does not match the broadcast shape [2, 3]");
    SL_CHECK_CLOSE(s.cpu(), ones({2}), 0, 0);
    // a mask that fits self still works in place: ones(2, 3).masked_fill_([T, F, T], 0)
    Tensor t = ones({2, 3}).to(dev);
    t.masked_fill_(mask({1, 0, 1}, {3}).to(dev), 0);
    SL_CHECK_CLOSE(t.cpu(), tensor({0.0f, 1.0f, 0.0f, 0.0f, 1.0f, 0.0f}).view({2, 3}), 0, 0);
    // shapes that do not broadcast at all: torch raises "The size of tensor a (2) must match ..."
    SL_CHECK_THROWS(masked_fill(ones({3}).to(dev), mask({1, 0, 1, 0}, {2, 2}).to(dev), 0),
                    ShapeError, "masked_fill: shapes [3] and [2, 2] do not broadcast");
  }
  // self's gradient sums over the dims the mask added, against f64 central differences
  Tensor x = randn({3}, f64).requires_grad_();
  Tensor m = mask({1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0}, {2, 2, 3});
  CHECK(gradcheck([&](const TensorList& in) { return masked_fill(in[0], m, 0.5); }, {x}));
  Tensor y = randn({2, 1}, f64).requires_grad_();
  CHECK(
      gradcheck([&](const TensorList& in) { return in[0].masked_fill(m.select(0, 1), 0.5); }, {y}));
}

TEST_CASE("topk of a 0-d tensor: its element for k = 0 and k = 1, an IndexError naming topk else") {
  // torch 1.13: torch.topk(tensor(3.), k) for k in (0, 1), dim None, 0 or -1, largest either
  // way, gives values tensor(3.) and indices tensor(0), both 0-d (k = 0 too: PyTorch copies the
  // element whatever k); the values' gradient reaches x (x.grad = tensor(1.)). k = 2 and k = -1
  // raise "selected index k out of range", dim 1 or -2 "Dimension out of range (expected to be
  // in range of [-1, 0], but got 1)". k = 0 threw a ShapeError naming view here.
  for (Device dev : test_devices()) {
    CAPTURE(dev);
    for (int64_t k : {0, 1}) {
      for (int64_t dim : {0, -1}) {
        for (bool largest : {true, false}) {
          CAPTURE(k);
          CAPTURE(dim);
          Tensor x = scalar_tensor(3.0f).to(dev).requires_grad_();
          auto [v, i] = topk(x, k, dim, largest);
          CHECK(v.dim() == 0);
          CHECK(i.dim() == 0);
          CHECK(i.dtype() == DType::i64);
          CHECK(v.cpu().item<float>() == 3.0f);
          CHECK(i.cpu().item<int64_t>() == 0);
          v.backward();
          CHECK(x.grad().dim() == 0);
          CHECK(x.grad().cpu().item<float>() == 1.0f);
        }
      }
    }
    // torch.topk(tensor(7), 1) = (tensor(7), tensor(0)); a NaN is kept
    CHECK(topk(scalar_tensor(7, {.dtype = DType::i64}).to(dev), 1).first.cpu().item<int64_t>() ==
          7);
    CHECK(std::isnan(topk(scalar_tensor(kNaN).to(dev), 0).first.cpu().item<double>()));
    Tensor s = scalar_tensor(3.0f).to(dev);
    SL_CHECK_THROWS(topk(s, 2), IndexError,
                    "topk: k (2) is out of range for dim -1 of size 1 (expected 0 <= k <= 1)");
    SL_CHECK_THROWS(topk(s, -1, 0), IndexError, "topk: k (-1) is out of range for dim 0");
    SL_CHECK_THROWS(topk(s, 0, 1), IndexError, "topk: dim 1 out of range");
    SL_CHECK_THROWS(topk(s, 1, -2), IndexError, "topk: dim -2 out of range");
  }
  // a 1-d tensor with k = 0 is still empty (torch.topk(tensor([3.]), 0) gives shape [0])
  CHECK(topk(tensor({3.0f}), 0).first.sizes() == Shape{0});
}

// Note [Bool inputs] (core/ops/elementwise.cpp). Each row: what PyTorch 1.13 gives for the op on
// b = torch.tensor([True, False]) (/usr/bin/python3: print(r.dtype, r.tolist()) or the error):
// its result dtype and values, or a refusal (DTypeError here, naming the op and bool). Before,
// square and square_ gave bool, and abs, relu, floor/ceil/round, pow of two bools and the in
// place forms kept bool while gelu, silu and leaky_relu promoted to float32.
TEST_CASE("unary ops and pow on bool tensors: the result dtype or refusal of PyTorch 1.13") {
  struct Row {
    const char* op;
    std::function<Tensor(const Tensor&)> fn;
    std::optional<DType> dtype;  // nullopt: refused
    std::vector<double> values;
    const char* refusal = "";  // when refused: a part of the message
  };
  const DType f32 = DType::f32, i64 = DType::i64, b8 = DType::b8;
  auto inplace = [](void (*f)(Tensor&)) {
    return [f](const Tensor& t) {
      Tensor c = t.clone();
      f(c);
      return c;
    };
  };
  const Tensor b_true = scalar_tensor(true, {.dtype = b8});
  const std::vector<Row> rows = {
      // refused: "abs_cpu" not implemented for 'Bool', "Boolean inputs not supported for relu"
      {"neg", [](const Tensor& t) { return neg(t); }, {}, {}, "neg: negation is not supported"},
      {"abs", [](const Tensor& t) { return abs(t); }, {}, {}, "abs: not supported for bool"},
      {"relu", [](const Tensor& t) { return relu(t); }, {}, {}, "relu: not supported for bool"},
      {"gelu", [](const Tensor& t) { return gelu(t); }, {}, {}, "gelu: not supported for bool"},
      {"gelu tanh", [](const Tensor& t) { return gelu(t, "tanh"); }, {}, {}, "gelu: not supported"},
      {"silu", [](const Tensor& t) { return silu(t); }, {}, {}, "silu: not supported for bool"},
      {"floor", [](const Tensor& t) { return floor(t); }, {}, {}, "floor: not supported for bool"},
      {"ceil", [](const Tensor& t) { return ceil(t); }, {}, {}, "ceil: not supported for bool"},
      {"round", [](const Tensor& t) { return round(t); }, {}, {}, "round: not supported for bool"},
      {"hardtanh", [](const Tensor& t) { return hardtanh(t); }, {}, {}, "hardtanh: not supported"},
      {"leaky_relu", [](const Tensor& t) { return leaky_relu(t); }, {}, {}, "leaky_relu: not"},
      // square is pow(x, 2): int64, as bool ^ int
      {"square", [](const Tensor& t) { return square(t); }, i64, {1, 0}},
      {"sign", [](const Tensor& t) { return sign(t); }, b8, {1, 0}},
      {"exp", [](const Tensor& t) { return exp(t); }, f32, {2.7182817459106445, 1}},
      {"log", [](const Tensor& t) { return log(t); }, f32, {0, -kInf}},
      {"log1p", [](const Tensor& t) { return log1p(t); }, f32, {0.6931471824645996, 0}},
      {"expm1", [](const Tensor& t) { return expm1(t); }, f32, {1.718281865119934, 0}},
      {"sqrt", [](const Tensor& t) { return sqrt(t); }, f32, {1, 0}},
      {"rsqrt", [](const Tensor& t) { return rsqrt(t); }, f32, {1, kInf}},
      {"reciprocal", [](const Tensor& t) { return reciprocal(t); }, f32, {1, kInf}},
      {"tanh", [](const Tensor& t) { return tanh(t); }, f32, {0.7615941762924194, 0}},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }, f32, {0.7310585975646973, 0.5}},
      {"sin", [](const Tensor& t) { return sin(t); }, f32, {0.8414709568023682, 0}},
      {"cos", [](const Tensor& t) { return cos(t); }, f32, {0.5403023362159729, 1}},
      {"erf", [](const Tensor& t) { return erf(t); }, f32, {0.8427007794380188, 0}},
      // pow: the computation type decides; bool ^ bool is refused ("pow" not implemented)
      {"pow(b, 2)", [](const Tensor& t) { return pow(t, 2); }, i64, {1, 0}},
      {"pow(b, 2.0)", [](const Tensor& t) { return pow(t, 2.0); }, f32, {1, 0}},
      {"pow(b, 0)", [](const Tensor& t) { return pow(t, 0); }, i64, {1, 1}},
      {"pow(b, [1, 2])", [](const Tensor& t) { return pow(t, arange(1, 3)); }, i64, {1, 0}},
      {"pow([1, 2], b)", [](const Tensor& t) { return pow(arange(1, 3), t); }, i64, {1, 1}},
      {"pow([1., 2.], b)",
       [](const Tensor& t) {
         return pow(tensor({1.f, 2.f}), t);
       },
       f32,
       {1, 1}},
      {"pow(2, b)", [](const Tensor& t) { return pow(Scalar(2), t); }, i64, {2, 1}},
      {"pow(2.0, b)", [](const Tensor& t) { return pow(Scalar(2.0), t); }, f32, {2, 1}},
      {"pow(b, True)", [](const Tensor& t) { return pow(t, true); }, {}, {}, "pow: not supported"},
      {"pow(b, b)", [](const Tensor& t) { return pow(t, t); }, {}, {}, "pow: not supported"},
      {"pow(True, b)", [](const Tensor& t) { return pow(Scalar(true), t); }, {}, {}, "pow: not"},
      {"pow(b, tensor(True))", [&](const Tensor& t) { return pow(t, b_true); }, {}, {}, "pow: not"},
      {"pow(tensor(True), b)", [&](const Tensor& t) { return pow(b_true, t); }, {}, {}, "pow: not"},
      {"pow(b, -1)", [](const Tensor& t) { return pow(t, -1); }, {}, {}, "pow: integers to neg"},
      // in place: "Found dtype Bool but expected Long", "result type Float can't be cast ..."
      {"square_", inplace([](Tensor& t) { t.square_(); }), {}, {}, "square_: result type int64"},
      {"abs_", inplace([](Tensor& t) { t.abs_(); }), {}, {}, "abs_: not supported for bool"},
      {"relu_", inplace([](Tensor& t) { t.relu_(); }), {}, {}, "relu_: not supported for bool"},
      {"floor_", inplace([](Tensor& t) { t.floor_(); }), {}, {}, "floor_: not supported for bool"},
      {"neg_", inplace([](Tensor& t) { t.neg_(); }), {}, {}, "neg_: negation is not supported"},
      {"exp_", inplace([](Tensor& t) { t.exp_(); }), {}, {}, "exp_: result type float"},
      {"pow_(2)", inplace([](Tensor& t) { t.pow_(2); }), {}, {}, "pow_: result type int64"},
      {"pow_(True)", inplace([](Tensor& t) { t.pow_(true); }), {}, {}, "pow_: not supported"},
      {"pow_(b)", inplace([](Tensor& t) { t.pow_(t.clone()); }), {}, {}, "pow_: not supported"},
      {"sign_", inplace([](Tensor& t) { t.sign_(); }), b8, {1, 0}},
  };
  const Tensor b = from_vector(std::vector<int64_t>{1, 0}, {2}).to(b8);
  for (const Row& r : rows) {
    const std::string op = r.op;
    CAPTURE(op);
    if (!r.dtype) {
      SL_CHECK_THROWS(r.fn(b), DTypeError, r.refusal);
      continue;
    }
    Tensor out = r.fn(b);
    CHECK(out.dtype() == *r.dtype);
    // float32 transcendental values within a few ulps of PyTorch's (both round in float32)
    SL_CHECK_CLOSE(out.to(DType::f64), from_vector(r.values), 1e-6, 0);
  }
  // the refusals name bool in the message too
  SL_CHECK_THROWS(abs(b), DTypeError, "abs: not supported for bool tensors");
  SL_CHECK_THROWS(pow(b, b), DTypeError, "pow: not supported for bool tensors");
}

// What PyTorch 1.13 gives for each unary op on x = torch.tensor([-2, 0, 3], dtype=dt), dt int64
// and int32 (/usr/bin/python3: print(r.dtype, r.tolist()) or the error): the result dtype
// ("same" = x's) and values, or a refusal (DTypeError here, naming the op and the dtype). gelu,
// silu and leaky_relu are "not implemented for 'Long'" there; they promoted to float32 here, and
// hardtanh gave float32 where PyTorch keeps the integer dtype.
TEST_CASE("unary ops on integer tensors: the result dtype or refusal of PyTorch 1.13") {
  struct Row {
    const char* op;
    std::function<Tensor(const Tensor&)> fn;
    std::optional<DType> dtype;  // nullopt: refused; b8/f32 fixed; i64 stands for x's own dtype
    std::vector<double> values;
    const char* refusal = "";  // when refused: a part of the message
  };
  const DType f32 = DType::f32, same = DType::i64, b8 = DType::b8;
  auto inplace = [](void (*f)(Tensor&)) {
    return [f](const Tensor& t) {
      Tensor c = t.clone();
      f(c);
      return c;
    };
  };
  const std::vector<Row> rows = {
      {"gelu", [](const Tensor& t) { return gelu(t); }, {}, {}, "gelu: not implemented for"},
      {"gelu tanh", [](const Tensor& t) { return gelu(t, "tanh"); }, {}, {}, "gelu: not impl"},
      {"silu", [](const Tensor& t) { return silu(t); }, {}, {}, "silu: not implemented for"},
      {"leaky_relu", [](const Tensor& t) { return leaky_relu(t); }, {}, {}, "leaky_relu: not imp"},
      {"gelu_",
       inplace([](Tensor& t) { ops::unary_(UnaryOp::gelu, t); }),
       {},
       {},
       "gelu_: not imp"},
      {"gelu_tanh_",
       inplace([](Tensor& t) { ops::unary_(UnaryOp::gelu_tanh, t); }),
       {},
       {},
       "gelu_:"},
      {"softmax", [](const Tensor& t) { return softmax(t, 0); }, {}, {}, "softmax"},
      {"log_softmax", [](const Tensor& t) { return log_softmax(t, 0); }, {}, {}, "log_softmax"},
      {"neg", [](const Tensor& t) { return neg(t); }, same, {2, 0, -3}},
      {"abs", [](const Tensor& t) { return abs(t); }, same, {2, 0, 3}},
      {"square", [](const Tensor& t) { return square(t); }, same, {4, 0, 9}},
      {"relu", [](const Tensor& t) { return relu(t); }, same, {0, 0, 3}},
      {"sign", [](const Tensor& t) { return sign(t); }, same, {-1, 0, 1}},
      {"floor", [](const Tensor& t) { return floor(t); }, same, {-2, 0, 3}},
      {"ceil", [](const Tensor& t) { return ceil(t); }, same, {-2, 0, 3}},
      {"round", [](const Tensor& t) { return round(t); }, same, {-2, 0, 3}},
      {"hardtanh", [](const Tensor& t) { return hardtanh(t); }, same, {-1, 0, 1}},
      {"hardtanh(-0.5, 2.5)",
       [](const Tensor& t) { return hardtanh(t, -0.5, 2.5); },
       same,
       {0, 0, 2}},
      {"relu_", inplace([](Tensor& t) { t.relu_(); }), same, {0, 0, 3}},
      {"abs_", inplace([](Tensor& t) { t.abs_(); }), same, {2, 0, 3}},
      {"floor_", inplace([](Tensor& t) { t.floor_(); }), same, {-2, 0, 3}},
      {"logical_not", [](const Tensor& t) { return logical_not(t); }, b8, {0, 1, 0}},
      {"isnan", [](const Tensor& t) { return isnan(t); }, b8, {0, 0, 0}},
      {"isinf", [](const Tensor& t) { return isinf(t); }, b8, {0, 0, 0}},
      {"isfinite", [](const Tensor& t) { return isfinite(t); }, b8, {1, 1, 1}},
      {"exp",
       [](const Tensor& t) { return exp(t); },
       f32,
       {0.1353352814912796, 1.0, 20.08553695678711}},
      {"log", [](const Tensor& t) { return log(t); }, f32, {kNaN, -kInf, 1.0986123085021973}},
      {"log1p", [](const Tensor& t) { return log1p(t); }, f32, {kNaN, 0.0, 1.3862943649291992}},
      {"expm1",
       [](const Tensor& t) { return expm1(t); },
       f32,
       {-0.8646647334098816, 0.0, 19.08553695678711}},
      {"sqrt", [](const Tensor& t) { return sqrt(t); }, f32, {kNaN, 0.0, 1.7320507764816284}},
      {"rsqrt", [](const Tensor& t) { return rsqrt(t); }, f32, {kNaN, kInf, 0.5773502588272095}},
      {"reciprocal",
       [](const Tensor& t) { return reciprocal(t); },
       f32,
       {-0.5, kInf, 0.3333333432674408}},
      {"tanh",
       [](const Tensor& t) { return tanh(t); },
       f32,
       {-0.9640275835990906, 0.0, 0.9950547814369202}},
      {"sigmoid",
       [](const Tensor& t) { return sigmoid(t); },
       f32,
       {0.11920291930437088, 0.5, 0.9525741338729858}},
      {"sin",
       [](const Tensor& t) { return sin(t); },
       f32,
       {-0.9092974066734314, 0.0, 0.14112000167369843}},
      {"cos",
       [](const Tensor& t) { return cos(t); },
       f32,
       {-0.416146844625473, 1.0, -0.9899924993515015}},
      {"erf",
       [](const Tensor& t) { return erf(t); },
       f32,
       {-0.9953222870826721, 0.0, 0.9999778866767883}},
  };
  for (Device dev : test_devices()) {
    for (DType dt : {DType::i64, DType::i32}) {
      const Tensor x = from_vector(std::vector<int64_t>{-2, 0, 3}, {3}).to(dev, dt);
      for (const Row& r : rows) {
        const std::string op = r.op;
        CAPTURE(dev);
        CAPTURE(dt);
        CAPTURE(op);
        if (!r.dtype) {
          SL_CHECK_THROWS(r.fn(x), DTypeError, r.refusal);
          continue;
        }
        Tensor out = r.fn(x);
        CHECK(out.dtype() == (*r.dtype == same ? dt : *r.dtype));
        // float32 transcendental values within a few ulps of PyTorch's (both round in float32)
        SL_CHECK_CLOSE(out.cpu().to(DType::f64), from_vector(r.values), 1e-6, 0);
      }
    }
  }
  // the refusals name the dtype, and gelu(x, "tanh") names gelu (not the kernel's gelu_tanh)
  const Tensor i = from_vector(std::vector<int64_t>{1, 2}, {2});
  SL_CHECK_THROWS(gelu(i, "tanh"), DTypeError, "gelu: not implemented for int64 tensors");
  SL_CHECK_THROWS(silu(i.to(DType::i32)), DTypeError, "silu: not implemented for int32 tensors");
  SL_CHECK_THROWS(leaky_relu(i), DTypeError, "leaky_relu: not implemented for int64 tensors");
  // hardtanh's bounds beyond the dtype's range are its limits: the values pass unchanged
  SL_CHECK_CLOSE(
      hardtanh(from_vector(std::vector<int64_t>{-5, 7}, {2}).to(DType::i32), -1e12, 1e12),
      from_vector(std::vector<int64_t>{-5, 7}, {2}).to(DType::i32), 0, 0);
  SL_CHECK_THROWS(hardtanh(i, std::nan(""), 1.0), ValueError, "hardtanh: min_val (nan)");
}

// Note [Bool inputs]: clamp of b = torch.tensor([True, False]) in PyTorch 1.13
// (/usr/bin/python3: print(r.dtype, r.tolist())) takes the dtype its bounds promote to: int64 for
// integer bounds, float32 for a floating one; bool bounds alone are refused ("clamp_cpu" not
// implemented for 'Bool'), and so is every in-place clamp_ of b (int64 / float32 results cannot
// be stored in it). It was refused here for every bound. Exact values.
TEST_CASE("clamp of a bool tensor: int64 or float32 by its bounds, as PyTorch 1.13") {
  struct Row {
    std::optional<Scalar> lo, hi;
    std::optional<DType> dtype;  // nullopt: refused
    std::vector<double> values;
  };
  const DType i64 = DType::i64, f32 = DType::f32;
  const std::vector<Row> rows = {
      {0, 1, i64, {1, 0}},
      {0, std::nullopt, i64, {1, 0}},
      {std::nullopt, 1, i64, {1, 0}},
      {2, std::nullopt, i64, {2, 2}},
      {-1, std::nullopt, i64, {1, 0}},
      {0.5, std::nullopt, f32, {1, 0.5}},
      {std::nullopt, 0.5, f32, {0.5, 0}},
      {0.0, 1.0, f32, {1, 0}},
      {0, 0.5, f32, {0.5, 0}},
      {true, std::nullopt, {}, {}},
      {false, true, {}, {}},
      {std::nullopt, false, {}, {}},
  };
  for (Device dev : test_devices()) {
    const Tensor b = from_vector(std::vector<int64_t>{1, 0}, {2}).to(dev, DType::b8);
    for (const Row& r : rows) {
      const double lo = r.lo.value_or(Scalar(99)).to_double();  // 99: absent
      const double hi = r.hi.value_or(Scalar(99)).to_double();
      CAPTURE(dev);
      CAPTURE(lo);
      CAPTURE(hi);
      if (!r.dtype) {
        SL_CHECK_THROWS(clamp(b, r.lo, r.hi), DTypeError,
                        "clamp: not supported for bool tensors with bool bounds");
        continue;
      }
      Tensor out = clamp(b, r.lo, r.hi);
      CHECK(out.dtype() == *r.dtype);
      SL_CHECK_CLOSE(out.cpu().to(DType::f64), from_vector(r.values), 0, 0);
    }
    Tensor c = b.clone();
    SL_CHECK_THROWS(c.clamp_(0, 1), DTypeError, "clamp_: not supported for bool tensors");
    SL_CHECK_THROWS(c.clamp_(0.5, std::nullopt), DTypeError, "clamp_: not supported for bool");
  }
}

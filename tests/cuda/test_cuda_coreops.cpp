// Parity of the softmax, index, shape and sort families on CUDA with the CPU, forward and
// backward through autograd.
//
// Tolerances: ops that only move values (index_select, gather, scatter, embedding, one_hot,
// masked_select, cat, stack, pad, tril/triu, flip, sort, topk) must match exactly, and so must
// their gradients: those are scatters and index_adds, which both backends compute one output
// element per thread, adding in index order with the same roundings. softmax / log_softmax
// differ by the ulps of the exp/log implementations (CUDA's expf is within 2 ulp, glibc's within
// 1) and the order of the double-precision sum: see softmax_tol.
#include <cmath>
#include <limits>

#include "cuda_testing.h"

using namespace sl;
using sl::testing::check_gpu_parity;
using sl::testing::kGPU;

namespace {

/// softmax / log_softmax, forward and backward: f64 to double rounding (both sum in double,
/// exp/log within ~2 ulp); f32 a few float ulps of the largest term: log_softmax's backward
/// subtracts exp(y) * sum(g) (|sum(g)| ~ 10 for the random upstream gradients here) from g, so
/// 1e-5 absolute; 16-bit results are rounded from float on both sides, where one float ulp can
/// move the result by one 16-bit ulp (f16 2^-10, bf16 2^-7 relative).
std::pair<double, double> softmax_tol(DType dt) {
  switch (dt) {
    case DType::f64:
      return {1e-12, 1e-12};
    case DType::f32:
      return {1e-5, 1e-5};
    case DType::f16:
      return {2e-3, 2e-3};
    default:
      return {1.6e-2, 1.6e-2};
  }
}

Tensor rnd(const Shape& s, DType dt, bool grad = true) {
  Tensor t = randn(s).to(dt);
  if (grad && is_floating(dt)) t.requires_grad_();
  return t;
}

const DType kAll[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                      DType::i64, DType::i32, DType::b8};
const DType kFloat[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
const DType kNoBool[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32};

/// Values of every dtype with repeats (ties) in them.
Tensor values_with_ties(const Shape& s, DType dt) {
  Tensor v = randint(-4, 5, s, {.dtype = DType::i64});
  if (dt == DType::b8) return v.gt(0);
  if (!is_floating(dt)) return v.to(dt);
  return (v.to(DType::f64) * 0.5 + randn(s, {.dtype = DType::f64}).gt(1.0).to(DType::f64) * 0.25)
      .to(dt);
}

}  // namespace

TEST_CASE("cuda parity: softmax and log_softmax along every dim, rows short and long" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("softmax parity");
  manual_seed(31);
  for (DType dt : kFloat) {
    CAPTURE(dt);
    auto [rt, at] = softmax_tol(dt);
    for (int64_t dim : {0, 1, 2}) {  // inner > 1 (a thread per slice) and inner == 1 (rows)
      CAPTURE(dim);
      check_gpu_parity([&](const TensorList& t) { return softmax(t[0], dim); },
                       {rnd({4, 9, 37}, dt)}, rt, at);
      check_gpu_parity([&](const TensorList& t) { return log_softmax(t[0], dim); },
                       {rnd({4, 9, 37}, dt)}, rt, at);
    }
    // n > 1024: a block per row
    check_gpu_parity([](const TensorList& t) { return softmax(t[0], -1); }, {rnd({3, 2000}, dt)},
                     rt, at);
    check_gpu_parity([](const TensorList& t) { return log_softmax(t[0], -1); },
                     {rnd({3, 2000}, dt)}, rt, at);
  }
  // NaN and all -inf slices give NaN on both (SL_CHECK_CLOSE matches NaN with NaN)
  Tensor x = randn({3, 5});
  x.select(0, 1).fill_(-INFINITY);
  x.select(0, 2).narrow(0, 3, 1).fill_(NAN);
  SL_CHECK_CLOSE(softmax(x.to(kGPU), 1).cpu(), softmax(x, 1), 1e-5, 1e-7);
  SL_CHECK_CLOSE(log_softmax(x.to(kGPU), 1).cpu(), log_softmax(x, 1), 1e-5, 1e-7);
}

TEST_CASE("cuda parity: index_select, index_add, gather, scatter, scatter_add" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("index parity");
  manual_seed(32);
  Tensor idx = from_vector<int64_t>({4, 0, 4, 2, 4, 1});  // repeats: accumulation order matters
  Tensor gidx = randint(0, 5, {3, 6, 4}, {.dtype = DType::i64});
  for (DType dt : kAll) {
    CAPTURE(dt);
    check_gpu_parity(
        [&](const TensorList& t) { return index_select(t[0], 1, idx.to(t[0].device())); },
        {rnd({3, 5, 4}, dt)}, 0, 0);
    check_gpu_parity([&](const TensorList& t) { return gather(t[0], 1, gidx.to(t[0].device())); },
                     {rnd({3, 5, 4}, dt)}, 0, 0);
    // gather from a strided (transposed) input
    check_gpu_parity(
        [&](const TensorList& t) {
          return gather(t[0].transpose(0, 2), 1,
                        gidx.narrow(0, 0, 2).narrow(2, 0, 3).to(t[0].device()));
        },
        {rnd({3, 5, 2}, dt)}, 0, 0);
    check_gpu_parity(
        [&](const TensorList& t) { return scatter(t[0], 1, gidx.to(t[0].device()), t[1]); },
        {rnd({3, 5, 4}, dt), rnd({3, 6, 4}, dt)}, 0, 0);
    if (dt == DType::b8) continue;  // index_add and scatter_add refuse bool
    check_gpu_parity(
        [&](const TensorList& t) {
          return index_add(t[0], 1, idx.to(t[0].device()), t[1], dt == DType::i32 ? 3 : 1);
        },
        {rnd({3, 5, 4}, dt), rnd({3, 6, 4}, dt)}, 0, 0);
    check_gpu_parity(
        [&](const TensorList& t) { return scatter_add(t[0], 1, gidx.to(t[0].device()), t[1]); },
        {rnd({3, 5, 4}, dt), rnd({3, 6, 4}, dt)}, 0, 0);
  }
  // index_add with alpha: the product is rounded before the sum on both devices
  check_gpu_parity(
      [&](const TensorList& t) { return index_add(t[0], 0, idx.to(t[0].device()), t[1], 0.3); },
      {rnd({5, 7}, DType::f32), rnd({6, 7}, DType::f32)}, 0, 0);
  // scatter of a scalar (an expanded source)
  Tensor base = rnd({3, 5, 4}, DType::f32, false);
  Tensor sidx = randint(0, 4, {3, 5, 3}, {.dtype = DType::i64});
  SL_CHECK_CLOSE(scatter(base.to(kGPU), 2, sidx.to(kGPU), 2.5).cpu(), scatter(base, 2, sidx, 2.5),
                 0, 0);
}

TEST_CASE("cuda parity: embedding (padding_idx), one_hot, masked_select across tiles" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("embedding / one_hot / masked_select parity");
  manual_seed(33);
  Tensor ids = randint(0, 10, {4, 7}, {.dtype = DType::i64});
  for (DType dt : kFloat) {
    CAPTURE(dt);
    check_gpu_parity([&](const TensorList& t) { return embedding(t[0], ids.to(t[0].device())); },
                     {rnd({10, 6}, dt)}, 0, 0);
    check_gpu_parity([&](const TensorList& t) { return embedding(t[0], ids.to(t[0].device()), 3); },
                     {rnd({10, 6}, dt)}, 0, 0);
  }
  SL_CHECK_CLOSE(one_hot(ids.to(kGPU)).cpu(), one_hot(ids), 0, 0);
  SL_CHECK_CLOSE(one_hot(ids.to(kGPU), 12).cpu(), one_hot(ids, 12), 0, 0);
  // several nonzero tiles (4096 mask elements each), with a broadcast mask
  for (DType dt : kAll) {
    CAPTURE(dt);
    Tensor x = rnd({5, 3001}, dt);
    Tensor mask = rand({5, 3001}).gt(0.7);
    check_gpu_parity(
        [&](const TensorList& t) { return masked_select(t[0], mask.to(t[0].device())); }, {x}, 0,
        0);
    Tensor row_mask = rand({3001}).gt(0.5);
    check_gpu_parity(
        [&](const TensorList& t) { return masked_select(t[0], row_mask.to(t[0].device())); }, {x},
        0, 0);
  }
  Tensor none = zeros({100}, {.dtype = DType::b8, .device = kGPU});
  CHECK(masked_select(randn({100}).to(kGPU), none).numel() == 0);
}

TEST_CASE("cuda parity: cat, stack, pad, tril, triu, flip, repeat" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("shape parity");
  manual_seed(34);
  for (DType dt : kAll) {
    CAPTURE(dt);
    check_gpu_parity(
        [](const TensorList& t) {
          return cat({t[0], t[1], t[0]}, 1);
        },
        {rnd({2, 3, 4}, dt), rnd({2, 5, 4}, dt)}, 0, 0);
    check_gpu_parity(
        [](const TensorList& t) {
          return stack({t[0], t[1]}, 2);
        },
        {rnd({2, 3, 4}, dt), rnd({2, 3, 4}, dt)}, 0, 0);
    check_gpu_parity([](const TensorList& t) { return tril(t[0], -1); }, {rnd({2, 5, 6}, dt)}, 0,
                     0);
    check_gpu_parity([](const TensorList& t) { return triu(t[0], 2); }, {rnd({2, 5, 6}, dt)}, 0, 0);
    check_gpu_parity(
        [](const TensorList& t) {
          return flip(t[0], {0, 2});
        },
        {rnd({3, 4, 5}, dt)}, 0, 0);
    // flip of a transposed (strided) view
    check_gpu_parity([](const TensorList& t) { return flip(t[0].transpose(0, 1), {1}); },
                     {rnd({3, 4, 5}, dt)}, 0, 0);
    // repeat's gradient sums the 6 copies of each element, in another order on each device (one
    // f64 ulp apart on the H200); its forward is exact
    check_gpu_parity(
        [](const TensorList& t) {
          return repeat(t[0], {2, 3});
        },
        {rnd({2, 3}, dt)}, sl::testing::Tol{0, 0}, sl::testing::reduce_tol(dt));
    if (dt == DType::b8) continue;
    check_gpu_parity(
        [](const TensorList& t) {
          return pad(t[0], {1, 2, 0, 3}, "constant", 2);
        },
        {rnd({2, 3, 4}, dt)}, 0, 0);
  }
  for (DType dt : kFloat) {
    CAPTURE(dt);
    check_gpu_parity(
        [](const TensorList& t) {
          return pad(t[0], {2, 1, 1, 2}, "reflect");
        },
        {rnd({2, 4, 5}, dt)}, 0, 0);
    check_gpu_parity(
        [](const TensorList& t) {
          return pad(t[0], {3, 1}, "replicate");
        },
        {rnd({2, 4, 5}, dt)}, 0, 0);
    check_gpu_parity(
        [](const TensorList& t) {
          return pad(t[0], {-1, 2});
        },
        {rnd({2, 4, 5}, dt)}, 0, 0);
  }
}

TEST_CASE("cuda parity: sort, argsort, topk with ties, NaN and signed zeros" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("sort parity");
  manual_seed(35);
  for (DType dt : kNoBool) {  // sort refuses bool
    CAPTURE(dt);
    for (bool desc : {false, true}) {
      CAPTURE(desc);
      Tensor x = values_with_ties({3, 37, 5}, dt);
      for (int64_t dim : {1, 2}) {
        CAPTURE(dim);
        auto [vg, ig] = sort(x.to(kGPU), dim, desc);
        auto [vc, ic] = sort(x, dim, desc);
        SL_CHECK_CLOSE(vg.cpu(), vc, 0, 0);
        SL_CHECK_CLOSE(ig.cpu(), ic, 0, 0);
        SL_CHECK_CLOSE(argsort(x.to(kGPU), dim, desc).cpu(), argsort(x, dim, desc), 0, 0);
      }
      for (int64_t k : {0, 1, 7, 37}) {
        CAPTURE(k);
        auto [tv, ti] = topk(x.to(kGPU), k, 1, desc);
        auto [cv, ci] = topk(x, k, 1, desc);
        SL_CHECK_CLOSE(tv.cpu(), cv, 0, 0);
        SL_CHECK_CLOSE(ti.cpu(), ci, 0, 0);
      }
    }
  }
  // special values: NaN last ascending / first descending, -0 == +0 (kept in input order)
  Tensor s = from_vector<float>({0.0f, -0.0f, NAN, 1.0f, -INFINITY, INFINITY, -0.0f, NAN, 1.0f});
  for (bool desc : {false, true}) {
    auto [vg, ig] = sort(s.to(kGPU), 0, desc);
    auto [vc, ic] = sort(s, 0, desc);
    SL_CHECK_CLOSE(vg.cpu(), vc, 0, 0);
    SL_CHECK_CLOSE(ig.cpu(), ic, 0, 0);
    CHECK(std::signbit(vg.cpu().to_vector<float>()[desc ? 5 : 2]) ==
          std::signbit(vc.to_vector<float>()[desc ? 5 : 2]));
  }
  // a long slice (padded to 4096 in the network) and gradients through sort / topk
  check_gpu_parity([](const TensorList& t) { return sort(t[0], -1, true).first; },
                   {rnd({2, 3000}, DType::f32)}, 0, 0);
  check_gpu_parity([](const TensorList& t) { return topk(t[0], 4, 0).first; },
                   {rnd({9, 6}, DType::f64)}, 0, 0);
}

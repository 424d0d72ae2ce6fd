// Op cases of the reduce family (sum, mean, prod, amax/amin, max/min along a dim, argmax/argmin,
// var, std, logsumexp, norm, all/any, cumsum) and of the matmul family.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/op_cases.h"

namespace sl::testing {

namespace {

using Vals = std::vector<double>;

double sum_of(const Vals& v) {
  return std::accumulate(v.begin(), v.end(), 0.0);
}
double mean_of(const Vals& v) {
  return sum_of(v) / static_cast<double>(v.size());
}
double var_of(const Vals& v, int64_t correction) {
  double m = mean_of(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  // torch.var divides by max(0, N - correction): inf for correction >= N (PyTorch 1.13 gives
  // var([[1, 3], [2, 2]], 1, correction=2) = [inf, nan]), 0/0 = NaN for N = 0.
  double denom = std::max(0.0, static_cast<double>(v.size()) - static_cast<double>(correction));
  return s / denom;
}

/// A reduction case: run(x) vs reduce_ref(x, dims, keepdim, f).
OpCase reduction(const std::string& op, const std::string& what, InputSpec input,
                 std::vector<DType> dtypes, std::vector<int64_t> dims, bool keepdim,
                 std::function<Tensor(const Tensor&)> run, std::function<double(const Vals&)> f,
                 bool grad, std::optional<DType> result = std::nullopt) {
  OpCase c{op,
           op + " " + what,
           {std::move(input)},
           std::move(dtypes),
           [run](const TensorList& x) -> TensorList { return {run(x[0])}; },
           [dims, keepdim, f, result](const std::vector<Ref>& x) {
             Ref r = reduce_ref(x[0], dims, keepdim, f);
             if (result) r.as(*result);
             return std::vector<Ref>{r};
           },
           grad};
  return c;
}

}  // namespace

std::vector<OpCase> reduce_cases() {
  std::vector<OpCase> v;
  const auto F = kFloatDTypes;
  // sum: all dims, one negative dim, two dims with keepdim, non-contiguous, zero-size, 0-d
  v.push_back(reduction(
      "sum", "all [3,4,5]", in({3, 4, 5}), F, {}, false, [](const Tensor& x) { return x.sum(); },
      sum_of, true));
  v.push_back(reduction(
      "sum", "dim -1 transposed", in({3, 4}, Domain::any, Layout::transposed), F, {-1}, false,
      [](const Tensor& x) { return x.sum({-1}); }, sum_of, true));
  v.push_back(reduction(
      "sum", "dims {0,2} keepdim", in({3, 4, 5}, Domain::any, Layout::strided), F, {0, 2}, true,
      [](const Tensor& x) {
        return x.sum({0, 2}, true);
      },
      sum_of, true));
  v.push_back(reduction(
      "sum", "zero-size dim 0", in({0, 3}), F, {0}, false,
      [](const Tensor& x) { return x.sum({0}); }, sum_of, false));
  v.push_back(reduction(
      "sum", "0-d", in({}), F, {}, false, [](const Tensor& x) { return x.sum(); }, sum_of, true));
  v.push_back(reduction(
      "sum", "int -> int64", in({3, 4}), {DType::i64, DType::i32, DType::b8}, {1}, false,
      [](const Tensor& x) { return x.sum({1}); }, sum_of, false, DType::i64));
  v.push_back(reduction(
      "mean", "dim 1 of [2,3,4]", in({2, 3, 4}, Domain::any, Layout::transposed), F, {1}, false,
      [](const Tensor& x) { return x.mean({1}); }, mean_of, true));
  // column sums (inner > 1) over more than one 64-wide tile of columns, the last one partial
  v.push_back(reduction(
      "sum", "dim 0 of [9,150]", in({9, 150}), F, {0}, false,
      [](const Tensor& x) { return x.sum({0}); }, sum_of, true));
  v.push_back(reduction(
      "mean", "dim 1 of [2,11,70] strided", in({2, 11, 70}, Domain::any, Layout::strided), F, {1},
      false, [](const Tensor& x) { return x.mean({1}); }, mean_of, true));
  v.push_back(reduction(
      "mean", "all expanded", in({3, 4}, Domain::any, Layout::expanded), F, {}, false,
      [](const Tensor& x) { return x.mean(); }, mean_of, true));
  auto prod_of = [](const Vals& v) {
    double p = 1;
    for (double x : v) p *= x;
    return p;
  };
  v.push_back(reduction(
      "prod", "dim 1", in({3, 4}, Domain::positive), F, {1}, false,
      [](const Tensor& x) { return x.prod(1); }, prod_of, true));
  v.push_back(reduction(
      "prod", "all keepdim=false", in({2, 3}, Domain::unit), F, {}, false,
      [](const Tensor& x) { return x.prod(); }, prod_of, true));
  v.push_back(reduction(
      "prod", "zero-size", in({2, 0}), F, {1}, false, [](const Tensor& x) { return x.prod(1); },
      prod_of, false));
  v.push_back(reduction(
      "prod", "int -> int64", in({2, 3}), {DType::i64, DType::i32}, {1}, false,
      [](const Tensor& x) { return x.prod(1); }, prod_of, false, DType::i64));
  auto max_of = [](const Vals& v) { return *std::max_element(v.begin(), v.end()); };
  auto min_of = [](const Vals& v) { return *std::min_element(v.begin(), v.end()); };
  v.push_back(reduction(
      "amax", "dims {0,-1}", in({3, 4, 2}), kNumericDTypes, {0, -1}, false,
      [](const Tensor& x) {
        return x.amax({0, -1});
      },
      max_of, true));
  v.push_back(reduction(
      "amax", "ties (grid)", in({3, 4}, Domain::grid), kNumericDTypes, {1}, true,
      [](const Tensor& x) { return x.amax({1}, true); }, max_of, false));
  v.push_back(reduction(
      "amin", "all", in({3, 4}, Domain::any, Layout::transposed), kNumericDTypes, {}, false,
      [](const Tensor& x) { return x.amin({}); }, min_of, true));
  // max/min along a dim: values and the index of the first extremum
  auto arg_case = [&](const std::string& op, bool is_max, InputSpec input, int64_t dim,
                      bool keepdim, bool grad) {
    v.push_back({op,
                 op + " dim " + std::to_string(dim) + (keepdim ? " keepdim" : ""),
                 {input},
                 kNumericDTypes,
                 [is_max, dim, keepdim](const TensorList& x) -> TensorList {
                   auto [val, idx] = is_max ? max(x[0], dim, keepdim) : min(x[0], dim, keepdim);
                   return {val, idx};
                 },
                 [is_max, dim, keepdim](const std::vector<Ref>& x) {
                   auto pick = [is_max](const Vals& l) {
                     size_t best = 0;
                     for (size_t i = 1; i < l.size(); ++i) {
                       if (is_max ? l[i] > l[best] : l[i] < l[best]) best = i;
                     }
                     return best;
                   };
                   Ref val =
                       reduce_ref(x[0], {dim}, keepdim, [&](const Vals& l) { return l[pick(l)]; });
                   Ref idx = reduce_ref(x[0], {dim}, keepdim, [&](const Vals& l) {
                     return static_cast<double>(pick(l));
                   });
                   return std::vector<Ref>{val, idx.as(DType::i64)};
                 },
                 grad});
  };
  arg_case("max_dim", true, in({3, 5}), 1, false, true);
  arg_case("max_dim", true, in({4, 3}, Domain::grid, Layout::transposed), 0, true, false);
  arg_case("min_dim", false, in({2, 3, 4}), -2, false, true);
  arg_case("min_dim", false, in({3, 4}, Domain::grid), -1, true, false);
  auto argpick = [](bool is_max) {
    return [is_max](const Vals& l) {
      size_t best = 0;
      for (size_t i = 1; i < l.size(); ++i) {
        if (is_max ? l[i] > l[best] : l[i] < l[best]) best = i;
      }
      return static_cast<double>(best);
    };
  };
  v.push_back(reduction(
      "argmax", "dim 1 ties", in({3, 4}, Domain::grid), kNumericDTypes, {1}, false,
      [](const Tensor& x) { return argmax(x, 1); }, argpick(true), false, DType::i64));
  v.push_back(reduction(
      "argmax", "flat", in({3, 4}, Domain::any, Layout::transposed), kNumericDTypes, {}, false,
      [](const Tensor& x) { return argmax(x); }, argpick(true), false, DType::i64));
  v.push_back(reduction(
      "argmin", "dim 0 keepdim", in({3, 4}, Domain::grid), kNumericDTypes, {0}, true,
      [](const Tensor& x) { return argmin(x, 0, true); }, argpick(false), false, DType::i64));
  v.push_back(reduction(
      "var", "dim 1", in({3, 5}), F, {1}, false, [](const Tensor& x) { return x.var({1}); },
      [](const Vals& l) { return var_of(l, 1); }, true));
  v.push_back(reduction(
      "var", "all correction=0 keepdim", in({2, 3, 4}, Domain::any, Layout::strided), F, {}, true,
      [](const Tensor& x) { return x.var({}, 0, true); },
      [](const Vals& l) { return var_of(l, 0); }, true));
  // A correction >= N: inf where the values differ (no gradient case: the values are inf).
  v.push_back(reduction(
      "var", "dim 1 correction=7", in({3, 5}), F, {1}, false,
      [](const Tensor& x) { return x.var({1}, 7); }, [](const Vals& l) { return var_of(l, 7); },
      false));
  v.push_back(reduction(
      "std", "all correction=24", in({2, 3, 4}), F, {}, false,
      [](const Tensor& x) { return x.std({}, 24); },
      [](const Vals& l) { return std::sqrt(var_of(l, 24)); }, false));
  v.push_back(reduction(
      "std", "dims {0,2}", in({3, 2, 4}), F, {0, 2}, false,
      [](const Tensor& x) {
        return x.std({0, 2});
      },
      [](const Vals& l) { return std::sqrt(var_of(l, 1)); }, true));
  auto lse = [](const Vals& l) {
    double m = -std::numeric_limits<double>::infinity();
    for (double x : l) m = std::max(m, x);
    double s = 0;
    for (double x : l) s += std::exp(x - m);
    return m + std::log(s);
  };
  v.push_back(reduction(
      "logsumexp", "dim -1", in({3, 4}), F, {-1}, false,
      [](const Tensor& x) { return x.logsumexp({-1}); }, lse, true));
  v.push_back(reduction(
      "logsumexp", "wide values, dims {0,1} keepdim", in({2, 3, 2}, Domain::wide), F, {0, 1}, true,
      [](const Tensor& x) {
        return x.logsumexp({0, 1}, true);
      },
      lse, true));
  auto pnorm = [](double p) {
    return [p](const Vals& l) {
      double s = 0;
      if (std::isinf(p) && p > 0) {
        for (double x : l) s = std::max(s, std::fabs(x));
        return s;
      }
      if (std::isinf(p)) {
        s = std::numeric_limits<double>::infinity();
        for (double x : l) s = std::min(s, std::fabs(x));
        return s;
      }
      if (p == 0) {
        for (double x : l) s += x != 0 ? 1 : 0;
        return s;
      }
      for (double x : l) s += std::pow(std::fabs(x), p);
      return std::pow(s, 1.0 / p);
    };
  };
  v.push_back(reduction(
      "norm", "p=2 all", in({3, 4}, Domain::any, Layout::transposed), F, {}, false,
      [](const Tensor& x) { return x.norm(); }, pnorm(2), true));
  v.push_back(reduction(
      "norm", "p=1 dim 1", in({3, 4}), F, {1}, false,
      [](const Tensor& x) { return x.norm(1, {1}); }, pnorm(1), true));
  v.push_back(reduction(
      "norm", "p=inf dim 0", in({3, 4}), F, {0}, false,
      [](const Tensor& x) { return x.norm(INFINITY, {0}); }, pnorm(INFINITY), true));
  v.push_back(reduction(
      "norm", "p=3 keepdim", in({2, 5}), F, {-1}, true,
      [](const Tensor& x) { return x.norm(3, {-1}, true); }, pnorm(3), true));
  // orders below 1: min |x|, the nonzero count, negative and fractional p (positive inputs keep
  // the finite differences away from |x| = 0, where these orders are not differentiable)
  v.push_back(reduction(
      "norm", "p=-inf dim 1", in({3, 4}, Domain::positive), F, {1}, false,
      [](const Tensor& x) { return x.norm(-INFINITY, {1}); }, pnorm(-INFINITY), true));
  v.push_back(reduction(
      "norm", "p=0 dim 0", in({3, 4}, Domain::positive), F, {0}, false,
      [](const Tensor& x) { return x.norm(0, {0}); }, pnorm(0), true));
  v.push_back(reduction(
      "norm", "p=-1.5 keepdim transposed", in({3, 4}, Domain::positive, Layout::transposed), F,
      {-1}, true, [](const Tensor& x) { return x.norm(-1.5, {-1}, true); }, pnorm(-1.5), true));
  v.push_back(reduction(
      "norm", "p=0.5 all", in({2, 3}, Domain::positive), F, {}, false,
      [](const Tensor& x) { return x.norm(0.5); }, pnorm(0.5), true));
  // max/min of all elements (0-d result)
  v.push_back(reduction(
      "max", "all transposed", in({3, 4}, Domain::any, Layout::transposed), kNumericDTypes, {},
      false, [](const Tensor& x) { return max(x); }, max_of, true));
  v.push_back(reduction(
      "min", "all 0-d", in({}), kNumericDTypes, {}, false, [](const Tensor& x) { return min(x); },
      min_of, true));
  // "any set of dims with keepdim": non-adjacent and negative dim sets on non-contiguous inputs
  v.push_back(reduction(
      "mean", "dims {0,2} keepdim strided", in({2, 3, 4}, Domain::any, Layout::strided), F, {0, 2},
      true,
      [](const Tensor& x) {
        return x.mean({0, 2}, true);
      },
      mean_of, true));
  v.push_back(reduction(
      "prod", "dim -1 keepdim transposed", in({3, 4}, Domain::unit, Layout::transposed), F, {-1},
      true, [](const Tensor& x) { return x.prod(-1, true); }, prod_of, true));
  v.push_back(reduction(
      "amin", "dims {-1,-3} keepdim", in({2, 3, 4}, Domain::any, Layout::transposed),
      kNumericDTypes, {-1, -3}, true,
      [](const Tensor& x) {
        return x.amin({-1, -3}, true);
      },
      min_of, true));
  v.push_back(reduction(
      "var", "dims {0,2} keepdim transposed", in({3, 2, 4}, Domain::any, Layout::transposed), F,
      {0, 2}, true,
      [](const Tensor& x) {
        return x.var({0, 2}, 1, true);
      },
      [](const Vals& l) { return var_of(l, 1); }, true));
  v.push_back(reduction(
      "std", "dim -1 correction=0 keepdim strided", in({3, 5}, Domain::any, Layout::strided), F,
      {-1}, true, [](const Tensor& x) { return x.std({-1}, 0, true); },
      [](const Vals& l) { return std::sqrt(var_of(l, 0)); }, true));
  v.push_back(reduction(
      "std", "all", in({2, 3}), F, {}, false, [](const Tensor& x) { return x.std(); },
      [](const Vals& l) { return std::sqrt(var_of(l, 1)); }, true));
  v.push_back(reduction(
      "norm", "p=2 dims {0,2} expanded", in({2, 3, 4}, Domain::any, Layout::expanded), F, {0, 2},
      false,
      [](const Tensor& x) {
        return x.norm(2, {0, 2});
      },
      pnorm(2), true));
  v.push_back(reduction(
      "norm", "p=1.5 dims {1,2} keepdim", in({2, 3, 4}), F, {1, 2}, true,
      [](const Tensor& x) {
        return x.norm(1.5, {1, 2}, true);
      },
      pnorm(1.5), true));
  v.push_back(reduction(
      "logsumexp", "all dims {0,1,2}", in({2, 2, 3}), F, {0, 1, 2}, false,
      [](const Tensor& x) {
        return x.logsumexp({0, 1, 2});
      },
      lse, true));
  auto all_of = [](const Vals& l) {
    for (double x : l)
      if (x == 0) return 0.0;
    return 1.0;
  };
  auto any_of = [](const Vals& l) {
    for (double x : l)
      if (x != 0) return 1.0;
    return 0.0;
  };
  v.push_back(reduction(
      "all", "dim 1", in({3, 4}, Domain::grid), kAllDTypes, {1}, false,
      [](const Tensor& x) { return all(x, {1}); }, all_of, false, DType::b8));
  v.push_back(reduction(
      "all", "zero-size is true", in({0, 2}), kAllDTypes, {}, false,
      [](const Tensor& x) { return x.all(); }, all_of, false, DType::b8));
  v.push_back(reduction(
      "any", "dims {0} keepdim", in({3, 4}, Domain::grid, Layout::transposed), kAllDTypes, {0},
      true, [](const Tensor& x) { return any(x, {0}, true); }, any_of, false, DType::b8));
  auto cumsum_case = [&](InputSpec input, int64_t dim, std::vector<DType> dtypes, bool grad,
                         std::optional<DType> result) {
    v.push_back({"cumsum",
                 "cumsum dim " + std::to_string(dim) + " " + shape_str(input.shape),
                 {input},
                 dtypes,
                 [dim](const TensorList& x) -> TensorList { return {x[0].cumsum(dim)}; },
                 [dim, result](const std::vector<Ref>& x) {
                   Ref r = along_dim(x[0], dim, [](const Vals& l) {
                     Vals o(l.size());
                     double s = 0;
                     for (size_t i = 0; i < l.size(); ++i) o[i] = s += l[i];
                     return o;
                   });
                   if (result) r.as(*result);
                   return std::vector<Ref>{r};
                 },
                 grad});
  };
  cumsum_case(in({3, 4}, Domain::any, Layout::transposed), 0, F, true, std::nullopt);
  cumsum_case(in({2, 3, 4}), -1, F, true, std::nullopt);
  cumsum_case(in({}), 0, F, true, std::nullopt);
  cumsum_case(in({3, 4}), 1, {DType::i64, DType::i32, DType::b8}, false, DType::i64);
  // inner > 1 runs over tiles of 64 adjacent columns (cumsum_columns in core/cpu/reduce.cpp):
  // several tiles and a partial one, one outer index and more
  cumsum_case(in({2, 5, 70}), 1, F, true, std::nullopt);
  cumsum_case(in({6, 131}), 0, {DType::i64, DType::i32, DType::b8}, false, DType::i64);
  return v;
}

std::vector<OpCase> matmul_cases() {
  std::vector<OpCase> v;
  const auto F = kFloatDTypes;
  auto mm_ref = [](const std::vector<Ref>& x) { return std::vector<Ref>{matmul_ref(x[0], x[1])}; };
  v.push_back({"mm",
               "mm [3,4]^T-layout x [4,2]",
               {in({3, 4}, Domain::any, Layout::transposed), in({4, 2})},
               kNumericDTypes,
               [](const TensorList& x) -> TensorList { return {mm(x[0], x[1])}; },
               mm_ref});
  v.push_back({"mm",
               "mm K=0",
               {in({3, 0}), in({0, 2})},
               F,
               [](const TensorList& x) -> TensorList { return {mm(x[0], x[1])}; },
               mm_ref,
               false});
  v.push_back({"mm",
               "mm M=0",
               {in({0, 3}), in({3, 2})},
               F,
               [](const TensorList& x) -> TensorList { return {mm(x[0], x[1])}; },
               mm_ref,
               false});
  v.push_back({"bmm",
               "bmm [2,3,4] x [2,4,5] strided",
               {in({2, 3, 4}), in({2, 4, 5}, Domain::any, Layout::strided)},
               F,
               [](const TensorList& x) -> TensorList { return {bmm(x[0], x[1])}; },
               mm_ref});
  v.push_back({"bmm",
               "bmm expanded batch",
               {in({2, 3, 4}, Domain::any, Layout::expanded), in({2, 4, 2})},
               F,
               [](const TensorList& x) -> TensorList { return {bmm(x[0], x[1])}; },
               mm_ref});
  // batch dims that cannot be merged into one (attention heads: a [B, H, L, D] view of
  // [B, L, H, D]): one bmm per leading batch index, on strided views
  v.push_back({"matmul",
               "matmul head-split views [2,4,3,5] x [2,3,5,2]",
               {in({2, 4, 3, 5}), in({2, 3, 5, 2})},
               F,
               [](const TensorList& x) -> TensorList {
                 return {matmul(x[0].permute({0, 2, 1, 3}), x[1])};
               },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{matmul_ref(permute_ref(x[0], {0, 2, 1, 3}), x[1])};
               }});
  v.push_back({"matmul",
               "matmul head-split views q k^T, broadcast batch",
               {in({2, 4, 3, 5}), in({1, 4, 3, 5}, Domain::any, Layout::strided)},
               F,
               [](const TensorList& x) -> TensorList {
                 return {matmul(x[0].permute({0, 2, 1, 3}), x[1].permute({0, 2, 3, 1}))};
               },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{
                     matmul_ref(permute_ref(x[0], {0, 2, 1, 3}), permute_ref(x[1], {0, 2, 3, 1}))};
               }});
  v.push_back({"linear",
               "linear 1-d input",
               {in({4}), in({5, 4}), in({5})},
               F,
               [](const TensorList& x) -> TensorList { return {linear(x[0], x[1], x[2])}; },
               [](const std::vector<Ref>& x) {
                 Ref p = matmul_ref(x[0], permute_ref(x[1], {1, 0}));
                 return std::vector<Ref>{map2(p, x[2], [](double a, double b) { return a + b; })};
               }});
  v.push_back({"linear",
               "linear transposed [2,4,3] input",
               {in({2, 4, 3}, Domain::any, Layout::transposed), in({2, 3}), in({2})},
               F,
               [](const TensorList& x) -> TensorList { return {linear(x[0], x[1], x[2])}; },
               [](const std::vector<Ref>& x) {
                 Ref p = matmul_ref(x[0], permute_ref(x[1], {1, 0}));
                 return std::vector<Ref>{map2(p, x[2], [](double a, double b) { return a + b; })};
               }});
  struct M {
    Shape a, b;
    Layout la;
  };
  const M shapes[] = {
      {{4}, {4}, Layout::contiguous},          {{4}, {4, 3}, Layout::contiguous},
      {{3, 4}, {4}, Layout::transposed},       {{2, 1, 3, 4}, {5, 4, 2}, Layout::contiguous},
      {{2, 3, 4}, {4, 5}, Layout::transposed}, {{3}, {2, 3, 2}, Layout::contiguous},
      {{2, 3, 4}, {4}, Layout::strided}};
  for (const M& m : shapes) {
    v.push_back({"matmul",
                 "matmul " + shape_str(m.a) + " x " + shape_str(m.b),
                 {in(m.a, Domain::any, m.la), in(m.b)},
                 F,
                 [](const TensorList& x) -> TensorList { return {matmul(x[0], x[1])}; },
                 mm_ref});
  }
  v.push_back({"addmm",
               "addmm beta=0.5 alpha=2 bias [2]",
               {in({2}), in({3, 4}), in({4, 2})},
               F,
               [](const TensorList& x) -> TensorList { return {addmm(x[0], x[1], x[2], 0.5, 2)}; },
               [](const std::vector<Ref>& x) {
                 Ref p = matmul_ref(x[1], x[2]);
                 return std::vector<Ref>{
                     map2(p, x[0], [](double a, double b) { return 2 * a + 0.5 * b; })};
               }});
  v.push_back({"linear",
               "linear [2,3,4] w [5,4] b [5]",
               {in({2, 3, 4}), in({5, 4}, Domain::any, Layout::strided), in({5})},
               F,
               [](const TensorList& x) -> TensorList { return {linear(x[0], x[1], x[2])}; },
               [](const std::vector<Ref>& x) {
                 Ref p = matmul_ref(x[0], permute_ref(x[1], {1, 0}));
                 return std::vector<Ref>{map2(p, x[2], [](double a, double b) { return a + b; })};
               }});
  v.push_back({"linear",
               "linear no bias",
               {in({3, 4}), in({2, 4})},
               F,
               [](const TensorList& x) -> TensorList { return {linear(x[0], x[1])}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{matmul_ref(x[0], permute_ref(x[1], {1, 0}))};
               }});
  // linear_act: act(x @ w^T + bias) per activation, one case with a bias and a strided weight,
  // one without a bias. On CUDA relu and tanh-gelu come from cuBLASLt's epilogue, whose tanh is
  // its own (accuracy undocumented): float32 gets 1e-4, which still tells tanh-gelu from
  // erf-gelu (they differ by up to 4.7e-4 near |x| = 2); 16-bit types keep their defaults.
  struct Act {
    Activation act;
    std::function<double(double)> f;
  };
  const Act acts[] = {
      {Activation::relu, [](double x) { return x > 0 ? x : 0.0; }},
      {Activation::gelu, [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }},
      {Activation::gelu_tanh, [](double x) {
         const double k = std::sqrt(2.0 / M_PI);
         return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
       }}};
  for (const Act& a : acts) {
    const Activation act = a.act;
    const auto f = a.f;
    const std::string name = std::string("linear_act ") + activation_name(act);
    std::map<DType, Tolerance> tol;
    if (act == Activation::gelu_tanh) tol[DType::f32] = {1e-4, 1e-4};
    v.push_back(
        {"linear_act",
         name + " [2,3,4] w [5,4] b [5]",
         {in({2, 3, 4}), in({5, 4}, Domain::any, Layout::strided), in({5})},
         F,
         [act](const TensorList& x) -> TensorList { return {linear_act(x[0], x[1], x[2], act)}; },
         [f](const std::vector<Ref>& x) {
           Ref p = matmul_ref(x[0], permute_ref(x[1], {1, 0}));
           p = map2(p, x[2], [](double u, double b) { return u + b; });
           return std::vector<Ref>{map1(p, f)};
         },
         true,
         tol});
    v.push_back({"linear_act",
                 name + " no bias, transposed [3,4] input",
                 {in({3, 4}, Domain::any, Layout::transposed), in({2, 4})},
                 F,
                 [act](const TensorList& x) -> TensorList {
                   return {linear_act(x[0], x[1], Tensor(), act)};
                 },
                 [f](const std::vector<Ref>& x) {
                   Ref p = matmul_ref(x[0], permute_ref(x[1], {1, 0}));
                   return std::vector<Ref>{map1(p, f)};
                 },
                 true,
                 tol});
  }
  v.push_back({"outer",
               "outer [3] x [4]",
               {in({3}), in({4}, Domain::any, Layout::strided)},
               F,
               [](const TensorList& x) -> TensorList { return {outer(x[0], x[1])}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{map2(reshape_ref(x[0], {3, 1}), x[1],
                                              [](double a, double b) { return a * b; })};
               }});
  v.push_back({"dot",
               "dot [5]",
               {in({5}), in({5}, Domain::any, Layout::strided)},
               F,
               [](const TensorList& x) -> TensorList { return {dot(x[0], x[1])}; },
               mm_ref});
  return v;
}

}  // namespace sl::testing

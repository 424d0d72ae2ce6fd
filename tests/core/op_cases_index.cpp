// Op cases of the softmax and index families.
#include <cmath>
#include <limits>

#include "core/op_cases.h"

namespace sl::testing {

namespace {

using Vals = std::vector<double>;

Vals softmax_line(const Vals& l, bool log) {
  double m = -std::numeric_limits<double>::infinity();
  for (double x : l) m = std::max(m, x);
  double s = 0;
  for (double x : l) s += std::exp(x - m);
  Vals out(l.size());
  for (size_t i = 0; i < l.size(); ++i)
    out[i] = log ? l[i] - m - std::log(s) : std::exp(l[i] - m) / s;
  return out;
}

/// Index values of a reference array as integers.
int64_t iv(const Ref& r, const Shape& idx) {
  return static_cast<int64_t>(r.at(idx));
}

/// Replaces coordinate d of idx.
Shape with(Shape idx, int64_t d, int64_t value) {
  idx[static_cast<size_t>(d)] = value;
  return idx;
}

Ref index_select_ref(const Ref& a, int64_t dim, const Ref& index) {
  int64_t d = ref_wrap(dim, a.ndim());
  Shape s = a.shape;
  s[static_cast<size_t>(d)] = index.numel();
  Ref out(s);
  for_each_index(s, [&](const Shape& i) {
    int64_t j = static_cast<int64_t>(index.v[static_cast<size_t>(i[static_cast<size_t>(d)])]);
    out.at(i) = a.at(with(i, d, j));
  });
  return out;
}

/// scatter / scatter_add reference: visits index positions row-major (so along dim in order).
Ref scatter_ref(const Ref& self, int64_t dim, const Ref& index,
                const std::function<double(const Shape&)>& src, bool accumulate) {
  int64_t d = ref_wrap(dim, self.ndim());
  Ref out = self;
  out.dtype.reset();
  for_each_index(index.shape, [&](const Shape& i) {
    Shape dst = with(i, d, iv(index, i));
    out.at(dst) = accumulate ? out.at(dst) + src(i) : src(i);
  });
  return out;
}

/// A constant int64 index on the device of `like`.
Tensor const_index(const std::vector<int64_t>& values, const Shape& shape, const Tensor& like) {
  return from_vector(values, {static_cast<int64_t>(values.size())})
      .reshape(shape)
      .to(like.device());
}

// Accumulating in the storage dtype: index_add / scatter_add round each partial sum to the
// result dtype. With unit-domain values (|x| < 0.9), at most 5 additions per element and alpha
// <= 2, partial sums stay below 10: per rounding at most half an ulp of 10 (f16: 2^-8 = 0.0039,
// bf16: 2^-5 = 0.031), five roundings: f16 0.02, bf16 0.16.
const std::map<DType, Tolerance> kStorageAccumulation = {{DType::f16, {2e-3, 0.02}},
                                                         {DType::bf16, {1.6e-2, 0.16}}};

}  // namespace

std::vector<OpCase> softmax_index_cases() {
  std::vector<OpCase> v;
  const auto F = kFloatDTypes;
  // ---- softmax / log_softmax ----------------------------------------------------------------
  struct S {
    InputSpec input;
    int64_t dim;
    bool grad;
  };
  const S softmax_shapes[] = {
      {in({3, 5}), -1, true},
      {in({4, 3}, Domain::any, Layout::transposed), 0, true},
      {in({2, 3, 4}, Domain::any, Layout::strided), 1, true},
      {in({}), 0, true},
      {in({0, 4}), -1, false},
      {in({3, 0}), -1, false},
      {in({2, 6}, Domain::wide), -1, true},  // naive exp would overflow
  };
  for (bool log : {false, true}) {
    std::string op = log ? "log_softmax" : "softmax";
    for (const S& s : softmax_shapes) {
      int64_t dim = s.dim;
      v.push_back({op,
                   op + " dim " + std::to_string(dim) + " of " + shape_str(s.input.shape) +
                       (s.input.domain == Domain::wide ? " wide" : ""),
                   {s.input},
                   F,
                   [log, dim](const TensorList& x) -> TensorList {
                     return {log ? log_softmax(x[0], dim) : softmax(x[0], dim)};
                   },
                   [log, dim](const std::vector<Ref>& x) {
                     return std::vector<Ref>{along_dim(
                         x[0], dim, [log](const Vals& l) { return softmax_line(l, log); })};
                   },
                   s.grad});
    }
  }
  v.push_back({"softmax",
               "softmax of int64 with dtype=float64",
               {in({2, 3})},
               {DType::i64},
               [](const TensorList& x) -> TensorList { return {softmax(x[0], 1, DType::f64)}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{along_dim(x[0], 1, [](const Vals& l) {
                                           return softmax_line(l, false);
                                         }).as(DType::f64)};
               },
               false});

  // ---- index_select ------------------------------------------------------------------------
  auto sel = [](int64_t dim) {
    return [dim](const std::vector<Ref>& x) {
      return std::vector<Ref>{index_select_ref(x[0], dim, x[1])};
    };
  };
  v.push_back({"index_select",
               "index_select dim 0 with repeats",
               {in({4, 3}), index_in({5}, 4)},
               kAllDTypes,
               [](const TensorList& x) -> TensorList { return {index_select(x[0], 0, x[1])}; },
               sel(0)});
  v.push_back({"index_select",
               "index_select dim -1 int32 index, transposed input",
               {in({2, 3, 5}, Domain::any, Layout::transposed), index_in({3}, 5, DType::i32)},
               F,
               [](const TensorList& x) -> TensorList { return {x[0].index_select(-1, x[1])}; },
               sel(-1)});
  v.push_back({"index_select",
               "index_select 0-d index",
               {in({3, 4}), index_in({}, 4)},
               F,
               [](const TensorList& x) -> TensorList { return {index_select(x[0], 1, x[1])}; },
               sel(1)});
  v.push_back({"index_select",
               "index_select empty index",
               {in({3, 4}), index_in({0}, 3)},
               F,
               [](const TensorList& x) -> TensorList { return {index_select(x[0], 0, x[1])}; },
               sel(0),
               false});

  // ---- index_add -----------------------------------------------------------------------------
  OpCase ia{
      "index_add",
      "index_add dim 0 repeats alpha=2",
      {in({4, 3}, Domain::unit), index_in({5}, 4), in({5, 3}, Domain::unit, Layout::transposed)},
      kNumericDTypes,
      [](const TensorList& x) -> TensorList { return {index_add(x[0], 0, x[1], x[2], 2)}; },
      [](const std::vector<Ref>& x) {
        Ref out = x[0];
        for_each_index(x[2].shape, [&](const Shape& i) {
          Shape dst = with(i, 0, iv(x[1], {i[0]}));
          out.at(dst) += 2 * x[2].at(i);
        });
        return std::vector<Ref>{out};
      }};
  ia.tol = kStorageAccumulation;
  v.push_back(ia);
  v.push_back({"index_add",
               "index_add dim 1 of [2,3,2]",
               {in({2, 3, 2}, Domain::unit), index_in({2}, 3), in({2, 2, 2}, Domain::unit)},
               F,
               [](const TensorList& x) -> TensorList { return {index_add(x[0], 1, x[1], x[2])}; },
               [](const std::vector<Ref>& x) {
                 Ref out = x[0];
                 for_each_index(x[2].shape, [&](const Shape& i) {
                   out.at(with(i, 1, iv(x[1], {i[1]}))) += x[2].at(i);
                 });
                 return std::vector<Ref>{out};
               }});
  v.back().tol = kStorageAccumulation;

  // ---- gather --------------------------------------------------------------------------------
  auto gat = [](int64_t dim) {
    return [dim](const std::vector<Ref>& x) {
      int64_t d = ref_wrap(dim, x[0].ndim());
      Ref out(x[1].shape);
      for_each_index(x[1].shape,
                     [&](const Shape& i) { out.at(i) = x[0].at(with(i, d, iv(x[1], i))); });
      return std::vector<Ref>{out};
    };
  };
  v.push_back({"gather",
               "gather dim 1",
               {in({3, 4}), index_in({3, 2}, 4)},
               kAllDTypes,
               [](const TensorList& x) -> TensorList { return {gather(x[0], 1, x[1])}; },
               gat(1)});
  v.push_back({"gather",
               "gather dim 0 smaller index",
               {in({4, 3}, Domain::any, Layout::transposed), index_in({2, 2}, 4)},
               F,
               [](const TensorList& x) -> TensorList { return {x[0].gather(0, x[1])}; },
               gat(0)});
  v.push_back({"gather",
               "gather dim -1 of [2,3,4]",
               {in({2, 3, 4}, Domain::any, Layout::strided), index_in({2, 2, 5}, 4)},
               F,
               [](const TensorList& x) -> TensorList { return {gather(x[0], -1, x[1])}; },
               gat(-1)});

  // ---- scatter / scatter_add -------------------------------------------------------------------
  // unique indices per row so that every src element reaches the output (gradcheck-able)
  const std::vector<int64_t> uniq = {0, 2, 4, 1, 1, 3};
  v.push_back({"scatter",
               "scatter dim 1 unique",
               {in({3, 5}), in({3, 2}, Domain::any, Layout::transposed)},
               kAllDTypes,
               [uniq](const TensorList& x) -> TensorList {
                 return {scatter(x[0], 1, const_index(uniq, {3, 2}, x[0]), x[1])};
               },
               [uniq](const std::vector<Ref>& x) {
                 Ref idx({3, 2}, Vals(uniq.begin(), uniq.end()));
                 return std::vector<Ref>{scatter_ref(
                     x[0], 1, idx, [&](const Shape& i) { return x[1].at(i); }, false)};
               }});
  v.push_back({"scatter",
               "scatter dim 0 repeated indices: last write wins",
               {in({3, 4}), index_in({5, 4}, 3), in({5, 4})},
               kNumericDTypes,
               [](const TensorList& x) -> TensorList { return {scatter(x[0], 0, x[1], x[2])}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{scatter_ref(
                     x[0], 0, x[1], [&](const Shape& i) { return x[2].at(i); }, false)};
               },
               false});
  v.push_back(
      {"scatter_value",
       "scatter value 2 dim 0",
       {in({3, 5}), index_in({2, 5}, 3)},
       kNumericDTypes,
       [](const TensorList& x) -> TensorList { return {scatter(x[0], 0, x[1], Scalar(2))}; },
       [](const std::vector<Ref>& x) {
         return std::vector<Ref>{scatter_ref(
             x[0], 0, x[1], [](const Shape&) { return 2.0; }, false)};
       }});
  v.push_back({"scatter_add",
               "scatter_add repeats, src larger than index",
               {in({3, 4}, Domain::unit), index_in({5, 4}, 3), in({6, 5}, Domain::unit)},
               kNumericDTypes,
               [](const TensorList& x) -> TensorList { return {scatter_add(x[0], 0, x[1], x[2])}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{scatter_ref(
                     x[0], 0, x[1], [&](const Shape& i) { return x[2].at(i); }, true)};
               }});
  v.back().tol = kStorageAccumulation;
  v.push_back({"scatter_add",
               "scatter_add 0-d",
               {in({}), index_in({}, 1), in({})},
               F,
               [](const TensorList& x) -> TensorList { return {scatter_add(x[0], 0, x[1], x[2])}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{Ref(Shape{}, Vals{x[0].v[0] + x[2].v[0]})};
               }});

  // ---- embedding, one_hot, masked_select -------------------------------------------------------
  auto emb = [](const std::vector<Ref>& x) {
    Shape s = x[1].shape;
    s.push_back(x[0].shape[1]);
    Ref out(s);
    for_each_index(s, [&](const Shape& i) {
      Shape ii(i.begin(), i.end() - 1);
      out.at(i) = x[0].at({iv(x[1], ii), i.back()});
    });
    return std::vector<Ref>{out};
  };
  v.push_back({"embedding",
               "embedding [5,3] by [2,3]",
               {in({5, 3}, Domain::any, Layout::strided), index_in({2, 3}, 5)},
               kAllDTypes,
               [](const TensorList& x) -> TensorList { return {embedding(x[0], x[1])}; },
               emb});
  v.push_back({"embedding",
               "embedding 0-d index, padding_idx set",
               {in({4, 2}), index_in({}, 4)},
               F,
               [](const TensorList& x) -> TensorList { return {embedding(x[0], x[1], 3)}; },
               emb,
               false});
  auto oh = [](int64_t classes) {
    return [classes](const std::vector<Ref>& x) {
      Shape s = x[0].shape;
      s.push_back(classes);
      Ref out(s);
      for_each_index(x[0].shape, [&](const Shape& i) {
        Shape j = i;
        j.push_back(iv(x[0], i));
        out.at(j) = 1;
      });
      out.as(DType::i64);
      return std::vector<Ref>{out};
    };
  };
  v.push_back({"one_hot",
               "one_hot 5 classes",
               {index_in({2, 3}, 4)},
               {DType::i64},
               [](const TensorList& x) -> TensorList { return {one_hot(x[0], 5)}; },
               oh(5),
               false});
  v.push_back({"one_hot",
               "one_hot int32 0-d",
               {index_in({}, 3, DType::i32)},
               {DType::i64},
               [](const TensorList& x) -> TensorList { return {one_hot(x[0], 3)}; },
               oh(3),
               false});
  auto msel = [](const std::vector<Ref>& x) {
    Shape s = ref_broadcast(x[0].shape, x[1].shape);
    Vals out;
    for_each_index(s, [&](const Shape& i) {
      if (bget(x[1], i) != 0) out.push_back(bget(x[0], i));
    });
    int64_t n = static_cast<int64_t>(out.size());
    return std::vector<Ref>{Ref(Shape{n}, out)};
  };
  v.push_back({"masked_select",
               "masked_select [3,4] by [4]",
               {in({3, 4}, Domain::any, Layout::transposed), bool_in({4})},
               kAllDTypes,
               [](const TensorList& x) -> TensorList { return {masked_select(x[0], x[1])}; },
               msel});
  v.push_back({"masked_select",
               "masked_select 0-d by [3]",
               {in({}), bool_in({3})},
               F,
               [](const TensorList& x) -> TensorList { return {x[0].masked_select(x[1])}; },
               msel});
  v.push_back({"masked_select",
               "masked_select zero-size",
               {in({0, 2}), bool_in({2})},
               F,
               [](const TensorList& x) -> TensorList { return {masked_select(x[0], x[1])}; },
               msel,
               false});
  return v;
}

}  // namespace sl::testing

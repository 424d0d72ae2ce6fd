// Op cases of the shape family (cat, stack, split, chunk, pad, tril/triu, flip, repeat) and the
// sort family (sort, argsort, topk).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/op_cases.h"

namespace sl::testing {

namespace {

using Vals = std::vector<double>;

/// Concatenation along dim of the given arrays (legacy 1-d empty arrays skipped).
Ref cat_ref(const std::vector<Ref>& parts, int64_t dim) {
  std::vector<const Ref*> used;
  for (const Ref& p : parts) {
    if (!(p.ndim() == 1 && p.shape[0] == 0)) used.push_back(&p);
  }
  int64_t d = ref_wrap(dim, used[0]->ndim());
  Shape s = used[0]->shape;
  s[static_cast<size_t>(d)] = 0;
  for (const Ref* p : used) s[static_cast<size_t>(d)] += p->shape[static_cast<size_t>(d)];
  Ref out(s);
  int64_t off = 0;
  for (const Ref* p : used) {
    for_each_index(p->shape, [&](const Shape& i) {
      Shape j = i;
      j[static_cast<size_t>(d)] += off;
      out.at(j) = p->at(i);
    });
    off += p->shape[static_cast<size_t>(d)];
  }
  return out;
}

/// Pieces of a along dim with the given lengths.
std::vector<Ref> split_ref(const Ref& a, const std::vector<int64_t>& lengths, int64_t dim) {
  int64_t d = ref_wrap(dim, a.ndim());
  std::vector<Ref> out;
  int64_t off = 0;
  for (int64_t len : lengths) {
    Shape s = a.shape;
    s[static_cast<size_t>(d)] = len;
    Ref p(s);
    for_each_index(s, [&](const Shape& i) {
      Shape j = i;
      j[static_cast<size_t>(d)] += off;
      p.at(i) = a.at(j);
    });
    out.push_back(p);
    off += len;
  }
  return out;
}

/// torch.nn.functional.pad semantics, written independently of core/ops/shape.cpp.
Ref pad_ref(const Ref& a, const std::vector<int64_t>& pads, const std::string& mode, double value) {
  Shape s = a.shape;
  std::vector<int64_t> left(a.shape.size(), 0);
  for (size_t p = 0; p < pads.size() / 2; ++p) {
    size_t d = a.shape.size() - 1 - p;
    left[d] = pads[2 * p];
    s[d] += pads[2 * p] + pads[2 * p + 1];
  }
  Ref out(s);
  for_each_index(s, [&](const Shape& i) {
    Shape src(i.size());
    bool inside = true;
    for (size_t d = 0; d < i.size(); ++d) {
      int64_t j = i[d] - left[d], n = a.shape[d];
      if (j < 0 || j >= n) {
        if (mode == "constant")
          inside = false;
        else if (mode == "reflect")
          j = j < 0 ? -j : 2 * (n - 1) - j;
        else
          j = j < 0 ? 0 : n - 1;
      }
      src[d] = j;
    }
    out.at(i) = inside ? a.at(src) : value;
  });
  return out;
}

/// Stable sort of a line: (values, original positions); NaN is largest.
std::pair<Vals, Vals> sort_line(const Vals& l, bool descending) {
  std::vector<size_t> p(l.size());
  std::iota(p.begin(), p.end(), size_t{0});
  auto less = [](double a, double b) {
    if (std::isnan(b)) return !std::isnan(a);
    return a < b;
  };
  std::stable_sort(p.begin(), p.end(), [&](size_t i, size_t j) {
    return descending ? less(l[j], l[i]) : less(l[i], l[j]);
  });
  Vals v, ix;
  for (size_t i : p) {
    v.push_back(l[i]);
    ix.push_back(static_cast<double>(i));
  }
  return {v, ix};
}

std::vector<Ref> sort_ref(const Ref& a, int64_t dim, bool descending, std::optional<int64_t> k) {
  auto take = [k](Vals v) {
    if (k) v.resize(static_cast<size_t>(*k));
    return v;
  };
  Ref values =
      along_dim(a, dim, [&](const Vals& l) { return take(sort_line(l, descending).first); });
  Ref indices =
      along_dim(a, dim, [&](const Vals& l) { return take(sort_line(l, descending).second); });
  return {values, indices.as(DType::i64)};
}

TensorList as_list(std::vector<Tensor> v) {
  return TensorList(v.begin(), v.end());
}

}  // namespace

std::vector<OpCase> shape_sort_cases() {
  std::vector<OpCase> v;
  const auto F = kFloatDTypes;
  const auto A = kAllDTypes;
  // ---- cat / stack ----------------------------------------------------------------------------
  v.push_back({"cat",
               "cat dim 0 of [2,3] and transposed [4,3]",
               {in({2, 3}), in({4, 3}, Domain::any, Layout::transposed)},
               A,
               [](const TensorList& x) -> TensorList { return {cat(x, 0)}; },
               [](const std::vector<Ref>& x) { return std::vector<Ref>{cat_ref(x, 0)}; }});
  v.push_back({"cat",
               "cat dim -1 of [2,1], strided [2,3], [2,0]",
               {in({2, 1}), in({2, 3}, Domain::any, Layout::strided), in({2, 0})},
               A,
               [](const TensorList& x) -> TensorList { return {cat(x, -1)}; },
               [](const std::vector<Ref>& x) { return std::vector<Ref>{cat_ref(x, -1)}; }});
  v.push_back({"cat",
               "cat skips legacy empty [0]",
               {in({0}), in({2, 3}), in({2, 2})},
               F,
               [](const TensorList& x) -> TensorList { return {cat(x, 1)}; },
               [](const std::vector<Ref>& x) { return std::vector<Ref>{cat_ref(x, 1)}; }});
  InputSpec f64_in = in({2, 2});
  f64_in.dtype = DType::f64;
  v.push_back(
      {"cat",
       "cat promotes to float64",
       {in({1, 2}), f64_in},
       F,
       [](const TensorList& x) -> TensorList { return {cat(x, 0)}; },
       [](const std::vector<Ref>& x) { return std::vector<Ref>{cat_ref(x, 0).as(DType::f64)}; }});
  auto stack_ref = [](int64_t dim) {
    return [dim](const std::vector<Ref>& x) {
      std::vector<Ref> parts;
      int64_t d = ref_wrap(dim, x[0].ndim() + 1);
      for (const Ref& r : x) {
        Shape s = r.shape;
        s.insert(s.begin() + d, 1);
        parts.push_back(reshape_ref(r, s));
      }
      return std::vector<Ref>{cat_ref(parts, d)};
    };
  };
  v.push_back({"stack",
               "stack 3 x [2,3] dim 1",
               {in({2, 3}), in({2, 3}, Domain::any, Layout::transposed), in({2, 3})},
               A,
               [](const TensorList& x) -> TensorList { return {stack(x, 1)}; },
               stack_ref(1)});
  v.push_back({"stack",
               "stack dim -1",
               {in({2, 2}), in({2, 2}, Domain::any, Layout::expanded)},
               F,
               [](const TensorList& x) -> TensorList { return {stack(x, -1)}; },
               stack_ref(-1)});
  v.push_back({"stack",
               "stack 0-d",
               {in({}), in({})},
               F,
               [](const TensorList& x) -> TensorList { return {stack(x, 0)}; },
               stack_ref(0)});

  // ---- split / chunk ---------------------------------------------------------------------------
  v.push_back({"split",
               "split [5,3] by 2",
               {in({5, 3})},
               A,
               [](const TensorList& x) -> TensorList { return as_list(split(x[0], 2, 0)); },
               [](const std::vector<Ref>& x) {
                 return split_ref(x[0], {2, 2, 1}, 0);
               }});
  v.push_back({"split",
               "split zero-size dim",
               {in({0, 2})},
               F,
               [](const TensorList& x) -> TensorList { return as_list(x[0].split(2)); },
               [](const std::vector<Ref>& x) { return split_ref(x[0], {0}, 0); },
               false});
  v.push_back({"split_with_sizes",
               "split {1,3,2} dim -1 transposed",
               {in({2, 6}, Domain::any, Layout::transposed)},
               A,
               [](const TensorList& x) -> TensorList {
                 return as_list(split(x[0], std::vector<int64_t>{1, 3, 2}, -1));
               },
               [](const std::vector<Ref>& x) {
                 return split_ref(x[0], {1, 3, 2}, -1);
               }});
  v.push_back({"chunk",
               "chunk [7] in 3",
               {in({7})},
               F,
               [](const TensorList& x) -> TensorList { return as_list(chunk(x[0], 3)); },
               [](const std::vector<Ref>& x) {
                 return split_ref(x[0], {3, 3, 1}, 0);
               }});
  v.push_back({"chunk",
               "chunk [2,6] in 4 gives 3",
               {in({2, 6}, Domain::any, Layout::strided)},
               F,
               [](const TensorList& x) -> TensorList { return as_list(x[0].chunk(4, 1)); },
               [](const std::vector<Ref>& x) {
                 return split_ref(x[0], {2, 2, 2}, 1);
               }});

  // ---- pad -----------------------------------------------------------------------------------
  struct P {
    Shape shape;
    Layout layout;
    std::vector<int64_t> pads;
    std::string mode;
  };
  const P pads[] = {{{3, 4}, Layout::contiguous, {1, 2}, "constant"},
                    {{2, 3, 4}, Layout::strided, {1, 1, 2, 0}, "constant"},
                    {{3, 4}, Layout::transposed, {-1, 2, 0, -1}, "constant"},
                    {{2, 4}, Layout::contiguous, {2, 1}, "reflect"},
                    {{2, 3, 4}, Layout::transposed, {1, 2, 2, 0}, "replicate"},
                    {{1, 3}, Layout::contiguous, {0, 0}, "reflect"}};
  for (const P& p : pads) {
    std::vector<int64_t> pd = p.pads;
    std::string mode = p.mode;
    v.push_back({"pad",
                 "pad " + mode + " " + shape_str(p.pads) + " of " + shape_str(p.shape),
                 {in(p.shape, Domain::any, p.layout)},
                 mode == "constant" ? A : F,
                 [pd, mode](const TensorList& x) -> TensorList { return {pad(x[0], pd, mode, 1)}; },
                 [pd, mode](const std::vector<Ref>& x) {
                   return std::vector<Ref>{pad_ref(x[0], pd, mode, 1)};
                 }});
  }

  // ---- tril / triu
  // -------------------------------------------------------------------------------
  for (int64_t diag : {0, 1, -1}) {
    for (bool lower : {true, false}) {
      std::string op = lower ? "tril" : "triu";
      v.push_back({op,
                   op + " diagonal " + std::to_string(diag),
                   {diag == 0 ? in({2, 3, 3}, Domain::any, Layout::transposed) : in({3, 4})},
                   A,
                   [lower, diag](const TensorList& x) -> TensorList {
                     return {lower ? x[0].tril(diag) : triu(x[0], diag)};
                   },
                   [lower, diag](const std::vector<Ref>& x) {
                     Ref out = x[0];
                     for_each_index(out.shape, [&](const Shape& i) {
                       int64_t off = i.back() - i[i.size() - 2];
                       if (lower ? off > diag : off < diag) out.at(i) = 0;
                     });
                     return std::vector<Ref>{out};
                   }});
    }
  }

  // ---- flip / repeat
  // --------------------------------------------------------------------------------
  auto flip_ref = [](std::vector<int64_t> dims) {
    return [dims](const std::vector<Ref>& x) {
      const Ref& a = x[0];
      Ref out(a.shape);
      for_each_index(a.shape, [&](const Shape& i) {
        Shape j = i;
        for (int64_t d : dims) {
          size_t w = static_cast<size_t>(ref_wrap(d, a.ndim()));
          j[w] = a.shape[w] - 1 - i[w];
        }
        out.at(i) = a.at(j);
      });
      return std::vector<Ref>{out};
    };
  };
  v.push_back({"flip",
               "flip dim 0 of [3,4]",
               {in({3, 4})},
               A,
               [](const TensorList& x) -> TensorList { return {flip(x[0], {0})}; },
               flip_ref({0})});
  v.push_back({"flip",
               "flip dims {-1,0} of strided [2,3,4]",
               {in({2, 3, 4}, Domain::any, Layout::strided)},
               A,
               [](const TensorList& x) -> TensorList {
                 return {flip(x[0], {-1, 0})};
               },
               flip_ref({-1, 0})});
  v.push_back({"flip",
               "flip transposed [3,4] dim 1",
               {in({3, 4}, Domain::any, Layout::transposed)},
               F,
               [](const TensorList& x) -> TensorList { return {flip(x[0], {1})}; },
               flip_ref({1})});
  auto repeat_ref = [](Shape reps) {
    return [reps](const std::vector<Ref>& x) {
      Shape xs = x[0].shape;
      while (xs.size() < reps.size()) xs.insert(xs.begin(), 1);
      Ref a = reshape_ref(x[0], xs);
      Shape s(reps.size());
      for (size_t i = 0; i < reps.size(); ++i) s[i] = reps[i] * xs[i];
      Ref out(s);
      for_each_index(s, [&](const Shape& i) {
        Shape j(i.size());
        for (size_t d = 0; d < i.size(); ++d) j[d] = i[d] % xs[d];
        out.at(i) = a.at(j);
      });
      return std::vector<Ref>{out};
    };
  };
  v.push_back({"repeat",
               "repeat {2,1,3} of [2,3]",
               {in({2, 3})},
               A,
               [](const TensorList& x) -> TensorList {
                 return {repeat(x[0], {2, 1, 3})};
               },
               repeat_ref({2, 1, 3})});
  v.push_back({"repeat",
               "repeat {2,2} of transposed [3,2]",
               {in({3, 2}, Domain::any, Layout::transposed)},
               F,
               [](const TensorList& x) -> TensorList {
                 return {repeat(x[0], {2, 2})};
               },
               repeat_ref({2, 2})});
  v.push_back({"repeat",
               "repeat {0,2}",
               {in({2, 3})},
               F,
               [](const TensorList& x) -> TensorList {
                 return {repeat(x[0], {0, 2})};
               },
               repeat_ref({0, 2}),
               false});

  // ---- sort / argsort / topk
  // ---------------------------------------------------------------------------
  const auto N = kNumericDTypes;
  auto sort_case = [&](InputSpec input, int64_t dim, bool desc, std::vector<DType> dtypes,
                       bool grad) {
    v.push_back(
        {"sort",
         std::string("sort ") + (desc ? "desc" : "asc") + " dim " + std::to_string(dim) + " " +
             shape_str(input.shape) + (input.domain == Domain::grid ? " ties" : "") +
             (input.domain == Domain::special ? " nan/inf" : ""),
         {input},
         dtypes,
         [dim, desc](const TensorList& x) -> TensorList {
           auto [values, indices] = sort(x[0], dim, desc);
           return {values, indices};
         },
         [dim, desc](const std::vector<Ref>& x) { return sort_ref(x[0], dim, desc, std::nullopt); },
         grad});
  };
  sort_case(in({3, 5}, Domain::grid), -1, false, N, false);
  sort_case(in({4, 3}, Domain::grid, Layout::transposed), 0, true, N, false);
  sort_case(in({3, 5}), -1, true, F, true);
  sort_case(in({2, 7}, Domain::special), 1, false, F, false);
  sort_case(in({2, 7}, Domain::special), 1, true, F, false);
  sort_case(in({}), 0, false, F, true);
  sort_case(in({0, 3}), 1, false, F, false);
  v.push_back({"argsort",
               "argsort desc ties",
               {in({3, 6}, Domain::grid, Layout::strided)},
               N,
               [](const TensorList& x) -> TensorList { return {argsort(x[0], -1, true)}; },
               [](const std::vector<Ref>& x) {
                 return std::vector<Ref>{sort_ref(x[0], -1, true, std::nullopt)[1]};
               },
               false});
  auto topk_case = [&](InputSpec input, int64_t k, int64_t dim, bool largest,
                       std::vector<DType> dtypes, bool grad) {
    v.push_back(
        {"topk",
         "topk k=" + std::to_string(k) + (largest ? " largest" : " smallest") + " dim " +
             std::to_string(dim) + " " + shape_str(input.shape) +
             (input.domain == Domain::grid ? " ties" : ""),
         {input},
         dtypes,
         [k, dim, largest](const TensorList& x) -> TensorList {
           auto [values, indices] = topk(x[0], k, dim, largest);
           return {values, indices};
         },
         [k, dim, largest](const std::vector<Ref>& x) { return sort_ref(x[0], dim, largest, k); },
         grad});
  };
  topk_case(in({3, 6}, Domain::grid), 2, -1, true, N, false);
  topk_case(in({5, 3}, Domain::any, Layout::transposed), 3, 0, false, F, true);
  topk_case(in({3, 6}), 4, 1, true, F, true);
  topk_case(in({2, 4}), 0, -1, true, F, false);
  return v;
}

}  // namespace sl::testing

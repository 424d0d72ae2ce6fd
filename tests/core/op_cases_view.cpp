// Op cases of the view ops (Tensor methods that share storage) and clone/contiguous.
#include "core/op_cases.h"

namespace sl::testing {

namespace {

/// out[idx] = a[src(idx)] for every idx of out_shape.
Ref gather_ref(const Ref& a, const Shape& out_shape,
               const std::function<Shape(const Shape&)>& src) {
  Ref out(out_shape);
  for_each_index(out_shape, [&](const Shape& idx) { out.at(idx) = a.at(src(idx)); });
  return out;
}

OpCase view_case(const std::string& op, const std::string& what, InputSpec input,
                 std::function<Tensor(const Tensor&)> run, std::function<Ref(const Ref&)> ref) {
  return OpCase{op,
                op + " " + what,
                {std::move(input)},
                kAllDTypes,
                [run](const TensorList& x) -> TensorList { return {run(x[0])}; },
                [ref](const std::vector<Ref>& x) { return std::vector<Ref>{ref(x[0])}; }};
}

}  // namespace

std::vector<OpCase> view_cases() {
  std::vector<OpCase> v;
  v.push_back(view_case(
      "view", "[3,4] -> [2,-1]", in({3, 4}),
      [](const Tensor& x) {
        return x.view({2, -1});
      },
      [](const Ref& a) {
        return reshape_ref(a, {2, 6});
      }));
  v.push_back(view_case(
      "view", "0-d -> [1]", in({}), [](const Tensor& x) { return x.view({1}); },
      [](const Ref& a) { return reshape_ref(a, {1}); }));
  v.push_back(view_case(
      "view", "[0,3] -> [3,0]", in({0, 3}),
      [](const Tensor& x) {
        return x.view({3, 0});
      },
      [](const Ref& a) {
        return reshape_ref(a, {3, 0});
      }));
  v.push_back(view_case(
      "reshape", "transposed [3,4] -> [12] (copies)", in({3, 4}, Domain::any, Layout::transposed),
      [](const Tensor& x) { return x.reshape({12}); },
      [](const Ref& a) { return reshape_ref(a, {12}); }));
  v.push_back(view_case(
      "reshape", "[1] -> 0-d", in({1}), [](const Tensor& x) { return x.reshape({}); },
      [](const Ref& a) { return reshape_ref(a, {}); }));
  v.push_back(view_case(
      "permute", "[2,3,4] {2,0,1} strided", in({2, 3, 4}, Domain::any, Layout::strided),
      [](const Tensor& x) {
        return x.permute({2, 0, -2});
      },
      [](const Ref& a) {
        return permute_ref(a, {2, 0, 1});
      }));
  v.push_back(view_case(
      "transpose", "(-1, 0) of [2,3,4]", in({2, 3, 4}),
      [](const Tensor& x) { return x.transpose(-1, 0); },
      [](const Ref& a) {
        return permute_ref(a, {2, 1, 0});
      }));
  v.push_back(view_case(
      "t", "[3,4]", in({3, 4}, Domain::any, Layout::transposed),
      [](const Tensor& x) { return x.t(); },
      [](const Ref& a) {
        return permute_ref(a, {1, 0});
      }));
  v.push_back(view_case(
      "t", "1-d", in({4}), [](const Tensor& x) { return x.t(); }, [](const Ref& a) { return a; }));
  v.push_back(view_case(
      "narrow", "(1, -2, 2) of [3,5]", in({3, 5}),
      [](const Tensor& x) { return x.narrow(1, -2, 2); },
      [](const Ref& a) {
        return gather_ref(a, {3, 2}, [](const Shape& i) { return Shape{i[0], i[1] + 3}; });
      }));
  v.push_back(view_case(
      "slice", "(-1, 1, 5, 2) of [2,6] transposed", in({2, 6}, Domain::any, Layout::transposed),
      [](const Tensor& x) { return x.slice(-1, 1, 5, 2); },
      [](const Ref& a) {
        return gather_ref(a, {2, 2}, [](const Shape& i) { return Shape{i[0], 1 + 2 * i[1]}; });
      }));
  v.push_back(view_case(
      "slice", "clamped end of [4]", in({4}), [](const Tensor& x) { return x.slice(0, -3, 100); },
      [](const Ref& a) {
        return gather_ref(a, {3}, [](const Shape& i) { return Shape{i[0] + 1}; });
      }));
  v.push_back(view_case(
      "select", "(1, -1) of [2,3,4]", in({2, 3, 4}),
      [](const Tensor& x) { return x.select(1, -1); },
      [](const Ref& a) {
        return gather_ref(a, {2, 4}, [](const Shape& i) { return Shape{i[0], 2, i[1]}; });
      }));
  v.push_back(view_case(
      "select", "[3] -> 0-d", in({3}), [](const Tensor& x) { return x[1]; },
      [](const Ref& a) { return gather_ref(a, {}, [](const Shape&) { return Shape{1}; }); }));
  v.push_back(view_case(
      "expand", "[3,1] -> [2,3,4]", in({3, 1}),
      [](const Tensor& x) {
        return x.expand({2, 3, 4});
      },
      [](const Ref& a) {
        return gather_ref(a, {2, 3, 4}, [](const Shape& i) { return Shape{i[1], 0}; });
      }));
  v.push_back(view_case(
      "expand", "0-d -> [2]", in({}), [](const Tensor& x) { return x.expand({2}); },
      [](const Ref& a) { return gather_ref(a, {2}, [](const Shape&) { return Shape{}; }); }));
  v.push_back(view_case(
      "squeeze", "all of [1,3,1,2]", in({1, 3, 1, 2}), [](const Tensor& x) { return x.squeeze(); },
      [](const Ref& a) {
        return reshape_ref(a, {3, 2});
      }));
  v.push_back(view_case(
      "squeeze", "dim -2 of [3,1,2]", in({3, 1, 2}, Domain::any, Layout::strided),
      [](const Tensor& x) { return x.squeeze(-2); },
      [](const Ref& a) {
        return reshape_ref(a, {3, 2});
      }));
  v.push_back(view_case(
      "unsqueeze", "-1 of [2,3]", in({2, 3}, Domain::any, Layout::transposed),
      [](const Tensor& x) { return x.unsqueeze(-1); },
      [](const Ref& a) {
        return reshape_ref(a, {2, 3, 1});
      }));
  v.push_back(view_case(
      "unsqueeze", "0 of 0-d", in({}), [](const Tensor& x) { return x.unsqueeze(0); },
      [](const Ref& a) { return reshape_ref(a, {1}); }));
  v.push_back(view_case(
      "flatten", "(1,-1) of transposed [2,3,4]", in({2, 3, 4}, Domain::any, Layout::transposed),
      [](const Tensor& x) { return x.flatten(1, -1); },
      [](const Ref& a) {
        return reshape_ref(a, {2, 12});
      }));
  v.push_back(view_case(
      "flatten", "0-d", in({}), [](const Tensor& x) { return x.flatten(); },
      [](const Ref& a) { return reshape_ref(a, {1}); }));
  v.push_back(view_case(
      "unflatten", "(1, {2,-1}) of [3,4]", in({3, 4}),
      [](const Tensor& x) {
        return x.unflatten(1, {2, -1});
      },
      [](const Ref& a) {
        return reshape_ref(a, {3, 2, 2});
      }));
  v.push_back(view_case(
      "movedim", "(0, -1) of [2,3,4]", in({2, 3, 4}),
      [](const Tensor& x) { return x.movedim(0, -1); },
      [](const Ref& a) {
        return permute_ref(a, {1, 2, 0});
      }));
  v.push_back(view_case(
      "clone", "strided", in({2, 3}, Domain::any, Layout::strided),
      [](const Tensor& x) { return x.clone(); }, [](const Ref& a) { return a; }));
  v.push_back(view_case(
      "contiguous", "transposed", in({3, 4}, Domain::any, Layout::transposed),
      [](const Tensor& x) {
        Tensor c = x.contiguous();
        SL_CHECK(c.is_contiguous(), "contiguous() returned a non-contiguous tensor");
        return c;
      },
      [](const Ref& a) { return a; }));
  return v;
}

}  // namespace sl::testing

// sort / argsort / topk: stability, NaN order, ties, errors, determinism.
#include <cmath>
#include <limits>

#include "support/testing.h"

using namespace sl;

TEST_CASE("sort is stable in both directions") {
  Tensor x = tensor({2.f, 1.f, 2.f, 1.f, 2.f});
  auto [v, i] = sort(x, 0);
  CHECK(v.to_vector<float>() == std::vector<float>{1, 1, 2, 2, 2});
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 0, 2, 4});
  auto [vd, id] = sort(x, 0, /*descending=*/true);
  CHECK(vd.to_vector<float>() == std::vector<float>{2, 2, 2, 1, 1});
  CHECK(id.to_vector<int64_t>() == std::vector<int64_t>{0, 2, 4, 1, 3});
  CHECK(equal(argsort(x, 0, true), id));
}

TEST_CASE("sort puts NaN last ascending and first descending (as torch.sort)") {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = tensor({std::nanf(""), 1.f, -inf, inf, 0.f});
  auto [v, i] = sort(x, 0);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{2, 4, 1, 3, 0});
  CHECK(std::isnan(v.to_vector<float>()[4]));
  auto [vd, id] = sort(x, 0, true);
  CHECK(id.to_vector<int64_t>() == std::vector<int64_t>{0, 3, 1, 4, 2});
}

TEST_CASE("topk resolves ties by lower index and is always sorted") {
  Tensor x = from_vector(std::vector<int64_t>{1, 3, 3, 2, 3});
  auto [v, i] = topk(x, 2);
  CHECK(v.to_vector<int64_t>() == std::vector<int64_t>{3, 3});
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  auto [vs, is] = topk(x, 3, 0, /*largest=*/false, /*sorted=*/false);
  CHECK(vs.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
  CHECK(is.to_vector<int64_t>() == std::vector<int64_t>{0, 3, 1});
}

TEST_CASE("sort and topk gradients flow to the selected positions") {
  Tensor x = tensor({0.5, -1.0, 2.0, 1.5}).requires_grad_();
  auto [v, i] = topk(x, 2);
  (v * tensor({10.0, 1.0})).sum().backward();
  // largest is x[2] (weight 10), second x[3] (weight 1)
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0, 10, 1});
  CHECK(!i.requires_grad());
}

TEST_CASE("sort and topk errors") {
  SL_CHECK_THROWS(topk(ones({2, 4}), 5), IndexError,
                  "topk: k (5) is out of range for dim -1 of size 4");
  SL_CHECK_THROWS(topk(ones({4}), -1), IndexError, "topk: k (-1) is out of range");
  SL_CHECK_THROWS(topk(ones({2}).to(DType::b8), 1), DTypeError,
                  "topk: not supported for bool tensors");
  SL_CHECK_THROWS(sort(ones({2, 3}), 2), IndexError, "sort: dim 2 out of range");
  SL_CHECK_THROWS(argsort(Tensor()), ValueError, "sort: input is an undefined tensor");
}

TEST_CASE("sort is deterministic with 1 or 2 threads") {
  manual_seed(5);
  Tensor x = randint(0, 50, {256, 300}).to(DType::f32);  // many ties
  int saved = get_num_threads();
  set_num_threads(1);
  auto [v1, i1] = sort(x, 1, true);
  auto [t1, j1] = topk(x, 7, 0);
  set_num_threads(2);
  auto [v2, i2] = sort(x, 1, true);
  auto [t2, j2] = topk(x, 7, 0);
  set_num_threads(saved);
  CHECK(equal(v1, v2));
  CHECK(equal(i1, i2));
  CHECK(equal(t1, t2));
  CHECK(equal(j1, j2));
}

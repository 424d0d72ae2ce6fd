#include "support/testing.h"

using namespace sl;

TEST_CASE("tensor basics: creation, views share storage, printing") {
  Tensor a = arange(6).to(DType::f32).view({2, 3});
  CHECK(a.sizes() == Shape{2, 3});
  CHECK(a.dtype() == DType::f32);
  Tensor t = a.t();
  CHECK(t.is_same_storage(a));
  CHECK(!t.is_contiguous());
  CHECK(t.contiguous().to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(a.str() == "tensor([[0., 1., 2.],\n        [3., 4., 5.]])");
  CHECK(tensor({1.5f, 2.25f}).str() == "tensor([1.5000, 2.2500])");
}

TEST_CASE("broadcast add and error message") {
  Tensor a = ones({2, 3});
  Tensor b = arange(3).to(DType::f32);
  Tensor c = a + b;
  CHECK(c.to_vector<float>() == std::vector<float>{1, 2, 3, 1, 2, 3});
  SL_CHECK_THROWS(ones({2, 3}) + ones({4}), ShapeError, "add: shapes [2, 3] and [4] do not broadcast");
}

TEST_CASE("reductions and matmul") {
  Tensor a = arange(6).to(DType::f32).view({2, 3});
  CHECK(a.sum().item<float>() == 15.f);
  CHECK(a.sum({0}).to_vector<float>() == std::vector<float>{3, 5, 7});
  Tensor m = matmul(a, a.t());
  CHECK(m.to_vector<float>() == std::vector<float>{5, 14, 14, 50});
}

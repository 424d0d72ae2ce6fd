// dropout: mask statistics and scaling, the Philox stream contract (Note [Dropout mask]),
// train vs eval, gradients, error paths. (No PyTorch parity: its CPU generator is not Philox.)
#include "support/testing.h"

using namespace sl;

TEST_CASE("dropout: keeps about 1 - p of the elements and scales them by 1 / (1 - p)") {
  Generator gen(1234);
  Tensor x = ones({200, 100});
  Tensor y = dropout(x, 0.3, true, &gen);
  auto v = y.to_vector<float>();
  int64_t kept = 0;
  for (float e : v) {
    CHECK((e == 0.0f || e == static_cast<float>(1.0 / 0.7)));
    kept += e != 0.0f;
  }
  // 20000 Bernoulli(0.7) draws: std 65, so 7000 +- 400 is a 6-sigma band
  CHECK(std::abs(static_cast<double>(kept) - 14000.0) < 400.0);
}

TEST_CASE("dropout: the mask is the bernoulli_(1 - p) stream of the same generator state") {
  Generator a(99), b(99);
  Tensor x = randn({7, 13});
  Tensor y = dropout(x, 0.4, true, &a);
  Tensor keep = empty({7, 13});
  keep.bernoulli_(0.6, &b);
  SL_CHECK_CLOSE(y, x * keep / 0.6, 1e-6, 0);
  CHECK(a.state() == b.state());  // both advanced by ceil(91 / 4) blocks
  CHECK(a.state().offset == 23);
}

TEST_CASE("dropout_seeded: a pure function of (seed, offset), equal to dropout from that state") {
  Tensor x = randn({50});
  Generator g(7);
  g.reserve(5);
  GeneratorState st = g.state();
  Tensor y1 = dropout_seeded(x, 0.5, st);
  Tensor y2 = dropout_seeded(x, 0.5, st);
  SL_CHECK_CLOSE(y1, y2, 0, 0);
  SL_CHECK_CLOSE(dropout(x, 0.5, true, &g), y1, 0, 0);
  Tensor y3 = dropout_seeded(x, 0.5, {st.seed, st.offset + 100});
  CHECK(sl::testing::compare(y1, y3, 0, 0) != "");
}

TEST_CASE("dropout: eval and p == 0 return the input; p == 1 gives zeros") {
  Tensor x = randn({4, 5}).requires_grad_();
  CHECK(dropout(x, 0.5, false).is_same(x));
  CHECK(dropout(x, 0.0, true).is_same(x));
  Generator g(3);
  Tensor z = dropout(x, 1.0, true, &g);
  SL_CHECK_CLOSE(z, zeros({4, 5}), 0, 0);
  CHECK(g.state().offset == 0);  // no mask was drawn
  z.sum().backward();
  SL_CHECK_CLOSE(x.grad(), zeros({4, 5}), 0, 0);
}

TEST_CASE("dropout: gradient is the mask times the scale; gradcheck (f64)") {
  Generator g(5);
  Tensor x = randn({6, 6}, {.dtype = DType::f64}).requires_grad_();
  Tensor y = dropout(x, 0.25, true, &g);
  Tensor gy = randn({6, 6}, {.dtype = DType::f64});
  y.backward(gy);
  Tensor kept = y.detach().ne(0).to(DType::f64);
  SL_CHECK_CLOSE(x.grad(), gy * kept / 0.75, 1e-12, 0);
  GeneratorState st{17, 3};
  CHECK(gradcheck([&](const TensorList& in) { return dropout_seeded(in[0], 0.25, st); }, {x}));
}

TEST_CASE("dropout: 16-bit floats and non-contiguous inputs") {
  Generator a(8), b(8);
  Tensor x = randn({6, 4}).t();  // non-contiguous view
  Tensor y = dropout(x, 0.5, true, &a);
  Tensor yh = dropout(x.to(DType::bf16), 0.5, true, &b);
  CHECK(yh.dtype() == DType::bf16);
  SL_CHECK_CLOSE(yh.to(DType::f32), y, 1e-2, 0);  // bf16 keeps 8 bits of the scaled value
  SL_CHECK_CLOSE(yh.to(DType::f32).ne(0).to(DType::f32), y.ne(0).to(DType::f32), 0, 0);
}

TEST_CASE("dropout: error paths") {
  Tensor x = randn({3});
  SL_CHECK_THROWS(dropout(x, -0.1), ValueError,
                  "dropout: dropout probability has to be between 0 and 1, but got -0.1");
  SL_CHECK_THROWS(dropout(x, 1.5), ValueError, "between 0 and 1");
  SL_CHECK_THROWS(dropout_seeded(x, 2.0, {}), ValueError, "dropout_seeded: dropout probability");
  SL_CHECK_THROWS(dropout(ones({3}, {.dtype = DType::i64}), 0.5), DTypeError,
                  "expected a floating input");
}

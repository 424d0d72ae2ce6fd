// In-place ops and views (Note [In-place on views], autograd/engine.cpp): a view whose base
// changed history is rebuilt from the base, and what autograd cannot record is refused with an
// AutogradError that names the op. Expected gradients are worked out by hand beside each case
// (PyTorch 1.13 gives the same values: tests/fixtures/autograd/inplace_views.py prints them).
#include <cmath>

#include "support/testing.h"

using namespace sl;

namespace {
std::vector<double> grad_of(const Tensor& t) {
  return t.grad().to_vector<double>();
}
}  // namespace

TEST_CASE("a view taken before its base was modified in place follows the base's new history") {
  // x = [1, 2]; y = 2x; v = y[0]; y *= 3, so v = 6 x0 and d(v^2)/dx = [72 x0, 0] = [72, 0]
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = x * 2;
  Tensor v = y.select(0, 0);
  y.mul_(3);
  CHECK(v.item<double>() == 6);
  (v * v).backward();
  CHECK(grad_of(x) == std::vector<double>{72, 0});
  CHECK(std::string(v.grad_fn()->name()) == "AsStridedBackward");
}

TEST_CASE("a view of a view is rebuilt from the root base") {
  // x = [1, 2, 3]; y = 2x; w = y[0:2][1] = y[1]; y *= 3, so w = 6 x1 and d(w^2)/dx1 = 72 x1 = 144
  Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
  Tensor y = x * 2;
  Tensor w = y.slice(0, 0, 2).select(0, 1);
  y.mul_(3);
  (w * w).backward();
  CHECK(grad_of(x) == std::vector<double>{0, 144, 0});
}

TEST_CASE("a base written under NoGradGuard keeps its views' graphs") {
  // the write is not recorded, so the view's graph stays v = 2 x0 (as PyTorch): d(v^2)/dx0 = 2 v
  // * 2 with v's current value 6: 24
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = x * 2;
  Tensor v = y.select(0, 0);
  const Node* before = v.grad_fn().get();
  {
    NoGradGuard ng;
    y.mul_(3);
  }
  CHECK(v.grad_fn().get() == before);
  (v * v).backward();
  CHECK(grad_of(x) == std::vector<double>{24, 0});
}

TEST_CASE("gradcheck: views taken before an in-place op on their base") {
  Tensor x = tensor({0.5, -1.25, 2.0, 0.75}).requires_grad_();
  Tensor s = tensor({1.5}).requires_grad_();
  CHECK(gradcheck(
      [](const TensorList& in) {
        Tensor y = in[0] * 1;
        Tensor a = y.slice(0, 1, 3);
        Tensor b = y.view({2, 2}).t();
        y.mul_(in[1]);
        y.exp_();
        return a.sum() * b[0][1] + (a * a).sum();
      },
      {x, s}));
}

TEST_CASE("a view made under NoGradGuard cannot be modified in place while recording") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = x * 2;
  Tensor v;
  {
    NoGradGuard ng;
    v = y.slice(0, 0, 1);
  }
  SL_CHECK_THROWS(v.mul_(10), AutogradError,
                  "mul_: a view created under NoGradGuard is being modified in place with grad "
                  "mode on");
  SL_CHECK_THROWS(v.add_(1.0), AutogradError, "add_: a view created under NoGradGuard");
  // a view of a buffer that needs no grad, written from a tensor that does
  Tensor buf = zeros({4}, {.dtype = DType::f64});
  Tensor w;
  {
    NoGradGuard ng;
    w = buf.slice(0, 0, 2);
  }
  SL_CHECK_THROWS(w.copy_(x * 3), AutogradError, "copy_: a view created under NoGradGuard");
  CHECK(buf.to_vector<double>() == std::vector<double>{0, 0, 0, 0});  // refused before writing
  // nothing to record: allowed (zeroing gradient buckets, writing plain values)
  w.copy_(tensor({5.0, 6.0}));
  w.zero_();
  {
    NoGradGuard ng;  // both inside the guard: allowed, not recorded
    v.mul_(10);
  }
  CHECK(y.to_vector<double>() == std::vector<double>{20, 4});
}

TEST_CASE("detach_ refuses views; detach does not") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor v = x.slice(0, 0, 1);
  SL_CHECK_THROWS(v.detach_(), AutogradError, "detach_: cannot detach a view in place");
  SL_CHECK_THROWS(zeros({3}).slice(0, 1, 2).detach_(), AutogradError, "detach_");
  CHECK(v.requires_grad());
  Tensor d = v.detach();
  CHECK(!d.requires_grad());
  CHECK(d.is_same_storage(x));
}

TEST_CASE("in-place ops on views that autograd cannot record are refused before writing") {
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0}).requires_grad_();
  // a view of a leaf that requires grad
  SL_CHECK_THROWS(x.slice(0, 0, 2).mul_(2), AutogradError,
                  "mul_: a view of a leaf tensor that requires grad is being used in an in-place "
                  "operation");
  // one of several views from one op
  Tensor y = x * 1;
  std::vector<Tensor> parts = y.split(2);
  SL_CHECK_THROWS(parts[0].mul_(2), AutogradError,
                  "mul_: this tensor is one of several views returned by one op (SplitBackward)");
  SL_CHECK_THROWS(parts[1].select(0, 0).add_(x[0]), AutogradError, "(SplitBackward)");
  // an expanded view: several elements share one location
  Tensor e = y.slice(0, 0, 1).expand({3});
  SL_CHECK_THROWS(e.mul_(2), AutogradError,
                  "mul_: the view has elements that share one memory location");
  CHECK(y.to_vector<double>() == std::vector<double>{1, 2, 3, 4});
}

TEST_CASE("a recorded in-place op on a view of a non-leaf is refused (not supported yet)") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor buf = zeros({4}, {.dtype = DType::f64});
  SL_CHECK_THROWS(buf.slice(0, 0, 2).copy_(x * 3), AutogradError,
                  "copy_: in-place operation on a view is not supported while recording");
  CHECK(buf.to_vector<double>() == std::vector<double>{0, 0, 0, 0});
  Tensor y = x * 2;
  SL_CHECK_THROWS(y.select(0, 1).mul_(3), AutogradError, "mul_: in-place operation on a view");
}

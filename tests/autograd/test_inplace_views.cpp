// In-place ops and views (Note [In-place on views], autograd/engine.cpp): a view whose base
// changed history is rebuilt from the base, and what autograd cannot record is refused with an
// AutogradError that names the op. Expected gradients are worked out by hand beside each case
// (PyTorch 1.13 gives the same values: tools/inplace_views_reference.py prints them).
#include <cmath>

#include "core/ops/view.h"
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

TEST_CASE("copy_ into a slice of a buffer that needs no grad sends the gradient through it") {
  // buf = [3 x0, 3 x1, 0, 0]: d/dx (sum buf^2 + sum x) = 18 x + 1 = [19, 37]
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor buf = zeros({4}, {.dtype = DType::f64});
  buf.slice(0, 0, 2).copy_(x * 3);
  CHECK(buf.requires_grad());
  CHECK(std::string(buf.grad_fn()->name()) == "CopySlices");
  ((buf * buf).sum() + x.sum()).backward();
  CHECK(grad_of(x) == std::vector<double>{19, 37});
  // without the extra term the loss still reaches x through the buffer: 18 x
  Tensor x2 = tensor({1.0, 2.0}).requires_grad_();
  Tensor buf2 = zeros({4}, {.dtype = DType::f64});
  buf2.slice(0, 0, 2).copy_(x2 * 3);
  (buf2 * buf2).sum().backward();
  CHECK(grad_of(x2) == std::vector<double>{18, 36});
}

TEST_CASE("another view of the buffer, taken before the write, sees the written values' graph") {
  // w = buf[1:3] = [3 x1, 0] after the copy: d(sum w^2)/dx = [0, 18 x1] = [0, 36]
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor buf = zeros({4}, {.dtype = DType::f64});
  Tensor w = buf.slice(0, 1, 3);
  CHECK(!w.requires_grad());
  buf.slice(0, 0, 2).copy_(x * 3);
  CHECK(w.requires_grad());
  (w * w).sum().backward();
  CHECK(grad_of(x) == std::vector<double>{0, 36});
}

TEST_CASE("in-place ops on views of a non-leaf rewrite the base's history") {
  SUBCASE("mul_ by a tensor on a view of a view") {
    // y = 2x, y[1] *= s: sum y^2 = 4 x0^2 + 4 x1^2 s^2 + 4 x2^2, so dx = [8 x0, 8 x1 s^2, 8 x2]
    // = [8, 400, 24] and ds = 8 x1^2 s = 160
    Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
    Tensor s = tensor({5.0}).requires_grad_();
    Tensor y = x * 2;
    y.slice(0, 0, 2).slice(0, 1, 2).mul_(s);
    (y * y).sum().backward();
    CHECK(grad_of(x) == std::vector<double>{8, 400, 24});
    CHECK(grad_of(s) == std::vector<double>{160});
  }
  SUBCASE("a row of a transposed matrix (a strided view)") {
    // y = x, column 1 doubled: d(sum y^2)/dx = 8 x in column 1, 2 x elsewhere
    Tensor x = arange(6).to(DType::f64).reshape({2, 3}).requires_grad_();
    Tensor y = x * 1;
    y.t()[1].mul_(2);
    (y * y).sum().backward();
    CHECK(grad_of(x) == std::vector<double>{0, 8, 4, 6, 32, 10});
  }
  SUBCASE("two writes into a buffer through different views") {
    // buf[:, 1] += x, then buf[1] *= x0 + 1: with weights [[0,1,2],[3,4,5]] the loss is
    // x0 + 4 x1 (x0 + 1), so dx = [1 + 4 x1, 4 (x0 + 1)] = [9, 8]
    Tensor x = tensor({1.0, 2.0}).requires_grad_();
    Tensor buf = zeros({2, 3}, {.dtype = DType::f64});
    buf.select(1, 1).add_(x);
    buf[1].mul_(x[0] + 1);
    (buf * arange(6).to(DType::f64).reshape({2, 3})).sum().backward();
    CHECK(grad_of(x) == std::vector<double>{9, 8});
  }
  SUBCASE("a write that replaces the view's values cuts the old ones out of the gradient") {
    // y = x^2, y[0] = 7: sum y = 7 + x1^2, so dx = [0, 2 x1] = [0, 4]
    Tensor x = tensor({3.0, 2.0}).requires_grad_();
    Tensor y = x * x;
    y.select(0, 0).fill_(7);
    y.sum().backward();
    CHECK(grad_of(x) == std::vector<double>{0, 4});
  }
}

TEST_CASE("gradcheck: in-place ops on views, including writes from other inputs") {
  Tensor x = tensor({0.5, -1.25, 2.0, 0.75, 1.5, -0.25}).requires_grad_();
  Tensor s = tensor({1.5, -0.5}).requires_grad_();
  CHECK(gradcheck(
      [](const TensorList& in) {
        Tensor y = in[0].view({2, 3}) * 1;
        Tensor before = y.select(1, 2);  // taken before the writes: rebuilt afterwards
        y.select(1, 0).mul_(in[1]);
        y.t().slice(0, 1, 3).sin_();
        Tensor buf = zeros({3, 2}, {.dtype = DType::f64});
        buf.slice(0, 1, 3).copy_(y.t().slice(0, 0, 2));
        buf[0].add_(in[1]);
        return (buf * buf).sum() + (before * y.select(1, 1)).sum();
      },
      {x, s}));
}

TEST_CASE(
    "a recorded in-place op on a view keeps its graph across retain_graph and refuses a "
    "second backward without it") {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor buf = zeros({3}, {.dtype = DType::f64});
  buf.slice(0, 1, 3).mul_(0).add_(x.exp());
  Tensor loss = (buf * buf).sum();  // sum exp(2x): d/dx = 2 exp(2x)
  loss.backward(Tensor(), /*retain_graph=*/true);
  loss.backward();
  std::vector<double> g = grad_of(x);
  CHECK(g[0] == doctest::Approx(4 * std::exp(2.0)).epsilon(1e-14));
  CHECK(g[1] == doctest::Approx(4 * std::exp(4.0)).epsilon(1e-14));
  SL_CHECK_THROWS(loss.backward(), AutogradError, "trying to backward through the graph a second");
}

TEST_CASE("parameters that are views of a flat buffer: optimizer steps and gradient buckets") {
  // leaves made from views of a plain buffer keep their own AccumulateGrad across steps that
  // write the buffer under NoGradGuard; their gradients, views of a bucket made under the
  // guard, are zeroed in place with grad mode on (nothing records)
  Tensor flat = tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.0});
  Tensor w = flat.slice(0, 0, 4).view({2, 2}).requires_grad_();
  Tensor b = flat.slice(0, 4, 6).requires_grad_();
  Tensor bucket = zeros({6}, {.dtype = DType::f64});
  {
    NoGradGuard ng;
    w.set_grad(bucket.slice(0, 0, 4).view({2, 2}));
    b.set_grad(bucket.slice(0, 4, 6));
  }
  Tensor in = tensor({1.0, -1.0});
  for (int step = 0; step < 2; ++step) {
    // loss = sum(w @ in + b): dw = [[1, -1], [1, -1]], db = [1, 1]
    (w.matmul(in) + b).sum().backward();
    CHECK(bucket.to_vector<double>() == std::vector<double>{1, -1, 1, -1, 1, 1});
    {
      NoGradGuard ng;
      w.sub_(w.grad());
      b.sub_(b.grad());
    }
    Tensor(w.grad()).zero_();
    Tensor(b.grad()).zero_();
    CHECK(w.is_leaf());
  }
  CHECK(flat.to_vector<double>() == std::vector<double>{-1, 4, 1, 6, 3, 4});
}

TEST_CASE("a view of a base whose elements share memory cannot be rebased") {
  // the base is an expand made by a core op (not tracked itself): writing the gradient of a
  // view back into it would be ambiguous
  Tensor x = tensor({1.0}).requires_grad_();
  Tensor base = ops::expand(zeros({1}, {.dtype = DType::f64}), {3});
  SL_CHECK_THROWS(base.slice(0, 0, 1).copy_(x), AutogradError,
                  "copy_: the base of this view has elements that share one memory location");
}

TEST_CASE("a view read by an in-place op on its own memory follows the op's record") {
  // The op reads its operand w after its kernel wrote and before it records; w must keep its old
  // history as the op's edge and still see the new history afterwards.
  // x = [1, 2, 3]; y = x; v = w = y[0:2]; v += w doubles both, so w = 2 x[0:2] and
  // d(w . [1, 10])/dx = [2, 20, 0]
  Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_();
  Tensor y = x * 1;
  Tensor v = y.slice(0, 0, 2);
  Tensor w = y.slice(0, 0, 2);
  v.add_(w);
  (w * tensor({1.0, 10.0})).sum().backward();
  CHECK(grad_of(x) == std::vector<double>{2, 20, 0});

  // w is stale before the op too (v *= s rewrote the base first): w = 2 s x[0:2], so
  // d(w . [1, 10])/dx = [2 s, 20 s, 0] = [6, 60, 0] and d/ds = 2 (x0 + 10 x1) = 42
  Tensor x2 = tensor({1.0, 2.0, 3.0}).requires_grad_();
  Tensor s = tensor({3.0}).requires_grad_();
  Tensor y2 = x2 * 1;
  Tensor v2 = y2.slice(0, 0, 2);
  Tensor w2 = y2.slice(0, 0, 2);
  v2.mul_(s);
  v2.add_(w2);
  (w2 * tensor({1.0, 10.0})).sum().backward();
  CHECK(grad_of(x2) == std::vector<double>{6, 60, 0});
  CHECK(grad_of(s) == std::vector<double>{42});
}

TEST_CASE("as_strided aliases are views: a recorded copy_ into one reaches its buffer") {
  // buf = [0, 3 x0, 3 x1, 0]; L = sum(buf^2) + sum(x): dL/dx = 18 x + 1 = [19, 37]
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor buf = zeros({4}, {.dtype = DType::f64});
  buf.as_strided({2}, {1}, 1).copy_(x * 3);
  CHECK(buf.requires_grad());
  ((buf * buf).sum() + x.sum()).backward();
  CHECK(grad_of(x) == std::vector<double>{19, 37});
  // an alias reaching beyond its base's elements cannot be described by the base's gradient
  Tensor big = zeros({8}, {.dtype = DType::f64});
  Tensor part = big.slice(0, 2, 4).detach();     // its own base: elements 2 and 3 of big
  Tensor beyond = part.as_strided({3}, {1}, 3);  // elements 3..5
  SL_CHECK_THROWS(beyond.copy_(tensor({1.0, 2.0, 3.0}).requires_grad_()), AutogradError,
                  "copy_: the view (an as_strided alias) reaches storage elements outside its "
                  "base");
  CHECK(big.to_vector<double>() == std::vector<double>(8, 0.0));  // refused before writing
}

TEST_CASE("copy_ into an integer tensor records nothing") {
  // as PyTorch: an integer tensor carries no gradient, so x's gradient is only through i's
  // values used as constants: d(sum(x * i))/dx = i = [1, 2]
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor i = zeros({2}, {.dtype = DType::i64});
  i.copy_(x);
  CHECK_FALSE(i.requires_grad());
  CHECK(i.grad_fn() == nullptr);
  (x * i.to(DType::f64)).sum().backward();
  CHECK(grad_of(x) == std::vector<double>{1, 2});
}

TEST_CASE("requires_grad_() on a stale view sees the history its base got") {
  // w = buf[0:2] is taken before buf = x is copied in: w is then a non-leaf (x's values), so
  // requires_grad_() changes nothing and d(sum(w^2))/dx = [2 x0, 2 x1, 0, 0] = [2, 4, 0, 0]
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0}).requires_grad_();
  Tensor buf = zeros({4}, {.dtype = DType::f64});
  Tensor w = buf.slice(0, 0, 2);
  buf.copy_(x * 1);
  w.requires_grad_();
  CHECK_FALSE(w.is_leaf());
  (w * w).sum().backward();
  CHECK(grad_of(x) == std::vector<double>{2, 4, 0, 0});
  CHECK_FALSE(w.grad().defined());
}

TEST_CASE("retain_grad follows a tensor's in-place changes: .grad is its current value's") {
  // y = x = [1, 2]; y *= 2; L = sum(y^2): y.grad = 2 y = [4, 8] (PyTorch 1.13 too), x.grad =
  // 4 y = [8, 16]
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = x * 1;
  y.retain_grad();
  y.mul_(2);
  (y * y).sum().backward();
  CHECK(y.grad().to_vector<double>() == std::vector<double>{4, 8});
  CHECK(grad_of(x) == std::vector<double>{8, 16});

  // a retaining view whose base is rewritten: v = 2 x[1:3] = [4, 6], v.grad = 2 v = [8, 12]
  // (PyTorch 1.13 too)
  Tensor x2 = tensor({1.0, 2.0, 3.0, 4.0}).requires_grad_();
  Tensor y2 = x2 * 1;
  Tensor v = y2.slice(0, 1, 3);
  v.retain_grad();
  y2.mul_(2);
  (v * v).sum().backward();
  CHECK(v.grad().to_vector<double>() == std::vector<double>{8, 12});
  CHECK(grad_of(x2) == std::vector<double>{0, 16, 24, 0});

  // a retaining base rewritten through a view: y3 = [3, 6, 3, 4] after y3[0:2] *= 3, so
  // y3.grad = 2 y3 = [6, 12, 6, 8], the gradient of its current value. (PyTorch 1.13 leaves its
  // hook on the old node here and reports the gradient of the values before the write,
  // [18, 36, 6, 8]; it moves the hook for a direct in-place op, as in the first case.)
  Tensor x3 = tensor({1.0, 2.0, 3.0, 4.0}).requires_grad_();
  Tensor y3 = x3 * 1;
  y3.retain_grad();
  y3.slice(0, 0, 2).mul_(3);
  (y3 * y3).sum().backward();
  CHECK(y3.grad().to_vector<double>() == std::vector<double>{6, 12, 6, 8});
  CHECK(grad_of(x3) == std::vector<double>{18, 36, 6, 8});
}

TEST_CASE("a view made under NoGradGuard is refused once its base changed history") {
  // as PyTorch ("A view was created in no_grad mode and its base or another view of its base
  // has been modified inplace with grad mode enabled"): reads with grad mode off still work
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  Tensor y = x * 1;
  Tensor v;
  {
    NoGradGuard ng;
    v = y.slice(0, 0, 1);
  }
  y.mul_(2);
  SL_CHECK_THROWS((v * v).sum(), AutogradError,
                  "a view created under NoGradGuard is used after its base (or another view of "
                  "its base) was modified in place with grad mode on");
  {
    NoGradGuard ng;
    CHECK((v * 3).item<double>() == 6);
  }
  SL_CHECK_THROWS(v * 2, AutogradError, "created under NoGradGuard");  // still refused
}

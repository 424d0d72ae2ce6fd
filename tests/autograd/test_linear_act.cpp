// linear_act (linear + relu/gelu/gelu_tanh as one op) on the CPU: the same bits as linear then
// the activation, forward and backward, under autocast too; gradcheck per activation; errors.
// The CUDA epilogue path is compared with the CPU in tests/cuda/test_cuda_matmul.cpp.
#include <cstring>
#include <functional>

#include "autograd/gradcheck.h"
#include "core/amp.h"
#include "core/ops/elementwise.h"
#include "core/ops/matmul.h"
#include "support/testing.h"

using namespace sl;

namespace {

/// Same dtype, shape and bytes (so -0 vs 0 and NaN payloads count too).
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor ac = a.detach().contiguous(), bc = b.detach().contiguous();
  return std::memcmp(ac.data_ptr(), bc.data_ptr(),
                     static_cast<size_t>(ac.numel()) * dtype_size(ac.dtype())) == 0;
}

const Activation kActs[] = {Activation::relu, Activation::gelu, Activation::gelu_tanh};

/// The two ops linear_act stands for.
Tensor composite(const Tensor& x, const Tensor& w, const Tensor& b, Activation act) {
  Tensor y = linear(x, w, b);
  if (act == Activation::relu) return relu(y);
  return gelu(y, act == Activation::gelu ? "none" : "tanh");
}

/// Runs f on fresh leaf copies of `inputs`, backpropagates `up`, returns {output, grads...}.
TensorList forward_backward(const std::function<Tensor(const TensorList&)>& f,
                            const TensorList& inputs, const Tensor& up) {
  TensorList leaves;
  for (const Tensor& t : inputs) {
    leaves.push_back(t.defined() ? t.detach().clone().requires_grad_() : Tensor());
  }
  Tensor y = f(leaves);
  y.backward(up);
  TensorList out{y.detach()};
  for (const Tensor& l : leaves) out.push_back(l.defined() ? l.grad() : Tensor());
  return out;
}

}  // namespace

TEST_CASE("linear_act: the same bits as linear then the activation, forward and backward") {
  manual_seed(31);
  for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
    for (Activation act : kActs) {
      for (bool with_bias : {true, false}) {
        CAPTURE(dt);
        const std::string act_name = activation_name(act);
        CAPTURE(act_name);
        CAPTURE(with_bias);
        // a 3-d input and a transposed (column-major) weight, as a module's view might be
        Tensor x = randn({2, 5, 12}).to(dt);
        Tensor w = randn({12, 7}).to(dt).t();
        Tensor b = with_bias ? randn({7}).to(dt) : Tensor();
        Tensor up = randn({2, 5, 7}).to(dt);
        TensorList fused = forward_backward(
            [act](const TensorList& t) { return linear_act(t[0], t[1], t[2], act); }, {x, w, b},
            up);
        TensorList ref = forward_backward(
            [act](const TensorList& t) { return composite(t[0], t[1], t[2], act); }, {x, w, b}, up);
        for (size_t i = 0; i < ref.size(); ++i) {
          CAPTURE(i);  // 0: output, then the gradients of x, w, bias
          REQUIRE(fused[i].defined() == ref[i].defined());
          if (ref[i].defined()) CHECK(same_bits(fused[i], ref[i]));
        }
      }
    }
  }
}

TEST_CASE("linear_act: the core op and its backward helper are linear + unary, op for op") {
  manual_seed(32);
  Tensor x = randn({6, 9}), w = randn({4, 9}), b = randn({4}), g = randn({6, 4});
  const int64_t fused_before = ops::linear_act_fused_count();
  for (Activation act : kActs) {
    const std::string act_name = activation_name(act);
    CAPTURE(act_name);
    ops::LinearActResult r = ops::linear_act_forward(x, w, b, act, true);
    Tensor pre = ops::linear(x, w, b);
    CHECK(same_bits(r.out, ops::linear_act(x, w, b, act)));
    // relu's backward reads the output, the gelus' the pre-activation (as relu/gelu save them)
    CHECK(same_bits(r.saved, act == Activation::relu ? r.out : pre));
    CHECK_FALSE(ops::linear_act_forward(x, w, b, act, false).saved.defined());
    const BinaryOp bop = act == Activation::relu   ? BinaryOp::relu_backward
                         : act == Activation::gelu ? BinaryOp::gelu_backward
                                                   : BinaryOp::gelu_tanh_backward;
    CHECK(same_bits(ops::linear_act_backward(g, r.saved, act), ops::binary(bop, g, r.saved)));
  }
  CHECK(ops::linear_act_fused_count() == fused_before);  // no epilogue kernel on the CPU
  CHECK(std::string(activation_name(Activation::gelu_tanh)) == "gelu_tanh");
}

TEST_CASE("linear_act: gradcheck in float64 for each activation") {
  manual_seed(33);
  auto f64 = [](const Shape& s) { return randn(s, {.dtype = DType::f64}).requires_grad_(); };
  for (Activation act : kActs) {
    const std::string act_name = activation_name(act);
    CAPTURE(act_name);
    Tensor x = f64({2, 3, 5}), w = f64({4, 5}), b = f64({4});
    CHECK(gradcheck([act](const TensorList& t) { return linear_act(t[0], t[1], t[2], act); },
                    {x, w, b}));
    CHECK(gradcheck([act](const TensorList& t) { return linear_act(t[0], t[1], Tensor(), act); },
                    {x, w}));
  }
}

TEST_CASE("linear_act: under autocast, the same bits as linear then the activation") {
  // linear is AmpPolicy::lower, relu/gelu have no policy: both forms run the activation on the
  // lowered product, and the gradients come back to the float32 leaves in float32.
  manual_seed(34);
  Tensor x = randn({3, 8}), w = randn({5, 8}), b = randn({5}), up = randn({3, 5});
  for (Activation act : kActs) {
    const std::string act_name = activation_name(act);
    CAPTURE(act_name);
    AutocastGuard guard(DeviceKind::cpu, DType::bf16);
    TensorList fused =
        forward_backward([act](const TensorList& t) { return linear_act(t[0], t[1], t[2], act); },
                         {x, w, b}, up.to(DType::bf16));
    TensorList ref =
        forward_backward([act](const TensorList& t) { return composite(t[0], t[1], t[2], act); },
                         {x, w, b}, up.to(DType::bf16));
    CHECK(fused[0].dtype() == DType::bf16);
    for (size_t i = 0; i < ref.size(); ++i) {
      CAPTURE(i);
      CHECK(same_bits(fused[i], ref[i]));
    }
    CHECK(fused[2].dtype() == DType::f32);
  }
}

TEST_CASE("linear_act: a bias of another dtype is promoted as linear's") {
  Tensor x = randn({3, 4}), w = randn({2, 4}), b = randn({2}, {.dtype = DType::f64});
  Tensor y = linear_act(x, w, b, Activation::gelu);
  CHECK(y.dtype() == DType::f64);
  CHECK(same_bits(y, composite(x, w, b, Activation::gelu)));
}

TEST_CASE("linear_act: typed errors naming the op") {
  Tensor x = randn({3, 4}), w = randn({2, 4}), b = randn({2});
  SL_CHECK_THROWS(linear_act(x, randn({2, 5}), b, Activation::relu), ShapeError,
                  "linear_act: input of shape [3, 4] does not match weight [2, 5]");
  SL_CHECK_THROWS(linear_act(x, randn({8}), b, Activation::relu), ShapeError,
                  "linear_act: weight must be 2-d [out, in], got [8]");
  SL_CHECK_THROWS(linear_act(x, w, randn({3}), Activation::gelu), ShapeError,
                  "linear_act: bias of shape [3] does not match weight [2, 4] (expected [2])");
  SL_CHECK_THROWS(linear_act(x, w.to(DType::f64), b, Activation::relu), DTypeError,
                  "linear_act: expected the weight in the input's dtype float32, got float64");
  SL_CHECK_THROWS(linear_act(x.to(DType::i64), w.to(DType::i64), Tensor(), Activation::relu),
                  DTypeError, "linear_act: expected a floating input, got int64");
  SL_CHECK_THROWS(linear_act(Tensor(), w, b, Activation::relu), ValueError, "linear_act");
  SL_CHECK_THROWS(linear_act(x, Tensor(), b, Activation::relu), ValueError, "linear_act");
  SL_CHECK_THROWS(linear_act(x, w, b, static_cast<Activation>(7)), ValueError,
                  "linear_act: unknown activation 7");
}

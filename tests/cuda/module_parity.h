// Shared by the tests/cuda/test_cuda_modules*.cpp files: module-level parity of an nn Module
// on CUDA with the CPU. Each case builds two identical modules (the same manual_seed before each
// construction), converts both to the case's dtype and moves one with to(kGPU), requires their
// parameters and buffers to be equal, runs forward on the same input (moved) with the default
// generator reseeded before each side (so dropout draws the same Philox mask on both devices),
// backpropagates the same random upstream gradient through every output, and compares the
// outputs, the input gradients, every named parameter's gradient, and every buffer (BatchNorm's
// running statistics and batch count) after the forward.
//
// A new Module class needs a case in one of those files, listed in its file comment.
//
// Tolerances: float64 1e-10 relative and absolute (the same math on both devices, sums and
// products in different orders and CUDA's libm, a few double ulps per op, far below 1e-10 for
// these sizes); float32 2e-4 relative as test_cuda_nn.cpp (reductions and matmuls accumulate in
// different orders; deep compositions such as the two-layer bidirectional RNNs and the
// transformer layer compound that to a few hundred ulps), atol 5e-5 for entries that are sums
// of cancelling O(1) terms (gradients of normalisation layers, attention).
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cuda_testing.h"
#include "models/registry.h"
#include "nn/activation.h"
#include "nn/attention.h"
#include "nn/checkpoint.h"
#include "nn/containers.h"
#include "nn/conv.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/normalization.h"
#include "nn/pooling.h"
#include "nn/rnn.h"
#include "nn/transformer.h"
#include "optim/sgd.h"

namespace sl::testing::modules {

using sl::testing::kGPU;
using sl::testing::Tol;

/// See the file comment.
inline Tol module_tol(DType dt) {
  return dt == DType::f64 ? Tol{1e-10, 1e-10} : Tol{2e-4, 5e-5};
}

constexpr uint64_t kBuildSeed = 1234, kForwardSeed = 99;

/// Two modules from make() after the same seed, both converted to dt, the second moved to the
/// GPU; their parameters and buffers must be equal (names and values).
template <class M>
std::pair<std::shared_ptr<M>, std::shared_ptr<M>> twins(
    const std::function<std::shared_ptr<M>()>& make, DType dt) {
  manual_seed(kBuildSeed);
  std::shared_ptr<M> c = make();
  manual_seed(kBuildSeed);
  std::shared_ptr<M> g = make();
  c->to(dt);
  g->to(kGPU, dt);
  auto same = [](const nn::Module::NamedTensors& a, const nn::Module::NamedTensors& b) {
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      CAPTURE(a[i].first);
      REQUIRE(a[i].first == b[i].first);
      CHECK(b[i].second.device() == kGPU);
      SL_CHECK_CLOSE(b[i].second.cpu(), a[i].second, 0, 0);
    }
  };
  same(c->named_parameters(), g->named_parameters());
  same(c->named_buffers(), g->named_buffers());
  return {c, g};
}

/// The module parity check of the file comment. fn runs the module on its inputs and returns
/// its outputs (undefined ones, e.g. attention weights not asked for, must be undefined on both
/// devices). Inputs with requires_grad are differentiated; the others (indices, lengths, masks)
/// are only moved. `train` sets the mode of both modules.
template <class M>
void check_module(const std::function<std::shared_ptr<M>()>& make,
                  const std::function<TensorList(M&, const TensorList&)>& fn,
                  const TensorList& inputs, DType dt, bool train = true) {
  CAPTURE(dt);
  CAPTURE(train);
  const Tol tol = module_tol(dt);
  auto [c, g] = twins(make, dt);
  c->train(train);
  g->train(train);
  TensorList cin, gin;
  for (const Tensor& t : inputs) {
    Tensor a = t.detach().clone(), b = t.detach().to(kGPU);
    if (t.requires_grad()) {
      a.requires_grad_();
      b.requires_grad_();
    }
    cin.push_back(a);
    gin.push_back(b);
  }
  manual_seed(kForwardSeed);
  TensorList yc = fn(*c, cin);
  manual_seed(kForwardSeed);
  TensorList yg = fn(*g, gin);
  REQUIRE(yc.size() == yg.size());
  Generator gen(4242);
  Tensor lc, lg;  // sum(y * upstream) over the outputs: their backward seeds every output
  for (size_t i = 0; i < yc.size(); ++i) {
    CAPTURE(i);
    REQUIRE(yc[i].defined() == yg[i].defined());
    if (!yc[i].defined()) continue;
    CHECK(yg[i].device() == kGPU);
    SL_CHECK_CLOSE_TOL(yg[i].cpu(), yc[i], tol);
    if (!yc[i].requires_grad()) continue;
    Tensor up = randn(yc[i].sizes(), {.dtype = yc[i].dtype()}, &gen);
    Tensor tc = (yc[i] * up).sum(), tg = (yg[i] * up.to(kGPU)).sum();
    lc = lc.defined() ? lc + tc : tc;
    lg = lg.defined() ? lg + tg : tg;
  }
  // buffers after the forward (running statistics, num_batches_tracked)
  auto bc = c->named_buffers(), bg = g->named_buffers();
  for (size_t i = 0; i < bc.size(); ++i) {
    CAPTURE(bc[i].first);
    SL_CHECK_CLOSE_TOL(bg[i].second.cpu(), bc[i].second, tol);
  }
  if (!lc.defined()) return;
  lc.backward();
  lg.backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    CAPTURE(i);
    REQUIRE(gin[i].grad().defined());
    CHECK(gin[i].grad().device() == kGPU);
    SL_CHECK_CLOSE_TOL(gin[i].grad().cpu(), cin[i].grad(), tol);
  }
  auto pc = c->named_parameters(), pg = g->named_parameters();
  for (size_t i = 0; i < pc.size(); ++i) {
    const std::string& name = pc[i].first;
    CAPTURE(name);
    REQUIRE(pc[i].second.grad().defined() == pg[i].second.grad().defined());
    if (!pc[i].second.grad().defined()) continue;
    CHECK(pg[i].second.grad().device() == kGPU);
    SL_CHECK_CLOSE_TOL(pg[i].second.grad().cpu(), pc[i].second.grad(), tol);
  }
}

/// check_module for a one-tensor module (forward(x)).
template <class M>
void check_unary(const std::function<std::shared_ptr<M>()>& make, const Tensor& x, DType dt,
                 bool train = true) {
  check_module<M>(
      make, [](M& m, const TensorList& t) { return TensorList{m.forward(t[0])}; }, {x}, dt, train);
}

inline Tensor rnd(const Shape& s, DType dt, bool grad = true) {
  Tensor t = randn(s, {.dtype = dt});
  if (grad) t.requires_grad_();
  return t;
}

constexpr DType kDtypes[] = {DType::f64, DType::f32};

/// Whether the GPU has convolution kernels. They come from cuDNN only: a CUDA build without cuDNN
/// has none, and the conv/pool module cases cannot run there, so they report the skip (visible
/// in the test output) instead of failing on the missing kernel. Moved unchanged from
/// test_cuda_modules.cpp.
inline bool have_conv_kernels() {
  if (conv2d_forward_kernel.has(kGPU.kind)) return true;
  sl::testing::report_skip("CUDA test: conv module parity", "built without cuDNN");
  return false;
}

}  // namespace sl::testing::modules

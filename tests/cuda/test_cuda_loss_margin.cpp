// Parity of the margin, likelihood and distance losses (nn/loss_margin.h, nn/loss_likelihood.h,
// nn/distance.h) on CUDA with the CPU, forward and backward w.r.t. every floating input, in
// float64 and float32, each reduction, and the options that change the composition (swap, p,
// weights, var shapes, Stirling's term, multilabel targets with repeats and -1 ends). They are
// compositions of ops whose kernels the rest of tests/cuda covers; this checks the compositions
// (index targets moved to the device, the host-side checks, masks built on the device).
//
// Tolerances: as test_cuda_loss.cpp's loss_tol: float64 1e-10 relative (the same math in other
// summation orders and CUDA's libm), float32 5e-5 relative and 1e-6 absolute (sums of up to ~50
// O(1) terms in other orders; cancelling gradient entries).
#include "cuda_testing.h"
#include "nn/distance.h"
#include "nn/loss_likelihood.h"
#include "nn/loss_margin.h"

using namespace sl;
using sl::testing::check_gpu_parity;
using sl::testing::Tol;
namespace F = sl::nn::functional;
using nn::Reduction;

namespace {

Tol tol_for(DType dt) {
  return dt == DType::f64 ? Tol{1e-10, 1e-12} : Tol{5e-5, 1e-6};
}

Tensor rnd(const Shape& s, DType dt) {
  return randn(s, {.dtype = dt}).requires_grad_();
}

constexpr Reduction kReductions[] = {Reduction::none, Reduction::mean, Reduction::sum};

}  // namespace

TEST_CASE("cuda parity: margin and embedding losses" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("margin loss parity");
  manual_seed(61);
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    const Tol tol = tol_for(dt);
    Tensor y = (rand({6, 5}, {.dtype = dt}).gt(0.5).to(dt) * 2 - 1);
    Tensor yc = from_vector<int64_t>({1, -1, 1, -1, -1, 1});
    Tensor cls = from_vector<int64_t>({0, 4, 2, 2, 1, 3});
    Tensor lab = from_vector<int64_t>({3, 0, -1, 1, 1, 2, 2, 4, -1, 0, -1, 1,  2,  3,  4,
                                       0, 1, 2,  3, 4, 4, 4, 4, 4,  4, 1,  -1, -1, -1, -1},
                                      {6, 5});
    Tensor w = rand({5}, {.dtype = dt}) + 0.5;
    for (Reduction red : kReductions) {
      CAPTURE(nn::reduction_name(red));
      check_gpu_parity(
          [&](const TensorList& t) { return F::margin_ranking_loss(t[0], t[1], t[2], 0.3, red); },
          {rnd({6, 5}, dt), rnd({6, 5}, dt), y}, tol.rtol, tol.atol);
      check_gpu_parity(
          [&](const TensorList& t) { return F::hinge_embedding_loss(t[0], t[1], 1.5, red); },
          {rnd({6, 5}, dt), y}, tol.rtol, tol.atol);
      check_gpu_parity([&](const TensorList& t) { return F::soft_margin_loss(t[0], t[1], red); },
                       {rnd({6, 5}, dt), y}, tol.rtol, tol.atol);
      check_gpu_parity(
          [&](const TensorList& t) {
            return F::multilabel_soft_margin_loss(t[0], t[1], t[2], red);
          },
          {rnd({6, 5}, dt), rand({6, 5}, {.dtype = dt}).requires_grad_(), w}, tol.rtol, tol.atol);
      check_gpu_parity(
          [&](const TensorList& t) {
            return F::cosine_embedding_loss(t[0], t[1], t[2], -0.1, red);
          },
          {rnd({6, 5}, dt), rnd({6, 5}, dt), yc}, tol.rtol, tol.atol);
      for (bool swap : {false, true}) {
        check_gpu_parity(
            [&](const TensorList& t) {
              return F::triplet_margin_loss(t[0], t[1], t[2], 1.0, swap ? 1.0 : 2.0, 1e-6, swap,
                                            red);
            },
            {rnd({6, 5}, dt), rnd({6, 5}, dt), rnd({6, 5}, dt)}, tol.rtol, tol.atol);
      }
      for (int64_t p : {1, 2}) {
        check_gpu_parity(
            [&](const TensorList& t) {
              return F::multi_margin_loss(t[0], t[1], p, 0.8, t[2], red);
            },
            {rnd({6, 5}, dt), cls, w}, tol.rtol, tol.atol);
      }
      check_gpu_parity(
          [&](const TensorList& t) { return F::multilabel_margin_loss(t[0], t[1], red); },
          {rnd({6, 5}, dt), lab}, tol.rtol, tol.atol);
    }
  }
}

TEST_CASE("cuda parity: poisson and gaussian NLL, cosine similarity, pairwise distance" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("likelihood loss and distance parity");
  manual_seed(62);
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    const Tol tol = tol_for(dt);
    Tensor counts = (rand({4, 6}, {.dtype = dt}) * 5).floor_();
    Tensor var = rand({4, 6}, {.dtype = dt}) + 0.05;
    var.select(0, 1).select(0, 2).fill_(1e-9);  // clamped to eps
    for (Reduction red : kReductions) {
      CAPTURE(nn::reduction_name(red));
      for (bool full : {false, true}) {
        check_gpu_parity(
            [&](const TensorList& t) {
              return F::poisson_nll_loss(t[0], t[1], true, full, 1e-8, red);
            },
            {rnd({4, 6}, dt), counts}, tol.rtol, tol.atol);
        check_gpu_parity(
            [&](const TensorList& t) {
              return F::gaussian_nll_loss(t[0], t[1], t[2], full, 1e-6, red);
            },
            {rnd({4, 6}, dt), rnd({4, 6}, dt), var.clone().requires_grad_()}, tol.rtol, tol.atol);
      }
      check_gpu_parity(
          [&](const TensorList& t) {
            return F::gaussian_nll_loss(t[0], t[1], t[2], false, 1e-6, red);
          },
          {rnd({4, 6}, dt), rnd({1, 6}, dt), var.select(1, 0).clone().requires_grad_()}, tol.rtol,
          tol.atol);
    }
    check_gpu_parity([](const TensorList& t) { return F::cosine_similarity(t[0], t[1], -1); },
                     {rnd({2, 3, 4}, dt), rnd({3, 1}, dt)}, tol.rtol, tol.atol);
    for (double p : {1.0, 2.0, 3.0}) {
      check_gpu_parity(
          [p](const TensorList& t) { return F::pairwise_distance(t[0], t[1], p, 1e-6, true); },
          {rnd({5, 7}, dt), rnd({7}, dt)}, tol.rtol, tol.atol);
    }
  }
}

TEST_CASE("cuda parity: MultiLabelSoftMarginLoss and MultiMarginLoss with weight buffers moved" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("margin loss module parity");
  manual_seed(63);
  using sl::testing::kGPU;
  for (DType dt : {DType::f64, DType::f32}) {
    CAPTURE(dt);
    const Tol tol = tol_for(dt);
    Tensor w = rand({5}, {.dtype = dt}) + 0.5;
    nn::MultiLabelSoftMarginLoss ml_c(w.clone()), ml_g(w.clone());
    nn::MultiMarginLoss mm_c(2, 0.5, w.clone()), mm_g(2, 0.5, w.clone());
    ml_g.to(kGPU);
    mm_g.to(kGPU);
    CHECK(ml_g.weight.device() == kGPU);
    CHECK(mm_g.weight.device() == kGPU);
    // forward picks the module whose buffer lives on the input's device
    check_gpu_parity(
        [&](const TensorList& t) {
          return (t[0].device() == kGPU ? ml_g : ml_c).forward(t[0], t[1]);
        },
        {rnd({3, 5}, dt), rand({3, 5}, {.dtype = dt})}, tol.rtol, tol.atol);
    check_gpu_parity(
        [&](const TensorList& t) {
          return (t[0].device() == kGPU ? mm_g : mm_c).forward(t[0], t[1]);
        },
        {rnd({3, 5}, dt), from_vector<int64_t>({4, 0, 2})}, tol.rtol, tol.atol);
  }
}

// Module-level parity on CUDA with the CPU (module_parity.h): normalisation layers, activations
// and the softmax modules.
//
// Covered module classes (a new one of these families needs a case here):
//   BatchNorm1d, BatchNorm2d, LayerNorm, GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
//   Softmax, LogSoftmax, Softmin, ReLU, GELU, Tanh, Sigmoid, SiLU, Hardtanh, LeakyReLU, PReLU,
//   Softplus, ELU, SELU, Mish, Hardswish, Hardsigmoid, Flatten, Unflatten.
//
// Tolerances: module_tol in module_parity.h.
#include "module_parity.h"

using namespace sl;
using namespace sl::testing::modules;

TEST_CASE("cuda module parity: BatchNorm1d / BatchNorm2d in train and eval, LayerNorm, GroupNorm" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("norm module parity");
  manual_seed(43);
  // random affine parameters and running statistics (the same draws on both sides: the seed
  // is reset before each construction) so that eval mode and the gradients are not trivial
  auto randomise = [](nn::BatchNormBase& bn) {
    NoGradGuard ng;
    const Shape s{bn.num_features};
    if (bn.weight.defined()) {
      bn.weight.copy_(randn(s) * 0.5 + 1);
      bn.bias.copy_(randn(s));
    }
    if (bn.running_mean.defined()) {
      bn.running_mean.copy_(randn(s));
      bn.running_var.copy_(rand(s) + 0.5);
    }
  };
  for (DType dt : kDtypes) {
    for (bool train : {true, false}) {
      check_unary<nn::BatchNorm1d>(
          [&] {
            auto m = std::make_shared<nn::BatchNorm1d>(5);
            randomise(*m);
            return m;
          },
          rnd({8, 5}, dt), dt, train);
      check_unary<nn::BatchNorm1d>(
          [&] {
            auto m = std::make_shared<nn::BatchNorm1d>(5, nn::BatchNormOptions{.affine = false});
            randomise(*m);
            return m;
          },
          rnd({4, 5, 6}, dt), dt, train);
      check_unary<nn::BatchNorm2d>(
          [&] {
            auto m = std::make_shared<nn::BatchNorm2d>(3, nn::BatchNormOptions{.eps = 1e-3});
            randomise(*m);
            return m;
          },
          rnd({4, 3, 5, 5}, dt), dt, train);
      // cumulative average (momentum None), and no running statistics (batch statistics in
      // eval too)
      check_unary<nn::BatchNorm2d>(
          [&] {
            auto m = std::make_shared<nn::BatchNorm2d>(
                3, nn::BatchNormOptions{.momentum = std::nullopt});
            randomise(*m);
            return m;
          },
          rnd({3, 3, 4, 6}, dt), dt, train);
      check_unary<nn::BatchNorm2d>(
          [&] {
            auto m = std::make_shared<nn::BatchNorm2d>(
                3, nn::BatchNormOptions{.track_running_stats = false});
            randomise(*m);
            return m;
          },
          rnd({2, 3, 4, 4}, dt), dt, train);
    }
    check_unary<nn::LayerNorm>(
        [] {
          auto m = std::make_shared<nn::LayerNorm>(Shape{4, 5});
          NoGradGuard ng;
          m->weight.copy_(randn({4, 5}));
          m->bias.copy_(randn({4, 5}));
          return m;
        },
        rnd({3, 4, 5}, dt), dt);
    check_unary<nn::LayerNorm>(
        [] { return std::make_shared<nn::LayerNorm>(Shape{7}, 1e-3, false); }, rnd({6, 7}, dt), dt);
    check_unary<nn::GroupNorm>(
        [] {
          auto m = std::make_shared<nn::GroupNorm>(2, 6);
          NoGradGuard ng;
          m->weight.copy_(randn({6}));
          m->bias.copy_(randn({6}));
          return m;
        },
        rnd({3, 6, 4, 5}, dt), dt);
    check_unary<nn::GroupNorm>([] { return std::make_shared<nn::GroupNorm>(4, 8, 1e-3, false); },
                               rnd({5, 8}, dt), dt);
  }
}

TEST_CASE("cuda module parity: InstanceNorm1d / 2d / 3d, running statistics, unbatched" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("instance norm module parity");
  manual_seed(49);
  // affine parameters and running statistics drawn at construction (the same on both sides)
  auto tracked = [](auto m) {
    NoGradGuard ng;
    const Shape s{m->num_features};
    m->weight.copy_(randn(s) * 0.5 + 1);
    m->bias.copy_(randn(s));
    m->running_mean.copy_(randn(s));
    m->running_var.copy_(rand(s) + 0.5);
    return m;
  };
  for (DType dt : kDtypes) {
    check_unary<nn::InstanceNorm1d>([] { return std::make_shared<nn::InstanceNorm1d>(4); },
                                    rnd({3, 4, 7}, dt), dt);
    check_unary<nn::InstanceNorm2d>([] { return std::make_shared<nn::InstanceNorm2d>(3); },
                                    rnd({3, 4, 5}, dt), dt);  // unbatched
    check_unary<nn::InstanceNorm3d>([] { return std::make_shared<nn::InstanceNorm3d>(3); },
                                    rnd({3, 2, 3, 4}, dt), dt);  // unbatched
    for (bool train : {true, false}) {
      check_unary<nn::InstanceNorm1d>(
          [&] { return tracked(std::make_shared<nn::InstanceNorm1d>(4, 1e-5, 0.2, true, true)); },
          rnd({3, 4, 6}, dt), dt, train);
      check_unary<nn::InstanceNorm2d>(
          [&] { return tracked(std::make_shared<nn::InstanceNorm2d>(3, 1e-3, 0.1, true, true)); },
          rnd({2, 3, 4, 5}, dt), dt, train);
      check_unary<nn::InstanceNorm3d>(
          [&] { return tracked(std::make_shared<nn::InstanceNorm3d>(2, 1e-5, 0.3, true, true)); },
          rnd({2, 2, 3, 2, 4}, dt), dt, train);
    }
  }
}

TEST_CASE("cuda module parity: Softmax, LogSoftmax, Softmin" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("softmax module parity");
  manual_seed(148);
  for (DType dt : kDtypes) {
    check_unary<nn::Softmax>([] { return std::make_shared<nn::Softmax>(1); }, rnd({2, 5, 3}, dt),
                             dt);
    check_unary<nn::LogSoftmax>([] { return std::make_shared<nn::LogSoftmax>(-1); },
                                rnd({4, 6}, dt), dt);
    check_unary<nn::Softmin>([] { return std::make_shared<nn::Softmin>(0); }, rnd({3, 2, 4}, dt),
                             dt);
  }
}

TEST_CASE("cuda module parity: activations, Flatten, Unflatten" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("activation module parity");
  manual_seed(47);
  for (DType dt : kDtypes) {
    // exact kinks: 0 (ReLU, LeakyReLU) and Hardtanh's bounds -0.5 and 0.7
    Tensor x = randn({4, 6}, {.dtype = dt}) * 2;
    x.select(0, 0).copy_(from_vector<double>({0, -0.5, 0.7, 0, -0.5, 0.7}).to(dt));
    x.requires_grad_();
    check_unary<nn::ReLU>([] { return std::make_shared<nn::ReLU>(); }, x, dt);
    check_unary<nn::GELU>([] { return std::make_shared<nn::GELU>(); }, x, dt);
    check_unary<nn::GELU>([] { return std::make_shared<nn::GELU>("tanh"); }, x, dt);
    check_unary<nn::Tanh>([] { return std::make_shared<nn::Tanh>(); }, x, dt);
    check_unary<nn::Sigmoid>([] { return std::make_shared<nn::Sigmoid>(); }, x, dt);
    check_unary<nn::SiLU>([] { return std::make_shared<nn::SiLU>(); }, x, dt);
    check_unary<nn::Hardtanh>([] { return std::make_shared<nn::Hardtanh>(-0.5, 0.7); }, x, dt);
    check_unary<nn::LeakyReLU>([] { return std::make_shared<nn::LeakyReLU>(0.2); }, x, dt);
    // PReLU: one slope, and one per channel (dim 1, 6 channels) with negative slopes too
    check_unary<nn::PReLU>([] { return std::make_shared<nn::PReLU>(); }, x, dt);
    check_unary<nn::PReLU>(
        [] {
          auto m = std::make_shared<nn::PReLU>(6);
          NoGradGuard ng;
          m->weight.copy_(randn({6}));
          return m;
        },
        x, dt);
    // the composed ones, with their kinks -3 and 3 (Hardswish, Hardsigmoid), 0 (ELU) and the
    // softplus threshold 1.5 (beta 2, threshold 3) in a row of their own
    Tensor k = randn({3, 6}, {.dtype = dt}) * 3;
    k.select(0, 0).copy_(from_vector<double>({-3, 3, 0, 1.5, -3, 3}).to(dt));
    k.requires_grad_();
    check_unary<nn::Softplus>([] { return std::make_shared<nn::Softplus>(); }, k, dt);
    check_unary<nn::Softplus>([] { return std::make_shared<nn::Softplus>(2.0, 3.0); }, k, dt);
    check_unary<nn::ELU>([] { return std::make_shared<nn::ELU>(0.5); }, k, dt);
    check_unary<nn::SELU>([] { return std::make_shared<nn::SELU>(); }, k, dt);
    check_unary<nn::Mish>([] { return std::make_shared<nn::Mish>(); }, k, dt);
    check_unary<nn::Hardswish>([] { return std::make_shared<nn::Hardswish>(); }, k, dt);
    check_unary<nn::Hardsigmoid>([] { return std::make_shared<nn::Hardsigmoid>(); }, k, dt);
    check_unary<nn::Flatten>([] { return std::make_shared<nn::Flatten>(); }, rnd({2, 3, 4}, dt),
                             dt);
    check_unary<nn::Flatten>([] { return std::make_shared<nn::Flatten>(0, 1); }, rnd({2, 3, 4}, dt),
                             dt);
    check_unary<nn::Unflatten>(
        [] {
          return std::make_shared<nn::Unflatten>(1, Shape{2, 3});
        },
        rnd({4, 6, 2}, dt), dt);
  }
}

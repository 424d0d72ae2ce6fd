// Module-level parity on CUDA with the CPU (module_parity.h): convolutions and pooling.
//
// Covered module classes (a new one of these families needs a case here):
//   Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d,
//   MaxPool1d, AvgPool1d, AdaptiveAvgPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool1d.
//
// Tolerances: module_tol in module_parity.h.
#include "module_parity.h"

using namespace sl;
using namespace sl::testing::modules;

TEST_CASE("cuda module parity: Conv1d and Conv2d with stride, padding, dilation, groups" *
          sl::testing::needs_cudnn(/*on_fake=*/true)) {
  SL_REQUIRE_CUDA("conv module parity");
  if (!have_conv_kernels()) return;
  manual_seed(42);
  using nn::Conv1d;
  using nn::Conv2d;
  for (DType dt : kDtypes) {
    check_unary<Conv2d>([] { return std::make_shared<Conv2d>(3, 4, 3); }, rnd({2, 3, 8, 7}, dt),
                        dt);
    check_unary<Conv2d>(
        [] {
          return std::make_shared<Conv2d>(4, 6, ExpandingArray<2>{3, 2},
                                          nn::Conv2dOptions{.stride = {2, 1},
                                                            .padding = {1, 0},
                                                            .dilation = {1, 2},
                                                            .groups = 2,
                                                            .bias = false});
        },
        rnd({2, 4, 9, 8}, dt), dt);
    check_unary<Conv2d>(
        [] { return std::make_shared<Conv2d>(2, 4, 3, nn::Conv2dOptions{.padding = "same"}); },
        rnd({1, 2, 6, 5}, dt), dt);
    check_unary<Conv2d>([] { return std::make_shared<Conv2d>(2, 3, 3); }, rnd({2, 6, 6}, dt),
                        dt);  // unbatched
    check_unary<Conv1d>(
        [] {
          return std::make_shared<Conv1d>(4, 6, 3, nn::Conv1dOptions{.stride = 2, .padding = 1});
        },
        rnd({3, 4, 11}, dt), dt);
    check_unary<Conv1d>(
        [] {
          return std::make_shared<Conv1d>(
              4, 4, 4,
              nn::Conv1dOptions{.padding = "same", .dilation = 2, .groups = 4, .bias = false});
        },
        rnd({2, 4, 10}, dt), dt);
  }
}

TEST_CASE("cuda module parity: ConvTranspose1d and ConvTranspose2d, output_size" *
          sl::testing::needs_cudnn(/*on_fake=*/true)) {
  SL_REQUIRE_CUDA("conv_transpose module parity");
  if (!have_conv_kernels()) return;
  manual_seed(46);
  using nn::ConvTranspose1d;
  using nn::ConvTranspose2d;
  for (DType dt : kDtypes) {
    check_unary<ConvTranspose2d>(
        [] {
          return std::make_shared<ConvTranspose2d>(
              3, 4, 3, nn::ConvTranspose2dOptions{.stride = 2, .padding = 1, .output_padding = 1});
        },
        rnd({2, 3, 5, 4}, dt), dt);
    // output_padding >= stride (dilated): the padded-input path (Note [Transposed convolution])
    check_unary<ConvTranspose2d>(
        [] {
          return std::make_shared<ConvTranspose2d>(
              2, 3, 3,
              nn::ConvTranspose2dOptions{
                  .stride = {1, 2}, .output_padding = {1, 2}, .bias = false, .dilation = {2, 3}});
        },
        rnd({1, 2, 4, 5}, dt), dt);
    check_module<ConvTranspose2d>(
        [] {
          return std::make_shared<ConvTranspose2d>(
              2, 3, 3, nn::ConvTranspose2dOptions{.stride = 3, .padding = 1});
        },
        [](ConvTranspose2d& m, const TensorList& t) {
          return TensorList{m.forward(t[0], {12, 14})};
        },
        {rnd({1, 2, 4, 5}, dt)}, dt);
    check_unary<ConvTranspose1d>(
        [] {
          return std::make_shared<ConvTranspose1d>(
              4, 2, 3, nn::ConvTranspose1dOptions{.padding = 1, .groups = 2, .dilation = 2});
        },
        rnd({4, 7}, dt), dt);  // unbatched
  }
}

TEST_CASE("cuda module parity: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("pool module parity");
  manual_seed(44);
  for (DType dt : kDtypes) {
    check_unary<nn::MaxPool2d>([] { return std::make_shared<nn::MaxPool2d>(3, 2, 1); },
                               rnd({2, 3, 11, 10}, dt), dt);
    check_unary<nn::MaxPool2d>(
        [] {
          return std::make_shared<nn::MaxPool2d>(ExpandingArray<2>{2, 3}, ExpandingArray<2>{2, 1},
                                                 0, 2, true);
        },
        rnd({1, 2, 9, 9}, dt), dt);
    check_unary<nn::MaxPool2d>([] { return std::make_shared<nn::MaxPool2d>(2); },
                               rnd({3, 8, 8}, dt), dt);  // unbatched
    check_unary<nn::AvgPool2d>([] { return std::make_shared<nn::AvgPool2d>(3, 2, 1, true, false); },
                               rnd({2, 3, 10, 7}, dt), dt);
    check_unary<nn::AvgPool2d>(
        [] { return std::make_shared<nn::AvgPool2d>(2, ExpandingArray<2>{}, 0, false, true, 3); },
        rnd({2, 2, 6, 8}, dt), dt);
    check_unary<nn::AdaptiveAvgPool2d>(
        [] {
          return std::make_shared<nn::AdaptiveAvgPool2d>(ExpandingArray<2>{3, 5});
        },
        rnd({2, 3, 7, 11}, dt), dt);
    check_unary<nn::AdaptiveAvgPool2d>([] { return std::make_shared<nn::AdaptiveAvgPool2d>(1); },
                                       rnd({2, 4, 5, 5}, dt), dt);
  }
}

TEST_CASE("cuda module parity: MaxPool1d, AvgPool1d, AdaptiveAvgPool1d" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("1-d pool module parity");
  manual_seed(147);
  for (DType dt : kDtypes) {
    // overlapping windows, padding, dilation and ceil_mode; then unbatched [C, L]
    check_unary<nn::MaxPool1d>([] { return std::make_shared<nn::MaxPool1d>(3, 2, 1, 2, true); },
                               rnd({2, 3, 13}, dt), dt);
    check_unary<nn::MaxPool1d>([] { return std::make_shared<nn::MaxPool1d>(2); }, rnd({3, 8}, dt),
                               dt);
    check_unary<nn::AvgPool1d>([] { return std::make_shared<nn::AvgPool1d>(3, 2, 1, true, false); },
                               rnd({2, 3, 10}, dt), dt);
    check_unary<nn::AvgPool1d>([] { return std::make_shared<nn::AvgPool1d>(2, 1, 1); },
                               rnd({4, 7}, dt), dt);
    check_unary<nn::AdaptiveAvgPool1d>([] { return std::make_shared<nn::AdaptiveAvgPool1d>(4); },
                                       rnd({2, 3, 11}, dt), dt);
    check_unary<nn::AdaptiveAvgPool1d>([] { return std::make_shared<nn::AdaptiveAvgPool1d>(7); },
                                       rnd({3, 5}, dt), dt);
  }
}

TEST_CASE("cuda module parity: AdaptiveMaxPool2d, AdaptiveMaxPool1d, with indices" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("adaptive max pool module parity");
  manual_seed(149);
  // forward and forward_with_indices (the indices compared exactly by check_module's
  // SL_CHECK_CLOSE_TOL on an integer tensor); downsampling, upsampling (overlapping windows whose
  // gradients add at a shared maximum), a None entry, unbatched, 1-d
  auto with_indices2 = [](nn::AdaptiveMaxPool2d& m, const TensorList& t) {
    auto [y, i] = m.forward_with_indices(t[0]);
    return TensorList{y, i};
  };
  auto with_indices1 = [](nn::AdaptiveMaxPool1d& m, const TensorList& t) {
    auto [y, i] = m.forward_with_indices(t[0]);
    return TensorList{y, i};
  };
  for (DType dt : kDtypes) {
    check_module<nn::AdaptiveMaxPool2d>(
        [] {
          return std::make_shared<nn::AdaptiveMaxPool2d>(AdaptiveOutputSize<2>{3, 5}, true);
        },
        with_indices2, {rnd({2, 3, 7, 11}, dt)}, dt);
    check_module<nn::AdaptiveMaxPool2d>(
        [] {
          return std::make_shared<nn::AdaptiveMaxPool2d>(AdaptiveOutputSize<2>{9, 8}, true);
        },
        with_indices2, {rnd({2, 2, 5, 6}, dt)}, dt);
    check_unary<nn::AdaptiveMaxPool2d>(
        [] {
          return std::make_shared<nn::AdaptiveMaxPool2d>(AdaptiveOutputSize<2>{std::nullopt, 4});
        },
        rnd({3, 6, 9}, dt), dt);  // unbatched
    check_module<nn::AdaptiveMaxPool1d>(
        [] { return std::make_shared<nn::AdaptiveMaxPool1d>(4, true); }, with_indices1,
        {rnd({2, 3, 11}, dt)}, dt);
    check_unary<nn::AdaptiveMaxPool1d>([] { return std::make_shared<nn::AdaptiveMaxPool1d>(7); },
                                       rnd({3, 5}, dt), dt);
  }
  // ties (integer values) and NaNs: the same indices as the CPU, so the same first maximum and
  // the same last NaN
  Tensor ties = randint(0, 3, {2, 2, 6, 5}).to(DType::f32).requires_grad_();
  check_module<nn::AdaptiveMaxPool2d>(
      [] {
        return std::make_shared<nn::AdaptiveMaxPool2d>(AdaptiveOutputSize<2>{4, 3}, true);
      },
      with_indices2, {ties}, DType::f32);
  Tensor nans = randn({1, 2, 6, 6});
  nans[0][0][0][1].fill_(NAN);  // two NaNs in window (0, 0) of plane 0: the later one wins
  nans[0][0][1][0].fill_(NAN);
  check_module<nn::AdaptiveMaxPool2d>(
      [] { return std::make_shared<nn::AdaptiveMaxPool2d>(3, true); }, with_indices2,
      {nans.requires_grad_()}, DType::f32);
}

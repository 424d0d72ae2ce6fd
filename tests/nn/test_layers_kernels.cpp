// Parity with PyTorch for LayerNorm, GroupNorm, BatchNorm, InstanceNorm, Conv, ConvTranspose,
// pooling and Dropout (fixtures: normalization, conv, pooling), gradchecks in float64,
// eval-vs-train and errors; the channel dropouts (Dropout1d / Dropout2d) by their mask's
// structure and statistics.
#include <cmath>

#include "fixture.h"
#include "nn/conv.h"
#include "nn/dropout.h"
#include "nn/functional.h"
#include "nn/normalization.h"
#include "nn/pooling.h"

using namespace sl;
using sl::testing::Fixture;
using sl::testing::module_gradcheck;
using sl::testing::split_lines;

// f32 default from the issue: rtol 1e-5, atol 1e-6. Where a case needs more, the reason is next
// to it.
constexpr double kRtol = 1e-5, kAtol = 1e-6;

namespace {
void run_module_case(const Fixture& fx, const std::string& name, nn::Module& m, double rtol = kRtol,
                     double atol = kAtol) {
  CAPTURE(name);
  fx.load_params(m, name);
  Tensor x = fx.input(name, 0);
  fx.check_backward(name, {m.forward(x)}, {x}, &m, rtol, atol);
}
}  // namespace

TEST_CASE("LayerNorm matches PyTorch") {
  Fixture fx("normalization");
  nn::LayerNorm a({6});
  run_module_case(fx, "layer_norm", a);
  nn::LayerNorm b({3, 4}, 1e-12);
  run_module_case(fx, "layer_norm_2d_eps", b);
  nn::LayerNorm c({5}, 1e-5, false);
  CHECK(c.named_parameters().empty());
  run_module_case(fx, "layer_norm_noaffine", c);
  CHECK(b.str() == "LayerNorm((3, 4), eps=1e-12, elementwise_affine=True)");
  SL_CHECK_THROWS(a.forward(randn({2, 5})), ShapeError, "");
}

TEST_CASE("GroupNorm matches PyTorch") {
  Fixture fx("normalization");
  nn::GroupNorm a(2, 4);
  run_module_case(fx, "group_norm", a);
  nn::GroupNorm b(3, 12, 1e-5, false);
  CHECK(b.named_parameters().empty());
  run_module_case(fx, "group_norm_2d_noaffine", b);
  nn::GroupNorm c(1, 4);
  run_module_case(fx, "group_norm_1group", c);
  // reprs as torch 1.13 prints them
  CHECK(a.str() == "GroupNorm(2, 4, eps=1e-05, affine=True)");
  CHECK(nn::GroupNorm(1, 3, 1e-3, false).str() == "GroupNorm(1, 3, eps=0.001, affine=False)");
}

TEST_CASE("group_norm: gradcheck in float64, empty inputs, errors") {
  manual_seed(12);
  const TensorOptions f64{.dtype = DType::f64};
  nn::GroupNorm gn(2, 4, 1e-5, true, f64);
  {
    NoGradGuard ng;
    gn.weight.normal_();
    gn.bias.normal_();
  }
  Tensor x = randn({2, 4, 3}, f64).requires_grad_();
  CHECK(module_gradcheck(gn, [&](const TensorList& in) { return gn.forward(in[0]); }, {x}));
  // An input with no elements (as PyTorch: empty output) still gives zero affine gradients.
  Tensor e = zeros({0, 4, 3}).requires_grad_();
  nn::GroupNorm g4(2, 4);
  Tensor y = g4.forward(e);
  CHECK(y.sizes() == Shape{0, 4, 3});
  y.sum().backward();
  CHECK(g4.weight.grad().sizes() == Shape{4});
  CHECK(g4.weight.grad().abs().max().item<float>() == 0.0f);
  // Errors, with PyTorch's conditions (its messages: "num_channels must be divisible by
  // num_groups", "Expected number of channels in input to be divisible by num_groups", "Expected
  // weight to be a vector of size equal to the number of channels").
  SL_CHECK_THROWS(nn::GroupNorm(3, 4), ValueError,
                  "GroupNorm: num_channels=4 must be divisible by num_groups=3");
  SL_CHECK_THROWS(nn::GroupNorm(0, 4), ValueError,
                  "GroupNorm: num_groups and num_channels must be >= 1, got 0 and 4");
  SL_CHECK_THROWS(g4.forward(zeros({2, 6})), ShapeError,
                  "GroupNorm: expected an input [N, 4, *], got [2, 6]");
  SL_CHECK_THROWS(group_norm(zeros({2, 6}), 4), ShapeError,
                  "group_norm: the 6 channels of input [2, 6] are not divisible by num_groups=4");
  SL_CHECK_THROWS(group_norm(zeros({2, 4, 3}), 2, ones({3})), ShapeError,
                  "group_norm: weight must be [4] (one per channel), got [3]");
  SL_CHECK_THROWS(group_norm(zeros({2, 4, 3}), 2, Tensor(), ones({4, 1})), ShapeError,
                  "group_norm: bias must be [4] (one per channel), got [4, 1]");
  SL_CHECK_THROWS(group_norm(zeros({4}), 2), ShapeError,
                  "group_norm: input must be [N, C, *], got shape [4]");
  SL_CHECK_THROWS(group_norm(zeros({2, 4}), 0), ValueError,
                  "group_norm: num_groups must be >= 1, got 0");
  SL_CHECK_THROWS(group_norm(zeros({2, 4}), 2, Tensor(), Tensor(), -1.0), ValueError,
                  "group_norm: eps must be >= 0, got -1");
}

TEST_CASE("BatchNorm matches PyTorch in training and eval, running statistics included") {
  Fixture fx("normalization");
  auto run = [&](const std::string& name, nn::BatchNormBase& m, bool training) {
    CAPTURE(name);
    m.train(training);
    fx.load_params(m, name);
    Tensor x = fx.input(name, 0);
    fx.check_backward(name, {m.forward(x)}, {x}, &m, kRtol, kAtol);
    SL_CHECK_CLOSE(m.running_mean, fx.get(name + ".after.running_mean"), kRtol, kAtol);
    SL_CHECK_CLOSE(m.running_var, fx.get(name + ".after.running_var"), kRtol, kAtol);
    CHECK(m.num_batches_tracked.item<int64_t>() ==
          fx.get(name + ".after.num_batches_tracked").item<int64_t>());
  };
  nn::BatchNorm1d a(3, {.momentum = 0.2});
  run("batch_norm1d_train", a, true);
  nn::BatchNorm1d b(3, {.momentum = 0.2});
  run("batch_norm1d_3d_train", b, true);
  nn::BatchNorm2d c(4);
  run("batch_norm2d_train", c, true);
  nn::BatchNorm2d d(4);
  run("batch_norm2d_eval", d, false);
  // momentum=None (PyTorch's cumulative moving average): the loaded count is 3, so the running
  // statistics move by 1/4 and the count ends at 4
  nn::BatchNorm1d e(3, {.momentum = std::nullopt});
  run("batch_norm1d_cma_train", e, true);
  CHECK(e.num_batches_tracked.item<int64_t>() == 4);
  CHECK(d.str() ==
        "BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
  CHECK(d.state_dict().keys() == std::vector<std::string>{"weight", "bias", "running_mean",
                                                          "running_var", "num_batches_tracked"});
  SL_CHECK_THROWS(d.forward(randn({2, 4, 3})), ShapeError,
                  "BatchNorm2d: expected 4D input (got 3D input)");
  SL_CHECK_THROWS(d.forward(randn({2, 3, 2, 2})), ShapeError, "expected 4 channels (dim 1)");
  SL_CHECK_THROWS(a.forward(randn({2, 3, 4, 5})), ShapeError,
                  "expected 2D or 3D input (got 4D input)");
}

TEST_CASE("BatchNorm eval differs from train; momentum=None averages cumulatively") {
  manual_seed(3);
  nn::BatchNorm1d bn(2, {.momentum = std::nullopt});
  Tensor x1 = randn({8, 2}) * 3.0 + 1.0, x2 = randn({8, 2}) - 2.0;
  bn.forward(x1);
  bn.forward(x2);
  // Cumulative average of the two batch means (factor 1/1 then 1/2).
  Tensor expected_mean = (x1.mean({0}) + x2.mean({0})) / 2.0;
  SL_CHECK_CLOSE(bn.running_mean, expected_mean, 1e-5, 1e-6);
  bn.eval();
  Tensor y = bn.forward(x1);
  Tensor expected = (x1 - bn.running_mean) / (bn.running_var + 1e-5).sqrt();
  SL_CHECK_CLOSE(y, expected, 1e-5, 1e-6);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 2);  // eval does not count
  nn::BatchNorm1d no_track(2, {.track_running_stats = false});
  no_track.eval();
  CHECK(no_track.state_dict().keys() == std::vector<std::string>{"weight", "bias"});
  Tensor z = no_track.forward(x1);  // batch statistics even in eval
  SL_CHECK_CLOSE(z.mean({0}), zeros({2}), 0, 1e-6);
}

TEST_CASE("InstanceNorm matches PyTorch: batched, unbatched, affine") {
  Fixture fx("normalization");
  nn::InstanceNorm1d a(3);
  CHECK(a.state_dict().keys() == split_lines(fx.meta("instance_norm1d.state_dict_keys")));
  CHECK(a.str() == fx.meta("instance_norm1d.repr"));
  run_module_case(fx, "instance_norm1d", a);
  nn::InstanceNorm2d b(4);
  run_module_case(fx, "instance_norm2d", b);
  nn::InstanceNorm2d c(4, 1e-5, 0.1, true);
  run_module_case(fx, "instance_norm2d_affine", c);
  nn::InstanceNorm2d d(3, 1e-5, 0.1, true);
  run_module_case(fx, "instance_norm2d_unbatched_affine", d);
  // without affine or running statistics any channel count passes (PyTorch 1.13): 5 != 3
  nn::InstanceNorm1d e(5);
  run_module_case(fx, "instance_norm1d_unbatched", e);
}

TEST_CASE("InstanceNorm with running statistics matches PyTorch in training, then eval") {
  Fixture fx("normalization");
  auto run = [&](const std::string& name, nn::InstanceNormBase& m, bool training) {
    CAPTURE(name);
    m.train(training);
    m.zero_grad();  // the fixture's eval gradients start from none, as PyTorch's run
    fx.load_params(m, name);
    Tensor x = fx.input(name, 0);
    fx.check_backward(name, {m.forward(x)}, {x}, &m, kRtol, kAtol);
    SL_CHECK_CLOSE(m.running_mean, fx.get(name + ".after.running_mean"), kRtol, kAtol);
    SL_CHECK_CLOSE(m.running_var, fx.get(name + ".after.running_var"), kRtol, kAtol);
    CHECK(m.num_batches_tracked.item<int64_t>() ==
          fx.get(name + ".after.num_batches_tracked").item<int64_t>());
  };
  // The eval case's params are what the training case left; the same module runs both, so the
  // running statistics it computed itself are checked against them as well.
  nn::InstanceNorm1d a(3, 1e-5, 0.2, true, true);
  run("instance_norm1d_track_train", a, true);
  run("instance_norm1d_track_eval", a, false);
  CHECK(a.str() == fx.meta("instance_norm1d_track_eval.repr"));
  CHECK(a.state_dict().keys() ==
        split_lines(fx.meta("instance_norm1d_track_eval.state_dict_keys")));
  nn::InstanceNorm2d b(3, 1e-5, 0.1, true, true);
  run("instance_norm2d_track_train", b, true);
  run("instance_norm2d_track_eval", b, false);  // unbatched [C, H, W] in eval
  CHECK(b.str() == fx.meta("instance_norm2d_track_eval.repr"));
  CHECK(b.state_dict().keys() ==
        split_lines(fx.meta("instance_norm2d_track_eval.state_dict_keys")));
}

TEST_CASE("instance_norm: gradcheck in float64, running statistics, errors") {
  manual_seed(13);
  const TensorOptions f64{.dtype = DType::f64};
  nn::InstanceNorm2d in2(3, 1e-5, 0.1, true, false, f64);
  {
    NoGradGuard ng;
    in2.weight.normal_();
    in2.bias.normal_();
  }
  Tensor x = randn({2, 3, 2, 3}, f64).requires_grad_();
  CHECK(module_gradcheck(in2, [&](const TensorList& in) { return in2.forward(in[0]); }, {x}));
  nn::InstanceNorm1d in1(3, 1e-5, 0.1, false, false, f64);
  Tensor xu = randn({3, 4}, f64).requires_grad_();  // unbatched
  CHECK(gradcheck([&](const TensorList& in) { return in1.forward(in[0]); }, {xu}));
  // eval with running statistics: an affine map of x per channel
  nn::InstanceNorm1d ev(3, 1e-5, 0.1, true, true, f64);
  {
    NoGradGuard ng;
    ev.weight.normal_();
    ev.running_mean.normal_();
    ev.running_var.uniform_(0.5, 2.0);
  }
  ev.eval();
  Tensor xe = randn({2, 3, 4}, f64).requires_grad_();
  CHECK(module_gradcheck(ev, [&](const TensorList& in) { return ev.forward(in[0]); }, {xe}));
  // The functional form's running update, against the definition (unbiased variance of each
  // slice, averaged over the batch), computed here from mean / var directly.
  Tensor rm = zeros({3}, f64), rv = ones({3}, f64);
  Tensor xr = randn({4, 3, 5}, f64);
  instance_norm(xr, rm, rv, Tensor(), Tensor(), true, 0.3);
  SL_CHECK_CLOSE(rm, xr.mean({2}).mean({0}) * 0.3, 1e-12, 1e-12);
  SL_CHECK_CLOSE(rv, xr.var({2}, 1).mean({0}) * 0.3 + 0.7, 1e-12, 1e-12);
  // Errors. PyTorch 1.13's: ValueError "expected 2D or 3D input (got 4D input)"; with affine or
  // running statistics a channel mismatch fails in its [N * C] batch norm ("weight should
  // contain 8 elements not 6"); ValueError "Expected more than 1 spatial element when
  // training". The rank errors are ShapeError here, as BatchNorm's.
  nn::InstanceNorm1d m1(3, 1e-5, 0.1, true);
  nn::InstanceNorm2d m2(3, 1e-5, 0.1, false, true);
  SL_CHECK_THROWS(m1.forward(zeros({2, 3, 4, 5})), ShapeError,
                  "InstanceNorm1d: expected 2D or 3D input (got 4D input)");
  SL_CHECK_THROWS(m2.forward(zeros({3, 4})), ShapeError,
                  "InstanceNorm2d: expected 3D or 4D input (got 2D input)");
  SL_CHECK_THROWS(m1.forward(zeros({2, 4, 5})), ShapeError,
                  "InstanceNorm1d: expected 3 channels (dim 1), got input of shape [2, 4, 5]");
  SL_CHECK_THROWS(m1.forward(zeros({4, 5})), ShapeError,
                  "InstanceNorm1d: expected 3 channels (dim 0), got input of shape [4, 5]");
  SL_CHECK_THROWS(m2.forward(zeros({2, 2, 4, 5})), ShapeError,
                  "InstanceNorm2d: expected 3 channels (dim 1), got input of shape [2, 2, 4, 5]");
  SL_CHECK_THROWS(m1.forward(zeros({2, 3, 1})), ValueError,
                  "instance_norm: expected more than 1 spatial element when training, got input "
                  "[2, 3, 1]");
  SL_CHECK_THROWS(nn::InstanceNorm2d(0), ValueError,
                  "InstanceNorm2d: num_features must be positive, got 0");
  SL_CHECK_THROWS(instance_norm(zeros({2, 3, 4}), Tensor(), Tensor(), Tensor(), Tensor(), false),
                  ValueError, "instance_norm: use_input_stats=false needs running_mean");
  SL_CHECK_THROWS(instance_norm(zeros({2, 3, 4}), zeros({2}), ones({2})), ShapeError,
                  "instance_norm: running_mean must be [3] (one per channel), got [2]");
  SL_CHECK_THROWS(instance_norm(zeros({3})), ShapeError,
                  "instance_norm: input must be [N, C, *], got shape [3]");
  // one spatial element is fine in eval with running statistics (PyTorch checks only when
  // using the input's statistics)
  m2.eval();
  CHECK(m2.forward(zeros({2, 3, 1, 1})).sizes() == Shape{2, 3, 1, 1});
}

TEST_CASE("Conv1d and Conv2d match PyTorch") {
  Fixture fx("conv");
  nn::Conv2d a(3, 4, 3);
  run_module_case(fx, "conv2d", a);
  nn::Conv2d b(2, 3, {3, 2}, {.stride = 2, .padding = 1});
  run_module_case(fx, "conv2d_stride_pad", b);
  nn::Conv2d c(2, 2, 3, {.padding = "same", .dilation = 2, .bias = false});
  run_module_case(fx, "conv2d_same_dil", c);
  nn::Conv2d d(4, 6, 3, {.padding = 1, .groups = 2});
  run_module_case(fx, "conv2d_groups", d);
  nn::Conv1d e(3, 5, 3, {.stride = 2, .padding = 1});
  run_module_case(fx, "conv1d", e);
  nn::Conv1d f(2, 2, 4, {.padding = "same"});
  run_module_case(fx, "conv1d_same", f);
  // "same" with odd total padding (PyTorch puts the extra element after): even kernels, dilated
  nn::Conv2d g(3, 4, {4, 2}, {.padding = "same", .dilation = {1, 3}});
  run_module_case(fx, "conv2d_same_even", g);
  nn::Conv1d h(3, 2, 4, {.padding = "same", .dilation = 3});
  run_module_case(fx, "conv1d_same_dil", h);
  // Reprs as torch 1.13 prints them.
  CHECK(a.str() == "Conv2d(3, 4, kernel_size=(3, 3), stride=(1, 1))");
  CHECK(c.str() ==
        "Conv2d(2, 2, kernel_size=(3, 3), stride=(1, 1), padding=same, dilation=(2, 2), "
        "bias=False)");
  CHECK(d.str() == "Conv2d(4, 6, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), groups=2)");
  CHECK(e.str() == "Conv1d(3, 5, kernel_size=(3,), stride=(2,), padding=(1,))");
  SL_CHECK_THROWS(nn::Conv2d(3, 4, 3, {.groups = 2}), ValueError,
                  "in_channels (3) must be divisible by groups (2)");
  SL_CHECK_THROWS(nn::Conv2d(2, 4, 3, {.stride = 2, .padding = "same"}), ValueError,
                  "padding='same' is not supported for strided convolutions");
  SL_CHECK_THROWS(a.forward(randn({1, 2, 5, 5})), ShapeError, "");
}

TEST_CASE("ConvTranspose1d and ConvTranspose2d match PyTorch") {
  Fixture fx("conv");
  // stride 2 with output_padding 1 (the extra row/column under the output-size formula's floor)
  nn::ConvTranspose2d a(3, 4, 3, {.stride = 2, .padding = 1, .output_padding = 1});
  run_module_case(fx, "conv_transpose2d_s2_op1", a);
  nn::ConvTranspose2d b(4, 6, {3, 2},
                        {.stride = {1, 2}, .padding = {2, 0}, .groups = 2, .dilation = 2});
  run_module_case(fx, "conv_transpose2d_groups_dil", b);
  // output_padding >= stride (allowed by dilation): the zero-padded input path of
  // Note [Transposed convolution], on both axes
  nn::ConvTranspose2d c(
      2, 3, 3, {.stride = {1, 2}, .output_padding = {1, 2}, .bias = false, .dilation = {2, 3}});
  run_module_case(fx, "conv_transpose2d_dil_op_nobias", c);
  nn::ConvTranspose1d d(3, 2, 4, {.stride = 3, .padding = 1, .output_padding = 2});
  run_module_case(fx, "conv_transpose1d_s3_op2", d);
  // unbatched [C, L] input
  nn::ConvTranspose1d e(4, 2, 3, {.padding = 1, .groups = 2, .dilation = 2});
  run_module_case(fx, "conv_transpose1d_unbatched_groups", e);
  // float64: both sides sum at most 2 * 2 * 3 = 12 products per value in double, so they agree
  // to a few ulps of values of magnitude <= ~10: rtol 1e-12, atol 1e-12
  nn::ConvTranspose2d f(2, 4, {2, 3},
                        {.stride = {2, 3},
                         .padding = {0, 1},
                         .output_padding = {1, 2},
                         .groups = 2,
                         .tensor_options = {.dtype = DType::f64}});
  run_module_case(fx, "conv_transpose2d_f64", f, 1e-12, 1e-12);
  {
    // forward(x, output_size): 12 x 14 within [10, 12] x [13, 15] (output_padding (2, 1))
    const std::string name = "conv_transpose2d_output_size";
    nn::ConvTranspose2d g(2, 3, 3, {.stride = 3, .padding = 1});
    fx.load_params(g, name);
    Tensor x = fx.input(name, 0);
    fx.check_backward(name, {g.forward(x, {12, 14})}, {x}, &g, kRtol, kAtol);
    // the full [N, C, H, W] form gives the same sizes (its leading sizes unchecked, as PyTorch)
    CHECK(g.forward(x, {1, 3, 12, 14}).sizes() == Shape{1, 3, 12, 14});
    CHECK(g.forward(x.squeeze(0), {3, 10, 13}).sizes() == Shape{3, 10, 13});
    // PyTorch's messages (ValueError), with the requested and valid sizes
    SL_CHECK_THROWS(g.forward(x, {9, 14}), ValueError,
                    "ConvTranspose2d: requested an output size of (9, 14), but valid sizes range "
                    "from (10, 13) to (12, 15) (for an input of spatial size (4, 5))");
    SL_CHECK_THROWS(g.forward(x, {12, 16}), ValueError, "valid sizes range from (10, 13) to");
    SL_CHECK_THROWS(g.forward(x, {12}), ValueError,
                    "ConvTranspose2d: for 4-d input, output_size must have 2 or 4 elements, got "
                    "(12,)");
    SL_CHECK_THROWS(g.forward(x.squeeze(0), {1, 3, 12, 14}), ValueError,
                    "for 3-d input, output_size must have 2 or 3 elements");
    nn::ConvTranspose1d h(2, 3, 3, {.stride = 2});
    CHECK(h.forward(randn({2, 5}), {12}).sizes() == Shape{3, 12});  // [11, 12]
    SL_CHECK_THROWS(h.forward(randn({2, 5}), {13}), ValueError,
                    "ConvTranspose1d: requested an output size of (13,), but valid sizes range "
                    "from (11,) to (12,)");
  }
  // Reprs as torch 1.13 prints them (printed there for these configurations).
  CHECK(a.str() ==
        "ConvTranspose2d(3, 4, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), "
        "output_padding=(1, 1))");
  CHECK(c.str() ==
        "ConvTranspose2d(2, 3, kernel_size=(3, 3), stride=(1, 2), dilation=(2, 3), "
        "output_padding=(1, 2), bias=False)");
  CHECK(b.str() ==
        "ConvTranspose2d(4, 6, kernel_size=(3, 2), stride=(1, 2), padding=(2, 0), "
        "dilation=(2, 2), groups=2)");
  CHECK(nn::ConvTranspose2d(4, 6, 3).str() ==
        "ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(1, 1))");
  CHECK(d.str() ==
        "ConvTranspose1d(3, 2, kernel_size=(4,), stride=(3,), padding=(1,), "
        "output_padding=(2,))");
  // PyTorch's transposed layout: weight [in, out / groups, *k]
  CHECK(b.weight.sizes() == Shape{4, 3, 3, 2});
  CHECK(b.bias.sizes() == Shape{6});
  SL_CHECK_THROWS(nn::ConvTranspose2d(4, 6, 3, {.groups = 4}), ValueError,
                  "ConvTranspose2d: out_channels (6) must be divisible by groups (4)");
  SL_CHECK_THROWS(nn::ConvTranspose2d(3, 4, 3, {.groups = 2}), ValueError,
                  "in_channels (3) must be divisible by groups (2)");
  SL_CHECK_THROWS(nn::ConvTranspose1d(0, 4, 3), ValueError,
                  "ConvTranspose1d: in_channels and out_channels must be positive, got 0 and 4");
  SL_CHECK_THROWS(nn::ConvTranspose2d(3, 4, {3, 0}), ValueError,
                  "ConvTranspose2d: kernel_size must be positive, got (3, 0)");
  // As PyTorch, an output_padding too large is refused by forward (output_size ignores it)
  nn::ConvTranspose2d big_op(2, 2, 3, {.stride = 2, .output_padding = 2});
  SL_CHECK_THROWS(big_op.forward(randn({1, 2, 3, 3})), ValueError,
                  "output_padding must be smaller than either stride or dilation");
  CHECK(big_op.forward(randn({1, 2, 3, 3}), {7, 8}).sizes() == Shape{1, 2, 7, 8});
  SL_CHECK_THROWS(a.forward(randn({1, 2, 5, 5})), ShapeError, "conv_transpose2d: input has 2");
}

TEST_CASE("ConvTranspose init: fan_in from weight.size(1) * kernel, as PyTorch") {
  // PyTorch's _ConvNd.reset_parameters on the transposed layout [in, out / groups, k...]:
  // kaiming_uniform(a=sqrt(5)) has bound gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in), and the
  // bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)), with fan_in = size(1) * 9 = 2 * 9 = 18 here (in
  // channels 16 would give 144, a bound 2.8x smaller).
  manual_seed(3);
  nn::ConvTranspose2d m(16, 4, 3, {.groups = 2});
  const double bound = 1.0 / std::sqrt(18.0);
  for (const Tensor& t : {m.weight, m.bias}) {
    const double mx = t.abs().max().item<double>();
    CHECK(mx <= bound);
    // 288 weights (4 biases) uniform on [-bound, bound]: the largest |value| is below 0.5 * bound
    // with probability 0.5^288 (0.5^4 = 1/16 for the bias, so the bias gets only <= bound)
    if (t.numel() > 100) CHECK(mx > 0.5 * bound);
  }
}

TEST_CASE("pooling modules match PyTorch") {
  Fixture fx("pooling");
  nn::MaxPool2d a(2);
  run_module_case(fx, "max_pool2d", a);
  nn::MaxPool2d b(3, 2, 1);
  run_module_case(fx, "max_pool2d_stride_pad", b);
  nn::AvgPool2d c(2);
  run_module_case(fx, "avg_pool2d", c);
  nn::AvgPool2d d(3, 2, 1, false, false);
  run_module_case(fx, "avg_pool2d_pad", d);
  nn::AdaptiveAvgPool2d e({3, 2});
  run_module_case(fx, "adaptive_avg_pool2d", e);
  nn::AdaptiveAvgPool2d f(1);
  run_module_case(fx, "adaptive_avg_pool2d_1", f);
  CHECK(a.str() == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
  CHECK(c.str() == "AvgPool2d(kernel_size=2, stride=2, padding=0)");
  CHECK(e.str() == "AdaptiveAvgPool2d(output_size=(3, 2))");
  SL_CHECK_THROWS(nn::AdaptiveAvgPool2d({-1, 2}), ValueError,
                  "AdaptiveAvgPool2d: output_size must be non-negative, got (-1, 2)");
  // nn.AdaptiveAvgPool2d((0, 2)) is accepted by PyTorch 1.13 and gives an empty [2, 3, 0, 2]
  nn::AdaptiveAvgPool2d empty_out({0, 2});
  CHECK(empty_out.forward(randn({2, 3, 4, 4})).sizes() == Shape{2, 3, 0, 2});
}

TEST_CASE("Dropout: train statistics, eval identity, gradient follows the mask") {
  manual_seed(9);
  nn::Dropout drop(0.25);
  Tensor x = ones({20000}).requires_grad_();
  Tensor y = drop.forward(x);
  double kept = y.ne(0.0).to(DType::f64).mean().item<double>();
  CHECK(std::fabs(kept - 0.75) < 0.015);  // ~5 standard errors of a Bernoulli mean at n=20000
  CHECK(y.max().item<double>() == doctest::Approx(1.0 / 0.75));
  y.sum().backward();
  SL_CHECK_CLOSE(x.grad(), y.detach(), 0, 0);  // d y_i / d x_i = mask_i / (1 - p) = y_i here
  drop.eval();
  Tensor z = drop.forward(x);
  SL_CHECK_CLOSE(z, x, 0, 0);
  CHECK(drop.str() == "Dropout(p=0.25, inplace=False)");
  SL_CHECK_THROWS(nn::Dropout(1.5), ValueError, "p must be in [0, 1], got 1.5");
}

namespace {
/// Checks a channel dropout's output y of an all-ones input: every entry is 0 or 1 / (1 - p)
/// rounded to y's dtype, exactly, and constant over `spatial` (the dims a channel spans); returns
/// the kept fraction of channels.
double check_channel_mask(const Tensor& y, double p, const std::vector<int64_t>& spatial) {
  Tensor d = y.detach().to(DType::f64);
  const double scale = scalar_tensor(1.0 / (1.0 - p), {.dtype = y.dtype()}).item<double>();
  CHECK(d.eq(0.0).logical_or(d.eq(scale)).all().item<bool>());
  SL_CHECK_CLOSE(d.amax(spatial), d.amin(spatial), 0, 0);  // whole channels
  return d.amax(spatial).ne(0.0).to(DType::f64).mean().item<double>();
}
}  // namespace

TEST_CASE("Dropout1d and Dropout2d zero whole channels, as PyTorch 1.13") {
  namespace F = sl::nn::functional;
  manual_seed(10);
  const double p = 0.25;
  // 10000 channels: the kept fraction's standard error is sqrt(0.75 * 0.25 / 1e4) = 0.0043; the
  // bound 0.022 is ~5 standard errors
  SUBCASE("Dropout1d, batched [N, C, L]: mask per (n, c), gradient follows it") {
    nn::Dropout1d drop(p);
    Tensor x = ones({100, 100, 6}).requires_grad_();
    Tensor y = drop.forward(x);
    CHECK(y.sizes() == x.sizes());
    CHECK(std::fabs(check_channel_mask(y, p, {2}) - 0.75) < 0.022);
    y.sum().backward();
    SL_CHECK_CLOSE(x.grad(), y.detach(), 0, 0);  // d y / d x = mask / (1 - p) = y here
    drop.eval();
    CHECK(drop.forward(x).is_same(x));
  }
  SUBCASE("Dropout1d, unbatched [C, L]: mask per channel") {
    Tensor y = nn::Dropout1d(p).forward(ones({10000, 3}));
    CHECK(y.sizes() == Shape{10000, 3});
    CHECK(std::fabs(check_channel_mask(y, p, {1}) - 0.75) < 0.022);
  }
  SUBCASE("Dropout2d, [N, C, H, W]: mask per (n, c) over H, W") {
    Tensor x = ones({100, 100, 2, 3}).requires_grad_();
    Tensor y = nn::Dropout2d(p).forward(x);
    CHECK(std::fabs(check_channel_mask(y, p, {2, 3}) - 0.75) < 0.022);
    y.sum().backward();
    SL_CHECK_CLOSE(x.grad(), y.detach(), 0, 0);
  }
  SUBCASE("Dropout2d on 3-d input is PyTorch 1.13's [N, C, L] (1-d) dropout, not [C, H, W]") {
    // as unbatched [C, H, W], each x[c] would be all zero or all kept; as [N, C, L] the rows
    // x[n][c] are masked apart: among 200 rows of one x[n] both occur (all alike: 2 * 0.5^200)
    Tensor y = F::dropout2d(ones({2, 200, 5}), 0.5);
    check_channel_mask(y, 0.5, {2});
    Tensor row_kept = y[0].amax({1}).ne(0.0);
    CHECK(row_kept.any().item<bool>());
    CHECK_FALSE(row_kept.all().item<bool>());
  }
  SUBCASE("p = 1 zeroes, p = 0 and eval are the identity") {
    Tensor x = randn({2, 3, 4});
    SL_CHECK_CLOSE(F::dropout1d(x, 1.0), zeros_like(x), 0, 0);
    SL_CHECK_CLOSE(F::dropout2d(x.unsqueeze(0), 1.0), zeros({1, 2, 3, 4}), 0, 0);
    CHECK(F::dropout1d(x, 0.0).is_same(x));
    CHECK(F::dropout2d(x, 0.7, false).is_same(x));
    nn::Dropout2d d2(0.5);
    d2.eval();
    CHECK(d2.forward(x).is_same(x));
  }
  SUBCASE("gradcheck in float64 with a fixed mask (the generator reseeded per call)") {
    Tensor x = randn({2, 3, 4}, {.dtype = DType::f64}).requires_grad_();
    CHECK(gradcheck(
        [](const TensorList& in) {
          manual_seed(77);
          return F::dropout1d(in[0], 0.4);
        },
        {x}));
    Tensor x4 = randn({2, 3, 2, 2}, {.dtype = DType::f64}).requires_grad_();
    CHECK(gradcheck(
        [](const TensorList& in) {
          manual_seed(78);
          return nn::Dropout2d(0.4).forward(in[0]);
        },
        {x4}));
  }
  SUBCASE("errors and reprs") {
    CHECK(nn::Dropout1d(0.25).str() == "Dropout1d(p=0.25, inplace=False)");  // torch 1.13's
    CHECK(nn::Dropout2d().str() == "Dropout2d(p=0.5, inplace=False)");
    SL_CHECK_THROWS(nn::Dropout1d(1.5), ValueError, "Dropout1d: p must be in [0, 1], got 1.5");
    SL_CHECK_THROWS(nn::Dropout2d(-0.5), ValueError, "Dropout2d: p must be in [0, 1], got -0.5");
    SL_CHECK_THROWS(F::dropout1d(ones({2, 3}), -0.1), ValueError,
                    "dropout1d: p must be in [0, 1], got -0.1");
    SL_CHECK_THROWS(F::dropout1d(ones({2, 3, 4, 5})), ShapeError,
                    "dropout1d: expected a 2-d [C, L] or 3-d [N, C, L] input, got [2, 3, 4, 5]");
    SL_CHECK_THROWS(F::dropout1d(ones({4})), ShapeError,
                    "dropout1d: expected a 2-d [C, L] or 3-d [N, C, L] input, got [4]");
    SL_CHECK_THROWS(F::dropout2d(ones({4})), ShapeError,
                    "dropout2d: expected an input of at least 2 dims, got [4]");
    SL_CHECK_THROWS(F::dropout2d(ones({2, 3, 4}, {.dtype = DType::i64})), DTypeError,
                    "dropout2d: expected a floating input, got int64");
    SL_CHECK_THROWS(nn::Dropout1d().forward(Tensor()), ValueError,
                    "Dropout1d: the input is undefined");
    SL_CHECK_THROWS(F::dropout2d(Tensor()), ValueError, "dropout2d");
  }
}

TEST_CASE("conv, norm and pooling modules gradcheck in float64") {
  manual_seed(6);
  TensorOptions f64{.dtype = DType::f64};
  nn::Conv2d conv(2, 2, 3, {.stride = 2, .padding = 1, .tensor_options = f64});
  Tensor x = randn({1, 2, 5, 5}, f64).requires_grad_();
  CHECK(module_gradcheck(conv, [&](const TensorList& in) { return conv.forward(in[0]); }, {x}));
  nn::Conv1d conv1(2, 3, 2, {.dilation = 2, .tensor_options = f64});
  Tensor x1 = randn({2, 2, 6}, f64).requires_grad_();
  CHECK(module_gradcheck(conv1, [&](const TensorList& in) { return conv1.forward(in[0]); }, {x1}));
  // "same" with asymmetric padding (totals 1 and 3): the stride-1 backward paths
  nn::Conv2d same(2, 2, {2, 2}, {.padding = "same", .dilation = {1, 3}, .tensor_options = f64});
  Tensor xs = randn({1, 2, 4, 5}, f64).requires_grad_();
  CHECK(module_gradcheck(same, [&](const TensorList& in) { return same.forward(in[0]); }, {xs}));
  // transposed: output_padding under the stride, then above it (dilated: padded-input path)
  nn::ConvTranspose2d convt(
      2, 4, 3,
      {.stride = 2, .padding = 1, .output_padding = 1, .groups = 2, .tensor_options = f64});
  Tensor xt = randn({2, 2, 3, 2}, f64).requires_grad_();
  CHECK(module_gradcheck(convt, [&](const TensorList& in) { return convt.forward(in[0]); }, {xt}));
  nn::ConvTranspose1d convt1(2, 3, 2, {.output_padding = 1, .dilation = 2, .tensor_options = f64});
  Tensor xt1 = randn({2, 2, 4}, f64).requires_grad_();
  CHECK(
      module_gradcheck(convt1, [&](const TensorList& in) { return convt1.forward(in[0]); }, {xt1}));
  nn::LayerNorm ln({4}, 1e-5, true, f64);
  Tensor x2 = randn({3, 4}, f64).requires_grad_();
  {
    NoGradGuard ng;
    ln.weight.normal_();
    ln.bias.normal_();
  }
  CHECK(module_gradcheck(ln, [&](const TensorList& in) { return ln.forward(in[0]); }, {x2}));
  nn::BatchNorm2d bn(2, {.tensor_options = f64});
  Tensor x3 = randn({3, 2, 2, 2}, f64).requires_grad_();
  CHECK(module_gradcheck(bn, [&](const TensorList& in) { return bn.forward(in[0]); }, {x3}));
  nn::MaxPool2d mp(2);
  nn::AvgPool2d ap(2, 1);
  nn::AdaptiveAvgPool2d aap({2, 3});
  Tensor x4 = randn({1, 1, 4, 5}, f64).requires_grad_();
  CHECK(gradcheck([&](const TensorList& in) { return aap.forward(ap.forward(in[0])); }, {x4}));
  CHECK(gradcheck([&](const TensorList& in) { return mp.forward(in[0]); }, {x4}));
}

// InstanceNorm3d: parity with PyTorch 1.13 (fixtures: normalization, the instance_norm3d_* cases
// of tools/gen_nn_fixtures.py) batched and unbatched, with and without affine, running statistics
// over two training steps and then in eval; a float64 gradcheck; errors.
#include "fixture.h"
#include "nn/normalization.h"

using namespace sl;
using sl::testing::Fixture;
using sl::testing::module_gradcheck;
using sl::testing::split_lines;

namespace {

// float32 against PyTorch's float32: the statistics are sums over at most 24 elements per
// slice, summed in another order than PyTorch's kernels (a few float32 roundings), as the
// 1d/2d InstanceNorm cases in test_layers_kernels.cpp.
constexpr double kRtol = 1e-5, kAtol = 1e-6;

/// Loads the case's state into m, runs forward and backward in the given mode and checks the
/// output, the input and parameter gradients and (when tracked) the running statistics after.
void run_case(const Fixture& fx, const std::string& name, nn::InstanceNorm3d& m, bool training) {
  CAPTURE(name);
  m.train(training);
  m.zero_grad();  // each case's gradients start from none, as the generator's
  fx.load_params(m, name);
  Tensor x = fx.input(name, 0);
  fx.check_backward(name, {m.forward(x)}, {x}, &m, kRtol, kAtol);
  if (!m.track_running_stats) return;
  SL_CHECK_CLOSE(m.running_mean, fx.get(name + ".after.running_mean"), kRtol, kAtol);
  SL_CHECK_CLOSE(m.running_var, fx.get(name + ".after.running_var"), kRtol, kAtol);
  CHECK(m.num_batches_tracked.item<int64_t>() ==
        fx.get(name + ".after.num_batches_tracked").item<int64_t>());
}

}  // namespace

TEST_CASE("InstanceNorm3d matches PyTorch: affine batched, unbatched without affine") {
  Fixture fx("normalization");
  nn::InstanceNorm3d a(3, 1e-5, 0.1, true);
  CHECK(a.str() == fx.meta("instance_norm3d_affine.repr"));
  CHECK(a.state_dict().keys() == split_lines(fx.meta("instance_norm3d_affine.state_dict_keys")));
  run_case(fx, "instance_norm3d_affine", a, true);
  nn::InstanceNorm3d b(2);
  CHECK(b.str() == fx.meta("instance_norm3d_unbatched.repr"));
  CHECK(b.state_dict().keys() == split_lines(fx.meta("instance_norm3d_unbatched.state_dict_keys")));
  run_case(fx, "instance_norm3d_unbatched", b, true);  // [C, D, H, W]
  CHECK(fx.input("instance_norm3d_unbatched", 0).dim() == 4);
}

TEST_CASE("InstanceNorm3d with running statistics: two training steps, then eval, as PyTorch") {
  // One module runs every case in turn, so the statistics it computed itself in the first step
  // are those the second starts from (and the fixture's "<case>.param.*", loaded before each
  // case, are PyTorch's from its own run: checked against ours by the "after" of the case
  // before). Eval normalises with the running statistics, batched and unbatched.
  Fixture fx("normalization");
  nn::InstanceNorm3d m(3, 1e-5, 0.3, true, true);
  run_case(fx, "instance_norm3d_track_train1", m, true);
  run_case(fx, "instance_norm3d_track_train2", m, true);
  run_case(fx, "instance_norm3d_track_eval", m, false);
  run_case(fx, "instance_norm3d_track_eval_unbatched", m, false);
  CHECK(m.str() == fx.meta("instance_norm3d_track_eval.repr"));
  CHECK(m.state_dict().keys() ==
        split_lines(fx.meta("instance_norm3d_track_eval.state_dict_keys")));
  // the second step moved the statistics again (so the two-step check is not one step twice)
  CHECK((fx.get("instance_norm3d_track_train2.after.running_mean") -
         fx.get("instance_norm3d_track_train1.after.running_mean"))
            .abs()
            .max()
            .item<float>() > 1e-3);
}

TEST_CASE("InstanceNorm3d: gradcheck in float64, training and eval with running statistics") {
  manual_seed(14);
  const TensorOptions f64{.dtype = DType::f64};
  nn::InstanceNorm3d m(2, 1e-5, 0.1, true, true, f64);
  {
    NoGradGuard ng;
    m.weight.normal_();
    m.bias.normal_();
    m.running_mean.normal_();
    m.running_var.uniform_(0.5, 2.0);
  }
  auto fn = [&](const TensorList& in) { return m.forward(in[0]); };
  Tensor x = randn({2, 2, 2, 3, 2}, f64).requires_grad_();
  CHECK(module_gradcheck(m, fn, {x}));
  Tensor xu = randn({2, 3, 2, 2}, f64).requires_grad_();  // unbatched
  CHECK(module_gradcheck(m, fn, {xu}));
  m.eval();
  CHECK(module_gradcheck(m, fn, {x}));
}

TEST_CASE("InstanceNorm3d: errors name the module, the shape and what was expected") {
  // PyTorch 1.13 raises ValueError "expected 4D or 5D input (got 3D input)" and, for one spatial
  // element when using the input's statistics, "Expected more than 1 spatial element when
  // training"; the rank errors are ShapeError here, as InstanceNorm1d/2d's.
  nn::InstanceNorm3d m(3, 1e-5, 0.1, true);
  SL_CHECK_THROWS(m.forward(zeros({3, 4, 5})), ShapeError,
                  "InstanceNorm3d: expected 4D or 5D input (got 3D input)");
  SL_CHECK_THROWS(m.forward(zeros({1, 2, 3, 2, 2, 2})), ShapeError,
                  "InstanceNorm3d: expected 4D or 5D input (got 6D input)");
  SL_CHECK_THROWS(
      m.forward(zeros({2, 4, 2, 2, 2})), ShapeError,
      "InstanceNorm3d: expected 3 channels (dim 1), got input of shape [2, 4, 2, 2, 2]");
  SL_CHECK_THROWS(m.forward(zeros({2, 2, 2, 2})), ShapeError,
                  "InstanceNorm3d: expected 3 channels (dim 0), got input of shape [2, 2, 2, 2]");
  SL_CHECK_THROWS(m.forward(zeros({2, 3, 1, 1, 1})), ValueError,
                  "instance_norm: expected more than 1 spatial element when training, got input "
                  "[2, 3, 1, 1, 1]");
  SL_CHECK_THROWS(m.forward(zeros({3, 1, 1, 1})), ValueError,
                  "instance_norm: expected more than 1 spatial element when training, got input "
                  "[1, 3, 1, 1, 1]");
  SL_CHECK_THROWS(nn::InstanceNorm3d(0), ValueError,
                  "InstanceNorm3d: num_features must be positive, got 0");
  // eval with running statistics normalises one element per slice too (PyTorch checks the
  // spatial size only when using the input's statistics)
  nn::InstanceNorm3d t(3, 1e-5, 0.1, false, true);
  t.eval();
  CHECK(t.forward(zeros({2, 3, 1, 1, 1})).sizes() == Shape{2, 3, 1, 1, 1});
  // without affine or running statistics any channel count passes, as PyTorch 1.13
  nn::InstanceNorm3d plain(3);
  CHECK(plain.forward(randn({1, 5, 2, 2, 2})).sizes() == Shape{1, 5, 2, 2, 2});
}

// Activation checkpointing: same gradients as the plain forward, fewer live activations,
// replayed randomness, unchanged names.
#include "nn/activation.h"
#include "nn/checkpoint.h"
#include "nn/containers.h"
#include "nn/linear.h"
#include "support/testing.h"

using namespace sl;

namespace {
std::shared_ptr<nn::Sequential> mlp(int64_t width) {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(width, 4 * width), std::make_shared<nn::GELU>(),
      std::make_shared<nn::Linear>(4 * width, width), std::make_shared<nn::Tanh>()});
}
}  // namespace

TEST_CASE("checkpointed module gives the same gradients, bit for bit") {
  manual_seed(0);
  auto plain = mlp(8);
  auto inner = mlp(8);
  CHECK(inner->load_state_dict(plain->state_dict()).ok());
  auto wrapped = std::make_shared<nn::CheckpointWrapper>(inner);
  Tensor x1 = randn({3, 8}).requires_grad_();
  Tensor x2 = x1.detach().clone().requires_grad_();
  plain->forward(x1).square().sum().backward();
  wrapped->forward(x2).square().sum().backward();
  // The recompute runs the same kernels on the same values, so the results are identical.
  SL_CHECK_CLOSE(x2.grad(), x1.grad(), 0, 0);
  auto pa = plain->named_parameters(), pb = wrapped->named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    CHECK(pa[i].first == pb[i].first);
    SL_CHECK_CLOSE(pb[i].second.grad(), pa[i].second.grad(), 0, 0);
  }
}

TEST_CASE("checkpoint keeps no activations alive between forward and backward") {
  manual_seed(1);
  auto net = mlp(64);
  Tensor x = randn({256, 64}).requires_grad_();
  auto live_after_forward = [&](bool ckpt) {
    int64_t before = memory_stats().live_bytes;
    Tensor y = ckpt ? nn::checkpoint([&](const TensorList& in) { return net->forward(in[0]); }, {x},
                                     net->parameters())
                    : net->forward(x);
    int64_t held = memory_stats().live_bytes - before;
    y.sum().backward();
    return held;
  };
  int64_t plain = live_after_forward(false), ckpt = live_after_forward(true);
  // Plain forward keeps the two [256, 256] hidden activations (256 KiB each);
  // checkpointing keeps only the [256, 64] output (64 KiB).
  CHECK(ckpt <= 256 * 64 * 4);
  CHECK(plain >= 2 * 256 * 256 * 4);
}

TEST_CASE("checkpoint replays the default generator for random ops") {
  // fn draws a dropout-like mask from the default generator; backward must see the same mask.
  auto fn = [](const TensorList& in) {
    Tensor keep = rand_like(in[0]).lt(0.5).to(in[0].dtype());
    return in[0] * keep * 2.0;
  };
  Tensor x = randn({50}).requires_grad_();
  manual_seed(7);
  Tensor y = nn::checkpoint(fn, {x});
  Tensor after_forward = rand({4});  // the stream moves on after the forward
  y.sum().backward();
  // d(sum y)/dx = 2 * keep, and keep is visible in y itself: y = 2 x keep.
  Tensor expected = y.detach().ne(0.0).to(DType::f32) * 2.0;
  SL_CHECK_CLOSE(x.grad(), expected, 0, 0);
  // Backward restored the generator where it was: the next draw continues the stream.
  manual_seed(7);
  (void)rand_like(x);
  Tensor again = rand({4});
  Tensor next_after_backward = rand({4});
  SL_CHECK_CLOSE(again, after_forward, 0, 0);
  CHECK_FALSE(equal(next_after_backward, again));
}

TEST_CASE("checkpoint gradcheck and passthrough without grad") {
  manual_seed(2);
  Tensor w = randn({3, 3}, {.dtype = DType::f64}).requires_grad_();
  Tensor x = randn({2, 3}, {.dtype = DType::f64}).requires_grad_();
  // The parameter reaches fn by capture (as a module's weights do), not through its inputs.
  auto make_fn = [](const Tensor& wt) {
    return [wt](const TensorList& in) { return matmul(in[0], wt).tanh() * in[0]; };
  };
  CHECK(gradcheck(
      [&](const TensorList& in) { return nn::checkpoint(make_fn(in[1]), {in[0]}, {in[1]}); },
      {x, w}));
  auto fn = make_fn(w);
  {
    NoGradGuard ng;
    Tensor y = nn::checkpoint(fn, {x}, {w});
    CHECK_FALSE(y.requires_grad());
  }
  // An identity function still gets its own output tensor.
  Tensor xi = randn({2}).requires_grad_();
  Tensor yi = nn::checkpoint([](const TensorList& in) { return in[0]; }, {xi});
  yi.sum().backward();
  SL_CHECK_CLOSE(xi.grad(), ones({2}), 0, 0);
}

TEST_CASE("CheckpointWrapper keeps names, state dict, modes and leaf hooks") {
  nn::Sequential model{mlp(4), mlp(4)};
  auto names_before = model.state_dict().keys();
  std::string repr_before = model.str();
  model.replace_module("1", std::make_shared<nn::CheckpointWrapper>(model[1]));
  CHECK(model.state_dict().keys() == names_before);
  CHECK(model.str() == repr_before);
  model.eval();
  auto w = std::dynamic_pointer_cast<nn::CheckpointWrapper>(model[1]);
  CHECK_FALSE(w->wrapped()->is_training());
  model.train();
  int fired = 0;
  Tensor p = model.get_parameter("1.2.weight");
  p.register_post_accumulate_grad_hook([&](const Tensor&) { ++fired; });
  model.forward(randn({2, 4})).sum().backward();
  CHECK(fired == 1);
  SL_CHECK_THROWS(nn::CheckpointWrapper(nullptr), ValueError, "the wrapped module is null");
}

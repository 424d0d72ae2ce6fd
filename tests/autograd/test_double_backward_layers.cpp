// Double backward (create_graph) through the layers whose plain backward is a kernel: the
// normalisations (layer_norm, batch_norm in training and eval, group_norm, instance_norm;
// norm_backward_graph in autograd/ops/norm.cpp), the pools (Note [Pool double backward] in
// autograd/ops/pool.cpp), interpolate in every mode, LSTM / GRU cells and layers (Note [RNN double
// backward] in autograd/ops/rnn.cpp), dropout, attention (the fused path and the
// unfused one's masked softmax) and linear_act (through the op-case sweep in
// test_double_backward.cpp). References: gradgradcheck (central differences of the first-order
// gradient in float64, gradcheck's default tolerances), and the first-order gradient under
// create_graph against the kernel's.
#include <functional>

#include "autograd/ops/attention.h"
#include "autograd/ops/dropout.h"
#include "autograd/ops/embedding_bag.h"
#include "autograd/ops/norm.h"
#include "autograd/ops/pool.h"
#include "autograd/ops/rnn.h"
#include "autograd/ops/upsample.h"
#include "support/testing.h"

using namespace sl;
using namespace sl::testing;

namespace {
Tensor param(const Shape& s) {
  return randn(s, {.dtype = DType::f64}).requires_grad_();
}
}  // namespace

TEST_CASE("double backward: layer_norm, with and without its affine part") {
  manual_seed(21);
  Tensor x = param({2, 3, 4}), w = param({3, 4}), b = param({3, 4}), w1 = param({4});
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return layer_norm(in[0], {3, 4}, in[1], in[2], 1e-5);
      },
      {x, w, b}));
  CHECK(gradgradcheck([](const TensorList& in) { return layer_norm(in[0], {4}, in[1]); }, {x, w1}));
  CHECK(gradgradcheck([](const TensorList& in) { return layer_norm(in[0], {2, 3, 4}); }, {x}));
}

TEST_CASE("double backward: batch_norm in training (batch statistics) and in eval") {
  manual_seed(22);
  Tensor x = param({3, 2, 2, 2}), w = param({2}), b = param({2}), x2 = param({5, 3});
  Tensor w3 = param({3}), b3 = param({3});
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5);
      },
      {x, w, b}));
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5);
      },
      {x2, w3, b3}));
  // eval: the running statistics are constants; the training forward also updates them, so each
  // gradgradcheck evaluation uses fresh copies in training mode
  Tensor rm = from_vector(std::vector<double>{0.25, -0.5}, {2});
  Tensor rv = from_vector(std::vector<double>{1.5, 0.75}, {2});
  CHECK(gradgradcheck(
      [&](const TensorList& in) {
        return batch_norm(in[0], rm, rv, in[1], in[2], false, 0.1, 1e-5);
      },
      {x, w, b}));
  CHECK(gradgradcheck(
      [&](const TensorList& in) {
        return batch_norm(in[0], rm.clone(), rv.clone(), in[1], in[2], true, 0.1, 1e-5);
      },
      {x, w, b}));
}

TEST_CASE("double backward: group_norm and instance_norm (layer_norm over a view)") {
  manual_seed(23);
  Tensor x = param({2, 4, 3}), w = param({4}), b = param({4});
  CHECK(gradgradcheck([](const TensorList& in) { return group_norm(in[0], 2, in[1], in[2]); },
                      {x, w, b}));
  CHECK(gradgradcheck(
      [](const TensorList& in) {
        return instance_norm(in[0], Tensor(), Tensor(), in[1], in[2], true, 0.1, 1e-5);
      },
      {x, w, b}));
}

TEST_CASE("double backward: the first-order gradient under create_graph is the kernel's") {
  manual_seed(24);
  Tensor x = param({4, 3, 5}), w = param({3}), b = param({3}),
         g = randn({4, 3, 5}, {.dtype = DType::f64});
  auto check_same = [&](const std::function<Tensor()>& f, const Tensor& gy) {
    variable_list plain = grad({f()}, {x, w, b}, {gy});
    variable_list graph = grad({f()}, {x, w, b}, {gy}, false, /*create_graph=*/true);
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      // grad bias = sum(g) depends on nothing that requires grad
      CHECK(graph[i].requires_grad() == (i < 2));
      // the same formula evaluated in another order: float64 roundoff only
      CHECK(allclose(graph[i].detach(), plain[i], 1e-12, 1e-12));
    }
  };
  check_same([&] { return batch_norm(x, Tensor(), Tensor(), w, b, true, 0.1, 1e-5); }, g);
  // a non-contiguous input normalised over its last dim
  check_same([&] { return layer_norm(x.transpose(1, 2), {3}, w, b); }, g.transpose(1, 2));
}

TEST_CASE("double backward: a gradient penalty through layer_norm and batch_norm") {
  manual_seed(25);
  Tensor w = param({6, 4}), lw = param({6}), lb = param({6}), bw = param({6}), bb = param({6});
  Tensor x = randn({5, 4}, {.dtype = DType::f64});
  // R1-style |dD/dx|^2 with D = sum(tanh(batch_norm(layer_norm(x W^T)))), gradchecked as a
  // function of the parameters: its gradient is a second derivative of D
  auto penalty = [&x](const TensorList& in) {
    EnableGradGuard eg;
    Tensor xi = x.detach().requires_grad_();
    Tensor h = layer_norm(linear(xi, in[0]), {6}, in[1], in[2]);
    Tensor d = tanh(batch_norm(h, Tensor(), Tensor(), in[3], in[4], true, 0.1, 1e-5)).sum();
    variable_list gx = grad({d}, {xi}, {}, true, true);
    return gx[0].square().sum();
  };
  CHECK(gradcheck(penalty, {w, lw, lb, bw, bb}));
}

TEST_CASE("double backward: max, average and adaptive pools, 2-d and 1-d") {
  manual_seed(26);
  // distinct values, so that no window has a tie within the finite-difference step
  Tensor x = (randperm(2 * 3 * 5 * 6).to(DType::f64) * 0.1 - 4.0).reshape({2, 3, 5, 6});
  x.requires_grad_();
  Tensor x1 = param({2, 3, 7});
  // an outer nonlinearity, so that the second derivative w.r.t. x is not zero everywhere
  auto sq = [](const Tensor& t) { return t * t; };
  CHECK(gradgradcheck([&](const TensorList& in) { return sq(max_pool2d(in[0], 2, 2, 1)); }, {x}));
  CHECK(gradgradcheck([&](const TensorList& in) { return sq(max_pool2d(in[0], 3, 1, 1, 2, true)); },
                      {x}));
  CHECK(gradgradcheck(
      [&](const TensorList& in) { return sq(avg_pool2d(in[0], 3, 2, 1, true, false)); }, {x}));
  CHECK(gradgradcheck(
      [&](const TensorList& in) { return sq(avg_pool2d(in[0], 2, 1, 0, false, true, 3)); }, {x}));
  CHECK(gradgradcheck(
      [&](const TensorList& in) {
        return sq(adaptive_avg_pool2d(in[0], {3, 4}));
      },
      {x}));
  CHECK(gradgradcheck(
      [&](const TensorList& in) {
        return sq(adaptive_max_pool2d(in[0], {int64_t{2}, int64_t{4}}));
      },
      {x}));
  CHECK(gradgradcheck([&](const TensorList& in) { return sq(max_pool1d(in[0], 2)); }, {x1}));
  CHECK(gradgradcheck([&](const TensorList& in) { return sq(avg_pool1d(in[0], 3, 2, 1)); }, {x1}));
  CHECK(
      gradgradcheck([&](const TensorList& in) { return sq(adaptive_avg_pool1d(in[0], 4)); }, {x1}));
  // unbatched [C, H, W]
  CHECK(gradgradcheck([&](const TensorList& in) { return sq(max_pool2d(in[0].select(0, 0), 2)); },
                      {x}));
}

TEST_CASE("double backward: average pools' gradients are twice differentiable (third order)") {
  // the adjoint op's own gradient is the pool again: differentiate three times
  manual_seed(27);
  Tensor x = param({1, 2, 4, 4});
  auto third = [](const TensorList& in) {
    EnableGradGuard eg;
    Tensor xi = in[0].requires_grad() ? in[0] : in[0].detach().requires_grad_();
    Tensor y = avg_pool2d(xi, 2, 1).pow(3).sum() + adaptive_avg_pool2d(xi, {3, 3}).pow(3).sum();
    variable_list g = grad({y}, {xi}, {}, true, true);
    return g[0];
  };
  CHECK(gradgradcheck(third, {x}));
}

TEST_CASE("double backward: dropout keeps its mask") {
  Tensor x = param({4, 5});
  const GeneratorState state{1234, 0};
  // the same mask in every evaluation: dropout_seeded draws it from a fixed state
  CHECK(gradgradcheck(
      [&](const TensorList& in) { return dropout_seeded(in[0], 0.4, state).pow(2); }, {x}));
  Tensor g = randn({4, 5}, {.dtype = DType::f64});
  variable_list plain = grad({dropout_seeded(x, 0.4, state)}, {x}, {g});
  variable_list graph = grad({dropout_seeded(x, 0.4, state)}, {x}, {g}, false, true);
  CHECK(allclose(graph[0].detach(), plain[0], 1e-15, 0));
}

TEST_CASE("double backward: scaled dot-product attention, fused and unfused") {
  manual_seed(28);
  Tensor q = param({2, 3, 4}), k = param({2, 5, 4}), v = param({2, 5, 3});
  Tensor bool_mask = rand({3, 5}).gt(0.3);  // some keys masked per query
  for (int i = 0; i < 3; ++i) bool_mask.select(0, i).select(0, i).fill_(true);  // none empty
  Tensor add_mask = randn({3, 5}, {.dtype = DType::f64});
  auto sdpa = [&](const Tensor& mask, bool causal) {
    return [&, mask, causal](const TensorList& in) {
      return scaled_dot_product_attention(in[0], in[1], in[2], mask, 0.0, causal);
    };
  };
  for (AttentionBackend backend : {AttentionBackend::unfused, AttentionBackend::fused}) {
    CAPTURE(static_cast<int>(backend));
    const AttentionBackend before = set_attention_backend(backend);
    CHECK(gradgradcheck(sdpa(Tensor(), false), {q, k, v}));
    CHECK(gradgradcheck(sdpa(bool_mask, false), {q, k, v}));
    CHECK(gradgradcheck(sdpa(add_mask, true), {q, k, v}));
    // the first-order gradient under create_graph against the kernels'
    Tensor g = randn({2, 3, 3}, {.dtype = DType::f64});
    auto y = [&] { return scaled_dot_product_attention(q, k, v, bool_mask, 0.0, false); };
    variable_list plain = grad({y()}, {q, k, v}, {g});
    variable_list graph = grad({y()}, {q, k, v}, {g}, false, /*create_graph=*/true);
    for (size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      CHECK(graph[i].requires_grad());
      CHECK(allclose(graph[i].detach(), plain[i], 1e-12, 1e-12));  // f64 roundoff
    }
    set_attention_backend(before);
  }
}

TEST_CASE("double backward: interpolate in every mode (linear maps recorded with their adjoints)") {
  manual_seed(29);
  Tensor x3 = param({1, 2, 5}), x4 = param({1, 2, 4, 5}), x5 = param({1, 1, 3, 4, 3});
  struct Case {
    const char* name;
    Tensor x;
    InterpolateOptions o;
  };
  const std::vector<Case> cases = {
      {"nearest 1-d", x3, {.size = {8}}},
      {"nearest 2-d", x4, {.scale_factor = {1.5}}},
      {"nearest 3-d", x5, {.size = {4, 5, 2}}},
      {"nearest-exact", x4, {.size = {3, 7}, .mode = "nearest-exact"}},
      {"area 2-d", x4, {.size = {3, 3}, .mode = "area"}},
      {"area 3-d", x5, {.size = {2, 3, 2}, .mode = "area"}},
      {"linear", x3, {.size = {7}, .mode = "linear"}},
      {"bilinear", x4, {.scale_factor = {1.7}, .mode = "bilinear"}},
      {"bilinear align_corners", x4, {.size = {3, 8}, .mode = "bilinear", .align_corners = true}},
      {"bicubic", x4, {.size = {6, 4}, .mode = "bicubic"}},
      {"trilinear", x5, {.size = {4, 3, 5}, .mode = "trilinear"}},
      {"bilinear antialias (down)", x4, {.size = {2, 3}, .mode = "bilinear", .antialias = true}},
      {"bicubic antialias (down)", x4, {.size = {3, 2}, .mode = "bicubic", .antialias = true}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    InterpolateOptions o = c.o;
    CHECK(gradgradcheck(
        [o](const TensorList& in) {
          Tensor y = interpolate(in[0], o);
          return y * y;
        },
        {c.x}));
  }
  // third order: the adjoint's gradient is the upsample again
  auto third = [](const TensorList& in) {
    EnableGradGuard eg;
    Tensor xi = in[0].requires_grad() ? in[0] : in[0].detach().requires_grad_();
    Tensor y = interpolate(xi, {.size = {6, 7}, .mode = "bicubic"}).pow(3).sum();
    return grad({y}, {xi}, {}, true, true)[0];
  };
  CHECK(gradgradcheck(third, {x4}));
}

TEST_CASE("double backward: LSTM and GRU cells and layers (lengths, two layers, bidirectional)") {
  manual_seed(30);
  const int64_t T = 3, N = 2, I = 3, H = 2;
  Tensor x = param({T, N, I}) * 0.7;  // leaves below: x itself is passed through detach
  x = x.detach().requires_grad_();
  Tensor lengths = from_vector(std::vector<int64_t>{3, 2});
  // per layer and direction: w_ih [G*H, in], w_hh [G*H, H], b_ih, b_hh (layer 1 takes D * H)
  auto make_params = [&](int64_t G, int64_t layers, int64_t D) {
    TensorList p;
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t d = 0; d < D; ++d) {
        const int64_t in = l == 0 ? I : D * H;
        for (const Shape& s : {Shape{G * H, in}, Shape{G * H, H}, Shape{G * H}, Shape{G * H}}) {
          p.push_back((randn(s, {.dtype = DType::f64}) * 0.6).requires_grad_());
        }
      }
    }
    return p;
  };
  // the output and the final states, joined, so that every output's gradient is checked
  auto joined = [](std::initializer_list<Tensor> ts) {
    TensorList flat;
    for (const Tensor& t : ts) flat.push_back(t.reshape({-1}));
    return cat(flat, 0);
  };
  {
    TensorList p = make_params(4, 2, 2);
    TensorList in = {x};
    in.insert(in.end(), p.begin(), p.end());
    CHECK(gradgradcheck(
        [&](const TensorList& v) {
          auto [y, hn, cn] = lstm(v[0], Tensor(), Tensor(), TensorList(v.begin() + 1, v.end()),
                                  true, 2, 0.0, true, /*bidirectional=*/true, false, lengths);
          return joined({y, hn, cn});
        },
        in));
  }
  {
    TensorList p = make_params(3, 1, 1);
    Tensor h0 = param({1, N, H});
    TensorList in = {x, h0};
    in.insert(in.end(), p.begin(), p.end());
    CHECK(gradgradcheck(
        [&](const TensorList& v) {
          auto [y, hn] = gru(v[0], v[1], TensorList(v.begin() + 2, v.end()), true, 1, 0.0, true,
                             false, false, lengths);
          return joined({y, hn});
        },
        in));
  }
  // the cells
  Tensor xc = param({N, I}), h = param({N, H}), c = param({N, H});
  TensorList lp = make_params(4, 1, 1), gp = make_params(3, 1, 1);
  CHECK(gradgradcheck(
      [](const TensorList& v) {
        auto [h1, c1] = lstm_cell(v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
        return cat({h1, c1}, 1);
      },
      {xc, h, c, lp[0], lp[1], lp[2], lp[3]}));
  CHECK(gradgradcheck(
      [](const TensorList& v) { return gru_cell(v[0], v[1], v[2], v[3], v[4], v[5]); },
      {xc, h, gp[0], gp[1], gp[2], gp[3]}));
}

TEST_CASE("double backward: embedding_bag in its three modes") {
  manual_seed(32);
  Tensor w = param({5, 3});
  Tensor input = from_vector(std::vector<int64_t>{0, 2, 4, 2, 1, 3, 3});
  Tensor offsets = from_vector(std::vector<int64_t>{0, 3, 3, 5});  // the second bag is empty
  Tensor psw = param({7});
  for (EmbeddingBagMode mode :
       {EmbeddingBagMode::sum, EmbeddingBagMode::mean, EmbeddingBagMode::max}) {
    CAPTURE(embedding_bag_mode_name(mode));
    CHECK(gradgradcheck(
        [&](const TensorList& in) {
          Tensor y = embedding_bag(in[0], input, {.offsets = offsets, .mode = mode});
          return y * y;
        },
        {w}));
  }
  // per-sample weights (mode sum): bilinear in the weight and them
  CHECK(gradgradcheck(
      [&](const TensorList& in) {
        return embedding_bag(
                   in[0], input,
                   {.offsets = offsets, .mode = EmbeddingBagMode::sum, .per_sample_weights = in[1]})
            .tanh();
      },
      {w, psw}));
}

TEST_CASE("double backward: in-place add_, sub_, scalar mul_ / div_, neg_ and masked_fill_") {
  manual_seed(33);
  Tensor x = param({3, 4}), r = param({4}), mask = rand({3, 4}).gt(0.5);
  // a residual block as model code writes it: out = f(x); out += x; out *= 0.5; ...
  CHECK(gradgradcheck(
      [&](const TensorList& in) {
        Tensor out = sin(in[0] * in[1]);  // sin saves its input, not out
        out.add_(in[0], 2.0).sub_(in[1]).mul_(0.5).div_(3.0).neg_().masked_fill_(mask, 0.25);
        return out * out;
      },
      {x, r}));
  // ops that save a value refuse (mul_ by a tensor saves self from before the write) ...
  Tensor y = x * 1.0;
  y.mul_(r);
  variable_list g = grad({y.sum()}, {x}, {}, false, /*create_graph=*/true);
  CHECK_THROWS_AS(grad({g[0].sum()}, {x}), AutogradError);
  // ... and so does an in-place op on a view (its CopySlices node rewrites the base's history)
  Tensor base = x * 1.0;
  base.narrow(0, 0, 2).add_(r);
  variable_list gb = grad({(base * base).sum()}, {x}, {}, false, true);
  CHECK_THROWS_AS(grad({gb[0].sum()}, {x}), AutogradError);
}

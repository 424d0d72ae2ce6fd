// MultiheadAttention and TransformerEncoderLayer against PyTorch (fixtures: attention,
// transformer), gradchecks, masks, eval-vs-train and errors.
#include <cmath>
#include <cstring>

#include "fixture.h"
#include "nn/attention.h"
#include "nn/transformer.h"

using namespace sl;
using sl::testing::Fixture;
using sl::testing::module_gradcheck;

// f32: rtol 1e-5 and atol 2e-6. Attention chains five matmuls, a softmax and a LayerNorm; each
// output sums O(E + S) products of O(1) values, so float32 reassociation against PyTorch's
// kernels gives absolute differences up to ~1e-6 on O(1) values (2x the default atol).
constexpr double kRtol = 1e-5, kAtol = 2e-6;

TEST_CASE("MultiheadAttention matches PyTorch (masks, cross attention, no bias)") {
  Fixture fx("attention");
  {
    nn::MultiheadAttention m(8, 2, 0.0, true, true);
    fx.load_params(m, "mha_self_kpm");
    Tensor x = fx.input("mha_self_kpm", 0);
    Tensor kpm = fx.get("mha_self_kpm.in.1");
    auto [out, w] = m.forward(x, x, x, {.key_padding_mask = kpm});
    fx.check_backward("mha_self_kpm", {out, w}, {x}, &m, kRtol, kAtol);
  }
  {
    nn::MultiheadAttention m(8, 4, 0.0, true, true);
    fx.load_params(m, "mha_causal");
    Tensor x = fx.input("mha_causal", 0);
    // PyTorch's fixture used a float -inf mask; is_causal must give the same result.
    auto [out, w] = m.forward(x, x, x, {.is_causal = true});
    fx.check_backward("mha_causal", {out, w}, {x}, &m, kRtol, kAtol);
  }
  {
    nn::MultiheadAttention m(6, 3);  // sequence-first
    fx.load_params(m, "mha_cross_seqfirst");
    TensorList in{fx.input("mha_cross_seqfirst", 0), fx.input("mha_cross_seqfirst", 1),
                  fx.input("mha_cross_seqfirst", 2)};
    auto [out, w] = m.forward(in[0], in[1], in[2]);
    fx.check_backward("mha_cross_seqfirst", {out, w}, in, &m, kRtol, kAtol);
  }
  {
    nn::MultiheadAttention m(8, 2, 0.0, false, true);
    CHECK(m.state_dict().keys() == std::vector<std::string>{"in_proj_weight", "out_proj.weight"});
    fx.load_params(m, "mha_bool_mask_nobias");
    Tensor x = fx.input("mha_bool_mask_nobias", 0);
    Tensor mask = nn::causal_mask(3, 3);
    auto [out, w] = m.forward(x, x, x, {.attn_mask = mask});
    fx.check_backward("mha_bool_mask_nobias", {out, w}, {x}, &m, kRtol, kAtol);
  }
}

TEST_CASE("float and bool masks agree; per-head weights; unbatched input") {
  manual_seed(2);
  nn::MultiheadAttention m(4, 2, 0.0, true, true);
  Tensor x = randn({2, 3, 4});
  Tensor float_mask = zeros({3, 3}).masked_fill(nn::causal_mask(3, 3), -INFINITY);
  auto [a, wa] = m.forward(x, x, x, {.attn_mask = float_mask, .average_attn_weights = false});
  auto [b, wb] = m.forward(x, x, x, {.average_attn_weights = false, .is_causal = true});
  // Two mask paths through the fused softmax (an added -inf vs is_causal): equal up to f32
  // rounding of the same sums.
  SL_CHECK_CLOSE(a, b, 1e-6, 1e-7);
  CHECK(wa.sizes() == Shape{2, 2, 3, 3});
  SL_CHECK_CLOSE(wa.sum({-1}), ones({2, 2, 3}), 1e-6, 1e-6);
  CHECK(wa.select(3, 2).select(2, 0).abs().max().item<double>() == 0.0);  // query 0 skips key 2
  // Unbatched [L, E] equals the batched result of one sequence.
  auto [u, wu] = m.forward(x[1], x[1], x[1]);
  auto [full, wf] = m.forward(x, x, x);
  SL_CHECK_CLOSE(u, full[1], 1e-6, 1e-7);
  CHECK(wu.sizes() == Shape{3, 3});
}

TEST_CASE("attention dropout acts in training only") {
  manual_seed(4);
  nn::MultiheadAttention m(4, 1, 0.5, true, true);
  Tensor x = randn({1, 6, 4});
  auto [o1, w1] = m.forward(x, x, x);
  // Dropped weights are exactly zero, kept ones scaled by 2: rows no longer sum to one.
  CHECK(w1.eq(0.0).any().item<bool>());
  m.eval();
  auto [o2, w2] = m.forward(x, x, x);
  auto [o3, w3] = m.forward(x, x, x);
  SL_CHECK_CLOSE(o2, o3, 0, 0);
  SL_CHECK_CLOSE(w2.sum({-1}), ones({1, 6}), 1e-6, 1e-6);
}

TEST_CASE("MultiheadAttention gradcheck and errors") {
  manual_seed(5);
  TensorOptions f64{.dtype = DType::f64};
  nn::MultiheadAttention m(4, 2, 0.0, true, true, f64);
  {
    NoGradGuard ng;
    m.in_proj_bias.normal_();
    m.out_proj->bias.normal_();
  }
  Tensor x = randn({1, 3, 4}, f64).requires_grad_();
  Tensor kpm = from_vector(std::vector<int64_t>{0, 0, 1}).to(DType::b8).view({1, 3});
  CHECK(module_gradcheck(m,
                         [&](const TensorList& in) {
                           return m.forward(in[0], in[0], in[0], {.key_padding_mask = kpm}).first;
                         },
                         {x}));
  SL_CHECK_THROWS(nn::MultiheadAttention(6, 4), ValueError,
                  "embed_dim (6) must be divisible by num_heads (4)");
  SL_CHECK_THROWS(m.forward(randn({1, 3, 5}, f64)), ShapeError,
                  "the last dim of query, key and value must be embed_dim=4");
  SL_CHECK_THROWS(m.forward(x, x, x, {.attn_mask = zeros({3, 2}, f64)}), ShapeError,
                  "attn_mask must be [3, 3] or [2, 3, 3], got [3, 2]");
  SL_CHECK_THROWS(m.forward(x, x, x, {.key_padding_mask = zeros({1, 4}, {.dtype = DType::b8})}),
                  ShapeError, "key_padding_mask must be [1, 3], got [1, 4]");
  SL_CHECK_THROWS(m.forward(x, x, x, {.attn_mask = zeros({3, 3}, {.dtype = DType::i64})}),
                  DTypeError, "attn_mask must be bool or floating, got int64");
}

TEST_CASE("MultiheadAttention gradcheck, batch 2 (head views whose batch dims do not merge)") {
  // With B > 1 and H > 1 the [B, H, L, D] head views of the [B, L, 3E] projection cannot be
  // viewed as [B * H, L, D]: the attention products run as one bmm per batch index on strided
  // views (core/ops/matmul.cpp), forward and backward; self- and cross-attention, causal.
  manual_seed(6);
  TensorOptions f64{.dtype = DType::f64};
  nn::MultiheadAttention m(4, 2, 0.0, true, true, f64);
  {
    NoGradGuard ng;
    m.in_proj_bias.normal_();
    m.out_proj->bias.normal_();
  }
  Tensor x = randn({2, 3, 4}, f64).requires_grad_();
  Tensor kv = randn({2, 5, 4}, f64).requires_grad_();
  CHECK(module_gradcheck(m,
                         [&](const TensorList& in) {
                           return m.forward(in[0], in[0], in[0], {.is_causal = true}).first;
                         },
                         {x}));
  CHECK(module_gradcheck(
      m, [&](const TensorList& in) { return m.forward(in[0], in[1], in[1]).first; }, {x, kv}));
}

TEST_CASE("TransformerEncoderLayer matches PyTorch, post-LN and pre-LN") {
  Fixture fx("transformer");
  for (bool pre : {false, true}) {
    std::string name = pre ? "transformer_pre_ln" : "transformer_post_ln";
    CAPTURE(name);
    nn::TransformerEncoderLayer m(8, 2,
                                  {.dim_feedforward = 16,
                                   .dropout = 0.0,
                                   .activation = "gelu",
                                   .batch_first = true,
                                   .norm_first = pre});
    fx.load_params(m, name);
    Tensor x = fx.input(name, 0);
    Tensor kpm = fx.get(name + ".in.1");
    fx.check_backward(name, {m.forward(x, Tensor(), kpm)}, {x}, &m, kRtol, kAtol);
  }
}

TEST_CASE("TransformerEncoderLayer names, repr, eval and errors") {
  nn::TransformerEncoderLayer m(8, 2, {.dim_feedforward = 16});
  std::vector<std::string> names;
  for (const auto& [n, p] : m.named_parameters()) names.push_back(n);
  // PyTorch 1.13's names for the same layer.
  CHECK(names == std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                          "self_attn.out_proj.weight", "self_attn.out_proj.bias",
                                          "linear1.weight", "linear1.bias", "linear2.weight",
                                          "linear2.bias", "norm1.weight", "norm1.bias",
                                          "norm2.weight", "norm2.bias"});
  CHECK(m.str().find("(out_proj): NonDynamicallyQuantizableLinear(in_features=8, out_features=8, "
                     "bias=True)") != std::string::npos);
  manual_seed(1);
  Tensor x = randn({5, 2, 8});  // sequence-first
  m.eval();
  SL_CHECK_CLOSE(m.forward(x), m.forward(x), 0, 0);  // no dropout in eval
  m.train();
  CHECK_FALSE(equal(m.forward(x), m.forward(x)));  // dropout 0.1 in training
  SL_CHECK_THROWS(nn::TransformerEncoderLayer(8, 2, {.activation = "swish"}), ValueError,
                  "activation must be 'relu', 'gelu' or 'gelu_tanh', got 'swish'");
}

TEST_CASE("TransformerEncoderLayer: the fused linear1 + activation gives the bits of the two ops") {
  // The feed-forward block runs linear1 and the activation as one linear_act; on the CPU that is
  // the same ops as before, so the layer's output and every gradient must keep their bits. The
  // reference spells out the layer's former forward with its own submodules.
  auto same_bits = [](const Tensor& a, const Tensor& b) {
    if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
    Tensor ac = a.contiguous(), bc = b.contiguous();
    return std::memcmp(ac.data_ptr(), bc.data_ptr(),
                       static_cast<size_t>(ac.numel()) * dtype_size(ac.dtype())) == 0;
  };
  for (const char* act : {"relu", "gelu", "gelu_tanh"}) {
    for (bool pre : {false, true}) {
      CAPTURE(act);
      CAPTURE(pre);
      manual_seed(41);
      nn::TransformerEncoderLayer m(
          8, 2, {.dim_feedforward = 16, .dropout = 0.0, .activation = act, .norm_first = pre});
      Tensor src = randn({5, 2, 8});
      Tensor up = randn({5, 2, 8});
      auto sa = [&](const Tensor& x) {
        return m.dropout1->forward(m.self_attn->forward(x, x, x, {.need_weights = false}).first);
      };
      auto ff = [&](const Tensor& x) {
        Tensor h = m.linear1->forward(x);
        h = std::string(act) == "relu" ? relu(h)
                                       : gelu(h, std::string(act) == "gelu" ? "none" : "tanh");
        return m.dropout2->forward(m.linear2->forward(m.dropout->forward(h)));
      };
      auto former = [&](const Tensor& s) {
        Tensor x = s;
        if (pre) {
          x = x + sa(m.norm1->forward(x));
          return x + ff(m.norm2->forward(x));
        }
        x = m.norm1->forward(x + sa(x));
        return m.norm2->forward(x + ff(x));
      };
      TensorList outs, grads;
      for (int run = 0; run < 2; ++run) {
        m.zero_grad();
        Tensor x = src.clone().requires_grad_();
        Tensor y = run == 0 ? m.forward(x) : former(x);
        y.backward(up);
        outs.push_back(y.detach());
        grads.push_back(x.grad());
        for (const auto& [name, p] : m.named_parameters()) grads.push_back(p.grad().clone());
      }
      CHECK(same_bits(outs[0], outs[1]));
      const size_t n = grads.size() / 2;
      for (size_t i = 0; i < n; ++i) {
        CAPTURE(i);  // 0: the input's gradient, then the parameters' in named_parameters order
        CHECK(same_bits(grads[i], grads[n + i]));
      }
    }
  }
}

TEST_CASE("masks of different kinds add, as PyTorch 2.x merges them") {
  // A bool attn_mask with a float key_padding_mask: the bool mask becomes -inf where true and
  // the float one is added as it is (nonzero entries do not hide keys), so the result must
  // equal one float [B * H, L, S] mask holding the sum, built here by hand.
  manual_seed(7);
  nn::MultiheadAttention m(4, 2, 0.0, true, true);
  Tensor x = randn({2, 3, 4});
  Tensor causal = nn::causal_mask(3, 3);
  Tensor kpm = from_vector(std::vector<float>{0.5f, -1.0f, 0.0f, 0.0f, 2.0f, -0.25f}).view({2, 3});
  auto [a, wa] = m.forward(x, x, x, {.key_padding_mask = kpm, .attn_mask = causal});
  Tensor sum =
      zeros({3, 3}).masked_fill(causal, -INFINITY).view({1, 1, 3, 3}) + kpm.view({2, 1, 1, 3});
  Tensor merged = sum.expand({2, 2, 3, 3}).contiguous().view({4, 3, 3});
  auto [b, wb] = m.forward(x, x, x, {.attn_mask = merged});
  // The same scores, offsets and softmax, in another order of two additions: f32 rounding only.
  SL_CHECK_CLOSE(a, b, 1e-6, 1e-7);
  SL_CHECK_CLOSE(wa, wb, 1e-6, 1e-7);
  // The float padding values shift the weights (they are not treated as "masked"): key 1 of
  // batch 0 gets a -1 offset, not -inf, so its weight is positive for queries 1 and 2.
  CHECK(wa.select(0, 0).select(1, 1).min().item<double>() == 0.0);  // query 0 skips key 1 (causal)
  CHECK(wa[0][1][1].item<double>() > 0.0);
  CHECK(wa[0][2][1].item<double>() > 0.0);
}

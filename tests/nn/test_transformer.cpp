// TransformerDecoderLayer, TransformerEncoder, TransformerDecoder and Transformer against PyTorch
// 1.13 (fixture: transformer, made by tools/gen_nn_fixtures.py), their state dict keys and reprs
// as PyTorch lists them, layer cloning, the xavier reset, a gradcheck and the error paths.
// TransformerEncoderLayer's own cases are in test_attention.cpp.
#include <cmath>
#include <sstream>

#include "fixture.h"
#include "nn/transformer.h"

using namespace sl;
using sl::testing::bits_equal;
using sl::testing::Fixture;
using sl::testing::module_gradcheck;
using sl::testing::split_lines;

namespace {

// f32: rtol 1e-5 and atol 2e-6, as test_attention.cpp's encoder layer cases: every output sums
// O(E + S) float32 products of O(1) values through a chain of matmuls, softmaxes and LayerNorms,
// so reassociation against PyTorch's kernels differs by ~1e-6 absolute. The stacks chain up to
// three layers and a final norm; LayerNorm renormalises after each, so the differences do not
// grow with depth here (a looser tolerance would be a new claim, so none is used).
constexpr double kRtol = 1e-5, kAtol = 2e-6;

/// The fixture tensor under key, or undefined when the case has none (a mask it does not use).
Tensor maybe(const Fixture& fx, const std::string& key) {
  return fx.has(key) ? fx.get(key) : Tensor();
}

/// The PyTorch-side key order and repr of case `name`, compared with the module's.
void check_names_and_repr(const Fixture& fx, const std::string& name, const nn::Module& m) {
  CAPTURE(name);
  CHECK(m.state_dict().keys() == split_lines(fx.meta(name + ".state_dict_keys")));
  CHECK(m.str() == fx.meta(name + ".repr"));
}

nn::TransformerLayerOptions small_layer(bool batch_first = false, bool norm_first = false,
                                        const std::string& act = "relu") {
  return {.dim_feedforward = 16,
          .dropout = 0.0,
          .activation = act,
          .batch_first = batch_first,
          .norm_first = norm_first};
}

}  // namespace

TEST_CASE("TransformerDecoderLayer matches PyTorch: post-LN with all four masks, sequence-first") {
  Fixture fx("transformer");
  const std::string name = "decoder_post_ln";
  // PyTorch's tgt_mask is the float causal mask; tgt_is_causal must give the same results.
  for (bool by_flag : {false, true}) {
    CAPTURE(by_flag);
    nn::TransformerDecoderLayer m(8, 2, small_layer());
    fx.load_params(m, name);
    check_names_and_repr(fx, name, m);
    Tensor tgt = fx.input(name, 0), mem = fx.input(name, 1);
    Tensor tgt_mask = by_flag ? Tensor() : fx.get(name + ".tgt_mask");
    Tensor out = m.forward(tgt, mem, tgt_mask, fx.get(name + ".memory_mask"),
                           fx.get(name + ".in.2"), fx.get(name + ".in.3"), by_flag);
    fx.check_backward(name, {out}, {tgt, mem}, &m, kRtol, kAtol);
  }
}

TEST_CASE("TransformerDecoderLayer matches PyTorch: pre-LN, gelu, batch_first; tgt_is_causal") {
  Fixture fx("transformer");
  const std::string name = "decoder_pre_ln";
  // PyTorch's case used a bool causal tgt_mask; tgt_is_causal without a mask must give the same
  // outputs and gradients.
  for (bool by_flag : {false, true}) {
    CAPTURE(by_flag);
    nn::TransformerDecoderLayer m(8, 2, small_layer(true, true, "gelu"));
    fx.load_params(m, name);
    Tensor tgt = fx.input(name, 0), mem = fx.input(name, 1);
    Tensor tgt_mask = by_flag ? Tensor() : fx.get(name + ".tgt_mask");
    Tensor out = m.forward(tgt, mem, tgt_mask, Tensor(), fx.get(name + ".in.2"),
                           fx.get(name + ".in.3"), by_flag);
    fx.check_backward(name, {out}, {tgt, mem}, &m, kRtol, kAtol);
  }
}

TEST_CASE("TransformerDecoderLayer matches PyTorch: unbatched tgt and memory") {
  Fixture fx("transformer");
  const std::string name = "decoder_unbatched";
  nn::TransformerDecoderLayer m(8, 4, {.dim_feedforward = 12, .dropout = 0.0});
  fx.load_params(m, name);
  Tensor tgt = fx.input(name, 0), mem = fx.input(name, 1);
  Tensor out = m.forward(tgt, mem, Tensor(), Tensor(), Tensor(), fx.get(name + ".in.3"));
  fx.check_backward(name, {out}, {tgt, mem}, &m, kRtol, kAtol);
}

TEST_CASE("TransformerDecoder (2 layers + final norm) matches PyTorch; keys and repr as torch") {
  Fixture fx("transformer");
  const std::string name = "decoder_stack";
  // The float causal tgt_mask of PyTorch's case, or tgt_is_causal passed down the stack.
  for (bool by_flag : {false, true}) {
    CAPTURE(by_flag);
    nn::TransformerDecoder m(nn::TransformerDecoderLayer(8, 2, small_layer()), 2,
                             std::make_shared<nn::LayerNorm>(Shape{8}));
    fx.load_params(m, name);  // strict: every name must be PyTorch's
    check_names_and_repr(fx, name, m);
    Tensor tgt = fx.input(name, 0), mem = fx.input(name, 1);
    Tensor tgt_mask = by_flag ? Tensor() : fx.get(name + ".tgt_mask");
    Tensor out = m.forward(tgt, mem, tgt_mask, maybe(fx, name + ".memory_mask"), Tensor(),
                           fx.get(name + ".in.3"), by_flag);
    fx.check_backward(name, {out}, {tgt, mem}, &m, kRtol, kAtol);
  }
}

TEST_CASE("TransformerEncoder (2 pre-LN layers + final norm) matches PyTorch; keys and repr") {
  Fixture fx("transformer");
  const std::string name = "encoder_stack";
  nn::TransformerEncoder m(nn::TransformerEncoderLayer(8, 2, small_layer(true, true)), 2,
                           std::make_shared<nn::LayerNorm>(Shape{8}));
  fx.load_params(m, name);
  check_names_and_repr(fx, name, m);
  Tensor src = fx.input(name, 0);
  Tensor out = m.forward(src, fx.get(name + ".src_mask"), fx.get(name + ".in.1"));
  fx.check_backward(name, {out}, {src}, &m, kRtol, kAtol);
}

TEST_CASE("Transformer matches PyTorch (2 encoder layers, 1 decoder layer, batch_first)") {
  Fixture fx("transformer");
  const std::string name = "transformer_model";
  nn::Transformer m(8, 2, 2, 1, small_layer(true));
  fx.load_params(m, name);
  check_names_and_repr(fx, name, m);
  Tensor src = fx.input(name, 0), tgt = fx.input(name, 1);
  Tensor src_kpm = fx.get(name + ".in.2"), tgt_kpm = fx.get(name + ".in.3");
  Tensor out = m.forward(src, tgt, Tensor(), fx.get(name + ".tgt_mask"), Tensor(), src_kpm, tgt_kpm,
                         src_kpm);
  fx.check_backward(name, {out}, {src, tgt}, &m, kRtol, kAtol);
}

TEST_CASE("Transformer::generate_square_subsequent_mask is PyTorch's") {
  Fixture fx("transformer");
  CHECK(bits_equal(nn::Transformer::generate_square_subsequent_mask(4),
                   fx.get("square_subsequent_mask_4")));
  CHECK(nn::Transformer::generate_square_subsequent_mask(0).sizes() == Shape{0, 0});
  SL_CHECK_THROWS(nn::Transformer::generate_square_subsequent_mask(-2), ValueError,
                  "Transformer::generate_square_subsequent_mask: sz must be >= 0, got -2");
}

TEST_CASE("TransformerDecoder and TransformerEncoder clone their layer: equal, then independent") {
  manual_seed(5);
  nn::TransformerDecoderLayer proto(8, 2, {.dim_feedforward = 16});
  nn::TransformerDecoder dec(proto, 3);
  REQUIRE(dec.layers->size() == 3);
  CHECK(dec.norm == nullptr);
  const auto pp = proto.named_parameters();
  auto param = [](const nn::Module& m, size_t k) { return m.named_parameters()[k].second; };
  // Each copy starts with the prototype's values in memory of its own.
  for (size_t i = 0; i < 3; ++i) {
    auto pl = dec.layer(i)->named_parameters();
    REQUIRE(pl.size() == pp.size());
    for (size_t k = 0; k < pp.size(); ++k) {
      CAPTURE(pp[k].first);
      CHECK(pl[k].first == pp[k].first);
      CHECK(bits_equal(pl[k].second, pp[k].second));
      CHECK_FALSE(pl[k].second.is_same_storage(pp[k].second));
    }
  }
  // Changing one layer's weight changes no other layer and not the prototype (and vice versa).
  auto snapshot = [&] {
    TensorList all;
    for (const Tensor& p : proto.parameters()) all.push_back(p.detach().clone());
    for (const Tensor& p : dec.parameters()) all.push_back(p.detach().clone());
    return all;
  };
  TensorList before = snapshot();
  {
    NoGradGuard ng;
    dec.layer(1)->linear1->weight.fill_(3.0);
    proto.multihead_attn->in_proj_weight.fill_(-3.0);
  }
  TensorList after = snapshot();
  const size_t n = pp.size();
  // index of layer(1).linear1.weight in dec.parameters(), and of the prototype's changed weight
  size_t changed_proto = 0, changed_layer = 0;
  for (size_t k = 0; k < n; ++k) {
    if (pp[k].first == "multihead_attn.in_proj_weight") changed_proto = k;
    if (pp[k].first == "linear1.weight") changed_layer = n + n + k;  // after proto's n, layer 0's n
  }
  for (size_t k = 0; k < before.size(); ++k) {
    CAPTURE(k);
    bool changed = k == changed_proto || k == changed_layer;
    CHECK(bits_equal(before[k], after[k]) == !changed);
  }
  CHECK(bits_equal(param(*dec.layer(1), changed_layer - 2 * n), full({16, 8}, 3.0)));

  // Flags, modes, dtype follow the prototype; the encoder clones the same way.
  manual_seed(6);
  nn::TransformerEncoderLayer eproto(8, 2, {.dim_feedforward = 16});
  eproto.to(DType::f64);
  eproto.eval();
  eproto.norm2->train();
  eproto.norm1->weight.requires_grad_(false);
  nn::TransformerEncoder enc(eproto, 2);
  for (size_t i = 0; i < 2; ++i) {
    auto l = enc.layer(i);
    CHECK(l->linear2->weight.dtype() == DType::f64);
    CHECK(bits_equal(l->linear2->weight, eproto.linear2->weight));
    CHECK_FALSE(l->norm1->weight.requires_grad());
    CHECK(l->norm1->bias.requires_grad());
    CHECK_FALSE(l->is_training());
    CHECK_FALSE(l->self_attn->is_training());
    CHECK(l->norm2->is_training());
  }
  nn::TransformerEncoder empty(eproto, 0);
  CHECK(empty.parameters().empty());
  Tensor x = randn({3, 2, 8}, {.dtype = DType::f64});
  CHECK(bits_equal(empty.forward(x), x));
}

TEST_CASE("Transformer: xavier_uniform_ redraws every >1-d parameter, as _reset_parameters") {
  manual_seed(7);
  nn::Transformer m(8, 2, 2, 2, {.dim_feedforward = 16});
  int64_t redrawn = 0;
  for (const auto& [name, p] : m.named_parameters()) {
    CAPTURE(name);
    if (p.dim() < 2) continue;
    ++redrawn;
    const double bound = std::sqrt(6.0 / static_cast<double>(p.size(0) + p.size(1)));
    double amax = p.detach().abs().max().item<double>();
    CHECK(amax <= bound);
    CHECK(amax > 0.5 * bound);  // 64+ draws from U(-b, b): all below b/2 has odds < 2^-64
  }
  CHECK(redrawn == 2 * 4 + 2 * 6);  // encoder layers: 4 matrices each; decoder layers: 6
  // The reset runs after cloning, so the clones' matrices differ; 1-d parameters keep the
  // prototype's values, so the clones' biases stay equal (PyTorch's behaviour too).
  auto e0 = m.encoder->layer(0), e1 = m.encoder->layer(1);
  CHECK_FALSE(bits_equal(e0->linear1->weight, e1->linear1->weight));
  CHECK(bits_equal(e0->linear1->bias, e1->linear1->bias));
  CHECK(bits_equal(m.decoder->layer(0)->norm3->weight, ones({8})));
  CHECK(bits_equal(m.decoder->layer(1)->multihead_attn->in_proj_bias, zeros({24})));
  auto* enorm = dynamic_cast<nn::LayerNorm*>(m.encoder->norm.get());
  REQUIRE(enorm != nullptr);
  CHECK(bits_equal(enorm->weight, ones({8})));
  REQUIRE(m.decoder->norm != nullptr);
}

TEST_CASE("TransformerDecoderLayer: gradcheck in f64 with masks; dropout in training only") {
  manual_seed(8);
  nn::TransformerDecoderLayer m(4, 2,
                                {.dim_feedforward = 6,
                                 .dropout = 0.0,
                                 .activation = "gelu",
                                 .norm_first = true,
                                 .tensor_options = {.dtype = DType::f64}});
  Tensor tgt = randn({3, 2, 4}, {.dtype = DType::f64}).requires_grad_();
  Tensor mem = randn({2, 2, 4}, {.dtype = DType::f64}).requires_grad_();
  Tensor mem_kpm = zeros({2, 2}, {.dtype = DType::b8});
  mem_kpm.select(0, 1).select(0, 0).fill_(true);
  CHECK(module_gradcheck(m,
                         [&](const TensorList& in) {
                           return m.forward(in[0], in[1], Tensor(), Tensor(), Tensor(), mem_kpm,
                                            true);
                         },
                         {tgt, mem}));

  manual_seed(9);
  nn::TransformerDecoderLayer d(8, 2, {.dim_feedforward = 16});  // dropout 0.1
  Tensor t = randn({4, 2, 8}), s = randn({5, 2, 8});
  d.eval();
  CHECK(bits_equal(d.forward(t, s), d.forward(t, s)));
  d.train();
  CHECK_FALSE(bits_equal(d.forward(t, s), d.forward(t, s)));
}

TEST_CASE("transformer errors name the module and the values") {
  nn::Transformer m(8, 2, 1, 1, {.dim_feedforward = 16});  // sequence-first
  Tensor src = randn({5, 2, 8});
  SL_CHECK_THROWS(m.forward(src, randn({4, 3, 8})), ShapeError,
                  "Transformer: the batch number of src and tgt must be equal (dim 1, "
                  "batch_first=false), got src [5, 2, 8] and tgt [4, 3, 8]");
  nn::Transformer mb(8, 2, 1, 1, {.dim_feedforward = 16, .batch_first = true});
  SL_CHECK_THROWS(mb.forward(src, randn({4, 2, 8})), ShapeError,
                  "Transformer: the batch number of src and tgt must be equal (dim 0, "
                  "batch_first=true), got src [5, 2, 8] and tgt [4, 2, 8]");
  SL_CHECK_THROWS(m.forward(src, randn({4, 2, 6})), ShapeError,
                  "Transformer: the feature number of src and tgt must be equal to d_model=8, "
                  "got src [5, 2, 8] and tgt [4, 2, 6]");
  SL_CHECK_THROWS(m.forward(src, randn({4, 8})), ShapeError,
                  "Transformer: src and tgt must both be 3-d (batched) or both 2-d, got src "
                  "[5, 2, 8] and tgt [4, 8]");
  SL_CHECK_THROWS(m.forward(src, Tensor()), ValueError, "Transformer: src and tgt must be defined");

  nn::TransformerDecoderLayer d(8, 2, {.dim_feedforward = 16});
  Tensor tgt = randn({4, 2, 8});
  SL_CHECK_THROWS(d.forward(tgt, randn({5, 2, 6})), ShapeError,
                  "TransformerDecoderLayer: the last dim of tgt and memory must be d_model=8, got "
                  "tgt [4, 2, 8] and memory [5, 2, 6]");
  SL_CHECK_THROWS(d.forward(tgt, randn({5, 3, 8})), ShapeError,
                  "TransformerDecoderLayer: tgt and memory must have one batch size (dim 1, "
                  "batch_first=false), got tgt [4, 2, 8] and memory [5, 3, 8]");
  SL_CHECK_THROWS(d.forward(tgt, randn({5, 8})), ShapeError,
                  "TransformerDecoderLayer: tgt and memory must both be 3-d (batched) or both "
                  "2-d, got tgt [4, 2, 8] and memory [5, 8]");
  SL_CHECK_THROWS(d.forward(tgt, Tensor()), ValueError,
                  "TransformerDecoderLayer: tgt and memory must be defined");
  // A mask that does not fit is refused by the attention that would use it.
  SL_CHECK_THROWS(d.forward(tgt, randn({5, 2, 8}), Tensor(), zeros({4, 4})), ShapeError,
                  "MultiheadAttention: attn_mask must be [4, 5] or [4, 4, 5], got [4, 4]");
  nn::TransformerDecoder stack(d, 2);
  SL_CHECK_THROWS(stack.forward(tgt, randn({5, 2, 6})), ShapeError,
                  "TransformerDecoderLayer: the last dim of tgt and memory must be d_model=8");

  SL_CHECK_THROWS(nn::TransformerDecoderLayer(8, 2, {.activation = "swish"}), ValueError,
                  "TransformerDecoderLayer: activation must be 'relu', 'gelu' or 'gelu_tanh', got "
                  "'swish'");
  SL_CHECK_THROWS(nn::TransformerDecoderLayer(8, 2, {.dim_feedforward = 0}), ValueError,
                  "TransformerDecoderLayer: dim_feedforward must be positive, got 0");
  SL_CHECK_THROWS(nn::TransformerDecoderLayer(8, 3), ValueError,
                  "MultiheadAttention: embed_dim (8) must be divisible by num_heads (3)");
  SL_CHECK_THROWS(nn::TransformerDecoder(d, -1), ValueError,
                  "TransformerDecoder: num_layers must be >= 0, got -1");
  SL_CHECK_THROWS(nn::TransformerEncoder(nn::TransformerEncoderLayer(8, 2), -2), ValueError,
                  "TransformerEncoder: num_layers must be >= 0, got -2");
  SL_CHECK_THROWS(nn::Transformer(8, 2, -1, 1), ValueError,
                  "TransformerEncoder: num_layers must be >= 0, got -1");
}

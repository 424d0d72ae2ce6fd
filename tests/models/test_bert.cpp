// BERT (models/bert.h) against Hugging Face transformers 4.30 (tests/fixtures/models/
// bert.safetensors, made by tools/gen_bert_fixtures.py, whose docstring lists the keys), f64
// gradchecks, and the behaviour HF's code implies (dropout, padding, errors, init).
//
// Float32 tolerances against HF: rtol 1e-4 and atol 1e-5 for outputs alone, rtol 1e-4 and atol
// 2e-5 where Fixture::check_backward checks outputs and gradients with one pair. Both sides
// compute the same float32 formulas, but matmuls and reductions (LayerNorm statistics, softmax
// sums, the batch/position sums of weight gradients) accumulate in other orders, and the
// attention here scales q k^T inside the fused softmax where HF divides the scores first: a few
// ulps (1e-7 relative) per op, compounded through two layers of attention, LayerNorm and GELU
// forward and backward. Measured worst (a scratch program over this fixture):
// outputs |ours - HF| <= 2.0e-6 (MLM logits up to 4.2), gradients |ours - HF| <= 1e-4 |HF| +
// 4.6e-6 (bert.encoder.layer.0.output.dense.weight of the MLM), so the tolerances leave a 4-5x
// margin. Gradients that are sums of cancelling O(1) terms (LayerNorm, softmax) can be near
// zero, hence the absolute floor.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "autograd/grad_mode.h"
#include "models/bert.h"
#include "models/registry.h"
#include "models/tiny_bert.h"
#include "models/tiny_bert.h"
#include "nn/fixture.h"
#include "nn/loss.h"
#include "nn/serialize/safetensors.h"
#include "support/testing.h"

using namespace sl;
using namespace sl::models;

namespace {

constexpr double kOutRtol = 1e-4, kOutAtol = 1e-5;
constexpr double kBackwardRtol = 1e-4, kBackwardAtol = 2e-5;

/// TINY of tools/gen_bert_fixtures.py.
BertConfig tiny_config() {
  BertConfig c;
  c.vocab_size = 99;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 37;
  c.max_position_embeddings = 64;
  c.type_vocab_size = 2;
  c.initializer_range = 0.2;
  return c;
}

std::string fixture_path() {
  return std::string(SL_MODEL_FIXTURES) + "/bert.safetensors";
}

const testing::Fixture& fixture() {
  static const testing::Fixture fx("bert", SL_MODEL_FIXTURES);
  return fx;
}

/// Every tensor of the fixture file, and its "lists" metadata split into sections of lines.
struct FixtureFile {
  serialize::StateDict tensors;
  std::map<std::string, std::vector<std::string>> lists;
};

const FixtureFile& fixture_file() {
  static const FixtureFile f = [] {
    FixtureFile out;
    serialize::Metadata meta;
    out.tensors = serialize::load_safetensors(fixture_path(), &meta);
    for (const auto& [k, v] : meta) {
      if (k != "lists") continue;
      std::istringstream in(v);
      std::string line, section;
      while (std::getline(in, line)) {
        if (!line.empty() && line.front() == '[') {
          section = line.substr(1, line.size() - 2);
        } else {
          out.lists[section].push_back(line);
        }
      }
    }
    return out;
  }();
  return f;
}

/// "<name> <dtype> <d0,d1,...>" lines, the format of the fixture's lists.
std::vector<std::string> describe(const nn::Module::NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [name, t] : named) {
    std::ostringstream line;
    line << name << (t.dtype() == DType::i64 ? " i64 " : " f32 ");
    for (int64_t d = 0; d < t.dim(); ++d) line << (d ? "," : "") << t.size(d);
    out.push_back(line.str());
  }
  return out;
}

std::vector<std::string> describe(const nn::StateDict& sd) {
  return describe(nn::Module::NamedTensors(sd.begin(), sd.end()));
}

/// The fixture's tensors under `prefix`, renamed with `prefix` replaced by `to`; keys starting
/// with `skip` (after renaming) left out.
void add_prefixed(nn::StateDict& out, const std::string& prefix, const std::string& to,
                  const std::string& skip = "\x01") {
  for (const auto& [k, v] : fixture_file().tensors) {
    if (k.rfind(prefix, 0) != 0) continue;
    std::string name = to + k.substr(prefix.size());
    if (name.rfind(skip, 0) == 0) continue;
    out.insert(name, v);
  }
}

Tensor in(const std::string& key) {
  return fixture().get(key);
}

}  // namespace

TEST_CASE("bert: BertModel matches Hugging Face: outputs, every gradient, names (tiny config)") {
  BertModel m(tiny_config());
  m.eval();
  CHECK(describe(m.state_dict()) == fixture_file().lists.at("keys.tiny_model"));
  nn::StateDict sd;
  add_prefixed(sd, "model.param.", "");
  m.load_state_dict(sd, /*strict=*/true);
  BertModelOutput out =
      m.forward(in("in.input_ids"), in("in.token_type_ids"), in("in.attention_mask"));
  CHECK(out.sequence_output.sizes() == Shape{2, 7, 32});
  CHECK(out.pooled_output.sizes() == Shape{2, 32});
  fixture().check_backward("model", {out.sequence_output, out.pooled_output}, {}, &m, kBackwardRtol,
                           kBackwardAtol);
}

TEST_CASE("bert: BertForMaskedLM matches Hugging Face, with the decoder tied to the embeddings") {
  BertForMaskedLM m(tiny_config());
  m.eval();
  const FixtureFile& ff = fixture_file();
  // names and order of HF's state_dict() and named_parameters() (tied tensors once)
  CHECK(describe(m.state_dict()) == ff.lists.at("keys.tiny_mlm"));
  CHECK(describe(m.named_parameters()) == ff.lists.at("params.tiny_mlm"));
  // one tensor under both names (Note [BERT tied weights])
  Tensor words = m.bert->embeddings->word_embeddings->weight;
  CHECK(m.cls->predictions->decoder->weight.is_same(words));
  CHECK(m.get_parameter("cls.predictions.decoder.weight").is_same(words));
  CHECK(m.get_parameter("cls.predictions.decoder.bias").is_same(m.cls->predictions->bias));

  // HF's state dict, composed as the generator's docstring states (it asserts the composition)
  nn::StateDict sd;
  add_prefixed(sd, "model.param.", "bert.", "bert.pooler.");
  add_prefixed(sd, "mlm.param.", "");
  sd.insert("cls.predictions.decoder.weight", in("model.param.embeddings.word_embeddings.weight"));
  sd.insert("cls.predictions.decoder.bias", in("mlm.param.cls.predictions.bias"));
  std::vector<std::string> composed = describe(sd), hf = ff.lists.at("keys.tiny_mlm");
  std::sort(composed.begin(), composed.end());  // the same entries, in another order
  std::sort(hf.begin(), hf.end());
  CHECK(composed == hf);
  m.load_state_dict(sd, /*strict=*/true);
  CHECK(m.cls->predictions->decoder->weight.is_same(words));  // loading kept the tie

  Tensor logits = m.forward(in("in.input_ids"), in("in.token_type_ids"), in("in.attention_mask"));
  CHECK(logits.sizes() == Shape{2, 7, 99});
  // the tied weight's gradient (one key, bert.embeddings.word_embeddings.weight) is the sum of
  // the embedding's and the decoder's, as PyTorch accumulates it; its padding row 0 gets only
  // the decoder's part
  fixture().check_backward("mlm", {logits}, {}, &m, kBackwardRtol, kBackwardAtol);
  CHECK(words.grad().select(0, 0).abs().sum().item<double>() > 0.0);
}

TEST_CASE("bert: BertForSequenceClassification matches Hugging Face (3 labels)") {
  BertConfig c = tiny_config();
  c.num_labels = 3;
  BertForSequenceClassification m(c);
  m.eval();
  CHECK(describe(m.state_dict()) == fixture_file().lists.at("keys.tiny_cls"));
  nn::StateDict sd;
  add_prefixed(sd, "model.param.", "bert.");
  add_prefixed(sd, "cls.param.", "");
  m.load_state_dict(sd, /*strict=*/true);
  Tensor logits = m.forward(in("in.input_ids"), in("in.token_type_ids"), in("in.attention_mask"));
  CHECK(logits.sizes() == Shape{2, 3});
  fixture().check_backward("cls", {logits}, {}, &m, kBackwardRtol, kBackwardAtol);
}

TEST_CASE("bert: the one-tensor forward (no types, no mask) and gelu_new match Hugging Face") {
  nn::StateDict sd;
  add_prefixed(sd, "model.param.", "");
  auto m = std::make_shared<BertModel>(tiny_config());
  m->load_state_dict(sd);
  m->eval();
  NoGradGuard ng;
  // through the base class, as generic code (registry, dist strategies) calls it
  std::shared_ptr<nn::Module> generic = m;
  Tensor ids = in("nomask.in.input_ids");
  SL_CHECK_CLOSE(generic->forward(ids), in("nomask.out.0"), kOutRtol, kOutAtol);
  SL_CHECK_CLOSE(m->forward(ids, Tensor(), Tensor()).pooled_output, in("nomask.out.1"), kOutRtol,
                 kOutAtol);

  BertConfig c = tiny_config();
  c.hidden_act = "gelu_new";
  BertModel t(c);
  t.load_state_dict(sd);
  t.eval();
  Tensor seq = t.forward(in("in.input_ids"), in("in.token_type_ids"), in("in.attention_mask"))
                   .sequence_output;
  SL_CHECK_CLOSE(seq, in("gelu_new.out.0"), kOutRtol, kOutAtol);
}

TEST_CASE("bert: bert_base's MLM state dict has HF BertForMaskedLM's names and shapes") {
  // The "bert_base" factory is BertForMaskedLM(bert_base_config()); building it through the
  // registry draws 110M normals (about 5 s here, 2.4 s of them in init::normal_), so the case
  // builds the same model without init_bert_weights (about 1.5 s: the layers' own init).
  auto names = model_names();
  CHECK(std::find(names.begin(), names.end(), "bert_base") != names.end());
  BertForMaskedLM m(bert_base_config(), /*init_weights=*/false);
  CHECK(describe(m.state_dict()) == fixture_file().lists.at("keys.base_mlm"));
  // 109,514,298: sum(p.numel() for p in HF BertForMaskedLM(BertConfig()).parameters())
  CHECK(m.num_parameters() == 109514298);
}

TEST_CASE("bert: registered small factories run their one-tensor forward") {
  // Hand-counted parameters (H 256, I 1024, V 30522, P 512, 4 layers): embeddings
  // V*H + P*H + 2*H + 2*H = 7,945,728; a layer 3*(H*H+H) + (H*H+H) + 2H + (H*I+I) + (I*H+H) + 2H
  // = 789,760, four 3,159,040; MLM head (H*H+H) + 2H + V (decoder tied) = 96,826; pooler H*H+H
  // = 65,792 and classifier 2H+2 = 514.
  auto mlm = create_model("bert_mini_mlm");
  CHECK(mlm->num_parameters() == 7945728 + 3159040 + 96826);
  auto cls = create_model("bert_mini_cls");
  CHECK(cls->num_parameters() == 7945728 + 3159040 + 65792 + 514);
  NoGradGuard ng;
  mlm->eval();
  cls->eval();
  Tensor ids = randint(0, 30522, {2, 9});
  CHECK(mlm->forward(ids).sizes() == Shape{2, 9, 30522});
  CHECK(cls->forward(ids).sizes() == Shape{2, 2});
}

TEST_CASE("bert: logits_at gives forward's rows at the positions, and the same gradients") {
  // In float64, so the two paths (the head on M rows, or on all B * L rows then M selected)
  // agree to rounding: each logit is the same dot products, only the GEMM's row count differs.
  BertConfig c = tiny_config();
  c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0;
  manual_seed(21);
  BertForMaskedLM a(c), b(c);
  a.to(DType::f64);
  b.load_state_dict(a.state_dict());
  b.to(DType::f64);
  Tensor ids = randint(0, c.vocab_size, {3, 7});
  Tensor pos = from_vector(std::vector<int64_t>{0, 5, 6, 12, 20});  // flat, row-major
  Tensor y = from_vector(std::vector<int64_t>{3, 98, 0, 41, 7});
  Tensor full = a.forward(ids).reshape({21, c.vocab_size}).index_select(0, pos);
  Tensor some = b.logits_at(ids, pos);
  CHECK(some.sizes() == Shape{5, c.vocab_size});
  SL_CHECK_CLOSE(some, full, 1e-12, 1e-12);
  nn::functional::cross_entropy(full, y).backward();
  nn::functional::cross_entropy(some, y).backward();
  auto pa = a.named_parameters(), pb = b.named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    CAPTURE(pa[i].first);
    SL_CHECK_CLOSE(pb[i].second.grad(), pa[i].second.grad(), 1e-10, 1e-12);
  }
  SL_CHECK_THROWS(b.logits_at(ids, from_vector(std::vector<int64_t>{21})), IndexError, "21");
}

TEST_CASE("bert: gradient checkpointing gives the same loss and gradients, keeping fewer bytes") {
  // With dropout on, so the recompute must replay the forward's masks.
  BertConfig c = tiny_config();
  c.num_hidden_layers = 4;
  c.max_position_embeddings = 128;
  manual_seed(8);
  BertForMaskedLM plain(c), ckpt(c);
  ckpt.load_state_dict(plain.state_dict());
  ckpt.bert->gradient_checkpointing_enable();
  Tensor ids = randint(0, c.vocab_size, {4, 96});
  Tensor y = randint(0, c.vocab_size, {4 * 96});
  auto run = [&](BertForMaskedLM& m, int64_t* peak) {
    manual_seed(9);
    reset_peak_memory_stats();
    const int64_t before = memory_stats().live_bytes;
    Tensor loss = nn::functional::cross_entropy(m.forward(ids).reshape({-1, c.vocab_size}), y);
    loss.backward();
    *peak = memory_stats().peak_bytes - before;
    return loss;
  };
  int64_t peak_plain = 0, peak_ckpt = 0;
  Tensor a = run(plain, &peak_plain), b = run(ckpt, &peak_ckpt);
  // The recompute runs the same kernels on the same inputs with the same dropout masks, and
  // the outer backward adds the same gradients: equal bit for bit, not merely close.
  CHECK(a.item<float>() == b.item<float>());
  auto pa = plain.named_parameters(), pb = ckpt.named_parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    CAPTURE(pa[i].first);
    SL_CHECK_CLOSE(pb[i].second.grad(), pa[i].second.grad(), 0, 0);
  }
  // The plain run keeps every layer's activations (attention probabilities, dropout masks, the
  // intermediate GELU) until backward; the checkpointed one keeps each layer's input only and
  // recomputes one layer at a time.
  MESSAGE("peak bytes of forward + backward: plain ", peak_plain, ", checkpointed ", peak_ckpt);
  CHECK(peak_ckpt < peak_plain * 3 / 4);
  // Off in eval mode and under no-grad (nothing to recompute for).
  ckpt.eval();
  plain.eval();
  NoGradGuard ng;
  SL_CHECK_CLOSE(ckpt.forward(ids), plain.forward(ids), 0, 0);
}

TEST_CASE("bert: float64 gradcheck of tiny BERT heads (tied MLM decoder, pooler, classifier)") {
  BertConfig c = testing::tiny_gradcheck_bert();
  const auto [ids, types, mask] = testing::TinyBertBatch{};
  manual_seed(5);
  BertForMaskedLM mlm(c);
  mlm.to(DType::f64);  // converts the tied tensor once (both names see it)
  CHECK(
      mlm.cls->predictions->decoder->weight.is_same(mlm.bert->embeddings->word_embeddings->weight));
  CHECK(mlm.cls->predictions->decoder->weight.dtype() == DType::f64);
  // parameters() lists the tied tensor once: its finite differences move both uses at once, so
  // they check the accumulated (embedding + decoder) gradient; the mask's 0 checks the padding
  CHECK(testing::module_gradcheck(
      mlm, [&](const TensorList&) { return mlm.forward(ids, types, mask); }, {}));

  c.num_labels = 3;
  BertForSequenceClassification cls(c);
  cls.to(DType::f64);
  CHECK(testing::module_gradcheck(
      cls, [&](const TensorList&) { return cls.forward(ids, types, mask); }, {}));
}

TEST_CASE("bert: dropout drops in training only, in the embeddings and in the attention") {
  BertConfig c = tiny_config();
  c.hidden_dropout_prob = 0.5;
  c.attention_probs_dropout_prob = 0.0;
  manual_seed(7);
  BertModel m(c);
  Tensor ids = randint(0, 99, {4, 64});
  NoGradGuard ng;
  // The embeddings' dropout with p = 0.5 zeroes each of 4*64*32 = 8192 outputs independently:
  // the zero fraction is 0.5 +- 0.0055 (one standard deviation); 0.45..0.55 is 9 of them.
  Tensor e = m.embeddings->forward(ids);
  double zero_frac = e.eq(0.0).to(DType::f64).mean().item<double>();
  CHECK(zero_frac > 0.45);
  CHECK(zero_frac < 0.55);
  Tensor train1 = m.forward(ids), train2 = m.forward(ids);
  m.eval();
  CHECK(m.embeddings->forward(ids).eq(0.0).to(DType::f64).mean().item<double>() == 0.0);
  Tensor eval1 = m.forward(ids), eval2 = m.forward(ids);
  SL_CHECK_CLOSE(eval1, eval2, 0, 0);  // eval is deterministic
  CHECK(train1.sub(train2).abs().max().item<double>() > 0.1);
  CHECK(train1.sub(eval1).abs().max().item<double>() > 0.1);

  // attention dropout alone (hidden dropout 0): training differs from eval only through it
  c.hidden_dropout_prob = 0.0;
  c.attention_probs_dropout_prob = 0.5;
  BertModel a(c);
  Tensor at = a.forward(ids);
  a.eval();
  Tensor ae = a.forward(ids);
  CHECK(at.sub(ae).abs().max().item<double>() > 0.1);
  c.attention_probs_dropout_prob = 0.0;
  BertModel z(c);  // with both probabilities 0, training mode is the identity too
  Tensor zt = z.forward(ids);
  z.eval();
  SL_CHECK_CLOSE(zt, z.forward(ids), 0, 0);
}

TEST_CASE("bert: padded tokens do not change the outputs at real tokens (bit for bit)") {
  BertForMaskedLM m(tiny_config());
  m.eval();
  NoGradGuard ng;
  Tensor ids = in("in.input_ids").clone(), types = in("in.token_type_ids").clone();
  Tensor mask = in("in.attention_mask");
  Tensor base = m.bert->forward(ids, types, mask).sequence_output;
  Tensor logits = m.forward(ids, types, mask);
  // row 1 is padding from position 4: other tokens and types there
  ids.select(0, 1).slice(0, 4).copy_(from_vector(std::vector<int64_t>{17, 42, 98}));
  types.select(0, 1).slice(0, 4).fill_(1);
  Tensor changed = m.bert->forward(ids, types, mask).sequence_output;
  Tensor changed_logits = m.forward(ids, types, mask);
  // a masked key's attention weight is exp(lowest - max) = exactly 0, so it adds exactly 0
  SL_CHECK_CLOSE(changed.select(0, 0), base.select(0, 0), 0, 0);
  SL_CHECK_CLOSE(changed.select(0, 1).slice(0, 0, 4), base.select(0, 1).slice(0, 0, 4), 0, 0);
  SL_CHECK_CLOSE(changed_logits.select(0, 1).slice(0, 0, 4), logits.select(0, 1).slice(0, 0, 4), 0,
                 0);
  // the padded positions themselves did change (the check above is not vacuous)
  CHECK(changed.select(0, 1)
            .slice(0, 4)
            .sub(base.select(0, 1).slice(0, 4))
            .abs()
            .max()
            .item<double>() > 1e-3);
  // without the mask the padding is attended to, and the real tokens change
  Tensor unmasked = m.bert->forward(ids, types, Tensor()).sequence_output;
  CHECK(unmasked.select(0, 1)
            .slice(0, 0, 4)
            .sub(base.select(0, 1).slice(0, 0, 4))
            .abs()
            .max()
            .item<double>() > 1e-3);
}

TEST_CASE("bert: initialisation as Hugging Face's _init_weights") {
  BertConfig c = tiny_config();
  c.vocab_size = 1000;
  c.hidden_size = 64;
  c.initializer_range = 0.02;
  manual_seed(3);
  BertForMaskedLM m(c);
  Tensor w = m.bert->embeddings->word_embeddings->weight;
  NoGradGuard ng;
  // 64,000 draws of N(0, 0.02^2): the sample std is within 0.02 * (1 +- 0.0028) (one sd of it)
  // and the mean within +-7.9e-5 (one sd); bounds at about 6 standard deviations
  CHECK(std::abs(w.std().item<double>() - 0.02) < 3.5e-4);
  CHECK(std::abs(w.mean().item<double>()) < 5e-4);
  // the tied decoder did not redraw the embeddings: the padding row stays zero
  CHECK(w.select(0, c.pad_token_id).abs().max().item<double>() == 0.0);
  CHECK(m.cls->predictions->decoder->weight.is_same(w));
  Tensor q = m.bert->encoder->layer->at<BertLayer>(0)->attention->self->query->weight;
  CHECK(std::abs(q.std().item<double>() - 0.02) < 0.02 * 0.15);  // 4096 draws: sd 1.1%
  for (const auto& [name, p] : m.named_parameters()) {
    CAPTURE(name);
    bool is_bias = name.size() >= 4 && name.substr(name.size() - 4) == "bias";
    if (is_bias) CHECK(p.abs().max().item<double>() == 0.0);
    if (name.find("LayerNorm.weight") != std::string::npos) {
      CHECK(p.sub(1.0).abs().max().item<double>() == 0.0);
    }
  }
}

TEST_CASE("bert: configuration and input errors name BERT, the field and the values") {
  BertConfig c = tiny_config();
  c.num_attention_heads = 5;
  SL_CHECK_THROWS(BertModel{c}, ValueError,
                  "BertConfig: hidden_size (32) must be a multiple of num_attention_heads (5)");
  c = tiny_config();
  c.hidden_act = "swish";
  SL_CHECK_THROWS(c.validate(), ValueError, "hidden_act must be one of");
  c = tiny_config();
  c.hidden_dropout_prob = 1.0;
  SL_CHECK_THROWS(c.validate(), ValueError, "hidden_dropout_prob must be in [0, 1), got 1");
  c = tiny_config();
  c.vocab_size = 0;
  SL_CHECK_THROWS(c.validate(), ValueError, "vocab_size must be >= 1, got 0");
  c = tiny_config();
  c.pad_token_id = 99;
  SL_CHECK_THROWS(c.validate(), ValueError, "pad_token_id (99) must be in [0, vocab_size = 99)");
  c = tiny_config();
  c.layer_norm_eps = 0;
  SL_CHECK_THROWS(c.validate(), ValueError, "layer_norm_eps must be > 0");

  BertForMaskedLM m(tiny_config());
  Tensor ids = from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 99}).view({2, 3});
  SL_CHECK_THROWS(m.forward(ids), IndexError,
                  "BertEmbeddings: input_ids[1, 2] = 99 is outside [0, vocab_size = 99)");
  ids = from_vector(std::vector<int64_t>{1, -2, 3}).view({1, 3});
  SL_CHECK_THROWS(m.forward(ids), IndexError, "input_ids[0, 1] = -2 is outside");
  ids = from_vector(std::vector<int64_t>{1, 2, 3}).view({1, 3});
  Tensor types = from_vector(std::vector<int64_t>{0, 2, 0}).view({1, 3});
  SL_CHECK_THROWS(m.forward(ids, types, Tensor()), IndexError,
                  "token_type_ids[0, 1] = 2 is outside [0, type_vocab_size = 2)");
  SL_CHECK_THROWS(m.forward(ids, types.view({3, 1}), Tensor()), ShapeError,
                  "token_type_ids of shape [3, 1] does not match input_ids of shape [1, 3]");
  SL_CHECK_THROWS(m.forward(ids, types.to(DType::i32), Tensor()), DTypeError,
                  "token_type_ids must be int64, got int32");
  SL_CHECK_THROWS(m.forward(ids.to(DType::f32)), DTypeError,
                  "input_ids must be int64, got float32");
  SL_CHECK_THROWS(m.forward(ids.view({3})), ShapeError,
                  "BertEmbeddings: expected input_ids [batch, length >= 1], got [3]");
  SL_CHECK_THROWS(m.forward(zeros({1, 65}, {.dtype = DType::i64})), ValueError,
                  "sequence length 65 exceeds max_position_embeddings = 64");
  SL_CHECK_THROWS(m.forward(ids, Tensor(), ones({1, 4})), ShapeError,
                  "BertModel: attention_mask of shape [1, 4] does not match input_ids [1, 3]");
  // HF's state dict without the tied decoder's name: strict loading reports it
  nn::StateDict sd = m.state_dict();
  sd.erase("cls.predictions.decoder.weight");
  SL_CHECK_THROWS(m.load_state_dict(sd), ValueError, "cls.predictions.decoder.weight");
  // BertModel's modules have no one-tensor forward where HF's take two inputs
  SL_CHECK_THROWS(static_cast<nn::Module&>(*m.bert->encoder).forward(zeros({1, 3, 32})), ValueError,
                  "BertEncoder: this module has no one-tensor forward(x)");
}

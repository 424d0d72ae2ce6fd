// The BERT jobs, on WordNet's glosses (wordnet.h) through the supervised loop of supervised.h
// (AdamW + cosine or --warmup-steps, any strategy, a sharded checkpoint each epoch, --resume 1):
//
// bert: masked-language-model pre-training (Devlin et al. 2018) of a small BertForMaskedLM
// (models/bert.h).
//   sl_train --model bert [the loop's flags] [--seq-len 64] [--vocab-size 8192] [--layers 2]
//            [--hidden 128] [--heads 2] [--intermediate 512] [--dropout 0.1] [--max-texts 0]
//            [--mask-prob 0.15]
// bert_pos: fine-tuning of a BertForSequenceClassification to tell a gloss's part of speech
// (noun, verb, adjective, adverb: the WordNet file it came from) from the gloss alone, its encoder
// taken from a bert checkpoint with --init (pooler and classifier start fresh).
//   sl_train --model bert_pos [the same flags] [--init checkpoints/bert | FILE.safetensors]
// With --init the vocabulary flags (--vocab-size, --max-texts) and --seq-len must be the
// pre-training's (checked against a checkpoint's config), and the encoder's sizes too (checked
// by the tensors' shapes).
//
// Vocabulary: a WordPiece vocabulary of at most --vocab-size tokens is trained on the first
// --max-texts (0: all 117,659) synsets' "<words>: <gloss>" texts by merges (models/tokenizer.h:
// train_wordpiece_vocab, pieces seen at least twice; deterministic, so every rank and both jobs
// build the same one from the same flags).
// bert's data: each text is tokenized (lower-cased) and followed by [SEP], and the token stream is
// cut into rows of [CLS] + seq-len - 1 tokens (RoBERTa's "full sentences": no padding, so the
// model runs without an attention mask). Every 20th row is held out for evaluation.
// Each epoch masks every training row anew (models/mlm.h: 15% of its tokens, 80% [MASK] / 10%
// random / 10% kept), with draws keyed by (seed, epoch, row): resumed runs and runs on other
// numbers of ranks mask exactly alike. The loss is cross entropy over the chosen positions
// (BertForMaskedLM::logits_at computes only those); the metric is the top-1 accuracy at the chosen
// positions of the held-out rows, whose masks are drawn once (the same every epoch).
// bert_pos's data: [CLS] gloss [SEP] padded to seq-len with an attention mask; every 20th synset is
// held out; the metric is the accuracy on those.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <shardlight/shardlight.h>

#include "core/ops/index.h"
#include "dist/checkpoint.h"
#include "models/bert.h"
#include "models/mlm.h"
#include "models/tokenizer.h"
#include "nn/loss.h"
#include "nn/serialize/safetensors.h"
#include "registry.h"
#include "supervised.h"
#include "wordnet.h"

namespace sl::train {
namespace {

/// The evaluation rows' key epoch: their masks are drawn once, outside the training epochs.
constexpr int64_t kEvalEpoch = -1;

/// What load_data builds and make_model / loss / evaluate read.
struct BertData {
  int64_t vocab_size = 0;
  models::MlmMaskingOptions masking;
};

/// Rows of [CLS] + (L - 1) tokens cut from `stream`; row r goes to the held-out set when
/// r % 20 == 19. Returns {train, test}, each a TensorDataset of {ids [N, L], row index [N]}.
std::pair<std::shared_ptr<nn::Dataset>, std::shared_ptr<nn::Dataset>> make_rows(
    const std::vector<int64_t>& stream, int64_t L, int64_t cls) {
  const int64_t rows = static_cast<int64_t>(stream.size()) / (L - 1);
  std::vector<int64_t> ids[2], index[2];
  for (int64_t r = 0; r < rows; ++r) {
    const int s = r % 20 == 19 ? 1 : 0;
    ids[s].push_back(cls);
    ids[s].insert(ids[s].end(), stream.begin() + r * (L - 1), stream.begin() + (r + 1) * (L - 1));
    index[s].push_back(static_cast<int64_t>(index[s].size()));
  }
  auto dataset = [L](const std::vector<int64_t>& i, const std::vector<int64_t>& x) {
    const int64_t n = static_cast<int64_t>(x.size());
    return std::make_shared<nn::TensorDataset>(
        TensorList{from_vector(i, {n, L}), from_vector(x, {n})});
  };
  return {dataset(ids[0], index[0]), dataset(ids[1], index[1])};
}

/// The masked inputs and labels of a batch {ids, row index} drawn for `epoch`.
models::MlmBatch mask_batch(const TensorList& b, uint64_t seed, int64_t epoch,
                            const models::MlmMaskingOptions& masking) {
  const int64_t* row = b[1].contiguous().data_ptr<int64_t>();
  std::vector<uint64_t> keys(static_cast<size_t>(b[1].size(0)));
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = models::mlm_row_key(seed, epoch, row[i]);
  return models::mask_for_mlm(b[0], keys, masking);
}

/// The flags both BERT jobs read: the encoder's size and where its vocabulary comes from (the
/// fine-tuning job must repeat the pre-training's, so its checkpoint fits).
struct BertFlags {
  models::BertConfig config;
  int64_t seq_len = 64, vocab_size = 8192, max_texts = 0;
};

BertFlags read_bert_flags(const Options& opt, const std::string& job) {
  BertFlags f;
  f.seq_len = opt.get_int("seq-len", 64);
  f.vocab_size = opt.get_int("vocab-size", 8192);
  f.max_texts = opt.get_int("max-texts", 0);
  SL_CHECK(f.seq_len >= 3, job, ": --seq-len must be >= 3 ([CLS], a token, [SEP]), got ",
           f.seq_len);
  SL_CHECK(f.max_texts >= 0, job, ": --max-texts must be >= 0 (0: all), got ", f.max_texts);
  models::BertConfig& c = f.config;
  c.num_hidden_layers = opt.get_int("layers", 2);
  c.hidden_size = opt.get_int("hidden", 128);
  c.num_attention_heads = opt.get_int("heads", 2);
  c.intermediate_size = opt.get_int("intermediate", 512);
  c.hidden_dropout_prob = c.attention_probs_dropout_prob = opt.get_double("dropout", 0.1);
  c.max_position_embeddings = f.seq_len;
  c.vocab_size = f.vocab_size;  // the trained vocabulary may be smaller: set after load_data
  return f;
}

/// "Head(layers 2, hidden 128, ...)" for the run's model line.
std::string describe(const std::string& head, const BertFlags& f) {
  const models::BertConfig& c = f.config;
  return head + "(layers " + std::to_string(c.num_hidden_layers) + ", hidden " +
         std::to_string(c.hidden_size) + ", heads " + std::to_string(c.num_attention_heads) +
         ", intermediate " + std::to_string(c.intermediate_size) +
         ", vocab <= " + std::to_string(f.vocab_size) + ", seq " + std::to_string(f.seq_len) + ")";
}

/// The flags' part of the run config (a checkpoint resumes only with the same).
serialize::Json bert_config_json(const BertFlags& f) {
  const models::BertConfig& c = f.config;
  return serialize::Json::object({{"layers", static_cast<long long>(c.num_hidden_layers)},
                                  {"hidden", static_cast<long long>(c.hidden_size)},
                                  {"heads", static_cast<long long>(c.num_attention_heads)},
                                  {"intermediate", static_cast<long long>(c.intermediate_size)},
                                  {"dropout", c.hidden_dropout_prob},
                                  {"vocab_size", static_cast<long long>(f.vocab_size)},
                                  {"seq_len", static_cast<long long>(f.seq_len)},
                                  {"max_texts", static_cast<long long>(f.max_texts)}});
}

/// The first --max-texts synsets of --data-dir's WordNet, and the WordPiece tokenizer both jobs
/// train on their "<words>: <gloss>" texts (deterministic: every rank and both jobs get the same
/// vocabulary from the same flags).
std::pair<std::vector<WordNetSynset>, std::shared_ptr<models::WordPieceTokenizer>> gloss_corpus(
    const Options& opt, const BertFlags& f) {
  std::vector<WordNetSynset> synsets =
      load_wordnet_synsets(opt.data_dir.empty() ? kWordNetDir : opt.data_dir);
  if (f.max_texts > 0 && static_cast<int64_t>(synsets.size()) > f.max_texts) {
    synsets.resize(f.max_texts);
  }
  std::vector<std::string> texts;
  for (const WordNetSynset& s : synsets) texts.push_back(s.words + ": " + s.gloss);
  return {std::move(synsets), std::make_shared<models::WordPieceTokenizer>(
                                  models::train_wordpiece_vocab(texts, f.vocab_size, 2))};
}

int run_bert(const Options& opt) {
  const BertFlags flags = read_bert_flags(opt, "bert");
  const models::BertConfig& config = flags.config;
  const double mask_prob = opt.get_double("mask-prob", 0.15);
  const uint64_t seed = opt.seed;

  auto state = std::make_shared<BertData>();
  SupervisedJob job;
  job.name = "bert";
  job.description = describe("BertForMaskedLM", flags);
  job.config = bert_config_json(flags);
  job.config.set("mask_prob", mask_prob);
  job.default_batch_size = 128;
  job.default_lr = 1e-3;
  job.no_decay = {"bias", "LayerNorm.weight"};
  job.metric = "masked-token accuracy";

  job.load_data = [&opt, state, flags, mask_prob] {
    auto [synsets, tokenizer] = gloss_corpus(opt, flags);
    const models::WordPieceTokenizer& tok = *tokenizer;
    std::vector<int64_t> stream;
    for (const WordNetSynset& s : synsets) {
      std::vector<int64_t> ids = tok.encode(s.words + ": " + s.gloss, /*add_special_tokens=*/false);
      stream.insert(stream.end(), ids.begin(), ids.end());
      stream.push_back(tok.sep_id());
    }
    state->vocab_size = tok.vocab_size();
    state->masking = {.mask_prob = mask_prob,
                      .mask_id = tok.mask_id(),
                      .vocab_size = tok.vocab_size(),
                      .never_mask = {tok.cls_id(), tok.sep_id(), tok.pad_id()}};
    auto [train, test] = make_rows(stream, flags.seq_len, tok.cls_id());
    char line[256];
    std::snprintf(line, sizeof line,
                  "wordnet: %zu glosses, %zu tokens, vocabulary %lld; %lld train / %lld held-out "
                  "rows of %lld tokens",
                  synsets.size(), stream.size(), static_cast<long long>(tok.vocab_size()),
                  static_cast<long long>(train->size()), static_cast<long long>(test->size()),
                  static_cast<long long>(flags.seq_len));
    return JobData{train, test, line};
  };
  job.make_model = [state, config] {
    models::BertConfig c = config;
    c.vocab_size = state->vocab_size;
    return std::make_shared<models::BertForMaskedLM>(c);
  };
  job.loss = [state, seed](dist::Strategy& strategy, const TensorList& b, const Device& device,
                           int64_t epoch) {
    models::MlmBatch m = mask_batch(b, seed, epoch, state->masking);
    const int64_t ignore = state->masking.ignore_index;
    // Logits at the chosen positions only (BertForMaskedLM::logits_at); dp splits both inputs
    // by rows and concatenates the replicas' rows in order, which is this same row-major order.
    Tensor labels = m.labels.reshape({-1});
    Tensor logits =
        strategy.forward({m.input_ids.to(device), m.labels.to(device)},
                         [ignore](nn::Module& model, const TensorList& in) {
                           return dynamic_cast<models::BertForMaskedLM&>(model).logits_at(
                               in[0], ops::nonzero_flat(in[1].reshape({-1}).ne(ignore)));
                         });
    return nn::functional::cross_entropy(logits,
                                         labels.masked_select(labels.ne(ignore)).to(device));
  };
  job.evaluate = [state, seed](nn::Module& model, const nn::Dataset& test, int64_t begin,
                               int64_t end) {
    auto& mlm = dynamic_cast<models::BertForMaskedLM&>(model);
    const Device device = model.parameters().front().device();
    const int64_t ignore = state->masking.ignore_index;
    int64_t correct = 0, counted = 0;
    for_each_batch(test, begin, end, 64, [&](const TensorList& batch) {
      models::MlmBatch m = mask_batch(batch, seed, kEvalEpoch, state->masking);
      Tensor labels = m.labels.reshape({-1});
      Tensor pos = ops::nonzero_flat(labels.ne(ignore));
      Tensor pred = mlm.logits_at(m.input_ids.to(device), pos).argmax(-1).to(kCPU).contiguous();
      Tensor y = labels.index_select(0, pos).contiguous();
      const int64_t* p = pred.data_ptr<int64_t>();
      const int64_t* t = y.data_ptr<int64_t>();
      for (int64_t k = 0; k < y.numel(); ++k) correct += p[k] == t[k];
      counted += y.numel();
    });
    return std::pair<int64_t, int64_t>(correct, counted);
  };
  return run_supervised(opt, job);
}

/// What the fine-tuning job's load_data builds for make_model.
struct PosData {
  int64_t vocab_size = 0;
  nn::StateDict init;  ///< from --init, empty without it
  std::string init_from;
};

/// The tensors of --init: a sharded checkpoint folder (consolidated, dist/checkpoint.h) whose
/// run config must match `flags` in the vocabulary's source, or a safetensors file. Throws
/// IOError for what cannot be read, ValueError for a checkpoint of another vocabulary.
nn::StateDict read_init(const std::string& path, const BertFlags& flags) {
  serialize::StateDict sd;
  if (std::filesystem::is_directory(path)) {
    const serialize::Json manifest = dist::read_sharded_manifest(path);
    if (const serialize::Json* extra = manifest.find("extra")) {
      if (const serialize::Json* c = extra->find("config")) {
        for (const char* key : {"vocab_size", "max_texts", "seq_len"}) {
          const serialize::Json* v = c->find(key);
          const serialize::Json want = bert_config_json(flags).at(key);
          SL_CHECK(v == nullptr || *v == want, "bert_pos: --init ", path, " was pre-trained with ",
                   key, " ", v ? v->dump() : "", ", this run has ", want.dump(),
                   " (the vocabulary and positions must be the pre-training's)");
        }
      }
    }
    sd = dist::consolidate_sharded_checkpoint(path);
  } else {
    sd = serialize::load_safetensors(path);
  }
  return serialize::convert_state_dict<nn::StateDict>(sd);
}

int run_bert_pos(const Options& opt) {
  const BertFlags flags = read_bert_flags(opt, "bert_pos");
  const std::string init = opt.get_string("init", "");
  auto state = std::make_shared<PosData>();
  SupervisedJob job;
  job.name = "bert_pos";
  job.description = describe("BertForSequenceClassification", flags) + ", 4 labels" +
                    (init.empty() ? "" : ", encoder from " + init);
  job.config = bert_config_json(flags);
  job.config.set("init", init);
  job.default_batch_size = 64;
  job.default_lr = 1e-3;
  job.no_decay = {"bias", "LayerNorm.weight"};
  job.metric = "test accuracy";

  job.load_data = [&opt, state, flags, init] {
    if (!init.empty()) {
      state->init = read_init(init, flags);
      state->init_from = init;
    }
    auto [synsets, tokenizer] = gloss_corpus(opt, flags);
    state->vocab_size = tokenizer->vocab_size();
    // Input: the gloss alone (its words would give the part of speech away too easily), as
    // [CLS] gloss [SEP] [PAD]..., cut to seq-len; every 20th synset is held out.
    std::vector<int64_t> ids[2], mask[2], label[2];
    int64_t count[2][4] = {};
    for (size_t i = 0; i < synsets.size(); ++i) {
      const int s = i % 20 == 19 ? 1 : 0;
      models::Encoding e = tokenizer->encode_single(synsets[i].gloss, flags.seq_len);
      ids[s].insert(ids[s].end(), e.input_ids.begin(), e.input_ids.end());
      mask[s].insert(mask[s].end(), e.attention_mask.begin(), e.attention_mask.end());
      label[s].push_back(synsets[i].part);
      ++count[s][synsets[i].part];
    }
    auto dataset = [&](int s) {
      const int64_t n = static_cast<int64_t>(label[s].size());
      return std::make_shared<nn::TensorDataset>(
          TensorList{from_vector(ids[s], {n, flags.seq_len}),
                     from_vector(mask[s], {n, flags.seq_len}), from_vector(label[s], {n})});
    };
    JobData d{dataset(0), dataset(1), ""};
    const int64_t n_test = static_cast<int64_t>(label[1].size());
    const int64_t majority = *std::max_element(count[1], count[1] + 4);
    char line[320];
    std::snprintf(line, sizeof line,
                  "wordnet: %zu glosses labelled noun/verb/adj/adv, vocabulary %lld; %lld train / "
                  "%lld test; the most frequent part is %.2f%% of the test split",
                  synsets.size(), static_cast<long long>(state->vocab_size),
                  static_cast<long long>(d.train->size()), static_cast<long long>(n_test),
                  n_test > 0 ? 100.0 * static_cast<double>(majority) / n_test : 0.0);
    d.summary = line;
    return d;
  };
  job.make_model = [state, flags] {
    models::BertConfig c = flags.config;
    c.vocab_size = state->vocab_size;
    c.num_labels = 4;
    auto model = std::make_shared<models::BertForSequenceClassification>(c);
    if (!state->init.empty()) {
      // The pre-trained encoder (bert.*); the MLM head is not used here, the pooler and the
      // classifier start fresh.
      nn::LoadResult r = model->load_state_dict(state->init, /*strict=*/false);
      SL_CHECK(r.mismatched_keys.empty(), "bert_pos: --init ", state->init_from,
               " does not fit this model: ", r.mismatched_keys.front());
      for (const std::string& k : r.missing_keys) {
        SL_CHECK(k.rfind("bert.pooler.", 0) == 0 || k.rfind("classifier.", 0) == 0,
                 "bert_pos: --init ", state->init_from, " lacks the encoder's '", k, "'");
      }
    }
    return model;
  };
  job.loss = [](dist::Strategy& strategy, const TensorList& b, const Device& device, int64_t) {
    Tensor logits = strategy.forward(
        {b[0].to(device), b[1].to(device)}, [](nn::Module& m, const TensorList& in) {
          return dynamic_cast<models::BertForSequenceClassification&>(m).forward(in[0], Tensor(),
                                                                                 in[1]);
        });
    return nn::functional::cross_entropy(logits, b[2].to(device));
  };
  job.evaluate = [](nn::Module& model, const nn::Dataset& test, int64_t begin, int64_t end) {
    auto& cls = dynamic_cast<models::BertForSequenceClassification&>(model);
    const Device device = model.parameters().front().device();
    int64_t correct = 0;
    for_each_batch(test, begin, end, 256, [&](const TensorList& b) {
      Tensor pred =
          cls.forward(b[0].to(device), Tensor(), b[1].to(device)).argmax(-1).to(kCPU).contiguous();
      const std::vector<int64_t> p = pred.to_vector<int64_t>(), y = b[2].to_vector<int64_t>();
      for (size_t k = 0; k < y.size(); ++k) correct += p[k] == y[k];
    });
    return std::pair<int64_t, int64_t>(correct, end - begin);
  };
  return run_supervised(opt, job);
}

}  // namespace

SL_REGISTER_TRAIN_JOB("bert",
                      "BERT masked-LM pre-training on WordNet's glosses (WordPiece vocabulary "
                      "built from them), AdamW + cosine, --strategy single|dp|ddp|zero1|zero2, "
                      "checkpoint each epoch, --resume 1",
                      &run_bert);
SL_REGISTER_TRAIN_JOB("bert_pos",
                      "BERT fine-tuning: the part of speech (noun/verb/adj/adv) of a WordNet "
                      "gloss, --init a bert job's checkpoint (or a safetensors file) for its "
                      "encoder, any strategy, checkpoint each epoch, --resume 1",
                      &run_bert_pos);

}  // namespace sl::train

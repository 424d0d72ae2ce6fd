// The BERT job: masked-language-model pre-training (Devlin et al. 2018) of a small BertForMaskedLM
// (models/bert.h) on WordNet's glosses (wordnet.h) through the supervised loop of supervised.h
// (AdamW + cosine, any strategy, a sharded checkpoint each epoch, --resume 1).
//
//   sl_train --model bert [the loop's flags] [--seq-len 64] [--vocab-size 8192] [--layers 2]
//            [--hidden 128] [--heads 2] [--intermediate 512] [--dropout 0.1] [--max-texts 0]
//            [--mask-prob 0.15]
//
// Data: a WordPiece vocabulary of at most --vocab-size tokens is trained on the glosses by merges
// (models/tokenizer.h: train_wordpiece_vocab, pieces seen at least twice; deterministic, so every
// rank builds the same one);
// each gloss is tokenized (lower-cased) and followed by [SEP], and the token stream is cut into
// rows of [CLS] + seq-len - 1 tokens (RoBERTa's "full sentences": no padding, so the model runs
// without an attention mask). Every 20th row is held out for evaluation. --max-texts N keeps the
// first N glosses (0: all 117,659) for quick runs.
// Each epoch masks every training row anew (models/mlm.h: 15% of its tokens, 80% [MASK] / 10%
// random / 10% kept), with draws keyed by (seed, epoch, row): resumed runs and runs on other
// numbers of ranks mask exactly alike. The loss is cross entropy over the chosen positions; the
// metric is the top-1 accuracy at the chosen positions of the held-out rows, whose masks are drawn
// once (the same every epoch).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <shardlight/shardlight.h>

#include "core/ops/index.h"
#include "models/bert.h"
#include "models/mlm.h"
#include "models/tokenizer.h"
#include "nn/loss.h"
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

int run_bert(const Options& opt) {
  const int64_t seq_len = opt.get_int("seq-len", 64);
  const int64_t vocab_size = opt.get_int("vocab-size", 8192);
  const int64_t max_texts = opt.get_int("max-texts", 0);
  SL_CHECK(seq_len >= 2, "bert: --seq-len must be >= 2 ([CLS] and one token), got ", seq_len);
  SL_CHECK(max_texts >= 0, "bert: --max-texts must be >= 0 (0: all), got ", max_texts);
  models::BertConfig config;
  config.num_hidden_layers = opt.get_int("layers", 2);
  config.hidden_size = opt.get_int("hidden", 128);
  config.num_attention_heads = opt.get_int("heads", 2);
  config.intermediate_size = opt.get_int("intermediate", 512);
  config.hidden_dropout_prob = config.attention_probs_dropout_prob = opt.get_double("dropout", 0.1);
  config.max_position_embeddings = seq_len;
  config.vocab_size = vocab_size;  // the built vocabulary may be smaller; set in load_data
  const double mask_prob = opt.get_double("mask-prob", 0.15);
  const uint64_t seed = opt.seed;

  auto state = std::make_shared<BertData>();
  SupervisedJob job;
  job.name = "bert";
  job.description =
      "BertForMaskedLM(layers " + std::to_string(config.num_hidden_layers) + ", hidden " +
      std::to_string(config.hidden_size) + ", heads " + std::to_string(config.num_attention_heads) +
      ", intermediate " + std::to_string(config.intermediate_size) +
      ", vocab <= " + std::to_string(vocab_size) + ", seq " + std::to_string(seq_len) + ")";
  job.config =
      serialize::Json::object({{"layers", static_cast<long long>(config.num_hidden_layers)},
                               {"hidden", static_cast<long long>(config.hidden_size)},
                               {"heads", static_cast<long long>(config.num_attention_heads)},
                               {"intermediate", static_cast<long long>(config.intermediate_size)},
                               {"dropout", config.hidden_dropout_prob},
                               {"vocab_size", static_cast<long long>(vocab_size)},
                               {"seq_len", static_cast<long long>(seq_len)},
                               {"max_texts", static_cast<long long>(max_texts)},
                               {"mask_prob", mask_prob}});
  job.default_batch_size = 128;
  job.default_lr = 1e-3;
  job.no_decay = {"bias", "LayerNorm.weight"};
  job.metric = "masked-token accuracy";

  job.load_data = [&opt, state, seq_len, vocab_size, max_texts, mask_prob] {
    std::vector<std::string> texts =
        load_wordnet_glosses(opt.data_dir.empty() ? kWordNetDir : opt.data_dir);
    if (max_texts > 0 && static_cast<int64_t>(texts.size()) > max_texts) texts.resize(max_texts);
    models::WordPieceTokenizer tok(models::train_wordpiece_vocab(texts, vocab_size, 2));
    std::vector<int64_t> stream;
    for (const std::string& t : texts) {
      std::vector<int64_t> ids = tok.encode(t, /*add_special_tokens=*/false);
      stream.insert(stream.end(), ids.begin(), ids.end());
      stream.push_back(tok.sep_id());
    }
    state->vocab_size = tok.vocab_size();
    state->masking = {.mask_prob = mask_prob,
                      .mask_id = tok.mask_id(),
                      .vocab_size = tok.vocab_size(),
                      .never_mask = {tok.cls_id(), tok.sep_id(), tok.pad_id()}};
    auto [train, test] = make_rows(stream, seq_len, tok.cls_id());
    char line[256];
    std::snprintf(line, sizeof line,
                  "wordnet: %zu glosses, %zu tokens, vocabulary %lld; %lld train / %lld held-out "
                  "rows of %lld tokens",
                  texts.size(), stream.size(), static_cast<long long>(tok.vocab_size()),
                  static_cast<long long>(train->size()), static_cast<long long>(test->size()),
                  static_cast<long long>(seq_len));
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
    NoGradGuard ng;
    const bool was_training = model.is_training();
    model.eval();
    auto& mlm = dynamic_cast<models::BertForMaskedLM&>(model);
    const Device device = model.parameters().front().device();
    const int64_t ignore = state->masking.ignore_index;
    int64_t correct = 0, counted = 0;
    for (int64_t i = begin; i < end; i += 64) {
      std::vector<int64_t> idx;
      for (int64_t j = i; j < std::min(end, i + 64); ++j) idx.push_back(j);
      models::MlmBatch m = mask_batch(test.get_batch(idx), seed, kEvalEpoch, state->masking);
      Tensor labels = m.labels.reshape({-1});
      Tensor pos = ops::nonzero_flat(labels.ne(ignore));
      Tensor pred = mlm.logits_at(m.input_ids.to(device), pos).argmax(-1).to(kCPU).contiguous();
      Tensor y = labels.index_select(0, pos).contiguous();
      const int64_t* p = pred.data_ptr<int64_t>();
      const int64_t* t = y.data_ptr<int64_t>();
      for (int64_t k = 0; k < y.numel(); ++k) correct += p[k] == t[k];
      counted += y.numel();
    }
    model.train(was_training);
    return std::pair<int64_t, int64_t>(correct, counted);
  };
  return run_supervised(opt, job);
}

}  // namespace

SL_REGISTER_TRAIN_JOB("bert",
                      "BERT masked-LM pre-training on WordNet's glosses (WordPiece vocabulary "
                      "built from them), AdamW + cosine, --strategy single|dp|ddp|zero1|zero2, "
                      "checkpoint each epoch, --resume 1",
                      &run_bert);

}  // namespace sl::train

// The bert job: masked-language-model pre-training (Devlin et al. 2018) of a small
// BertForMaskedLM (models/bert.h) on WordNet's glosses (wordnet.h) or your own text, through the
// supervised loop of supervised.h (AdamW + cosine or --warmup-steps, any strategy, a sharded
// checkpoint each epoch, --resume 1). Fine-tuning is in bert_classify.cpp.
//   sl_train --model bert [the loop's flags] [--seq-len 64] [--vocab-size 8192] [--layers 2]
//            [--hidden 128] [--heads 2] [--intermediate 512] [--dropout 0.1] [--max-texts 0]
//            [--mask-prob 0.15] [--checkpoint-activations 0|1] [--text-file FILE]
//            [--lower-case 1] [--max-positions seq-len]
// --text-file pre-trains on your own corpus instead: the non-empty lines of a UTF-8 text file,
// one text each (e.g. a document or a paragraph).
//
// Vocabulary: a WordPiece vocabulary of at most --vocab-size tokens is trained on the first
// --max-texts (0: all 117,659) synsets' "<words>: <gloss>" texts (or the file's lines) by merges
// (models/tokenizer.h: train_wordpiece_vocab, pieces seen at least twice; deterministic, so
// every rank builds the same one), and stored in every checkpoint for the fine-tuning jobs.
// Data: each text is tokenized (lower-cased unless --lower-case 0) and followed by [SEP], and
// the token stream is cut into rows of [CLS] + seq-len - 1 tokens (RoBERTa's "full sentences":
// no padding, so the model runs without an attention mask). Every 20th row is held out.
// Each epoch masks every training row anew (models/mlm.h: 15% of its tokens, 80% [MASK] / 10%
// random / 10% kept), with draws keyed by (seed, epoch, row): resumed runs and runs on other
// numbers of ranks mask exactly alike. The loss is cross entropy over the chosen positions
// (BertForMaskedLM::logits_at computes only those); the metric is the top-1 accuracy at the chosen
// positions of the held-out rows, whose masks are drawn once (the same every epoch).
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <shardlight/shardlight.h>

#include "bert_common.h"
#include "core/ops/index.h"
#include "models/bert.h"
#include "models/mlm.h"
#include "models/tokenizer.h"
#include "models/unicode_text.h"
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
  std::shared_ptr<models::WordPieceTokenizer> tokenizer;  ///< stored in every checkpoint
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

/// The texts of --text-file: its lines, without the line ends and leaving out empty ones (and
/// lines of spaces only). Throws IOError naming the file when it cannot be read or has no text,
/// ValueError naming the file and line for invalid UTF-8.
std::vector<std::string> read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  SL_CHECK_IO(f.good(), "bert: cannot read --text-file '", path, "'");
  std::vector<std::string> texts;
  std::string line;
  int64_t bytes = 0;
  for (int64_t n = 1; std::getline(f, line); ++n) {
    bytes += static_cast<int64_t>(line.size()) + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string who = "bert: --text-file '" + path + "' line " + std::to_string(n);
    models::unicode::decode_utf8(line, who.c_str());  // throws naming the line
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    texts.push_back(std::move(line));
  }
  SL_CHECK_IO(f.eof(), "bert: error reading --text-file '", path, "'");
  SL_CHECK_IO(!texts.empty(), "bert: --text-file '", path, "' has no text (", bytes, " bytes)");
  return texts;
}

FlagDocs bert_job_flags() {
  return join_flags(join_flags({{"mask-prob", "0.15", "share of tokens masked (80/10/10)"},
                                {"text-file", "",
                                 "pre-train on this UTF-8 file's lines instead "
                                 "of WordNet's glosses"}},
                               bert_flags()),
                    loop_flags());
}

int run_bert(const Options& opt) {
  const BertFlags flags = read_bert_flags(opt, "bert");
  const models::BertConfig& config = flags.config;
  const double mask_prob = opt.get_double("mask-prob", 0.15);
  const std::string text_file = opt.get_string("text-file", "");
  const uint64_t seed = opt.seed;

  auto state = std::make_shared<BertData>();
  SupervisedJob job;
  job.name = "bert";
  job.description = describe("BertForMaskedLM", flags);
  job.config = bert_config_json(flags);
  job.config.set("mask_prob", mask_prob);
  // Your own corpus instead of WordNet's glosses: its texts (and so the vocabulary) are pinned
  // by the file's size and CRC-32, so a run resumes only on the same corpus.
  auto own_texts = std::make_shared<std::vector<std::string>>();
  if (!text_file.empty()) {
    *own_texts = read_text_file(text_file);
    SL_CHECK(opt.data_dir.empty(),
             "bert: --text-file and --data-dir (WordNet's folder) exclude "
             "each other");
    serialize::Json pin = file_pin(text_file);
    job.config.set("corpus", serialize::Json::object({{"text_file", text_file},
                                                      {"bytes", pin.at("bytes")},
                                                      {"crc32", pin.at("crc32")}}));
  }
  job.default_batch_size = 128;
  job.default_lr = 1e-3;
  job.no_decay = {"bias", "LayerNorm.weight"};
  job.metric = "masked-token accuracy";

  job.load_data = [&opt, state, flags, mask_prob, own_texts, text_file] {
    std::vector<std::string> texts = *own_texts;
    std::shared_ptr<models::WordPieceTokenizer> tokenizer;
    if (texts.empty()) {
      const std::vector<WordNetSynset> synsets = wordnet_synsets(opt, flags);
      for (const WordNetSynset& s : synsets) texts.push_back(s.words + ": " + s.gloss);
      tokenizer = gloss_tokenizer(synsets, flags);
    } else {
      if (flags.max_texts > 0 && static_cast<int64_t>(texts.size()) > flags.max_texts) {
        texts.resize(static_cast<size_t>(flags.max_texts));
      }
      const models::WordPieceOptions o = flags.tokenizer_options();
      tokenizer = std::make_shared<models::WordPieceTokenizer>(
          models::train_wordpiece_vocab(texts, flags.vocab_size, 2, o), o);
    }
    const models::WordPieceTokenizer& tok = *tokenizer;
    std::vector<int64_t> stream;
    for (const std::string& text : texts) {
      std::vector<int64_t> ids = tok.encode(text, /*add_special_tokens=*/false);
      stream.insert(stream.end(), ids.begin(), ids.end());
      stream.push_back(tok.sep_id());
    }
    state->vocab_size = tok.vocab_size();
    state->tokenizer = tokenizer;
    state->masking = {.mask_prob = mask_prob,
                      .mask_id = tok.mask_id(),
                      .vocab_size = tok.vocab_size(),
                      .never_mask = {tok.cls_id(), tok.sep_id(), tok.pad_id()}};
    auto [train, test] = make_rows(stream, flags.seq_len, tok.cls_id());
    const std::string source = text_file.empty() ? "wordnet" : text_file;
    const char* what = text_file.empty() ? "glosses" : "texts";
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s: %zu %s, %zu tokens, vocabulary %lld; %lld train / %lld held-out rows of "
                  "%lld tokens",
                  source.c_str(), texts.size(), what, stream.size(),
                  static_cast<long long>(tok.vocab_size()), static_cast<long long>(train->size()),
                  static_cast<long long>(test->size()), static_cast<long long>(flags.seq_len));
    return JobData{train, test, line};
  };
  job.checkpoint_extra = [state] { return tokenizer_json(*state->tokenizer); };
  job.make_model = [state, config, ckpt = flags.checkpoint_activations] {
    models::BertConfig c = config;
    c.vocab_size = state->vocab_size;
    auto model = std::make_shared<models::BertForMaskedLM>(c);
    model->bert->gradient_checkpointing_enable(ckpt);
    return model;
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

}  // namespace

SL_REGISTER_TRAIN_JOB("bert",
                      "BERT masked-LM pre-training on WordNet's glosses or your --text-file "
                      "(WordPiece vocabulary trained on them, stored in the checkpoint), AdamW + "
                      "cosine, --strategy single|dp|ddp|zero1|zero2, checkpoint each epoch, "
                      "--resume 1",
                      &run_bert, &bert_job_flags);

}  // namespace sl::train

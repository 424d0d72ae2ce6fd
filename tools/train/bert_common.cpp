// What the BERT jobs share (see bert_common.h).
#include "bert_common.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <shardlight/shardlight.h>

#include "dist/checkpoint.h"
#include "nn/loss.h"
#include "nn/serialize/crc32.h"
#include "nn/serialize/safetensors.h"

namespace sl::train {

models::WordPieceOptions BertFlags::tokenizer_options() const {
  models::WordPieceOptions o;
  o.do_lower_case = lower_case;
  return o;
}

BertFlags read_bert_flags(const Options& opt, const std::string& job) {
  BertFlags f;
  f.seq_len = opt.get_int("seq-len", 64);
  const int64_t positions = opt.get_int("max-positions", f.seq_len);
  f.vocab_size = opt.get_int("vocab-size", 8192);
  f.max_texts = opt.get_int("max-texts", 0);
  f.lower_case = opt.get_bool("lower-case", true);
  f.checkpoint_activations = opt.get_bool("checkpoint-activations", false);
  SL_CHECK(f.seq_len >= 3, job, ": --seq-len must be >= 3 ([CLS], a token, [SEP]), got ",
           f.seq_len);
  SL_CHECK(positions >= f.seq_len, job, ": --max-positions ", positions, " must be >= --seq-len ",
           f.seq_len, " (one position embedding per token)");
  SL_CHECK(f.max_texts >= 0, job, ": --max-texts must be >= 0 (0: all), got ", f.max_texts);
  models::BertConfig& c = f.config;
  c.num_hidden_layers = opt.get_int("layers", 2, 1);
  c.hidden_size = opt.get_int("hidden", 128, 1);
  c.num_attention_heads = opt.get_int("heads", 2, 1);
  c.intermediate_size = opt.get_int("intermediate", 512, 1);
  c.hidden_dropout_prob = c.attention_probs_dropout_prob = opt.get_double("dropout", 0.1, 0.0, 1.0);
  c.max_position_embeddings = positions;
  c.vocab_size = f.vocab_size;  // the trained vocabulary may be smaller: set after load_data
  return f;
}

const FlagDocs& bert_flags() {
  static const FlagDocs flags = {
      {"seq-len", "64", "tokens per row, [CLS] and [SEP] included"},
      {"max-positions", "(--seq-len)", "position embeddings (512 for HF's released models)"},
      {"vocab-size", "8192", "largest WordPiece vocabulary to train"},
      {"max-texts", "0", "use the first N texts only (0: all)"},
      {"lower-case", "1", "1: lower-case and strip accents (uncased models); 0: cased"},
      {"checkpoint-activations", "0", "1: recompute each layer in backward (less memory)"},
      {"layers", "2", "encoder layers"},
      {"hidden", "128", "hidden size"},
      {"heads", "2", "attention heads"},
      {"intermediate", "512", "feed-forward size"},
      {"dropout", "0.1", "hidden and attention dropout"},
  };
  return flags;
}

std::string describe(const std::string& head, const BertFlags& f) {
  const models::BertConfig& c = f.config;
  return head + "(layers " + std::to_string(c.num_hidden_layers) + ", hidden " +
         std::to_string(c.hidden_size) + ", heads " + std::to_string(c.num_attention_heads) +
         ", intermediate " + std::to_string(c.intermediate_size) +
         ", vocab <= " + std::to_string(f.vocab_size) + ", seq " + std::to_string(f.seq_len) +
         (f.checkpoint_activations ? ", activation checkpointing" : "") + ")";
}

serialize::Json bert_config_json(const BertFlags& f) {
  const models::BertConfig& c = f.config;
  serialize::Json j =
      serialize::Json::object({{"layers", static_cast<long long>(c.num_hidden_layers)},
                               {"hidden", static_cast<long long>(c.hidden_size)},
                               {"heads", static_cast<long long>(c.num_attention_heads)},
                               {"intermediate", static_cast<long long>(c.intermediate_size)},
                               {"dropout", c.hidden_dropout_prob},
                               {"vocab_size", static_cast<long long>(f.vocab_size)},
                               {"seq_len", static_cast<long long>(f.seq_len)},
                               {"max_texts", static_cast<long long>(f.max_texts)}});
  // Only when not the defaults, so the configs of earlier checkpoints stay valid.
  if (c.max_position_embeddings != f.seq_len) {
    j.set("max_positions", static_cast<long long>(c.max_position_embeddings));
  }
  if (!f.lower_case) j.set("lower_case", false);
  return j;
}

serialize::Json tokenizer_json(const models::WordPieceTokenizer& tok) {
  serialize::Json tokens = serialize::Json::array();
  for (const std::string& t : tok.vocab()) tokens.push_back(t);
  return serialize::Json::object(
      {{"vocab", std::move(tokens)}, {"lower_case", tok.options().do_lower_case}});
}

serialize::Json file_pin(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  SL_CHECK_IO(f.good(), "cannot read '", path, "'");
  uint32_t crc = 0;
  long long bytes = 0;
  char buf[1 << 16];
  while (f.read(buf, sizeof buf) || f.gcount() > 0) {
    crc = serialize::crc32(crc, buf, static_cast<size_t>(f.gcount()));
    bytes += f.gcount();
  }
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc);
  return serialize::Json::object({{"file", path}, {"bytes", bytes}, {"crc32", std::string(hex)}});
}

std::vector<WordNetSynset> wordnet_synsets(const Options& opt, const BertFlags& f) {
  std::vector<WordNetSynset> synsets =
      load_wordnet_synsets(opt.data_dir.empty() ? kWordNetDir : opt.data_dir);
  if (f.max_texts > 0 && static_cast<int64_t>(synsets.size()) > f.max_texts) {
    synsets.resize(static_cast<size_t>(f.max_texts));
  }
  return synsets;
}

std::shared_ptr<models::WordPieceTokenizer> gloss_tokenizer(
    const std::vector<WordNetSynset>& synsets, const BertFlags& f) {
  std::vector<std::string> texts;
  for (const WordNetSynset& s : synsets) texts.push_back(s.words + ": " + s.gloss);
  const models::WordPieceOptions o = f.tokenizer_options();
  return std::make_shared<models::WordPieceTokenizer>(
      models::train_wordpiece_vocab(texts, f.vocab_size, 2, o), o);
}

nn::LoadResult load_init(nn::Module& model, const nn::StateDict& tensors, const std::string& job,
                         const std::string& from) {
  try {
    return model.load_state_dict(tensors, /*strict=*/false);
  } catch (const ShapeError& e) {
    detail::throw_error<ShapeError>(job, ": --init ", from, " does not fit this model: ", e.what());
  }
}

BertInit read_bert_init(const std::string& path, const std::string& job) {
  BertInit out;
  out.from = path;
  serialize::StateDict sd;
  if (std::filesystem::is_directory(path)) {
    const serialize::Json manifest = dist::read_sharded_manifest(path);
    if (const serialize::Json* extra = manifest.find("extra")) {
      if (const serialize::Json* c = extra->find("config")) out.config = *c;
      if (const serialize::Json* v = extra->find("vocab")) {
        std::vector<std::string> vocab;
        for (const serialize::Json& t : v->items()) vocab.push_back(t.as_string());
        models::WordPieceOptions o;
        if (const serialize::Json* lc = extra->find("lower_case")) o.do_lower_case = lc->as_bool();
        out.tokenizer = std::make_shared<models::WordPieceTokenizer>(std::move(vocab), o);
      }
      if (const serialize::Json* l = extra->find("labels")) {
        for (const serialize::Json& t : l->items()) out.labels.push_back(t.as_string());
      }
    }
    sd = dist::consolidate_sharded_checkpoint(path);
  } else {
    SL_CHECK_IO(std::filesystem::exists(path), job, ": --init '", path,
                "' is neither a checkpoint folder nor a file");
    sd = serialize::load_safetensors(path);
  }
  // A bare BertModel's file (HF's "embeddings.word_embeddings.weight", ...) under the heads'
  // "bert." prefix; the LayerNorm names of the original TensorFlow BERT releases (gamma, beta)
  // as today's (weight, bias), as HF's loader renames them.
  bool bare = sd.size() > 0;
  for (const auto& [name, t] : sd) bare = bare && name.rfind("bert.", 0) != 0;
  for (const auto& [name, t] : sd) {
    std::string key = bare ? "bert." + name : name;
    for (const auto& [from, to] : {std::pair{".LayerNorm.gamma", ".LayerNorm.weight"},
                                   std::pair{".LayerNorm.beta", ".LayerNorm.bias"}}) {
      const size_t n = std::string(from).size();
      if (key.size() > n && key.compare(key.size() - n, n, from) == 0) {
        key = key.substr(0, key.size() - n) + to;
      }
    }
    out.tensors.set(key, t);
  }
  return out;
}

std::shared_ptr<models::WordPieceTokenizer> finetune_tokenizer(const std::string& vocab_file,
                                                               const BertFlags& flags,
                                                               const BertInit& init) {
  if (!vocab_file.empty()) {
    return std::make_shared<models::WordPieceTokenizer>(
        models::WordPieceTokenizer::from_file(vocab_file, flags.tokenizer_options()));
  }
  return init.tokenizer;
}

void set_bert_classifier(SupervisedJob& job, const std::shared_ptr<ClassifierState>& state,
                         const BertFlags& flags) {
  const std::string name = job.name;
  job.make_model = [state, flags, name] {
    models::BertConfig c = flags.config;
    c.vocab_size = state->vocab_size;
    c.num_labels = state->num_labels;
    auto model = std::make_shared<models::BertForSequenceClassification>(c);
    model->bert->gradient_checkpointing_enable(flags.checkpoint_activations);
    const BertInit& init = state->init;
    if (!init.tensors.empty()) {
      // The pre-trained encoder (bert.*); an MLM head is not used here, the pooler and the
      // classifier start fresh when the file has none (or one of another number of labels).
      nn::StateDict usable;
      for (const auto& [k, t] : init.tensors) {
        if (k.rfind("classifier.", 0) == 0 && t.size(0) != c.num_labels) continue;
        usable.set(k, t);
      }
      nn::LoadResult r = load_init(*model, usable, name, init.from);
      for (const std::string& k : r.missing_keys) {
        // HF's files leave out the position ids and token types (deterministic buffers).
        SL_CHECK(k.rfind("bert.pooler.", 0) == 0 || k.rfind("classifier.", 0) == 0 ||
                     k == "bert.embeddings.position_ids" || k == "bert.embeddings.token_type_ids",
                 name, ": --init ", init.from, " lacks the encoder's '", k, "'");
      }
    }
    return model;
  };
  job.loss = [](dist::Strategy& strategy, const TensorList& b, const Device& device, int64_t) {
    Tensor logits =
        strategy.forward({b[0].to(device), b[1].to(device), b[2].to(device)},
                         [](nn::Module& m, const TensorList& in) {
                           return dynamic_cast<models::BertForSequenceClassification&>(m).forward(
                               in[0], in[1], in[2]);
                         });
    return nn::functional::cross_entropy(logits, b[3].to(device));
  };
  job.evaluate = [](nn::Module& model, const nn::Dataset& test, int64_t begin, int64_t end) {
    auto& cls = dynamic_cast<models::BertForSequenceClassification&>(model);
    const Device device = model.parameters().front().device();
    int64_t correct = 0;
    for_each_batch(test, begin, end, 256, [&](const TensorList& b) {
      Tensor pred = cls.forward(b[0].to(device), b[1].to(device), b[2].to(device))
                        .argmax(-1)
                        .to(kCPU)
                        .contiguous();
      const std::vector<int64_t> p = pred.to_vector<int64_t>(), y = b[3].to_vector<int64_t>();
      for (size_t k = 0; k < y.size(); ++k) correct += p[k] == y[k];
    });
    return std::pair<int64_t, int64_t>(correct, end - begin);
  };
  job.checkpoint_extra = [state] {
    serialize::Json extra = tokenizer_json(*state->tokenizer);
    serialize::Json labels = serialize::Json::array();
    for (const std::string& l : state->labels) labels.push_back(l);
    extra.set("labels", std::move(labels));
    return extra;
  };
}

}  // namespace sl::train

// The BERT fine-tuning jobs: a BertForSequenceClassification (models/bert.h) trained through the
// supervised loop of supervised.h (AdamW + cosine or --warmup-steps, any strategy, a sharded
// checkpoint each epoch, --resume 1), its encoder taken with --init from a bert job's
// checkpoint (bert.cpp), a bert_pos / bert_cls checkpoint, or a safetensors file such as Hugging
// Face's model.safetensors (names as HF's; a bare BertModel's file is read under "bert.").
//
// bert_pos: the part of speech (noun, verb, adjective, adverb: the WordNet file it came from) of
// a WordNet gloss, from the gloss alone.
//   sl_train --model bert_pos [the BERT flags of bert_common.h] [--init DIR | FILE.safetensors]
//            [--vocab vocab.txt]
// bert_cls: your own labelled texts, as Hugging Face's run_glue.py: tab-separated lines
// "label<TAB>text" (or "label<TAB>text<TAB>second text" for pairs, encoded as [CLS] a [SEP] b
// [SEP] with token types 0 and 1).
//   sl_train --model bert_cls --train-file train.tsv [--test-file test.tsv] [the BERT flags]
//            [--init DIR | FILE.safetensors] [--vocab vocab.txt]
// --predict FILE labels the lines of FILE ("text" or "text<TAB>text", as the training file
// without its label) with a fine-tuned checkpoint given by --init, whose sizes, sequence length,
// tokenizer and label names it takes from the checkpoint: one line "label<TAB>probability<TAB>
// the input line" per input line, to stdout or to --output FILE (written whole or not at all).
//   sl_train --model bert_cls --init checkpoints/bert_cls --predict texts.txt [--output out.tsv]
// The labels are the distinct first fields of the training file, in sorted order; without
// --test-file every 20th line is held out. Both files are pinned in the run config by size and
// CRC-32, so a run resumes only on the same data.
//
// Vocabulary, in this order: --vocab FILE (HF's vocab.txt, read with --lower-case); the --init
// checkpoint's (every bert, bert_pos and bert_cls checkpoint stores its tokenizer); bert_pos:
// rebuilt from WordNet with the vocabulary flags (then a checkpoint's config must have the same
// --vocab-size, --max-texts and --seq-len); bert_cls from scratch: trained on the training
// file's texts. Inputs are [CLS] text [SEP] cut and padded to --seq-len with an attention mask;
// the metric is the accuracy on the held-out examples.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <shardlight/shardlight.h>

#include "bert_common.h"
#include "models/unicode_text.h"
#include "nn/serialize/file_io.h"
#include "registry.h"
#include "supervised.h"

namespace sl::train {
namespace {

/// Examples as token ids, types and masks [N, L] plus labels, as a TensorDataset.
struct Encoded {
  std::vector<int64_t> ids, types, mask, label;
  std::shared_ptr<nn::Dataset> dataset(int64_t seq_len) const {
    const int64_t n = static_cast<int64_t>(label.size());
    return std::make_shared<nn::TensorDataset>(
        TensorList{from_vector(ids, {n, seq_len}), from_vector(types, {n, seq_len}),
                   from_vector(mask, {n, seq_len}), from_vector(label, {n})});
  }
  void add(const models::Encoding& e, int64_t y) {
    ids.insert(ids.end(), e.input_ids.begin(), e.input_ids.end());
    types.insert(types.end(), e.token_type_ids.begin(), e.token_type_ids.end());
    mask.insert(mask.end(), e.attention_mask.begin(), e.attention_mask.end());
    label.push_back(y);
  }
};

/// "; the most frequent label is X% of the test split" for a summary line.
std::string majority_note(const std::vector<int64_t>& test_labels, int64_t num_labels) {
  std::vector<int64_t> count(static_cast<size_t>(num_labels));
  for (int64_t y : test_labels) ++count[static_cast<size_t>(y)];
  const double n = static_cast<double>(test_labels.size());
  char buf[96];
  std::snprintf(
      buf, sizeof buf, "; the most frequent label is %.2f%% of the test split",
      n > 0 ? 100.0 * static_cast<double>(*std::max_element(count.begin(), count.end())) / n : 0.0);
  return buf;
}

/// The shared setup of both jobs' SupervisedJob.
SupervisedJob classifier_job(const std::string& name, const BertFlags& flags,
                             const std::string& init, const std::string& vocab_file) {
  SupervisedJob job;
  job.name = name;
  job.config = bert_config_json(flags);
  job.config.set("init", init);
  // The token ids depend on the vocabulary file's contents: a resumed run must read the same.
  if (!vocab_file.empty()) job.config.set("vocab", file_pin(vocab_file));
  job.default_batch_size = 64;
  job.default_lr = 1e-3;
  job.no_decay = {"bias", "LayerNorm.weight"};
  job.metric = "test accuracy";
  return job;
}

/// --init and --vocab, both fine-tuning jobs'.
FlagDocs init_flags() {
  return {{"init", "", "the encoder from a bert checkpoint folder or a safetensors file"},
          {"vocab", "", "a vocab.txt (HF's) for an --init safetensors file without one"}};
}

FlagDocs bert_pos_flags() {
  return join_flags(join_flags(init_flags(), bert_flags()), loop_flags());
}

int run_bert_pos(const Options& opt) {
  const BertFlags flags = read_bert_flags(opt, "bert_pos");
  const std::string init = opt.get_string("init", "");
  const std::string vocab_file = opt.get_string("vocab", "");
  auto state = std::make_shared<ClassifierState>();
  state->num_labels = 4;
  state->labels.assign(std::begin(kWordNetParts), std::end(kWordNetParts));
  SupervisedJob job = classifier_job("bert_pos", flags, init, vocab_file);
  job.description = describe("BertForSequenceClassification", flags) + ", 4 labels" +
                    (init.empty() ? "" : ", encoder from " + init);
  job.load_data = [&opt, state, flags, init, vocab_file] {
    if (!init.empty()) state->init = read_bert_init(init, "bert_pos");
    const std::vector<WordNetSynset> synsets = wordnet_synsets(opt, flags);
    state->tokenizer = finetune_tokenizer(vocab_file, flags, state->init);
    if (!state->tokenizer) {
      // WordNet's vocabulary, rebuilt from the flags: they must be the pre-training's.
      if (const serialize::Json* c = state->init.config.is_null() ? nullptr : &state->init.config) {
        SL_CHECK(c->find("corpus") == nullptr, "bert_pos: --init ", init, " was pre-trained on ",
                 c->at("corpus").dump(), " and holds no vocabulary; give it with --vocab");
        for (const char* key : {"vocab_size", "max_texts", "seq_len"}) {
          const serialize::Json* v = c->find(key);
          const serialize::Json want = bert_config_json(flags).at(key);
          SL_CHECK(v == nullptr || *v == want, "bert_pos: --init ", init, " was pre-trained with ",
                   key, " ", v ? v->dump() : "", ", this run has ", want.dump(),
                   " (the vocabulary and positions must be the pre-training's)");
        }
      }
      state->tokenizer = gloss_tokenizer(synsets, flags);
    }
    state->vocab_size = state->tokenizer->vocab_size();
    // Input: the gloss alone (its words would give the part of speech away too easily), as
    // [CLS] gloss [SEP] [PAD]..., cut to seq-len; every 20th synset is held out.
    Encoded split[2];
    for (size_t i = 0; i < synsets.size(); ++i) {
      split[i % 20 == 19 ? 1 : 0].add(
          state->tokenizer->encode_single(synsets[i].gloss, flags.seq_len), synsets[i].part);
    }
    JobData d{split[0].dataset(flags.seq_len), split[1].dataset(flags.seq_len), ""};
    d.summary = "wordnet: " + std::to_string(synsets.size()) +
                " glosses labelled noun/verb/adj/adv, vocabulary " +
                std::to_string(state->vocab_size) + "; " + std::to_string(d.train->size()) +
                " train / " + std::to_string(d.test->size()) + " test" +
                majority_note(split[1].label, 4);
    return d;
  };
  set_bert_classifier(job, state, flags);
  return run_supervised(opt, job);
}

/// One example of a labelled file.
struct LabelledText {
  std::string label, a, b;
  bool pair = false;
  int64_t line = 0;
};

/// The non-empty lines of a tab-separated file of "label<TAB>text[<TAB>text]". Throws IOError
/// naming the file when it cannot be read or has no example, ValueError naming the file and line
/// for another number of fields, an empty label or invalid UTF-8.
std::vector<LabelledText> read_labelled(const std::string& path, const std::string& flag) {
  std::ifstream f(path, std::ios::binary);
  SL_CHECK_IO(f.good(), "bert_cls: cannot read ", flag, " '", path, "'");
  std::vector<LabelledText> out;
  std::string line;
  for (int64_t n = 1; std::getline(f, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = "bert_cls: " + flag + " '" + path + "' line " + std::to_string(n);
    models::unicode::decode_utf8(line, where.c_str());
    std::vector<std::string> fields;
    for (size_t at = 0;;) {
      const size_t tab = line.find('\t', at);
      fields.push_back(line.substr(at, tab == std::string::npos ? std::string::npos : tab - at));
      if (tab == std::string::npos) break;
      at = tab + 1;
    }
    SL_CHECK(fields.size() == 2 || fields.size() == 3, where, ": expected label<TAB>text or ",
             "label<TAB>text<TAB>text, got ", fields.size(), " tab-separated field(s)");
    SL_CHECK(!fields[0].empty(), where, ": the label (first field) is empty");
    LabelledText t{fields[0], fields[1], fields.size() == 3 ? fields[2] : "", fields.size() == 3,
                   n};
    out.push_back(std::move(t));
  }
  SL_CHECK_IO(f.eof(), "bert_cls: error reading ", flag, " '", path, "'");
  SL_CHECK_IO(!out.empty(), "bert_cls: ", flag, " '", path, "' has no example");
  return out;
}

/// --predict: the labels of a file's lines by a fine-tuned checkpoint (see the file comment).
int predict(const Options& opt, BertFlags flags, const std::string& init,
            const std::string& vocab_file, const std::string& input, const std::string& output) {
  opt.check_all_read("bert_cls");
  SL_CHECK(!init.empty(),
           "bert_cls: --predict needs --init, a fine-tuned bert_cls or bert_pos "
           "checkpoint");
  const BertInit in = read_bert_init(init, "bert_cls");
  SL_CHECK(!in.labels.empty(), "bert_cls: --init ", init,
           " has no label names; --predict needs "
           "a bert_cls or bert_pos checkpoint");
  std::shared_ptr<models::WordPieceTokenizer> tok = finetune_tokenizer(vocab_file, flags, in);
  SL_CHECK_IO(tok != nullptr, "bert_cls: --init ", init,
              " holds no vocabulary; give it by --vocab");
  // The encoder's sizes and the sequence length as the checkpoint was trained with.
  if (in.config.is_object()) {
    models::BertConfig& c = flags.config;
    c.num_hidden_layers = in.config.at("layers").as_int();
    c.hidden_size = in.config.at("hidden").as_int();
    c.num_attention_heads = in.config.at("heads").as_int();
    c.intermediate_size = in.config.at("intermediate").as_int();
    flags.seq_len = in.config.at("seq_len").as_int();
    const serialize::Json* p = in.config.find("max_positions");
    c.max_position_embeddings = p ? p->as_int() : flags.seq_len;
  }
  models::BertConfig c = flags.config;
  c.vocab_size = tok->vocab_size();
  c.num_labels = static_cast<int64_t>(in.labels.size());
  models::BertForSequenceClassification model(c);
  const nn::LoadResult r = load_init(model, in.tensors, "bert_cls", init);
  for (const std::string& k : r.missing_keys) {
    SL_CHECK(k == "bert.embeddings.position_ids" || k == "bert.embeddings.token_type_ids",
             "bert_cls: --init ", init, " lacks '", k, "'");
  }
  const Device device(opt.device);
  model.to(device);
  model.eval();
  NoGradGuard no_grad;

  std::ifstream f(input, std::ios::binary);
  SL_CHECK_IO(f.good(), "bert_cls: cannot read --predict '", input, "'");
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where =
        "bert_cls: --predict '" + input + "' line " + std::to_string(lines.size() + 1);
    models::unicode::decode_utf8(line, where.c_str());
    lines.push_back(std::move(line));
  }
  SL_CHECK_IO(f.eof(), "bert_cls: error reading --predict '", input, "'");
  std::string out;
  const int64_t batch = opt.batch_size > 0 ? opt.batch_size : 64;
  for (size_t at = 0; at < lines.size(); at += static_cast<size_t>(batch)) {
    Encoded e;
    const size_t end = std::min(lines.size(), at + static_cast<size_t>(batch));
    for (size_t i = at; i < end; ++i) {
      const size_t tab = lines[i].find('\t');
      e.add(tab == std::string::npos
                ? tok->encode_single(lines[i], flags.seq_len)
                : tok->encode_pair(std::string_view(lines[i]).substr(0, tab),
                                   std::string_view(lines[i]).substr(tab + 1), flags.seq_len),
            0);
    }
    const int64_t n = static_cast<int64_t>(end - at);
    Tensor p = softmax(model.forward(from_vector(e.ids, {n, flags.seq_len}).to(device),
                                     from_vector(e.types, {n, flags.seq_len}).to(device),
                                     from_vector(e.mask, {n, flags.seq_len}).to(device)),
                       -1)
                   .to(kCPU)
                   .to(DType::f32)
                   .contiguous();
    const float* pp = p.data_ptr<float>();
    const int64_t k = c.num_labels;
    for (int64_t i = 0; i < n; ++i) {
      const float* row = pp + i * k;
      const int64_t best = std::max_element(row, row + k) - row;
      char prob[32];
      std::snprintf(prob, sizeof prob, "\t%.4f\t", static_cast<double>(row[best]));
      out +=
          in.labels[static_cast<size_t>(best)] + prob + lines[at + static_cast<size_t>(i)] + "\n";
    }
  }
  if (output.empty()) {
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {  // whole or not at all
    serialize::write_file_atomically(output, out);
    std::printf("bert_cls: %zu predictions of %s written to %s\n", lines.size(), init.c_str(),
                output.c_str());
  }
  return 0;
}

FlagDocs bert_cls_flags() {
  FlagDocs own = {
      {"train-file", "", "label<TAB>text[<TAB>text] lines to train on (required)"},
      {"test-file", "", "lines to evaluate on (default: every 20th training line held out)"},
      {"predict", "", "label this file's lines with the --init checkpoint instead of training"},
      {"output", "", "--predict: write the labels here (default: stdout)"},
  };
  return join_flags(join_flags(join_flags(init_flags(), own), bert_flags()), loop_flags());
}

int run_bert_cls(const Options& opt) {
  const BertFlags flags = read_bert_flags(opt, "bert_cls");
  const std::string init = opt.get_string("init", "");
  const std::string vocab_file = opt.get_string("vocab", "");
  const std::string to_predict = opt.get_string("predict", "");
  const std::string output = opt.get_string("output", "");
  if (!to_predict.empty()) return predict(opt, flags, init, vocab_file, to_predict, output);
  SL_CHECK(output.empty(), "bert_cls: --output goes with --predict");
  const std::string train_file = opt.get_string("train-file", "");
  const std::string test_file = opt.get_string("test-file", "");
  SL_CHECK(!train_file.empty(),
           "bert_cls: --train-file FILE is required (tab-separated lines of "
           "label<TAB>text or label<TAB>text<TAB>text)");
  auto state = std::make_shared<ClassifierState>();
  SupervisedJob job = classifier_job("bert_cls", flags, init, vocab_file);
  job.description = describe("BertForSequenceClassification", flags) +
                    (init.empty() ? "" : ", encoder from " + init);
  job.config.set("train_file", file_pin(train_file));
  if (!test_file.empty()) job.config.set("test_file", file_pin(test_file));
  job.load_data = [state, flags, init, vocab_file, train_file, test_file] {
    if (!init.empty()) state->init = read_bert_init(init, "bert_cls");
    std::vector<LabelledText> train = read_labelled(train_file, "--train-file"), test;
    if (!test_file.empty()) {
      test = read_labelled(test_file, "--test-file");
    } else {  // every 20th example held out
      std::vector<LabelledText> kept;
      for (size_t i = 0; i < train.size(); ++i) (i % 20 == 19 ? test : kept).push_back(train[i]);
      train = std::move(kept);
    }
    std::map<std::string, int64_t> labels;
    for (const LabelledText& t : train) labels.emplace(t.label, 0);
    int64_t next = 0;
    std::string label_list;
    for (auto& [label, id] : labels) {
      id = next++;
      label_list += label_list.empty() ? "" : ", ";
      label_list += label;
    }
    SL_CHECK(labels.size() >= 2, "bert_cls: ", train_file, " has one label ('",
             labels.begin()->first, "'); a classifier needs at least 2");
    for (const LabelledText& t : test) {
      SL_CHECK(labels.count(t.label), "bert_cls: ", test_file.empty() ? train_file : test_file,
               " line ", t.line, ": label '", t.label, "' is not among the training labels (",
               label_list, ")");
    }
    state->num_labels = static_cast<int64_t>(labels.size());
    for (const auto& [label, id] : labels) state->labels.push_back(label);
    state->tokenizer = finetune_tokenizer(vocab_file, flags, state->init);
    if (!state->tokenizer) {
      SL_CHECK_IO(init.empty(), "bert_cls: --init ", init,
                  " holds no vocabulary; give the one it "
                  "was trained with by --vocab vocab.txt");
      std::vector<std::string> texts;
      for (const LabelledText& t : train) {
        texts.push_back(t.a);
        if (t.pair) texts.push_back(t.b);
      }
      const models::WordPieceOptions o = flags.tokenizer_options();
      state->tokenizer = std::make_shared<models::WordPieceTokenizer>(
          models::train_wordpiece_vocab(texts, flags.vocab_size, 2, o), o);
    }
    state->vocab_size = state->tokenizer->vocab_size();
    const models::WordPieceTokenizer& tok = *state->tokenizer;
    auto encode = [&](const std::vector<LabelledText>& examples) {
      Encoded e;
      for (const LabelledText& t : examples) {
        e.add(t.pair ? tok.encode_pair(t.a, t.b, flags.seq_len)
                     : tok.encode_single(t.a, flags.seq_len),
              labels.at(t.label));
      }
      return e;
    };
    const Encoded tr = encode(train), te = encode(test);
    JobData d{tr.dataset(flags.seq_len), te.dataset(flags.seq_len), ""};
    d.summary = train_file + ": " + std::to_string(train.size()) + " train / " +
                std::to_string(test.size()) + " test examples, " + std::to_string(labels.size()) +
                " labels (" + label_list + "), vocabulary " + std::to_string(state->vocab_size) +
                majority_note(te.label, state->num_labels);
    return d;
  };
  set_bert_classifier(job, state, flags);
  return run_supervised(opt, job);
}

}  // namespace

SL_REGISTER_TRAIN_JOB("bert_pos",
                      "BERT fine-tuning: the part of speech (noun/verb/adj/adv) of a WordNet "
                      "gloss, --init a bert job's checkpoint (or a safetensors file) for its "
                      "encoder, any strategy, checkpoint each epoch, --resume 1",
                      &run_bert_pos, &bert_pos_flags);
SL_REGISTER_TRAIN_JOB("bert_cls",
                      "BERT fine-tuning on your labelled texts: --train-file FILE.tsv of "
                      "label<TAB>text[<TAB>text] lines, --init a bert checkpoint or HF's "
                      "model.safetensors (+ --vocab vocab.txt), any strategy, --resume 1",
                      &run_bert_cls, &bert_cls_flags);

}  // namespace sl::train

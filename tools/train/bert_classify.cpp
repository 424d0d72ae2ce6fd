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
                             const std::string& init) {
  SupervisedJob job;
  job.name = name;
  job.config = bert_config_json(flags);
  job.config.set("init", init);
  job.default_batch_size = 64;
  job.default_lr = 1e-3;
  job.no_decay = {"bias", "LayerNorm.weight"};
  job.metric = "test accuracy";
  return job;
}

int run_bert_pos(const Options& opt) {
  const BertFlags flags = read_bert_flags(opt, "bert_pos");
  const std::string init = opt.get_string("init", "");
  const std::string vocab_file = opt.get_string("vocab", "");
  auto state = std::make_shared<ClassifierState>();
  state->num_labels = 4;
  SupervisedJob job = classifier_job("bert_pos", flags, init);
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

int run_bert_cls(const Options& opt) {
  const BertFlags flags = read_bert_flags(opt, "bert_cls");
  const std::string init = opt.get_string("init", "");
  const std::string vocab_file = opt.get_string("vocab", "");
  const std::string train_file = opt.get_string("train-file", "");
  const std::string test_file = opt.get_string("test-file", "");
  SL_CHECK(!train_file.empty(),
           "bert_cls: --train-file FILE is required (tab-separated lines of "
           "label<TAB>text or label<TAB>text<TAB>text)");
  auto state = std::make_shared<ClassifierState>();
  SupervisedJob job = classifier_job("bert_cls", flags, init);
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
                      &run_bert_pos);
SL_REGISTER_TRAIN_JOB("bert_cls",
                      "BERT fine-tuning on your labelled texts: --train-file FILE.tsv of "
                      "label<TAB>text[<TAB>text] lines, --init a bert checkpoint or HF's "
                      "model.safetensors (+ --vocab vocab.txt), any strategy, --resume 1",
                      &run_bert_cls);

}  // namespace sl::train

// What the BERT jobs share (bert.cpp: masked-LM pre-training; bert_classify.cpp: bert_pos and
// bert_cls fine-tuning): the encoder's flags, the vocabulary as checkpoints keep it, --init, and
// the classification loop's model, loss and metric.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/bert.h"
#include "models/tokenizer.h"
#include "nn/module.h"
#include "nn/serialize/json.h"
#include "registry.h"
#include "supervised.h"
#include "wordnet.h"

namespace sl::train {

/// The flags every BERT job reads: the encoder's size and the vocabulary's source.
struct BertFlags {
  models::BertConfig config;
  int64_t seq_len = 64, vocab_size = 8192, max_texts = 0;
  /// --lower-case 0|1 (default 1): the tokenizer's do_lower_case (and accent stripping), as an
  /// uncased or cased HF BERT.
  bool lower_case = true;
  /// --checkpoint-activations 1: recompute each encoder layer in backward
  /// (BertModel::gradient_checkpointing_enable); changes memory and time, not results.
  bool checkpoint_activations = false;
  models::WordPieceOptions tokenizer_options() const;
};

/// Reads --seq-len (default 64, >= 3), --max-positions (default seq-len, >= seq-len: a
/// pre-trained model's position table, 512 for HF's BERTs), --vocab-size (8192), --max-texts
/// (0: all), --layers (2) --hidden (128) --heads (2) --intermediate (512) --dropout (0.1),
/// --lower-case (1), --checkpoint-activations (0). Throws ValueError naming `job` and the flag.
BertFlags read_bert_flags(const Options& opt, const std::string& job);

/// The flags read_bert_flags reads, for --help.
const FlagDocs& bert_flags();

/// "Head(layers 2, hidden 128, ...)" for the run's model line.
std::string describe(const std::string& head, const BertFlags& f);

/// The flags' part of the run config (a checkpoint resumes only with the same).
serialize::Json bert_config_json(const BertFlags& f);

/// A tokenizer as a checkpoint's extra keeps it: {"vocab": [token 0, token 1, ...] (HF's
/// vocab.txt as JSON), "lower_case": bool}, so fine-tuning tokenizes as the pre-training did.
serialize::Json tokenizer_json(const models::WordPieceTokenizer& tok);

/// {"file": path, "bytes": size, "crc32": the CRC-32 as 8 lowercase hex digits} of a file's
/// contents, for a run config that must change when the file does. Throws IOError when it
/// cannot be read.
serialize::Json file_pin(const std::string& path);

/// The first --max-texts synsets of --data-dir's WordNet (all with --max-texts 0).
std::vector<WordNetSynset> wordnet_synsets(const Options& opt, const BertFlags& f);
/// The WordPiece tokenizer trained on the synsets' "<words>: <gloss>" texts (deterministic: the
/// same vocabulary from the same flags).
std::shared_ptr<models::WordPieceTokenizer> gloss_tokenizer(
    const std::vector<WordNetSynset>& synsets, const BertFlags& f);

/// What --init gives a fine-tuning job.
struct BertInit {
  std::string from;  ///< the path given; empty without --init
  nn::StateDict tensors;
  /// The checkpoint's tokenizer (a bert, bert_pos or bert_cls checkpoint of this version);
  /// null for a safetensors file or an older checkpoint.
  std::shared_ptr<models::WordPieceTokenizer> tokenizer;
  /// The pre-training's run config (null for a safetensors file).
  serialize::Json config;
  /// A bert_pos / bert_cls checkpoint's label names, by class index (empty otherwise).
  std::vector<std::string> labels;
};

/// --init `path`: a sharded checkpoint folder (consolidated, dist/checkpoint.h) or a
/// safetensors file (HF's model.safetensors loads by name; a bare BertModel's names are read
/// under "bert.", LayerNorm.gamma / .beta as .weight / .bias). Throws IOError naming `job` and
/// the path for what cannot be read.
BertInit read_bert_init(const std::string& path, const std::string& job);

/// model.load_state_dict(tensors, strict = false) for --init `from`: a tensor of another shape
/// is a ShapeError "<job>: --init <from> does not fit this model: " followed by every such key
/// with both shapes (nothing is copied). Returns the missing and unexpected keys.
nn::LoadResult load_init(nn::Module& model, const nn::StateDict& tensors, const std::string& job,
                         const std::string& from);

/// A fine-tuning job's tokenizer: from `vocab_file` (--vocab: HF's vocab.txt) when not empty,
/// else the --init checkpoint's, else null (the caller builds one). Throws IOError for an
/// unreadable vocabulary file.
std::shared_ptr<models::WordPieceTokenizer> finetune_tokenizer(const std::string& vocab_file,
                                                               const BertFlags& flags,
                                                               const BertInit& init);

/// What a classification job's load_data fills in for its model.
struct ClassifierState {
  int64_t vocab_size = 0, num_labels = 0;
  std::vector<std::string> labels;  ///< the classes' names, stored in every checkpoint
  BertInit init;
  std::shared_ptr<models::WordPieceTokenizer> tokenizer;
};

/// Sets job.make_model / loss / evaluate / checkpoint_extra for a BertForSequenceClassification
/// over batches {input_ids [N, L], token_type_ids [N, L], attention_mask [N, L], label [N]}: the
/// encoder from state->init when given (its pooler and classifier start fresh unless the file
/// has them; a missing encoder tensor or one of another shape is a ShapeError naming it), cross
/// entropy, and the metric's accuracy; each checkpoint stores the tokenizer and the labels.
void set_bert_classifier(SupervisedJob& job, const std::shared_ptr<ClassifierState>& state,
                         const BertFlags& flags);

}  // namespace sl::train

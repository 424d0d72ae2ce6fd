// The bert_cls job end to end (tools/train/bert_classify.cpp): fine-tuning BERT on your own
// tab-separated labelled texts, from scratch, from a bert checkpoint (its stored vocabulary),
// and from a safetensors file with a vocab.txt, in HF's layout or a bare BertModel's; pairs;
// resume; and the errors a user's file can cause.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "dist/checkpoint.h"
#include "job_testing.h"
#include "nn/serialize/json.h"
#include "nn/serialize/safetensors.h"
#include "support/testing.h"

using sl::testing::check_resume;
using sl::testing::JobResult;
using sl::testing::plus;
using sl::testing::run_job;
using sl::testing::state_digest_of;

using namespace sl;

namespace {

/// Reviews whose label is carried by one word among shared ones (great/fun vs awful/dull).
std::string reviews(int n, int offset) {
  const char* subjects[] = {"the movie", "this film", "the show", "that play", "the book"};
  const char* good[] = {"great", "fun", "lovely"};
  const char* bad[] = {"awful", "dull", "boring"};
  std::string out;
  for (int i = offset; i < offset + n; ++i) {
    const bool pos = (i * 7 + 3) % 5 < 2 || i % 3 == 0;
    out += std::string(pos ? "pos" : "neg") + "\t" + subjects[i % 5] + " was " +
           (pos ? good[i % 3] : bad[i % 3]) + " and long\n";
  }
  return out;
}

struct Data : sl::testing::TempDir {
  explicit Data(const std::string& name) : sl::testing::TempDir(name) {
    write("train.tsv", reviews(80, 0));
    write("test.tsv", reviews(20, 80));
  }
  std::string path(const std::string& f) const { return root + "/" + f; }
  /// A tiny encoder, 3 epochs of 10 steps of 8 examples.
  std::vector<std::string> args(const std::string& ckpt) const {
    return plus(plus({"--model", "bert_cls", "--train-file", path("train.tsv"), "--test-file",
                      path("test.tsv")},
                     sl::testing::tiny_bert_flags()),
                {"--checkpoint-dir", path(ckpt)});
  }
};

/// The accuracy printed after the last epoch, in percent (NaN when absent).
double final_accuracy(const std::string& out) {
  const auto at = out.rfind("final test accuracy ");
  return at == std::string::npos ? NAN : std::atof(out.c_str() + at + 20);
}

}  // namespace

TEST_CASE("bert_cls: fine-tunes on a labelled file, from scratch and from a bert checkpoint") {
  Data d("bert_cls");
  JobResult r = run_job(plus(d.args("scratch"), {"--epochs", "6"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find(d.path("train.tsv") + ": 80 train / 20 test examples, 2 labels (neg, "
                                                 "pos), vocabulary ") != std::string::npos,
                r.out);
  // One word of each review decides its label: a tiny encoder learns it in 60 steps (the
  // majority label is 55% of the test file; measured: 100% from the third epoch on).
  CHECK_MESSAGE(final_accuracy(r.out) >= 90.0, r.out);
  check_resume(d.args("scratch2"));

  // --predict labels new lines with the fine-tuned checkpoint: its sizes, tokenizer and label
  // names come from the checkpoint. On the test file's texts it gives the run's accuracy.
  std::vector<std::string> gold, inputs;
  std::string texts_only;
  {
    std::ifstream in(d.path("test.tsv"));
    for (std::string line; std::getline(in, line);) {
      gold.push_back(line.substr(0, line.find('\t')));
      inputs.push_back(line.substr(line.find('\t') + 1));
      texts_only += inputs.back() + "\n";
    }
  }
  d.write("new.txt", texts_only);
  JobResult pr = run_job({"--model", "bert_cls", "--init", d.path("scratch"), "--predict",
                          d.path("new.txt"), "--output", d.path("predicted.tsv")});
  REQUIRE_MESSAGE(pr.code == 0, pr.out);
  CHECK(pr.out.find("bert_cls: 20 predictions of " + d.path("scratch") + " written to " +
                    d.path("predicted.tsv")) != std::string::npos);
  {
    std::ifstream in(d.path("predicted.tsv"));
    int64_t n = 0, right = 0;
    for (std::string line; std::getline(in, line); ++n) {
      REQUIRE(n < static_cast<int64_t>(gold.size()));
      const size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
      REQUIRE(t2 != std::string::npos);
      right += line.substr(0, t1) == gold[static_cast<size_t>(n)];
      const double prob = std::atof(line.c_str() + t1 + 1);
      CHECK((prob >= 0.5 && prob <= 1.0));  // the larger of two probabilities
      CHECK(line.substr(t2 + 1) == inputs[static_cast<size_t>(n)]);  // the input line, as given
    }
    CHECK(n == 20);
    CHECK(100.0 * static_cast<double>(right) / 20 == doctest::Approx(final_accuracy(r.out)));
  }
  // Without --output the lines go to stdout.
  pr =
      run_job({"--model", "bert_cls", "--init", d.path("scratch"), "--predict", d.path("new.txt")});
  REQUIRE_MESSAGE(pr.code == 0, pr.out);
  CHECK(pr.out.find("\tthe movie was great and long\n") != std::string::npos);

  // Pre-train on the reviews' texts with the bert job, then fine-tune from its checkpoint:
  // the classifier uses the vocabulary the checkpoint stores.
  std::string texts;
  for (const char* f : {"train.tsv", "test.tsv"}) {
    std::ifstream in(d.path(f));
    for (std::string line; std::getline(in, line);)
      texts += line.substr(line.find('\t') + 1) + "\n";
  }
  d.write("texts.txt", texts);
  std::vector<std::string> pre = d.args("pre");
  pre[1] = "bert";
  pre.erase(pre.begin() + 2, pre.begin() + 6);  // no --train-file / --test-file
  JobResult p = run_job(plus(pre, {"--text-file", d.path("texts.txt"), "--epochs", "1"}));
  REQUIRE_MESSAGE(p.code == 0, p.out);
  JobResult tuned = run_job(plus(d.args("tuned"), {"--init", d.path("pre")}));
  REQUIRE_MESSAGE(tuned.code == 0, tuned.out);
  CHECK(tuned.out.find("encoder from " + d.path("pre")) != std::string::npos);
  CHECK(state_digest_of(tuned.out) != state_digest_of(r.out));
  check_resume(plus(d.args("tuned2"), {"--init", d.path("pre")}));

  // The same encoder as a safetensors file with a vocab.txt (what a Hugging Face model folder
  // holds), and as a bare BertModel's file without the "bert." prefix and the MLM head, with
  // LayerNorm.gamma / .beta names: the same run, bit for bit.
  serialize::StateDict full = dist::consolidate_sharded_checkpoint(d.path("pre"));
  serialize::save_safetensors(d.path("model.safetensors"), full);
  serialize::StateDict bare;  // with the original BERT releases' LayerNorm names too
  for (const auto& [name, t] : full) {
    if (name.rfind("bert.", 0) != 0) continue;
    std::string key = name.substr(5);
    if (key.ends_with("LayerNorm.weight")) key = key.substr(0, key.size() - 6) + "gamma";
    if (key.ends_with("LayerNorm.bias")) key = key.substr(0, key.size() - 4) + "beta";
    bare.insert(key, t);
  }
  REQUIRE(bare.contains("embeddings.LayerNorm.gamma"));
  serialize::save_safetensors(d.path("bare.safetensors"), bare);
  const serialize::Json manifest = dist::read_sharded_manifest(d.path("pre"));
  std::string vocab;
  for (const serialize::Json& t : manifest.at("extra").at("vocab").items()) {
    vocab += t.as_string() + "\n";
  }
  d.write("vocab.txt", vocab);
  for (const char* file : {"model.safetensors", "bare.safetensors"}) {
    CAPTURE(file);
    JobResult f = run_job(plus(d.args(std::string("f_") + file),
                               {"--init", d.path(file), "--vocab", d.path("vocab.txt")}));
    REQUIRE_MESSAGE(f.code == 0, f.out);
    CHECK(state_digest_of(f.out) == state_digest_of(tuned.out));
  }
  // Without --vocab a safetensors file has no vocabulary to tokenize with.
  r = run_job(plus(d.args("e"), {"--init", d.path("model.safetensors")}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("bert_cls: --init " + d.path("model.safetensors") +
                           " holds no vocabulary; give the one it was trained with by --vocab "
                           "vocab.txt") != std::string::npos,
                r.out);
  // --predict needs a fine-tuned checkpoint: one with label names.
  r = run_job({"--model", "bert_cls", "--init", d.path("pre"), "--predict", d.path("texts.txt")});
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("bert_cls: --init " + d.path("pre") +
                           " has no label names; --predict "
                           "needs a bert_cls or bert_pos checkpoint") != std::string::npos,
                r.out);
  r = run_job({"--model", "bert_cls", "--predict", d.path("texts.txt")});
  CHECK_MESSAGE(r.out.find("bert_cls: --predict needs --init") != std::string::npos, r.out);
  r = run_job(plus(d.args("e"), {"--output", d.path("x.tsv")}));
  CHECK_MESSAGE(r.out.find("bert_cls: --output goes with --predict") != std::string::npos, r.out);
  // An encoder of another size does not fit.
  r = run_job(plus(plus(d.args("e"), {"--init", d.path("pre")}), {"--hidden", "32"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("does not fit this model") != std::string::npos, r.out);
}

TEST_CASE("bert_cls: fine-tunes from a file written by Hugging Face's save_pretrained") {
  // tests/fixtures/serialize/hf_bert_mlm/model.safetensors: a tiny BertForMaskedLM saved by
  // transformers 4.30 (tools/gen_hf_bert_safetensors.py: vocabulary 40, hidden 16, 2 layers, 2
  // heads, intermediate 24, 16 positions). HF leaves out the position ids and stores the tied
  // decoder once; its vocab.txt is not in the fixture, so one of its size is written here.
  Data d("bert_cls_hf");
  std::string vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  const char* words[] = {"the",   "movie", "this",   "film",  "show", "that",
                         "play",  "book",  "was",    "great", "fun",  "lovely",
                         "awful", "dull",  "boring", "and",   "long"};
  for (const char* w : words) vocab += std::string(w) + "\n";
  for (int i = 5 + 17; i < 40; ++i) vocab += "##" + std::to_string(i) + "\n";
  d.write("vocab.txt", vocab);
  std::vector<std::string> args = d.args("hf");
  for (auto [flag, value] : {std::pair{"--hidden", "16"},
                             {"--layers", "2"},
                             {"--heads", "2"},
                             {"--intermediate", "24"},
                             {"--vocab-size", "40"}}) {
    *(std::find(args.begin(), args.end(), flag) + 1) = value;
  }
  const std::string model = std::string(SL_SERIALIZE_FIXTURES) + "/hf_bert_mlm/model.safetensors";
  JobResult r = run_job(plus(args, {"--init", model, "--vocab", d.path("vocab.txt"),
                                    "--max-positions", "16", "--epochs", "6"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("vocabulary 40;") != std::string::npos);
  CHECK_MESSAGE(final_accuracy(r.out) >= 90.0, r.out);
  // Its 16 positions are part of the model: rows of 8 tokens need --max-positions 16.
  r = run_job(plus(args, {"--init", model, "--vocab", d.path("vocab.txt"), "--seq-len", "8"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("does not fit this model") != std::string::npos, r.out);
}

TEST_CASE("bert_cls: sentence pairs, and held-out lines without --test-file") {
  Data d("bert_cls_pairs");
  // "same" when both halves name the same animal.
  const char* animals[] = {"cat", "dog", "bird", "fish"};
  std::string pairs;
  for (int i = 0; i < 100; ++i) {
    const int a = i % 4, b = (i * 3 + i / 4) % 4;
    pairs += std::string(a == b ? "same" : "other") + "\ta " + animals[a] + " sleeps\tthe " +
             animals[b] + " eats\n";
  }
  d.write("pairs.tsv", pairs);
  auto args = [&](const std::string& ckpt) {
    std::vector<std::string> a = d.args(ckpt);
    a.erase(a.begin() + 4, a.begin() + 6);  // no --test-file: every 20th line held out
    a[3] = d.path("pairs.tsv");
    return a;
  };
  JobResult r = run_job(args("p"));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(
      r.out.find(": 95 train / 5 test examples, 2 labels (other, same)") != std::string::npos,
      r.out);
  check_resume(args("p2"));
}

TEST_CASE("bert_cls: a user's file errors name the file, the line and what was expected") {
  Data d("bert_cls_errors");
  auto with_train = [&](const std::string& contents) {
    d.write("bad.tsv", contents);
    std::vector<std::string> a = d.args("e");
    a[3] = d.path("bad.tsv");
    return run_job(a);
  };
  JobResult r = with_train("pos\tgood\nneg bad\n");
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("bert_cls: --train-file '" + d.path("bad.tsv") +
                           "' line 2: expected label<TAB>text or label<TAB>text<TAB>text, got 1 "
                           "tab-separated field(s)") != std::string::npos,
                r.out);
  r = with_train("pos\tgood\n\tno label\n");
  CHECK_MESSAGE(r.out.find("line 2: the label (first field) is empty") != std::string::npos, r.out);
  r = with_train("pos\tgood\nneg\tnot \xc3 utf-8\n");
  CHECK_MESSAGE(r.out.find("line 2: invalid UTF-8 at byte 8 (0xC3)") != std::string::npos, r.out);
  r = with_train("pos\tgood\npos\tfine\n");
  CHECK_MESSAGE(
      r.out.find("has one label ('pos'); a classifier needs at least 2") != std::string::npos,
      r.out);
  r = with_train("\n\n");
  CHECK_MESSAGE(r.out.find("' has no example") != std::string::npos, r.out);
  // A test label the training file does not have.
  d.write("test.tsv", "pos\tgood\nmaybe\tso so\n");
  r = run_job(d.args("e"));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("bert_cls: " + d.path("test.tsv") +
                           " line 2: label 'maybe' is not among the training labels (neg, pos)") !=
                    std::string::npos,
                r.out);
  std::vector<std::string> a = d.args("e");
  a.erase(a.begin() + 2, a.begin() + 4);
  r = run_job(a);
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("bert_cls: --train-file FILE is required") != std::string::npos, r.out);
  a = d.args("e");
  a[3] = d.path("none.tsv");
  r = run_job(a);
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("cannot read '" + d.path("none.tsv") + "'") != std::string::npos, r.out);
}

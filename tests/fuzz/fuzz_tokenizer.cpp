// libFuzzer target for the WordPiece tokenizer (models/tokenizer.h) and its vocabulary trainer:
// arbitrary bytes as the text users and corpora hand it.
//
// Every input must either work or throw sl::Error (ValueError for text that is not UTF-8);
// anything else (a crash, a sanitizer report, a hang) is a bug. What works must keep the
// contracts: ids inside the vocabulary; [CLS] ... [SEP] and max_len exactly for the padded
// encodings, with masks and types of the same length; a trained vocabulary deterministic and
// within its size. Built by tools/fuzz_smoke.sh.
// Input layout: byte 0 picks the options and max_len; the rest is text a, then (after the first
// NUL byte) text b.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "models/tokenizer.h"

namespace {

using sl::models::Encoding;
using sl::models::WordPieceOptions;
using sl::models::WordPieceTokenizer;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

/// A small fixed vocabulary with pieces of several scripts and ## suffixes.
std::vector<std::string> fixed_vocab() {
  std::vector<std::string> v = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (const char* t :
       {"the", "a", "##s",  "##ing", "##ed", "un", "##aff", "##able", "cat", "dog", ".",
        ",",   "!", "über", "uber",  "##er", "日", "本",    "語",     "é",   "e",   "##é",
        "é",   "i", "##i",  "x",     "##x",  "0",  "##0",   "1",      "[",   "]"}) {
    if (std::find(v.begin(), v.end(), t) == v.end()) v.push_back(t);
  }
  return v;
}

void check_encoding(const Encoding& e, const WordPieceTokenizer& tok, int64_t max_len) {
  check(static_cast<int64_t>(e.input_ids.size()) == max_len);
  check(e.attention_mask.size() == e.input_ids.size());
  check(e.token_type_ids.size() == e.input_ids.size());
  check(e.input_ids.front() == tok.cls_id());
  for (int64_t id : e.input_ids) check(id >= 0 && id < tok.vocab_size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t nul = rest.find('\0');
  const std::string_view a = rest.substr(0, nul);
  const std::string_view b =
      nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  WordPieceOptions opts;
  opts.do_lower_case = (mode & 1) != 0;
  if (mode & 2) opts.strip_accents = (mode & 4) != 0;
  opts.tokenize_chinese_chars = (mode & 8) != 0;
  opts.max_input_chars_per_word = 1 + (mode >> 6) * 7;
  const int64_t max_len = 3 + (mode >> 4);

  static const WordPieceTokenizer cased(fixed_vocab(), {.do_lower_case = false});
  static const WordPieceTokenizer lower(fixed_vocab(), {.do_lower_case = true});
  const WordPieceTokenizer& tok = (mode & 1) ? lower : cased;
  try {
    std::vector<std::string> tokens = tok.tokenize(a);
    std::vector<int64_t> ids = tok.encode(a);
    check(ids.size() == tokens.size() + 2);
    check(ids.front() == tok.cls_id() && ids.back() == tok.sep_id());
    for (int64_t id : ids) check(id >= 0 && id < tok.vocab_size());
    (void)tok.decode(ids, (mode & 16) != 0);
    (void)WordPieceTokenizer::convert_tokens_to_string(tokens);
    check_encoding(tok.encode_single(a, max_len), tok, max_len);
    check_encoding(tok.encode_pair(a, b, max_len), tok, max_len);
  } catch (const sl::Error&) {
  }
  // A vocabulary trained on the input's lines: deterministic, within its size, and a tokenizer
  // of it encodes those lines into its ids.
  try {
    std::vector<std::string> texts;
    for (size_t at = 0; at <= rest.size();) {
      size_t end = rest.find('\n', at);
      if (end == std::string_view::npos) end = rest.size();
      texts.emplace_back(rest.substr(at, end - at));
      at = end + 1;
    }
    const int64_t vocab_size = 64 + (mode & 63);
    std::vector<std::string> v = sl::models::train_wordpiece_vocab(texts, vocab_size, 1, opts);
    check(static_cast<int64_t>(v.size()) <= vocab_size);
    check(v == sl::models::train_wordpiece_vocab(texts, vocab_size, 1, opts));
    WordPieceTokenizer trained(v, opts);
    for (const std::string& t : texts) {
      for (int64_t id : trained.encode(t, /*add_special_tokens=*/false)) {
        check(id >= 0 && id < trained.vocab_size());
      }
    }
  } catch (const sl::Error&) {
  }
  return 0;
}

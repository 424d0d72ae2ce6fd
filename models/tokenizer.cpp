// WordPieceTokenizer: HF BertTokenizer's tokenize / encode / decode (see models/tokenizer.h).
#include "models/tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/error.h"
#include "models/unicode_text.h"

namespace sl::models {
namespace {

namespace uc = unicode;
constexpr const char* kWho = "WordPieceTokenizer";

/// The special token starting at text[i], or -1. None is a prefix of another, so the
/// leftmost-match rules of HF's regex and trie both reduce to this test.
int special_at(const std::u32string& text, size_t i) {
  if (text[i] != U'[') return -1;
  for (int k = 0; k < 5; ++k) {
    std::string_view s = kBertSpecialTokens[k];
    if (i + s.size() > text.size()) continue;
    bool match = true;
    for (size_t j = 0; j < s.size() && match; ++j) match = text[i + j] == char32_t(s[j]);
    if (match) return k;
  }
  return -1;
}

/// Python str.split(): runs of non-space code points.
std::vector<std::u32string> split_python_space(const std::u32string& text) {
  std::vector<std::u32string> out;
  std::u32string cur;
  for (char32_t c : text) {
    if (uc::is_python_space(c)) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

bool is_special_word(const std::u32string& w) {
  return !w.empty() && special_at(w, 0) >= 0 &&
         w.size() == std::strlen(kBertSpecialTokens[special_at(w, 0)]);
}

/// BasicTokenizer.tokenize on one piece of text between special tokens (already lower-cased
/// when do_lower_case, which makes BasicTokenizer's own lower() a no-op: str.lower() is
/// idempotent, checked by tools/gen_unicode_tables.py).
void basic_tokenize(const std::u32string& text, const WordPieceOptions& opts,
                    std::vector<std::u32string>& out) {
  std::u32string clean;
  clean.reserve(text.size());
  for (char32_t c : text) {
    if (c == 0 || c == 0xFFFD || uc::is_control(c)) continue;
    if (uc::is_whitespace(c)) {
      clean.push_back(U' ');
    } else if (opts.tokenize_chinese_chars && uc::is_cjk(c)) {
      clean.push_back(U' ');
      clean.push_back(c);
      clean.push_back(U' ');
    } else {
      clean.push_back(c);
    }
  }
  const bool strip = opts.strip_accents.value_or(opts.do_lower_case);
  for (std::u32string& word : split_python_space(clean)) {
    if (is_special_word(word)) {  // never_split: kept whole, not stripped nor split
      out.push_back(std::move(word));
      continue;
    }
    if (strip) word = uc::strip_accents(word);
    std::u32string cur;
    for (char32_t c : word) {
      if (uc::is_punctuation(c)) {
        if (!cur.empty()) out.push_back(std::move(cur));
        cur.clear();
        out.push_back(std::u32string(1, c));
      } else {
        cur.push_back(c);
      }
    }
    if (!cur.empty()) out.push_back(std::move(cur));
  }
}

/// A word of pre_tokenize: `special` when it is a special token cut out of the text (step 2),
/// which HF passes on whole; everything else, even a "[CLS]" that BasicTokenizer left whole
/// (from "[CL\x00S]"), goes through WordPiece.
struct Word {
  std::u32string text;
  bool special = false;
};

/// Steps 1-3 of the list in tokenizer.h.
std::vector<Word> pre_tokenize(std::string_view text, const WordPieceOptions& opts) {
  std::u32string cps = uc::decode_utf8(text, kWho);
  if (opts.do_lower_case) {
    std::u32string low;
    low.reserve(cps.size());
    for (size_t i = 0; i < cps.size();) {
      int k = special_at(cps, i);
      if (k >= 0) {
        size_t n = std::strlen(kBertSpecialTokens[k]);
        low.append(cps, i, n);
        i += n;
      } else {
        uc::append_lower(low, cps[i++]);
      }
    }
    cps = std::move(low);
  }
  std::vector<Word> words;
  std::vector<std::u32string> basic;
  std::u32string piece;
  auto flush = [&] {
    basic.clear();
    basic_tokenize(piece, opts, basic);
    for (auto& w : basic) words.push_back({std::move(w), false});
    piece.clear();
  };
  for (size_t i = 0; i < cps.size();) {
    int k = special_at(cps, i);
    if (k < 0) {
      piece.push_back(cps[i++]);
      continue;
    }
    flush();
    size_t n = std::strlen(kBertSpecialTokens[k]);
    words.push_back({cps.substr(i, n), true});
    i += n;
  }
  flush();
  return words;
}

/// Python's str.replace(from, to) for ASCII `from` (bytewise is then code point-wise).
std::string replace_all(const std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos, std::string::npos);
  return out;
}

/// Python's str.strip(): drops str.isspace() code points at both ends.
std::string strip_python_space(const std::string& s) {
  std::u32string cps = uc::decode_utf8(s, kWho);
  size_t b = 0, e = cps.size();
  while (b < e && uc::is_python_space(cps[b])) ++b;
  while (e > b && uc::is_python_space(cps[e - 1])) --e;
  return uc::encode_utf8(std::u32string_view(cps).substr(b, e - b));
}

}  // namespace

std::vector<std::string> bert_pre_tokenize(std::string_view text, const WordPieceOptions& opts) {
  std::vector<std::string> out;
  for (const auto& w : pre_tokenize(text, opts)) out.push_back(uc::encode_utf8(w.text));
  return out;
}

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> vocab, WordPieceOptions opts)
    : opts_(opts), vocab_(std::move(vocab)) {
  SL_CHECK(opts_.max_input_chars_per_word >= 1, kWho,
           ": max_input_chars_per_word must be >= 1, got ", opts_.max_input_chars_per_word);
  ids_.reserve(vocab_.size());
  for (size_t i = 0; i < vocab_.size(); ++i) {
    auto [it, fresh] = ids_.emplace(vocab_[i], static_cast<int64_t>(i));
    SL_CHECK(fresh, kWho, ": token '", vocab_[i], "' appears twice in the vocabulary (ids ",
             it->second, " and ", i, ")");
    try {
      max_token_chars_ = std::max(max_token_chars_, uc::decode_utf8(vocab_[i], "").size());
    } catch (const ValueError& e) {
      detail::throw_error<ValueError>(kWho, ": vocabulary token ", i, " is not UTF-8", e.what());
    }
  }
  int64_t* slots[] = {&pad_id_, &unk_id_, &cls_id_, &sep_id_, &mask_id_};
  for (int k = 0; k < 5; ++k) {
    auto it = ids_.find(kBertSpecialTokens[k]);
    SL_CHECK(it != ids_.end(), kWho, ": special token ", kBertSpecialTokens[k],
             " is missing from the vocabulary of ", vocab_.size(), " tokens");
    *slots[k] = it->second;
  }
}

WordPieceTokenizer WordPieceTokenizer::from_file(const std::string& vocab_path,
                                                 WordPieceOptions opts) {
  std::ifstream f(vocab_path, std::ios::binary);
  SL_CHECK_IO(f.good(), kWho, ": cannot open vocabulary file '", vocab_path,
              "': ", std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  SL_CHECK_IO(!f.bad(), kWho, ": cannot read vocabulary file '", vocab_path, "'");
  const std::string bytes = ss.str();
  std::vector<std::string> vocab;
  size_t start = 0;
  while (start < bytes.size()) {
    size_t end = bytes.find_first_of("\r\n", start);
    if (end == std::string::npos) end = bytes.size();
    vocab.push_back(bytes.substr(start, end - start));
    try {
      uc::decode_utf8(vocab.back(), "");
    } catch (const ValueError& e) {
      detail::throw_error<IOError>(kWho, ": vocabulary file '", vocab_path, "' line ", vocab.size(),
                                   " is not UTF-8", e.what());
    }
    if (end < bytes.size() && bytes[end] == '\r' && end + 1 < bytes.size() &&
        bytes[end + 1] == '\n') {
      ++end;
    }
    start = end + 1;
  }
  return WordPieceTokenizer(std::move(vocab), opts);
}

void WordPieceTokenizer::save_vocab(const std::string& path) const {
  std::ofstream f(path, std::ios::binary);
  SL_CHECK_IO(f.good(), kWho, ": cannot create '", path, "': ", std::strerror(errno));
  for (const auto& t : vocab_) f << t << '\n';
  f.flush();
  SL_CHECK_IO(f.good(), kWho, ": cannot write '", path, "'");
}

void WordPieceTokenizer::wordpiece(const std::u32string& word,
                                   std::vector<std::string>& out) const {
  const size_t n = word.size();
  if (n > static_cast<size_t>(opts_.max_input_chars_per_word)) {
    out.push_back(vocab_[unk_id_]);
    return;
  }
  // The word's UTF-8 bytes and where each code point starts, so that a candidate piece is a
  // byte range (appended to a reused buffer: no allocation per lookup).
  std::string bytes;
  std::vector<size_t> at;
  at.reserve(n + 1);
  for (char32_t c : word) {
    at.push_back(bytes.size());
    uc::append_utf8(bytes, c);
  }
  at.push_back(bytes.size());
  const size_t first = out.size();
  std::string piece;
  for (size_t start = 0; start < n;) {
    // Longest match first; no token is longer than max_token_chars_ code points.
    size_t end = std::min(n, start + max_token_chars_);
    bool found = false;
    for (; end > start; --end) {
      piece.assign(start > 0 ? "##" : "");
      piece.append(bytes, at[start], at[end] - at[start]);
      if (ids_.contains(piece)) {
        found = true;
        break;
      }
    }
    if (!found) {  // the whole word becomes [UNK]
      out.resize(first);
      out.push_back(vocab_[unk_id_]);
      return;
    }
    out.push_back(piece);
    start = end;
  }
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text) const {
  std::vector<std::string> out;
  for (const auto& word : pre_tokenize(text, opts_)) {
    if (word.special) {
      out.push_back(uc::encode_utf8(word.text));
    } else {
      wordpiece(word.text, out);
    }
  }
  return out;
}

int64_t WordPieceTokenizer::token_to_id(std::string_view token) const {
  auto it = ids_.find(std::string(token));
  return it == ids_.end() ? unk_id_ : it->second;
}

bool WordPieceTokenizer::contains(std::string_view token) const {
  return ids_.contains(std::string(token));
}

const std::string& WordPieceTokenizer::id_to_token(int64_t id) const {
  SL_CHECK_INDEX(id >= 0 && id < vocab_size(), kWho, ": id ", id, " is outside the vocabulary [0, ",
                 vocab_size(), ")");
  return vocab_[id];
}

std::vector<int64_t> WordPieceTokenizer::convert_tokens_to_ids(
    const std::vector<std::string>& tokens) const {
  std::vector<int64_t> ids;
  ids.reserve(tokens.size());
  for (const auto& t : tokens) ids.push_back(token_to_id(t));
  return ids;
}

bool WordPieceTokenizer::is_special_id(int64_t id) const {
  return id == pad_id_ || id == unk_id_ || id == cls_id_ || id == sep_id_ || id == mask_id_;
}

std::vector<int64_t> WordPieceTokenizer::encode(std::string_view text,
                                                bool add_special_tokens) const {
  std::vector<int64_t> ids;
  if (add_special_tokens) ids.push_back(cls_id_);
  for (const auto& t : tokenize(text)) ids.push_back(token_to_id(t));
  if (add_special_tokens) ids.push_back(sep_id_);
  return ids;
}

Encoding WordPieceTokenizer::encode_pair(std::string_view a, std::string_view b,
                                         int64_t max_len) const {
  SL_CHECK(max_len >= 3, kWho, ": encode_pair needs max_len >= 3 for [CLS] a [SEP] b [SEP], got ",
           max_len);
  std::vector<int64_t> ia = encode(a, false), ib = encode(b, false);
  // HF truncate_sequences, longest_first with a pair: one token at a time from the longer.
  int64_t excess = static_cast<int64_t>(ia.size() + ib.size()) + 3 - max_len;
  for (; excess > 0; --excess) {
    if (ia.size() > ib.size()) {
      ia.pop_back();
    } else {
      ib.pop_back();
    }
  }
  Encoding e;
  e.input_ids.push_back(cls_id_);
  e.input_ids.insert(e.input_ids.end(), ia.begin(), ia.end());
  e.input_ids.push_back(sep_id_);
  e.token_type_ids.assign(e.input_ids.size(), 0);
  e.input_ids.insert(e.input_ids.end(), ib.begin(), ib.end());
  e.input_ids.push_back(sep_id_);
  e.token_type_ids.resize(e.input_ids.size(), 1);
  e.attention_mask.assign(e.input_ids.size(), 1);
  e.input_ids.resize(max_len, pad_id_);
  e.token_type_ids.resize(max_len, 0);
  e.attention_mask.resize(max_len, 0);
  return e;
}

Encoding WordPieceTokenizer::encode_single(std::string_view a, int64_t max_len) const {
  SL_CHECK(max_len >= 3, kWho, ": encode_single needs max_len >= 3 for [CLS] a [SEP], got ",
           max_len);
  std::vector<int64_t> ia = encode(a, false);
  if (static_cast<int64_t>(ia.size()) + 2 > max_len) ia.resize(max_len - 2);
  Encoding e;
  e.input_ids.push_back(cls_id_);
  e.input_ids.insert(e.input_ids.end(), ia.begin(), ia.end());
  e.input_ids.push_back(sep_id_);
  e.attention_mask.assign(e.input_ids.size(), 1);
  e.input_ids.resize(max_len, pad_id_);
  e.token_type_ids.assign(max_len, 0);
  e.attention_mask.resize(max_len, 0);
  return e;
}

std::string WordPieceTokenizer::convert_tokens_to_string(const std::vector<std::string>& tokens) {
  std::string joined;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) joined += ' ';
    joined += tokens[i];
  }
  return strip_python_space(replace_all(joined, " ##", ""));
}

std::string WordPieceTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens,
                                       bool clean_up_tokenization_spaces) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    const std::string& t = id_to_token(id);  // range check first
    if (skip_special_tokens && is_special_id(id)) continue;
    tokens.push_back(t);
  }
  std::string text = convert_tokens_to_string(tokens);
  if (!clean_up_tokenization_spaces) return text;
  // HF PreTrainedTokenizerBase.clean_up_tokenization, in its order.
  static constexpr std::pair<std::string_view, std::string_view> kCleanups[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kCleanups) text = replace_all(text, from, to);
  return text;
}

}  // namespace sl::models

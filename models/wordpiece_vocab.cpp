// build_wordpiece_vocab: a vocabulary from a corpus (the method is in models/tokenizer.h).
#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "models/tokenizer.h"
#include "models/unicode_text.h"

namespace sl::models {
namespace {

using Counts = std::unordered_map<std::string, int64_t>;

/// The keys of counts seen at least min_frequency times and not in `taken`, most frequent
/// first, ties by the string.
std::vector<std::pair<std::string, int64_t>> ranked(const Counts& counts, int64_t min_frequency,
                                                    const std::unordered_set<std::string>& taken) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& [s, n] : counts) {
    if (n >= min_frequency && !taken.contains(s)) out.emplace_back(s, n);
  }
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) {
    return x.second != y.second ? x.second > y.second : x.first < y.first;
  });
  return out;
}

}  // namespace

std::vector<std::string> build_wordpiece_vocab(const std::vector<std::string>& texts,
                                               int64_t vocab_size, int64_t min_frequency,
                                               const WordPieceOptions& opts) {
  constexpr const char* kWho = "build_wordpiece_vocab";
  SL_CHECK(min_frequency >= 1, kWho, ": min_frequency must be >= 1, got ", min_frequency);
  // Words, as the tokenizer will see them.
  Counts word_counts;
  for (const auto& text : texts) {
    for (auto& w : bert_pre_tokenize(text, opts)) ++word_counts[std::move(w)];
  }
  std::set<char32_t> chars;
  std::vector<std::pair<std::u32string, int64_t>> words;  // those WordPiece can cover
  for (const auto& [w, n] : word_counts) {
    bool special = false;
    for (const char* s : kBertSpecialTokens) special |= w == s;
    std::u32string cps = unicode::decode_utf8(w, kWho);
    if (special || static_cast<int64_t>(cps.size()) > opts.max_input_chars_per_word) continue;
    chars.insert(cps.begin(), cps.end());
    words.emplace_back(std::move(cps), n);
  }

  std::vector<std::string> vocab(std::begin(kBertSpecialTokens), std::end(kBertSpecialTokens));
  const int64_t needed = static_cast<int64_t>(vocab.size() + 2 * chars.size());
  SL_CHECK(vocab_size >= needed, kWho, ": vocab_size ", vocab_size, " is smaller than the ", needed,
           " tokens needed for the 5 special tokens and the ", chars.size(),
           " characters of the corpus (each also as ##char)");
  for (char32_t c : chars) {  // std::set: code point order
    std::string s;
    unicode::append_utf8(s, c);
    vocab.push_back(s);
    vocab.push_back("##" + s);
  }
  std::unordered_set<std::string> taken(vocab.begin(), vocab.end());
  auto take = [&](const std::vector<std::pair<std::string, int64_t>>& candidates) {
    for (const auto& [s, n] : candidates) {
      if (static_cast<int64_t>(vocab.size()) >= vocab_size) return;
      vocab.push_back(s);
      taken.insert(s);
    }
  };

  Counts whole;
  for (const auto& [cps, n] : words) {
    if (cps.size() >= 2) whole[unicode::encode_utf8(cps)] = n;
  }
  take(ranked(whole, min_frequency, taken));

  Counts suffixes;  // "##" + w[p:] for p >= 1, two or more characters, of words not taken whole
  for (const auto& [cps, n] : words) {
    if (cps.size() < 3 || taken.contains(unicode::encode_utf8(cps))) continue;
    for (size_t p = 1; p + 2 <= cps.size(); ++p) {
      suffixes["##" + unicode::encode_utf8(std::u32string_view(cps).substr(p))] += n;
    }
  }
  take(ranked(suffixes, min_frequency, taken));
  return vocab;
}

}  // namespace sl::models

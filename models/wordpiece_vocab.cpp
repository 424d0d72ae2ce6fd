// build_wordpiece_vocab and train_wordpiece_vocab: vocabularies from a corpus (the methods are
// in models/tokenizer.h).
#include <algorithm>
#include <cstring>
#include <queue>
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

/// The corpus as WordPiece will see it: the distinct words (code points) with their counts,
/// sorted by word so that what follows depends on the corpus as a multiset only, and the set
/// of characters they use. Special tokens and words over max_input_chars_per_word are left
/// out (WordPiece turns them into [UNK] whatever the vocabulary).
struct CorpusWords {
  std::vector<std::pair<std::u32string, int64_t>> words;
  std::set<char32_t> chars;
};

CorpusWords corpus_words(const std::vector<std::string>& texts, const WordPieceOptions& opts,
                         const char* who) {
  Counts word_counts;
  for (const auto& text : texts) {
    for (auto& w : bert_pre_tokenize(text, opts)) ++word_counts[std::move(w)];
  }
  CorpusWords c;
  for (const auto& [w, n] : word_counts) {
    bool special = false;
    for (const char* s : kBertSpecialTokens) special |= w == s;
    std::u32string cps = unicode::decode_utf8(w, who);
    if (special || static_cast<int64_t>(cps.size()) > opts.max_input_chars_per_word) continue;
    c.chars.insert(cps.begin(), cps.end());
    c.words.emplace_back(std::move(cps), n);
  }
  std::sort(c.words.begin(), c.words.end());
  return c;
}

/// The special tokens, then each character and its ##form in code point order. Throws
/// ValueError when that is more than vocab_size.
std::vector<std::string> alphabet_vocab(const std::set<char32_t>& chars, int64_t vocab_size,
                                        const char* who) {
  std::vector<std::string> vocab(std::begin(kBertSpecialTokens), std::end(kBertSpecialTokens));
  const int64_t needed = static_cast<int64_t>(vocab.size() + 2 * chars.size());
  SL_CHECK(vocab_size >= needed, who, ": vocab_size ", vocab_size, " is smaller than the ", needed,
           " tokens needed for the 5 special tokens and the ", chars.size(),
           " characters of the corpus (each also as ##char)");
  for (char32_t c : chars) {  // std::set: code point order
    std::string s;
    unicode::append_utf8(s, c);
    vocab.push_back(s);
    vocab.push_back("##" + s);
  }
  return vocab;
}

}  // namespace

std::vector<std::string> build_wordpiece_vocab(const std::vector<std::string>& texts,
                                               int64_t vocab_size, int64_t min_frequency,
                                               const WordPieceOptions& opts) {
  constexpr const char* kWho = "build_wordpiece_vocab";
  SL_CHECK(min_frequency >= 1, kWho, ": min_frequency must be >= 1, got ", min_frequency);
  const CorpusWords corpus = corpus_words(texts, opts, kWho);
  std::vector<std::string> vocab = alphabet_vocab(corpus.chars, vocab_size, kWho);
  std::unordered_set<std::string> taken(vocab.begin(), vocab.end());
  auto take = [&](const std::vector<std::pair<std::string, int64_t>>& candidates) {
    for (const auto& [s, n] : candidates) {
      if (static_cast<int64_t>(vocab.size()) >= vocab_size) return;
      vocab.push_back(s);
      taken.insert(s);
    }
  };

  Counts whole;
  for (const auto& [cps, n] : corpus.words) {
    if (cps.size() >= 2) whole[unicode::encode_utf8(cps)] = n;
  }
  take(ranked(whole, min_frequency, taken));

  Counts suffixes;  // "##" + w[p:] for p >= 1, two or more characters, of words not taken whole
  for (const auto& [cps, n] : corpus.words) {
    if (cps.size() < 3 || taken.contains(unicode::encode_utf8(cps))) continue;
    for (size_t p = 1; p + 2 <= cps.size(); ++p) {
      suffixes["##" + unicode::encode_utf8(std::u32string_view(cps).substr(p))] += n;
    }
  }
  take(ranked(suffixes, min_frequency, taken));
  return vocab;
}

std::vector<std::string> train_wordpiece_vocab(const std::vector<std::string>& texts,
                                               int64_t vocab_size, int64_t min_frequency,
                                               const WordPieceOptions& opts) {
  constexpr const char* kWho = "train_wordpiece_vocab";
  SL_CHECK(min_frequency >= 1, kWho, ": min_frequency must be >= 1, got ", min_frequency);
  const CorpusWords corpus = corpus_words(texts, opts, kWho);
  std::vector<std::string> vocab = alphabet_vocab(corpus.chars, vocab_size, kWho);
  std::unordered_map<std::string, int32_t> ids;
  for (size_t i = 0; i < vocab.size(); ++i) ids.emplace(vocab[i], static_cast<int32_t>(i));

  // Each distinct word as symbols: its first character, then ##characters.
  struct Word {
    std::vector<int32_t> syms;
    int64_t count;
  };
  std::vector<Word> words;
  for (const auto& [cps, n] : corpus.words) {
    Word w{{}, n};
    for (size_t i = 0; i < cps.size(); ++i) {
      std::string s = i > 0 ? "##" : "";
      unicode::append_utf8(s, cps[i]);
      w.syms.push_back(ids.at(s));
    }
    words.push_back(std::move(w));
  }
  auto key = [](int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); };
  auto left = [](uint64_t k) { return int32_t(k >> 32); };
  auto right = [](uint64_t k) { return int32_t(k & 0xFFFFFFFFu); };
  // The right symbol is always a continuation ("##..."): only a word's first symbol is not.
  auto merged = [&](uint64_t k) { return vocab[left(k)] + vocab[right(k)].substr(2); };

  std::unordered_map<uint64_t, int64_t> pair_count;               // weighted by word counts
  std::unordered_map<uint64_t, std::vector<int32_t>> pair_words;  // may hold stale entries
  for (size_t wi = 0; wi < words.size(); ++wi) {
    const auto& s = words[wi].syms;
    for (size_t j = 0; j + 1 < s.size(); ++j) {
      pair_count[key(s[j], s[j + 1])] += words[wi].count;
      pair_words[key(s[j], s[j + 1])].push_back(static_cast<int32_t>(wi));
    }
  }
  // Best first: the highest count, then the smallest merged token, then the smallest left
  // symbol (two pairs can make the same token). Stale entries are skipped when popped.
  struct Entry {
    int64_t count;
    std::string token, left_token;
    uint64_t key;
  };
  auto worse = [](const Entry& x, const Entry& y) {
    if (x.count != y.count) return x.count < y.count;
    if (x.token != y.token) return x.token > y.token;
    return x.left_token > y.left_token;
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(worse)> heap(worse);
  auto push = [&](uint64_t k, int64_t n) { heap.push({n, merged(k), vocab[left(k)], k}); };
  for (const auto& [k, n] : pair_count) push(k, n);

  std::vector<int64_t> touched(words.size(), -1);  // the last merge that rewrote each word
  for (int64_t step = 0; static_cast<int64_t>(vocab.size()) < vocab_size && !heap.empty();) {
    Entry best = heap.top();
    heap.pop();
    auto found = pair_count.find(best.key);
    if (found == pair_count.end() || found->second != best.count) continue;  // stale
    if (best.count < min_frequency) break;  // the best pair left is too rare
    ++step;
    auto [it, fresh] = ids.emplace(best.token, static_cast<int32_t>(vocab.size()));
    if (fresh) vocab.push_back(best.token);
    const int32_t a = left(best.key), b = right(best.key), m = it->second;
    std::unordered_map<uint64_t, int64_t> delta;
    std::vector<int32_t> holders = std::move(pair_words[best.key]);
    pair_words.erase(best.key);
    for (int32_t wi : holders) {
      if (touched[wi] == step) continue;
      touched[wi] = step;
      Word& w = words[wi];
      std::vector<int32_t> out;
      out.reserve(w.syms.size());
      for (size_t j = 0; j < w.syms.size();) {
        if (j + 1 < w.syms.size() && w.syms[j] == a && w.syms[j + 1] == b) {
          out.push_back(m);
          j += 2;
        } else {
          out.push_back(w.syms[j++]);
        }
      }
      if (out.size() == w.syms.size()) continue;  // a stale holder
      for (size_t j = 0; j + 1 < w.syms.size(); ++j)
        delta[key(w.syms[j], w.syms[j + 1])] -= w.count;
      for (size_t j = 0; j + 1 < out.size(); ++j) {
        delta[key(out[j], out[j + 1])] += w.count;
        if (out[j] == m || out[j + 1] == m) pair_words[key(out[j], out[j + 1])].push_back(wi);
      }
      w.syms = std::move(out);
    }
    for (const auto& [k, d] : delta) {
      if (d == 0) continue;
      int64_t& n = pair_count[k];
      n += d;
      if (n <= 0) {
        pair_count.erase(k);
      } else {
        push(k, n);
      }
    }
    SL_ASSERT(!pair_count.contains(best.key));  // every occurrence was merged
  }
  return vocab;
}

}  // namespace sl::models

// The WordPiece tokenizer against Hugging Face's BertTokenizer (fixtures from
// tools/gen_tokenizer_fixtures.py), its vocabulary builder and its errors. Tokens and ids are
// discrete: every comparison is exact.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "models/tokenizer.h"
#include "models/unicode_text.h"
#include "nn/serialize/json.h"
#include "support/testing.h"

using namespace sl;
using models::WordPieceOptions;
using models::WordPieceTokenizer;
using serialize::Json;

namespace {

std::string fixture_path(const std::string& name) {
  return std::string(SL_MODEL_FIXTURES) + "/" + name;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot open " << path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const Json& fixture() {
  static const Json doc = Json::parse(read_text(fixture_path("tokenizer.json")), "tokenizer.json");
  return doc;
}

std::vector<std::string> strings(const Json& a) {
  std::vector<std::string> out;
  for (const auto& x : a.items()) out.push_back(x.as_string());
  return out;
}

std::vector<int64_t> ints(const Json& a) {
  std::vector<int64_t> out;
  for (const auto& x : a.items()) out.push_back(x.as_int());
  return out;
}

/// The options of each fixture mode (tools/gen_tokenizer_fixtures.py).
WordPieceOptions options_for(const std::string& mode) {
  WordPieceOptions o;
  o.do_lower_case = mode == "lower" || mode == "lower_keep_accents" || mode == "no_cjk_split";
  if (mode == "cased_strip") o.strip_accents = true;
  if (mode == "lower_keep_accents") o.strip_accents = false;
  if (mode == "no_cjk_split") o.tokenize_chinese_chars = false;
  return o;
}

/// A temporary file removed at scope exit.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name, const std::string& bytes)
      : path((std::filesystem::temp_directory_path() / name).string()) {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

std::vector<std::string> small_vocab() {
  return {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", "a", "."};
}

}  // namespace

TEST_CASE("tokenizer: words, tokens, ids and decode match HF BertTokenizer (uncased and cased)") {
  const Json& doc = fixture();
  CHECK(std::string(models::unicode::unicode_version()) == doc.at("unicode_version").as_string());
  for (const std::string mode : {"lower", "cased"}) {
    auto tok =
        WordPieceTokenizer::from_file(fixture_path("tokenizer_vocab.txt"), options_for(mode));
    REQUIRE(tok.vocab_size() == doc.at("vocab_size").as_int());
    int index = 0;
    for (const auto& c : doc.at("cases").items()) {
      const std::string& text = c.at("text").as_string();
      const Json& r = c.at(mode);
      INFO(mode << " case " << index++ << ": '" << text << "'");
      // HF's tokenize() with WordPiece replaced by the identity: the pre-tokenization alone.
      CHECK(models::bert_pre_tokenize(text, tok.options()) == strings(r.at("words")));
      CHECK(tok.tokenize(text) == strings(r.at("tokens")));
      std::vector<int64_t> ids = tok.encode(text);
      CHECK(ids == ints(r.at("ids")));
      CHECK(tok.decode(ids) == r.at("decode").as_string());
      CHECK(tok.decode(ids, /*skip_special_tokens=*/true) == r.at("decode_skip").as_string());
      CHECK(tok.decode(ids, false, /*clean_up_tokenization_spaces=*/false) ==
            r.at("decode_raw").as_string());
    }
  }
}

TEST_CASE("tokenizer: the strip_accents and tokenize_chinese_chars options match HF's") {
  for (const std::string mode : {"cased_strip", "lower_keep_accents", "no_cjk_split"}) {
    auto tok =
        WordPieceTokenizer::from_file(fixture_path("tokenizer_vocab.txt"), options_for(mode));
    int index = 0;
    for (const auto& c : fixture().at("cases").items()) {
      const std::string& text = c.at("text").as_string();
      INFO(mode << " case " << index++ << ": '" << text << "'");
      CHECK(models::bert_pre_tokenize(text, tok.options()) == strings(c.at(mode).at("words")));
      CHECK(tok.tokenize(text) == strings(c.at(mode).at("tokens")));
    }
  }
}

TEST_CASE(
    "tokenizer: encode_pair and encode_single match HF's longest_first truncation and padding") {
  const Json& doc = fixture();
  for (const std::string mode : {"lower", "cased"}) {
    auto tok =
        WordPieceTokenizer::from_file(fixture_path("tokenizer_vocab.txt"), options_for(mode));
    for (const auto& p : doc.at("pairs").items()) {
      const Json& e = p.at(mode);
      INFO(mode << " pair '" << p.at("a").as_string() << "' / '" << p.at("b").as_string()
                << "' max_len " << p.at("max_len").as_int());
      models::Encoding got =
          tok.encode_pair(p.at("a").as_string(), p.at("b").as_string(), p.at("max_len").as_int());
      CHECK(got.input_ids == ints(e.at("input_ids")));
      CHECK(got.token_type_ids == ints(e.at("token_type_ids")));
      CHECK(got.attention_mask == ints(e.at("attention_mask")));
    }
    for (const auto& s : doc.at("singles").items()) {
      const Json& e = s.at(mode);
      INFO(mode << " single '" << s.at("a").as_string() << "' max_len "
                << s.at("max_len").as_int());
      models::Encoding got = tok.encode_single(s.at("a").as_string(), s.at("max_len").as_int());
      CHECK(got.input_ids == ints(e.at("input_ids")));
      CHECK(got.token_type_ids == ints(e.at("token_type_ids")));
      CHECK(got.attention_mask == ints(e.at("attention_mask")));
    }
  }
}

TEST_CASE("tokenizer: decode round trips, and re-tokenizing decoded text gives the same tokens") {
  auto tok = WordPieceTokenizer::from_file(fixture_path("tokenizer_vocab.txt"));
  // Hand-derived: "##" pieces rejoin their word; without clean-up the spaces HF puts between
  // tokens stay (" , "), with it " ," and " !" lose their space.
  std::vector<int64_t> ids = tok.encode("Hello, unaffable World!", false);
  CHECK(tok.convert_tokens_to_string({"un", "##aff", "##able", "!"}) == "unaffable !");
  CHECK(tok.decode(ids, false, false) == "hello , unaffable world !");
  CHECK(tok.decode(ids) == "hello, unaffable world!");
  CHECK(tok.decode(tok.encode("Hello world")) == "[CLS] hello world [SEP]");
  CHECK(tok.decode(tok.encode("Hello world"), true) == "hello world");
  // Property over every fixture string whose tokens have no [UNK] (an [UNK] loses the text):
  // the decoded text (no clean-up) tokenizes back to the same tokens, in both modes.
  int checked = 0;
  for (const std::string mode : {"lower", "cased"}) {
    auto t = WordPieceTokenizer::from_file(fixture_path("tokenizer_vocab.txt"), options_for(mode));
    for (const auto& c : fixture().at("cases").items()) {
      std::vector<std::string> tokens = t.tokenize(c.at("text").as_string());
      if (std::find(tokens.begin(), tokens.end(), "[UNK]") != tokens.end()) continue;
      INFO(mode << ": '" << c.at("text").as_string() << "'");
      CHECK(t.tokenize(t.decode(t.encode(c.at("text").as_string(), false), false, false)) ==
            tokens);
      ++checked;
    }
  }
  CHECK(checked > 40);  // the property was exercised, not vacuous
}

TEST_CASE("tokenizer: vocab from a file (universal newlines) equals vocab from strings; save") {
  // HF's load_vocab opens the file in text mode: \r\n and \r end lines too; a last line without
  // a newline counts; an empty line is a token "".
  TempFile f("sl_tokenizer_vocab_crlf.txt", "[PAD]\r\n[UNK]\r[CLS]\n\n[SEP]\n[MASK]\nhello");
  auto tok = WordPieceTokenizer::from_file(f.path);
  CHECK(tok.vocab() ==
        std::vector<std::string>{"[PAD]", "[UNK]", "[CLS]", "", "[SEP]", "[MASK]", "hello"});
  CHECK(tok.pad_id() == 0);
  CHECK(tok.unk_id() == 1);
  CHECK(tok.cls_id() == 2);
  CHECK(tok.sep_id() == 4);
  CHECK(tok.mask_id() == 5);
  CHECK(tok.token_to_id("hello") == 6);
  CHECK(tok.token_to_id("absent") == 1);  // HF: unknown tokens map to [UNK]'s id
  CHECK(tok.encode("hello HELLO hellos") == std::vector<int64_t>{2, 6, 6, 1, 4});

  WordPieceTokenizer from_vec(small_vocab());
  TempFile saved("sl_tokenizer_vocab_saved.txt", "");
  from_vec.save_vocab(saved.path);
  CHECK(read_text(saved.path) == "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n##s\na\n.\n");
  CHECK(WordPieceTokenizer::from_file(saved.path).vocab() == small_vocab());
  // Longest match first: "worlds" -> world ##s; "hellohello" cannot continue (no "##hello").
  CHECK(from_vec.tokenize("Worlds hellohello a.") ==
        std::vector<std::string>{"world", "##s", "[UNK]", "a", "."});
}

TEST_CASE("tokenizer: max_input_chars_per_word and the Unicode helpers, hand-checked") {
  WordPieceOptions o;
  o.max_input_chars_per_word = 5;
  WordPieceTokenizer tok(small_vocab(), o);
  // "hello" has 5 code points (kept), "worlds" 6 ([UNK]); a special token cut out of the
  // text is never WordPiece'd, so "[MASK]" (6 characters) survives.
  CHECK(tok.tokenize("hello worlds [MASK]") ==
        std::vector<std::string>{"hello", "[UNK]", "[MASK]"});

  namespace uc = models::unicode;
  std::u32string low;
  uc::append_lower(low, U'\u0130');  // Python: "İ".lower() == "i\u0307"
  uc::append_lower(low, U'\u03A3');  // one character at a time: always σ, never final ς
  uc::append_lower(low, U'\u212A');  // KELVIN SIGN -> k
  uc::append_lower(low, U'\u1E9E');  // CAPITAL SHARP S -> ß
  CHECK(low == std::u32string{U'i', U'\u0307', U'\u03C3', U'k', U'\u00DF'});
  // NFD + drop Mn: é -> e, Hangul 한 -> jamo 1112 1161 11AB, ǅ stays (no canonical mapping),
  // and the two musical signs (Mc, ccc 226 then 216) are put in canonical order.
  CHECK(uc::strip_accents(U"\u00E9\uD55C\u01C5") ==
        std::u32string{U'e', U'\u1112', U'\u1161', U'\u11AB', U'\u01C5'});
  CHECK(uc::strip_accents(U"a\U0001D16D\u0301\U0001D165") ==
        std::u32string{U'a', U'\U0001D165', U'\U0001D16D'});
  CHECK(uc::is_punctuation(U'$'));        // ASCII symbol: HF's rule, though category Sc
  CHECK(uc::is_punctuation(U'\u00BF'));   // ¿ Po
  CHECK(!uc::is_punctuation(U'\u20AC'));  // € Sc, not ASCII
  CHECK(uc::is_control(U'\u200B'));       // Cf
  CHECK(uc::is_control(U'\u0378'));       // unassigned (Cn)
  CHECK(!uc::is_control(U'\t'));
  CHECK(uc::is_whitespace(U'\u3000'));    // Zs
  CHECK(uc::is_python_space(U'\u2028'));  // Zl: str.split() splits on it
  CHECK(!uc::is_whitespace(U'\u2028'));
  CHECK(uc::is_cjk(U'\uF900'));
  CHECK(!uc::is_cjk(U'\u3042'));  // hiragana is not
}

TEST_CASE("tokenizer: errors name the tokenizer and the values") {
  SL_CHECK_THROWS((void)WordPieceTokenizer({"[PAD]", "[UNK]", "[CLS]", "[SEP]"}), ValueError,
                  "WordPieceTokenizer: special token [MASK] is missing from the vocabulary of 4");
  auto dup = small_vocab();
  dup.push_back("hello");
  SL_CHECK_THROWS(
      (void)WordPieceTokenizer(dup), ValueError,
      "WordPieceTokenizer: token 'hello' appears twice in the vocabulary (ids 5 and 10)");
  SL_CHECK_THROWS(
      (void)WordPieceTokenizer({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "\xC3"}), ValueError,
      "WordPieceTokenizer: vocabulary token 5 is not UTF-8: invalid UTF-8 at byte 0 (0xC3)");
  WordPieceOptions o;
  o.max_input_chars_per_word = 0;
  SL_CHECK_THROWS((void)WordPieceTokenizer(small_vocab(), o), ValueError,
                  "max_input_chars_per_word must be >= 1, got 0");
  SL_CHECK_THROWS(WordPieceTokenizer::from_file("/nonexistent/vocab.txt"), IOError,
                  "WordPieceTokenizer: cannot open vocabulary file '/nonexistent/vocab.txt'");
  TempFile bad("sl_tokenizer_vocab_bad.txt", "[PAD]\n[UNK]\nab\xff\n");
  SL_CHECK_THROWS(WordPieceTokenizer::from_file(bad.path), IOError,
                  "line 3 is not UTF-8: invalid UTF-8 at byte 2 (0xFF)");

  WordPieceTokenizer tok(small_vocab());
  // Byte offsets: "ok " is 3 bytes; a lone continuation byte; a truncated 3-byte sequence; an
  // overlong '/'; an encoded surrogate.
  SL_CHECK_THROWS(tok.tokenize("ok \x80"), ValueError,
                  "WordPieceTokenizer: invalid UTF-8 at byte 3 (0x80)");
  SL_CHECK_THROWS(tok.tokenize("\xC3\xA9\xE2\x82"), ValueError, "invalid UTF-8 at byte 2 (0xE2)");
  SL_CHECK_THROWS(tok.tokenize("\xC0\xAF"), ValueError, "invalid UTF-8 at byte 0 (0xC0)");
  SL_CHECK_THROWS(tok.tokenize("a\xED\xA0\x80"), ValueError, "invalid UTF-8 at byte 1 (0xED)");
  SL_CHECK_THROWS(tok.decode({5, 10}), IndexError,
                  "WordPieceTokenizer: id 10 is outside the vocabulary [0, 10)");
  SL_CHECK_THROWS(tok.decode({-1}), IndexError, "id -1 is outside");
  SL_CHECK_THROWS(
      tok.encode_pair("a", "b", 2), ValueError,
      "WordPieceTokenizer: encode_pair needs max_len >= 3 for [CLS] a [SEP] b [SEP], got 2");
  SL_CHECK_THROWS(tok.encode_single("a", 1), ValueError, "encode_single needs max_len >= 3");
}

TEST_CASE("tokenizer: build_wordpiece_vocab, hand-derived on a tiny corpus") {
  // Words: the x2, cat x2, sat, a, hat, "." (punctuation is split off). Characters . a c e h
  // s t in code point order, each also as ##char: 5 + 14 = 19 tokens. Whole words of >= 2
  // characters seen >= min_frequency 2 times: cat, the (a tie, broken by the string). Suffixes
  // of the words not taken (hat, sat): ##at, counted 2, kept.
  std::vector<std::string> corpus = {"The cat sat.", "the CAT", "a hat"};
  std::vector<std::string> want = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".",   "##.", "a",
                                   "##a",   "c",     "##c",   "e",     "##e",    "h",   "##h", "s",
                                   "##s",   "t",     "##t",   "cat",   "the",    "##at"};
  CHECK(models::build_wordpiece_vocab(corpus, 100, 2) == want);
  // The size is a hard cap: 21 keeps the whole words and drops ##at.
  auto capped = models::build_wordpiece_vocab(corpus, 21, 2);
  CHECK(capped == std::vector<std::string>(want.begin(), want.begin() + 21));
  WordPieceTokenizer tok(models::build_wordpiece_vocab(corpus, 100, 2));
  CHECK(tok.tokenize("the hat sat") == std::vector<std::string>{"the", "h", "##at", "s", "##at"});
  SL_CHECK_THROWS(models::build_wordpiece_vocab(corpus, 18, 1), ValueError,
                  "build_wordpiece_vocab: vocab_size 18 is smaller than the 19 tokens needed for "
                  "the 5 special tokens and the 7 characters");
  SL_CHECK_THROWS(models::build_wordpiece_vocab(corpus, 100, 0), ValueError,
                  "min_frequency must be >= 1, got 0");
}

TEST_CASE(
    "tokenizer: build_wordpiece_vocab covers every corpus word, respects the size, is "
    "deterministic") {
  // The fixture's strings (accents, CJK, emoji, controls, ...) as a corpus.
  std::vector<std::string> corpus;
  for (const auto& c : fixture().at("cases").items()) corpus.push_back(c.at("text").as_string());
  for (const bool lower : {true, false}) {
    WordPieceOptions o;
    o.do_lower_case = lower;
    std::vector<std::string> full = models::build_wordpiece_vocab(corpus, 100000, 1, o);
    for (const int64_t size : {static_cast<int64_t>(full.size()) - 50, int64_t{600}}) {
      std::vector<std::string> vocab = models::build_wordpiece_vocab(corpus, size, 1, o);
      CHECK(static_cast<int64_t>(vocab.size()) == std::min<int64_t>(size, full.size()));
      CHECK(std::equal(vocab.begin(), vocab.end(), full.begin()));  // a prefix: ranking is fixed
      WordPieceTokenizer tok(vocab, o);
      for (const auto& text : corpus) {
        for (const auto& word : models::bert_pre_tokenize(text, o)) {
          INFO("lower " << lower << " size " << size << " word '" << word << "'");
          // Words WordPiece turns into [UNK] by rule: over 100 characters, or "[UNK]" itself.
          if (models::unicode::decode_utf8(word, "test").size() > 100 || word == "[UNK]") continue;
          std::vector<std::string> t = tok.tokenize(word);
          CHECK(std::find(t.begin(), t.end(), "[UNK]") == t.end());
        }
      }
    }
    // The corpus as a multiset: order does not matter.
    std::vector<std::string> reversed(corpus.rbegin(), corpus.rend());
    CHECK(models::build_wordpiece_vocab(reversed, 100000, 1, o) == full);
  }
}

TEST_CASE("tokenizer: train_wordpiece_vocab merges pairs, hand-derived on tiny corpora") {
  // Words ab x3, abc x1; alphabet a b c with ##forms: 5 + 6 = 11 tokens. Pair counts
  // (a, ##b) 3 + 1 = 4, (##b, ##c) 1: "ab" first; then abc = [ab, ##c] leaves (ab, ##c) 1.
  std::vector<std::string> alphabet = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a",
                                       "##a",   "b",     "##b",   "c",     "##c"};
  std::vector<std::string> corpus = {"ab ab", "AB abc"};
  auto with = [&](std::vector<std::string> v, std::initializer_list<const char*> more) {
    v.insert(v.end(), more.begin(), more.end());
    return v;
  };
  CHECK(models::train_wordpiece_vocab(corpus, 100, 1) == with(alphabet, {"ab", "abc"}));
  CHECK(models::train_wordpiece_vocab(corpus, 100, 2) == with(alphabet, {"ab"}));  // 1 < 2
  CHECK(models::train_wordpiece_vocab(corpus, 12, 1) == with(alphabet, {"ab"}));   // size cap
  // Continuation pieces merge too: xab, yab -> (##a, ##b) has count 2 -> "##ab"; then
  // (x, ##ab) and (y, ##ab) tie at 1 and go in token order.
  auto v = models::train_wordpiece_vocab({"xab yab"}, 100, 1);
  CHECK(std::vector<std::string>(v.begin() + 13, v.end()) ==
        std::vector<std::string>{"##ab", "xab", "yab"});
  WordPieceTokenizer tok(v);
  CHECK(tok.tokenize("xab yab ab b") == std::vector<std::string>{"xab", "yab", "a", "##b", "b"});
  SL_CHECK_THROWS(models::train_wordpiece_vocab(corpus, 10, 1), ValueError,
                  "train_wordpiece_vocab: vocab_size 10 is smaller than the 11 tokens needed");
  SL_CHECK_THROWS(models::train_wordpiece_vocab(corpus, 100, 0), ValueError,
                  "train_wordpiece_vocab: min_frequency must be >= 1, got 0");
}

TEST_CASE(
    "tokenizer: train_wordpiece_vocab covers every corpus word, respects the size, is "
    "deterministic") {
  std::vector<std::string> corpus;
  for (const auto& c : fixture().at("cases").items()) corpus.push_back(c.at("text").as_string());
  for (const bool lower : {true, false}) {
    WordPieceOptions o;
    o.do_lower_case = lower;
    std::vector<std::string> full = models::train_wordpiece_vocab(corpus, 100000, 1, o);
    for (const int64_t size : {static_cast<int64_t>(full.size()) - 50, int64_t{600}}) {
      std::vector<std::string> vocab = models::train_wordpiece_vocab(corpus, size, 1, o);
      CHECK(static_cast<int64_t>(vocab.size()) == std::min<int64_t>(size, full.size()));
      CHECK(std::equal(vocab.begin(), vocab.end(), full.begin()));  // merges in a fixed order
      WordPieceTokenizer tok(vocab, o);
      for (const auto& text : corpus) {
        for (const auto& word : models::bert_pre_tokenize(text, o)) {
          INFO("lower " << lower << " size " << size << " word '" << word << "'");
          if (models::unicode::decode_utf8(word, "test").size() > 100 || word == "[UNK]") continue;
          std::vector<std::string> t = tok.tokenize(word);
          CHECK(std::find(t.begin(), t.end(), "[UNK]") == t.end());
        }
      }
    }
    std::vector<std::string> reversed(corpus.rbegin(), corpus.rend());
    CHECK(models::train_wordpiece_vocab(reversed, 100000, 1, o) == full);
  }
}

// UTF-8 and the table lookups of Note [Unicode tables].
#include "models/unicode_text.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>

#include "core/error.h"

namespace sl::models::unicode {
namespace tables {

struct LowerRun {
  uint32_t first, last;
  int32_t delta;
  uint32_t stride;
};
struct MultiMap {
  uint32_t cp;
  uint32_t out[3];
  uint32_t count;
};
struct CodePair {
  uint32_t cp, target;
};
struct CombiningClass {
  uint32_t cp, ccc;
};
// The class codes of kClassRuns (tools/gen_unicode_tables.py: OTHER, ZS, CTRL, ...).
enum Class : uint32_t {
  kOther = 0,
  kZs = 1,
  kControl = 2,
  kPunct = 3,
  kMnBridge = 4,  // Mn whose NFD is all non-starters: canonical reordering sorts across it
  kMnBreak = 5,   // Mn with a starter in its NFD: ends a run of non-starters
  kSpace = 6,     // str.isspace() but neither Zs nor C*: U+2028, U+2029
};

#include "models/unicode_tables.inc"

}  // namespace tables

namespace {

using namespace tables;

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kVCount = 21, kTCount = 28, kSCount = 19 * 21 * 28;

Class char_class_lookup(char32_t c) {
  // The last run whose first code point is <= c.
  auto it = std::upper_bound(std::begin(kClassRuns), std::end(kClassRuns), c,
                             [](char32_t v, uint32_t run) { return v < (run >> 3); });
  return static_cast<Class>(*(it - 1) & 7u);
}

Class char_class(char32_t c) {
  static const auto ascii = [] {
    std::array<Class, 128> t{};
    for (char32_t i = 0; i < 128; ++i) t[i] = char_class_lookup(i);
    return t;
  }();
  return c < 128 ? ascii[c] : char_class_lookup(c);
}

const MultiMap* find_multi(const MultiMap* begin, const MultiMap* end, char32_t c) {
  auto it = std::lower_bound(begin, end, c, [](const MultiMap& m, char32_t v) { return m.cp < v; });
  return it != end && it->cp == c ? it : nullptr;
}

uint32_t combining_class_non_mn(char32_t c) {
  if (c < kCombiningNonMn[0].cp) return 0;  // the table is sorted
  for (const auto& e : kCombiningNonMn) {
    if (e.cp == c) return e.ccc;
  }
  return 0;
}

}  // namespace

std::u32string decode_utf8(std::string_view bytes, const char* who) {
  std::u32string out;
  out.reserve(bytes.size());
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  auto fail = [&](size_t at) {
    static const char* hex = "0123456789ABCDEF";
    std::string b = {hex[s[at] >> 4], hex[s[at] & 15]};
    detail::throw_error<ValueError>(who, ": invalid UTF-8 at byte ", at, " (0x", b, ")");
  };
  while (i < n) {
    unsigned char b0 = s[i];
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    }
    int len;
    char32_t c, min;
    if ((b0 & 0xE0) == 0xC0) {
      len = 2, c = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, c = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4, c = b0 & 0x07, min = 0x10000;
    } else {
      fail(i);
    }
    if (n - i < static_cast<size_t>(len)) fail(i);
    for (int k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) fail(i);
      c = (c << 6) | (s[i + k] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) fail(i);
    out.push_back(c);
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string encode_utf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) append_utf8(out, c);
  return out;
}

bool is_whitespace(char32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || char_class(c) == kZs;
}

bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return char_class(c) == kControl;
}

bool is_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126)) {
    return true;
  }
  return char_class(c) == kPunct;
}

bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_python_space(char32_t c) {
  // The control characters str.isspace() accepts (checked by the table generator).
  if ((c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x1F) || c == 0x85) return true;
  Class k = char_class(c);
  return c == ' ' || k == kZs || k == kSpace;
}

bool is_nonspacing_mark(char32_t c) {
  Class k = char_class(c);
  return k == kMnBridge || k == kMnBreak;
}

void append_lower(std::u32string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  if (const MultiMap* m = find_multi(std::begin(kLowerMulti), std::end(kLowerMulti), c)) {
    out.append(m->out, m->out + m->count);
    return;
  }
  auto it = std::upper_bound(std::begin(kLowerRuns), std::end(kLowerRuns), c,
                             [](char32_t v, const LowerRun& r) { return v < r.first; });
  if (it != std::begin(kLowerRuns)) {
    const LowerRun& r = *(it - 1);
    if (c <= r.last && (c - r.first) % r.stride == 0) {
      out.push_back(static_cast<char32_t>(static_cast<int64_t>(c) + r.delta));
      return;
    }
  }
  out.push_back(c);
}

std::u32string strip_accents(std::u32string_view text) {
  // NFD = full canonical decomposition, then a stable sort by combining class of each maximal
  // run of non-starters (ccc != 0). Only the order of the survivors (non-Mn) matters, so the
  // Mn marks are dropped at once; a dropped mark that contains a starter still ends the run.
  std::u32string out;
  std::u32string ccc;  // combining class of each output code point (0: a starter)
  out.reserve(text.size());
  size_t run_start = 0;  // where the current run of non-starters begins in `out`
  auto push = [&](char32_t x) {
    uint32_t k = combining_class_non_mn(x);
    out.push_back(x);
    ccc.push_back(k);
    if (k == 0) {
      run_start = out.size();
      return;
    }
    for (size_t j = out.size() - 1; j > run_start && ccc[j - 1] > k; --j) {  // stable insert
      std::swap(out[j - 1], out[j]);
      std::swap(ccc[j - 1], ccc[j]);
    }
  };
  for (char32_t c : text) {
    if (c < 0x80) {
      push(c);
      continue;
    }
    Class k = char_class(c);
    if (k == kMnBridge) continue;
    if (k == kMnBreak) {
      run_start = out.size();
      continue;
    }
    if (c >= kSBase && c < kSBase + kSCount) {  // Hangul syllable: L V (T)
      char32_t s = c - kSBase;
      push(kLBase + s / (kVCount * kTCount));
      push(kVBase + (s % (kVCount * kTCount)) / kTCount);
      if (s % kTCount != 0) push(kTBase + s % kTCount);
      continue;
    }
    if (const MultiMap* m = find_multi(std::begin(kStripMulti), std::end(kStripMulti), c)) {
      for (uint32_t j = 0; j < m->count; ++j) push(m->out[j]);
      continue;
    }
    auto it = std::lower_bound(std::begin(kStripPairs), std::end(kStripPairs), c,
                               [](const CodePair& p, char32_t v) { return p.cp < v; });
    push(it != std::end(kStripPairs) && it->cp == c ? it->target : c);
  }
  return out;
}

const char* unicode_version() {
  return tables::kUnicodeVersion;
}

}  // namespace sl::models::unicode

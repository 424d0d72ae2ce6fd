// The Unicode pieces of BERT's BasicTokenizer, without ICU: UTF-8 decoding and encoding, the
// character classes Hugging Face's tokenization_bert.py asks about, full lower-casing of one
// code point and accent stripping (NFD, then drop the Mn marks).
//
// Note [Unicode tables]: the data is models/unicode_tables.inc, generated from Python 3.11's
// unicodedata (Unicode 14.0.0) by tools/gen_unicode_tables.py, which also checks every lookup
// below (re-implemented in Python) against unicodedata for all 0x110000 code points. Text is
// classified exactly as the Python tokenizer does it under that Unicode version.
#pragma once

#include <string>
#include <string_view>

namespace sl::models::unicode {

/// Decodes UTF-8 into code points. Throws ValueError "<who>: invalid UTF-8 at byte N (0xXX)"
/// for a malformed sequence, an overlong form, a surrogate or a value above U+10FFFF (Python
/// strings, which the Hugging Face tokenizer takes, cannot hold such bytes).
std::u32string decode_utf8(std::string_view bytes, const char* who);
/// Appends the UTF-8 form of c (a valid scalar value).
void append_utf8(std::string& out, char32_t c);
/// The UTF-8 form of a sequence of valid scalar values.
std::string encode_utf8(std::u32string_view cps);

/// HF _is_whitespace: ' ', \t, \n, \r or category Zs.
bool is_whitespace(char32_t c);
/// HF _is_control: category C* (Cc Cf Cs Co Cn, so unassigned code points too), except \t \n \r.
bool is_control(char32_t c);
/// HF _is_punctuation: ASCII 33-47, 58-64, 91-96, 123-126, or category P*.
bool is_punctuation(char32_t c);
/// HF _is_chinese_char: the CJK Unified Ideograph blocks (and the compatibility ones).
bool is_cjk(char32_t c);
/// Python str.isspace(), what str.split() splits on.
bool is_python_space(char32_t c);
/// Category Mn (nonspacing mark).
bool is_nonspacing_mark(char32_t c);

/// Appends Python's str.lower() of the single code point c (U+0130 gives two code points).
void append_lower(std::u32string& out, char32_t c);
/// HF _run_strip_accents: "".join(x for x in NFD(text) if category(x) != "Mn"), including
/// Hangul decomposition and the canonical reordering of the non-Mn combining signs.
std::u32string strip_accents(std::u32string_view text);

/// The Unicode version of the tables ("14.0.0").
const char* unicode_version();

}  // namespace sl::models::unicode

#include "core/utf8.h"

namespace sl {

size_t utf8_sequence_length(std::string_view s, size_t i, size_t* bad) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  // the length a lead byte announces, and the range its second byte must lie in (Table 3-7)
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;  // no overlong forms
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  }
  size_t got = 1;  // bytes of a well-formed prefix
  while (need > 0 && got < need && i + got < s.size()) {
    const unsigned char b = byte(i + got);
    const bool fits = got == 1 ? b >= lo && b <= hi : b >= 0x80 && b <= 0xBF;
    if (!fits) break;
    ++got;
  }
  if (need > 0 && got == need) return need;
  if (bad != nullptr) *bad = got;  // a lone continuation or invalid lead byte: 1
  return 0;
}

size_t utf8_invalid_offset(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return s.size();
}

}  // namespace sl

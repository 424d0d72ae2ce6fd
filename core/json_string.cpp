#include "core/json_string.h"

#include "core/utf8.h"

namespace sl {

void json_escape_string(std::string_view s, std::string& out) {
  static const char* hex = "0123456789abcdef";
  out.push_back('"');
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x80) {  // a UTF-8 sequence as it is; an ill-formed one as U+FFFD
      size_t bad = 0;
      const size_t n = utf8_sequence_length(s, i, &bad);
      if (n > 0) {
        out.append(s.substr(i, n));
        i += n - 1;
      } else {
        out += "\xef\xbf\xbd";
        i += bad - 1;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out.push_back(hex[c >> 4]);
          out.push_back(hex[c & 15]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

}  // namespace sl

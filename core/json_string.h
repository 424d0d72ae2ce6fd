// JSON string literals, for every layer that writes JSON (nn/serialize's Json, the profiler's
// traces).
#pragma once

#include <string>
#include <string_view>

namespace sl {

/// Appends s to out as a JSON string literal (quotes included), escaped as serde_json does:
/// quote, backslash and the control characters \b \f \n \r \t by name, the other control
/// characters as \u00XX, every other character (UTF-8 included) as it is. JSON text is UTF-8, so
/// each ill-formed UTF-8 sequence of s (its maximal subpart, core/utf8.h) becomes U+FFFD, as
/// Python's bytes.decode("utf-8", "replace") does: the output always parses.
void json_escape_string(std::string_view s, std::string& out);

}  // namespace sl

// UTF-8 validation (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), for the
// JSON writers (core/json_string.h) and the safetensors writer, whose headers must be UTF-8.
#pragma once

#include <cstddef>
#include <string_view>

namespace sl {

/// At s[i]: the length of the well-formed UTF-8 sequence starting there (1 to 4), or 0 when none
/// does. Then *bad (when not null) is the length of the ill-formed sequence's maximal subpart
/// (Unicode 15, section 3.9, U+FFFD substitution: 1 to 3 bytes), which a decoder replaces by one
/// U+FFFD, as Python's errors="replace" does. Requires i < s.size().
size_t utf8_sequence_length(std::string_view s, size_t i, size_t* bad = nullptr);

/// The byte offset of the first ill-formed sequence in s, or s.size() when s is valid UTF-8.
size_t utf8_invalid_offset(std::string_view s);

}  // namespace sl

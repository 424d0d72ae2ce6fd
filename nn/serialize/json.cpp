#include "nn/serialize/json.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace sl::serialize {

// ---- construction and access -----------------------------------------------------------------

Json::Json(unsigned long v) : type_(Type::integer) {
  SL_CHECK(v <= static_cast<unsigned long>(std::numeric_limits<int64_t>::max()), "json: integer ",
           v, " does not fit int64");
  int_ = static_cast<int64_t>(v);
}

Json::Json(unsigned long long v) : type_(Type::integer) {
  SL_CHECK(v <= static_cast<unsigned long long>(std::numeric_limits<int64_t>::max()),
           "json: integer ", v, " does not fit int64");
  int_ = static_cast<int64_t>(v);
}

Json Json::array(std::vector<Json> items) {
  Json j;
  j.type_ = Type::array;
  j.arr_ = std::move(items);
  return j;
}

Json Json::object(std::vector<Member> members) {
  Json j;
  j.type_ = Type::object;
  j.obj_ = std::move(members);
  return j;
}

const char* Json::type_name() const {
  switch (type_) {
    case Type::null:
      return "null";
    case Type::boolean:
      return "bool";
    case Type::integer:
      return "integer";
    case Type::number:
      return "number";
    case Type::string:
      return "string";
    case Type::array:
      return "array";
    case Type::object:
      return "object";
  }
  return "?";
}

namespace {
[[noreturn]] void type_mismatch(const Json& j, const char* expected) {
  detail::throw_error<ValueError>("json: expected ", expected, ", got ", j.type_name());
}
}  // namespace

bool Json::as_bool() const {
  if (type_ != Type::boolean) type_mismatch(*this, "bool");
  return int_ != 0;
}

int64_t Json::as_int() const {
  if (type_ == Type::integer) return int_;
  if (type_ == Type::number && std::isfinite(num_) && std::floor(num_) == num_ &&
      num_ >= -9.2233720368547758e18 && num_ < 9.2233720368547758e18) {
    return static_cast<int64_t>(num_);
  }
  type_mismatch(*this, "an integer");
}

double Json::as_double() const {
  if (type_ == Type::integer) return static_cast<double>(int_);
  if (type_ == Type::number) return num_;
  type_mismatch(*this, "a number");
}

const std::string& Json::as_string() const {
  if (type_ != Type::string) type_mismatch(*this, "string");
  return str_;
}

const std::vector<Json>& Json::items() const {
  if (type_ != Type::array) type_mismatch(*this, "array");
  return arr_;
}
std::vector<Json>& Json::items() {
  if (type_ != Type::array) type_mismatch(*this, "array");
  return arr_;
}
const std::vector<Json::Member>& Json::members() const {
  if (type_ != Type::object) type_mismatch(*this, "object");
  return obj_;
}
std::vector<Json::Member>& Json::members() {
  if (type_ != Type::object) type_mismatch(*this, "object");
  return obj_;
}

size_t Json::size() const {
  if (type_ == Type::array) return arr_.size();
  if (type_ == Type::object) return obj_.size();
  return 0;
}

const Json& Json::operator[](size_t i) const {
  const auto& a = items();
  SL_CHECK_INDEX(i < a.size(), "json: index ", i, " out of range for an array of ", a.size());
  return a[i];
}

void Json::push_back(Json v) {
  if (type_ == Type::null) type_ = Type::array;
  items().push_back(std::move(v));
}

const Json* Json::find(std::string_view key) const {
  for (const auto& [k, v] : members()) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool Json::contains(std::string_view key) const {
  return find(key) != nullptr;
}

const Json& Json::at(std::string_view key) const {
  const Json* j = find(key);
  SL_CHECK(j != nullptr, "json: missing key '", key, "'");
  return *j;
}

Json& Json::set(std::string key, Json value) {
  if (type_ == Type::null) type_ = Type::object;
  for (auto& [k, v] : members()) {
    if (k == key) {
      v = std::move(value);
      return v;
    }
  }
  obj_.emplace_back(std::move(key), std::move(value));
  return obj_.back().second;
}

bool Json::operator==(const Json& o) const {
  if (is_number() && o.is_number() && type_ != o.type_) return as_double() == o.as_double();
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::null:
      return true;
    case Type::boolean:
    case Type::integer:
      return int_ == o.int_;
    case Type::number:
      return num_ == o.num_;
    case Type::string:
      return str_ == o.str_;
    case Type::array:
      return arr_ == o.arr_;
    case Type::object:
      return obj_ == o.obj_;
  }
  return false;
}

// ---- writer ----------------------------------------------------------------------------------

namespace {
void dump_to(const Json& j, std::string& out) {
  switch (j.type()) {
    case Json::Type::null:
      out += "null";
      break;
    case Json::Type::boolean:
      out += j.as_bool() ? "true" : "false";
      break;
    case Json::Type::integer:
      out += std::to_string(j.as_int());
      break;
    case Json::Type::number: {
      double v = j.as_double();
      SL_CHECK(std::isfinite(v), "json: cannot write the non-finite number ", v);
      char buf[64];
      auto res = std::to_chars(buf, buf + sizeof(buf), v);
      std::string_view txt(buf, static_cast<size_t>(res.ptr - buf));
      out += txt;
      // keep it a number (not an integer) when read back
      if (txt.find_first_of(".eE") == std::string_view::npos) out += ".0";
      break;
    }
    case Json::Type::string:
      json_escape_string(j.as_string(), out);
      break;
    case Json::Type::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& v : j.items()) {
        if (!first) out.push_back(',');
        first = false;
        dump_to(v, out);
      }
      out.push_back(']');
      break;
    }
    case Json::Type::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [k, v] : j.members()) {
        if (!first) out.push_back(',');
        first = false;
        json_escape_string(k, out);
        out.push_back(':');
        dump_to(v, out);
      }
      out.push_back('}');
      break;
    }
  }
}
}  // namespace

std::string Json::dump() const {
  std::string out;
  dump_to(*this, out);
  return out;
}

// ---- UTF-8 -----------------------------------------------------------------------------------

namespace {
/// Length of the well-formed UTF-8 sequence starting at s[i], or 0 when it is malformed.
size_t utf8_seq_len(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlongs
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  }
  return n;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}
}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_seq_len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// ---- parser ----------------------------------------------------------------------------------

namespace {

class Parser {
 public:
  Parser(std::string_view text, const char* what, int max_depth, size_t max_values)
      : s_(text), what_(what), max_depth_(max_depth), max_values_(max_values) {}

  Json document() {
    skip_ws();
    Json v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const char* reason) {
    detail::throw_error<IOError>(what_, ": invalid JSON at byte ", pos_, ": ", reason);
  }
  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return s_[pos_]; }
  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) {
      ++pos_;
    }
  }
  void expect_literal(std::string_view lit) {
    if (s_.substr(pos_, lit.size()) != lit) fail("invalid literal");
    pos_ += lit.size();
  }

  Json value(int depth) {
    if (at_end()) fail("unexpected end of input");
    if (++values_ > max_values_) fail("too many values");
    switch (peek()) {
      case '{':
        return object(depth + 1);
      case '[':
        return array(depth + 1);
      case '"':
        return Json(string());
      case 't':
        expect_literal("true");
        return Json(true);
      case 'f':
        expect_literal("false");
        return Json(false);
      case 'n':
        expect_literal("null");
        return Json();
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return number();
        fail("unexpected character");
    }
  }

  Json object(int depth) {
    if (depth > max_depth_) fail("nesting too deep");
    ++pos_;  // '{'
    Json obj = Json::object();
    auto& members = obj.members();
    skip_ws();
    if (!at_end() && peek() == '}') {
      ++pos_;
      return obj;
    }
    while (true) {
      skip_ws();
      if (at_end() || peek() != '"') fail("expected a string key");
      size_t key_pos = pos_;
      std::string key = string();
      for (const auto& m : members) {
        if (m.first == key) {
          pos_ = key_pos;
          fail(("duplicate key \"" + key.substr(0, 64) + "\"").c_str());
        }
      }
      skip_ws();
      if (at_end() || peek() != ':') fail("expected ':'");
      ++pos_;
      skip_ws();
      Json v = value(depth);
      members.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (at_end()) fail("unexpected end of input in an object");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return obj;
      }
      fail("expected ',' or '}'");
    }
  }

  Json array(int depth) {
    if (depth > max_depth_) fail("nesting too deep");
    ++pos_;  // '['
    Json arr = Json::array();
    skip_ws();
    if (!at_end() && peek() == ']') {
      ++pos_;
      return arr;
    }
    while (true) {
      skip_ws();
      arr.items().push_back(value(depth));
      skip_ws();
      if (at_end()) fail("unexpected end of input in an array");
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return arr;
      }
      fail("expected ',' or ']'");
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<uint32_t>(c - 'A' + 10);
      else
        fail("bad hex digit in \\u escape");
    }
    return v;
  }

  std::string string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (at_end()) fail("unterminated string");
      auto c = static_cast<unsigned char>(peek());
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("control character in string");
      if (c == '\\') {
        ++pos_;
        if (at_end()) fail("unterminated escape");
        char e = s_[pos_++];
        switch (e) {
          case '"':
            out.push_back('"');
            break;
          case '\\':
            out.push_back('\\');
            break;
          case '/':
            out.push_back('/');
            break;
          case 'b':
            out.push_back('\b');
            break;
          case 'f':
            out.push_back('\f');
            break;
          case 'n':
            out.push_back('\n');
            break;
          case 'r':
            out.push_back('\r');
            break;
          case 't':
            out.push_back('\t');
            break;
          case 'u': {
            uint32_t cp = hex4();
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (s_.substr(pos_, 2) != "\\u") fail("lone high surrogate in \\u escape");
              pos_ += 2;
              uint32_t lo = hex4();
              if (lo < 0xDC00 || lo > 0xDFFF) fail("invalid low surrogate in \\u escape");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
              fail("lone low surrogate in \\u escape");
            }
            append_utf8(cp, out);
            break;
          }
          default:
            --pos_;
            fail("invalid escape");
        }
        continue;
      }
      size_t n = utf8_seq_len(s_, pos_);
      if (n == 0) fail("invalid UTF-8 in string");
      out.append(s_.substr(pos_, n));
      pos_ += n;
    }
  }

  Json number() {
    size_t start = pos_;
    if (peek() == '-') ++pos_;
    if (at_end()) fail("truncated number");
    if (peek() == '0') {
      ++pos_;
    } else if (peek() >= '1' && peek() <= '9') {
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
    } else {
      fail("invalid number");
    }
    bool integral = true;
    if (!at_end() && peek() == '.') {
      integral = false;
      ++pos_;
      if (at_end() || peek() < '0' || peek() > '9') fail("digit expected after '.'");
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
    }
    if (!at_end() && (peek() == 'e' || peek() == 'E')) {
      integral = false;
      ++pos_;
      if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
      if (at_end() || peek() < '0' || peek() > '9') fail("digit expected in exponent");
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
    }
    const char* b = s_.data() + start;
    const char* e = s_.data() + pos_;
    if (integral) {
      int64_t v = 0;
      auto r = std::from_chars(b, e, v);
      if (r.ec == std::errc() && r.ptr == e) return Json(static_cast<long long>(v));
      // out of int64 range: keep as a floating number
    }
    double d = 0;
    auto r = std::from_chars(b, e, d);
    if (r.ec == std::errc::result_out_of_range) {
      pos_ = start;
      fail("number out of range");
    }
    if (r.ec != std::errc() || r.ptr != e) {
      pos_ = start;
      fail("invalid number");
    }
    return Json(d);
  }

  std::string_view s_;
  const char* what_;
  int max_depth_;
  size_t max_values_;
  size_t values_ = 0;
  size_t pos_ = 0;
};

}  // namespace

Json Json::parse(std::string_view text, const char* what, int max_depth, size_t max_values) {
  return Parser(text, what, max_depth, max_values).document();
}

}  // namespace sl::serialize

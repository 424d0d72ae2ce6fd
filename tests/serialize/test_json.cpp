// The JSON value, parser and writer used by safetensors headers and checkpoint manifests.
#include "core/utf8.h"
#include "support/testing.h"

using namespace sl;
using serialize::Json;

TEST_CASE("json: parse and dump round trip, compact serde_json style") {
  const char* text =
      R"({"a":1,"b":-2.5,"c":[true,false,null],"d":{"e":"x\"y\\z\n"},"f":[],"g":{},"h":1e-08})";
  Json j = Json::parse(text);
  CHECK(j.at("a").as_int() == 1);
  CHECK(j.at("a").is_integer());
  CHECK(j.at("b").as_double() == -2.5);
  CHECK(j.at("c").size() == 3);
  CHECK(j.at("c")[0].as_bool());
  CHECK(j.at("c")[2].is_null());
  CHECK(j.at("d").at("e").as_string() == "x\"y\\z\n");
  CHECK(j.at("h").as_double() == 1e-8);
  // members keep their order; numbers that are not integers stay numbers
  CHECK(j.dump() ==
        R"({"a":1,"b":-2.5,"c":[true,false,null],"d":{"e":"x\"y\\z\n"},"f":[],"g":{},"h":1e-08})");
  CHECK(Json(2.0).dump() == "2.0");
  CHECK(Json::parse(Json(0.1).dump()).as_double() == 0.1);
  CHECK(Json::parse(Json(1e300).dump()).as_double() == 1e300);
  CHECK(Json::parse("  [1, 2 ]\n").size() == 2);
  CHECK(Json::parse("9223372036854775807").as_int() == INT64_MAX);
  CHECK(Json::parse("-9223372036854775808").as_int() == INT64_MIN);
  CHECK(Json::parse("18446744073709551616").is_integer() == false);  // beyond int64: a number
  CHECK(Json::parse("\"\\u00e9\\ud83d\\ude00\"").as_string() == "\xc3\xa9\xf0\x9f\x98\x80");
}

TEST_CASE("json: the writer escapes as serde_json does") {
  std::string out;
  serialize::json_escape_string(std::string("a\"b\\c\b\f\n\r\t\x01\x1f\x7f/\xc3\xa9", 16), out);
  CHECK(out == "\"a\\\"b\\\\c\\b\\f\\n\\r\\t\\u0001\\u001f\x7f/\xc3\xa9\"");
}

// Ill-formed UTF-8 becomes U+FFFD, one per maximal subpart. The expected strings are what
// /usr/bin/python3 printed for
//   json.dumps(b.decode("utf-8", "replace"), ensure_ascii=False).encode("utf-8")
// for each input b (Python's decoder replaces maximal subparts as Unicode 3.9 recommends).
TEST_CASE("json: the writer replaces ill-formed UTF-8 as Python's decoder does") {
  const std::pair<std::string, std::string> cases[] = {
      {"ok \xc3\xa9", "\"ok \xc3\xa9\""},
      {"\xe2\x82", "\"\xef\xbf\xbd\""},                                              // truncated
      {"\xe0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\""},                                  // overlong
      {"\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},                  // surrogate
      {"\xf4\x90\x80\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},  // > U+10FFFF
      {"\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\""},
      {"\xff", "\"\xef\xbf\xbd\""},
      {"a\x80"
       "b",
       "\"a\xef\xbf\xbd"
       "b\""},
      {"\xc0\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\""},
      {"\xe2\x82\xac\xe2\x82x", "\"\xe2\x82\xac\xef\xbf\xbdx\""},
      {"\xf0\x9f\x98", "\"\xef\xbf\xbd\""},
  };
  for (const auto& [in, want] : cases) {
    CAPTURE(in);
    std::string out;
    serialize::json_escape_string(in, out);
    CHECK(out == want);
    CHECK(Json::parse(out).as_string() == want.substr(1, want.size() - 2));  // parses back
    // utf8_invalid_offset agrees: valid exactly when nothing was replaced
    CHECK((sl::utf8_invalid_offset(in) == in.size()) ==
          (out.find("\xef\xbf\xbd") == std::string::npos));
  }
  CHECK(sl::utf8_invalid_offset("ab\xc3\xa9\xff") == 4);
  CHECK(sl::utf8_invalid_offset("") == 0);
}

TEST_CASE("json: object helpers") {
  Json o;
  o.set("x", 1);
  o.set("y", "s");
  o.set("x", 3);  // replaced in place
  CHECK(o.dump() == R"({"x":3,"y":"s"})");
  CHECK(o.contains("y"));
  CHECK(o.find("z") == nullptr);
  SL_CHECK_THROWS(o.at("z"), ValueError, "json: missing key 'z'");
  SL_CHECK_THROWS(o.at("y").as_int(), ValueError, "json: expected an integer, got string");
  SL_CHECK_THROWS(Json(1.5).as_int(), ValueError, "expected an integer, got number");
  CHECK(Json(3.0).as_int() == 3);
  SL_CHECK_THROWS(Json(NAN).dump(), ValueError, "non-finite");
  SL_CHECK_THROWS(Json::array()[0], IndexError, "json: index 0 out of range");
}

TEST_CASE("json: malformed input is an IOError naming the byte offset") {
  const std::pair<const char*, const char*> bad[] = {
      {"", "unexpected end of input"},
      {"{", "expected a string key"},
      {"{\"a\":1,}", "expected a string key"},
      {"[1,]", "unexpected character"},
      {"[1 2]", "expected ',' or ']'"},
      {"{\"a\" 1}", "expected ':'"},
      {"{\"a\":1,\"a\":2}", "duplicate key \"a\""},
      {"\"abc", "unterminated string"},
      {"\"a\nb\"", "control character in string"},
      {"\"\\x\"", "invalid escape"},
      {"\"\\ud800\"", "lone high surrogate"},
      {"\"\\udc00\"", "lone low surrogate"},
      {"\"\\u12g4\"", "bad hex digit"},
      {"\"\xff\"", "invalid UTF-8"},
      {"\"\xc0\xaf\"", "invalid UTF-8"},          // overlong '/'
      {"\"\xed\xa0\x80\"", "invalid UTF-8"},      // encoded surrogate
      {"\"\xf4\x90\x80\x80\"", "invalid UTF-8"},  // above U+10FFFF
      {"01", "unexpected trailing characters"},
      {"-", "truncated number"},
      {"1.", "digit expected after '.'"},
      {"1e", "digit expected in exponent"},
      {"1e999", "number out of range"},
      {"tru", "invalid literal"},
      {"NaN", "unexpected character"},
      {"{} x", "unexpected trailing characters"},
  };
  for (const auto& [text, msg] : bad) {
    CAPTURE(text);
    SL_CHECK_THROWS(Json::parse(text, "hdr"), IOError, msg);
  }
  SL_CHECK_THROWS(Json::parse("[1,", "hdr"), IOError, "hdr: invalid JSON at byte 3");
  std::string deep(100, '[');
  SL_CHECK_THROWS(Json::parse(deep, "hdr", 64), IOError, "nesting too deep");
  SL_CHECK_THROWS(Json::parse("[1,2,3,4]", "hdr", 8, 4), IOError, "too many values");
  CHECK(serialize::is_valid_utf8("plain \xc3\xa9 \xf0\x9f\x98\x80"));
  CHECK(!serialize::is_valid_utf8("\xe2\x82"));  // truncated sequence
}

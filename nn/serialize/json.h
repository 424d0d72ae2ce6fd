// A small JSON value with a strict, bounded parser and a compact writer.
//
// Used for safetensors headers, checkpoint manifests and the metadata of state sections
// (optimizer hyperparameters, scheduler state, RNG state). The writer produces the same bytes
// as serde_json's compact output (what Python's safetensors writes): no spaces, strings escaped
// as serde_json does, objects in insertion order. The parser accepts RFC 8259 JSON only, checks
// UTF-8, refuses duplicate object keys, and bounds nesting depth, so hostile input fails with an
// IOError instead of exhausting the stack or memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json_string.h"

namespace sl::serialize {

class Json {
 public:
  enum class Type : uint8_t { null, boolean, integer, number, string, array, object };
  using Member = std::pair<std::string, Json>;

  Json() = default;                                        ///< null
  Json(std::nullptr_t) {}                                  // NOLINT
  Json(bool b) : type_(Type::boolean), int_(b ? 1 : 0) {}  // NOLINT
  Json(int v) : type_(Type::integer), int_(v) {}           // NOLINT
  Json(long v) : type_(Type::integer), int_(v) {}          // NOLINT
  Json(long long v) : type_(Type::integer), int_(v) {}     // NOLINT
  Json(unsigned v) : type_(Type::integer), int_(v) {}      // NOLINT
  /// Throws ValueError when v does not fit int64.
  Json(unsigned long v);                                            // NOLINT
  Json(unsigned long long v);                                       // NOLINT
  Json(double v) : type_(Type::number), num_(v) {}                  // NOLINT
  Json(std::string s) : type_(Type::string), str_(std::move(s)) {}  // NOLINT
  Json(const char* s) : type_(Type::string), str_(s) {}             // NOLINT
  Json(std::string_view s) : type_(Type::string), str_(s) {}        // NOLINT

  static Json array(std::vector<Json> items = {});
  static Json object(std::vector<Member> members = {});

  Type type() const { return type_; }
  /// "null", "bool", "integer", "number", "string", "array", "object".
  const char* type_name() const;
  bool is_null() const { return type_ == Type::null; }
  bool is_bool() const { return type_ == Type::boolean; }
  bool is_integer() const { return type_ == Type::integer; }
  /// Integer or floating number.
  bool is_number() const { return type_ == Type::integer || type_ == Type::number; }
  bool is_string() const { return type_ == Type::string; }
  bool is_array() const { return type_ == Type::array; }
  bool is_object() const { return type_ == Type::object; }

  // Accessors throw ValueError naming the expected and actual type.
  bool as_bool() const;
  /// An integer, or a number with an integral value that fits int64.
  int64_t as_int() const;
  double as_double() const;
  const std::string& as_string() const;
  const std::vector<Json>& items() const;
  std::vector<Json>& items();
  const std::vector<Member>& members() const;
  std::vector<Member>& members();

  /// Elements (array) or members (object); 0 otherwise.
  size_t size() const;
  /// Array element; throws IndexError out of range.
  const Json& operator[](size_t i) const;
  void push_back(Json v);

  /// Object lookups (linear in the member count; objects here are small).
  bool contains(std::string_view key) const;
  /// Throws ValueError "json: missing key 'k'" when absent.
  const Json& at(std::string_view key) const;
  /// Null when absent.
  const Json* find(std::string_view key) const;
  /// Sets key (replacing an existing member in place, else appending). Makes a null an object.
  Json& set(std::string key, Json value);

  /// Compact serialisation (serde_json style). Non-finite numbers throw ValueError.
  std::string dump() const;
  /// Parses one JSON document (surrounding whitespace allowed). Throws IOError
  /// "<what>: invalid JSON at byte N: reason". max_depth bounds nesting and max_values the
  /// number of values created (each costs about 100 bytes, so hostile input cannot make the
  /// tree much larger than max_values allows).
  static Json parse(std::string_view text, const char* what = "json", int max_depth = 64,
                    size_t max_values = SIZE_MAX);

  bool operator==(const Json& o) const;

 private:
  Type type_ = Type::null;
  int64_t int_ = 0;
  double num_ = 0.0;
  std::string str_;
  std::vector<Json> arr_;
  std::vector<Member> obj_;
};

/// Appends s to out as a JSON string literal (core/json_string.h).
using ::sl::json_escape_string;
/// True when s is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool is_valid_utf8(std::string_view s);

}  // namespace sl::serialize

#include "ops/fixtures.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#ifndef SL_OP_FIXTURE_DIR
#error "SL_OP_FIXTURE_DIR must be defined by the build"
#endif

namespace sl::testing {

namespace {

/// A cursor over the JSON header; understands exactly what gen_op_fixtures.py writes.
struct Cursor {
  const std::string& s;
  size_t i = 0;
  const std::string& path;

  [[noreturn]] void fail(const char* what) const {
    detail::throw_error<IOError>("fixture ", path, ": malformed header (", what, " at byte ", i,
                                 ")");
  }
  void skip_ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n')) ++i;
  }
  void expect(char c) {
    skip_ws();
    if (i >= s.size() || s[i] != c) fail("unexpected character");
    ++i;
  }
  bool peek(char c) {
    skip_ws();
    return i < s.size() && s[i] == c;
  }
  std::string string() {
    expect('"');
    size_t j = s.find('"', i);
    if (j == std::string::npos) fail("unterminated string");
    std::string r = s.substr(i, j - i);
    i = j + 1;
    return r;
  }
  int64_t integer() {
    skip_ws();
    size_t used = 0;
    int64_t v = std::stoll(s.substr(i, 24), &used);
    if (used == 0) fail("expected an integer");
    i += used;
    return v;
  }
  std::vector<int64_t> int_list() {
    std::vector<int64_t> r;
    expect('[');
    if (peek(']')) {
      ++i;
      return r;
    }
    do {
      r.push_back(integer());
    } while (peek(',') && (++i, true));
    expect(']');
    return r;
  }
};

DType parse_dtype_code(const std::string& code, const std::string& path) {
  if (code == "F32") return DType::f32;
  if (code == "F64") return DType::f64;
  if (code == "I64") return DType::i64;
  if (code == "BOOL") return DType::b8;
  detail::throw_error<IOError>("fixture ", path, ": unsupported dtype ", code);
}

}  // namespace

Fixture::Fixture(const std::string& family)
    : path_(std::string(SL_OP_FIXTURE_DIR) + "/" + family + ".safetensors") {
  std::ifstream f(path_, std::ios::binary);
  SL_CHECK_IO(f.good(), "fixture ", path_,
              ": cannot open (regenerate with "
              "/usr/bin/python3 tools/gen_op_fixtures.py)");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  SL_CHECK_IO(bytes.size() >= 8, "fixture ", path_, ": truncated");
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k)
    n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(k)]);
  SL_CHECK_IO(8 + n <= bytes.size(), "fixture ", path_, ": header beyond the file");
  std::string header = bytes.substr(8, n);
  const char* data = bytes.data() + 8 + n;
  const uint64_t data_size = bytes.size() - 8 - n;
  Cursor c{header, 0, path_};
  c.expect('{');
  while (!c.peek('}')) {
    std::string name = c.string();
    c.expect(':');
    c.expect('{');
    DType dt = DType::f32;
    Shape shape;
    std::vector<int64_t> offs;
    while (!c.peek('}')) {
      std::string key = c.string();
      c.expect(':');
      if (key == "dtype") {
        dt = parse_dtype_code(c.string(), path_);
      } else if (key == "shape") {
        shape = c.int_list();
      } else if (key == "data_offsets") {
        offs = c.int_list();
      } else {
        c.fail("unknown key");
      }
      if (c.peek(',')) ++c.i;
    }
    c.expect('}');
    if (offs.size() != 2 || offs[0] < 0 || offs[1] < offs[0] ||
        static_cast<uint64_t>(offs[1]) > data_size) {
      c.fail("bad data_offsets");
    }
    Tensor t = empty(shape, {.dtype = dt});
    SL_CHECK_IO(t.nbytes() == static_cast<size_t>(offs[1] - offs[0]), "fixture ", path_, ": ", name,
                " has ", offs[1] - offs[0], " bytes for shape ", shape_str(shape));
    if (t.nbytes() > 0) std::memcpy(t.data_ptr(), data + offs[0], t.nbytes());
    tensors_[name] = t;
    if (c.peek(',')) ++c.i;
  }
}

bool Fixture::has(const std::string& case_name, const std::string& what) const {
  return tensors_.count(case_name + "/" + what) != 0;
}

Tensor Fixture::get(const std::string& case_name, const std::string& what) const {
  auto it = tensors_.find(case_name + "/" + what);
  SL_CHECK(it != tensors_.end(), "fixture ", path_, ": no tensor ", case_name, "/", what);
  return it->second;
}

Tensor Fixture::get_f64(const std::string& case_name, const std::string& what) const {
  return get(case_name, what).to(DType::f64, /*copy=*/true);
}

std::vector<int64_t> Fixture::ints(const std::string& case_name, const std::string& what) const {
  return get(case_name, what).to_vector<int64_t>();
}

double Fixture::number(const std::string& case_name, const std::string& what) const {
  return get(case_name, what).item<double>();
}

std::vector<std::string> Fixture::cases(const std::string& prefix) const {
  std::set<std::string> names;
  for (const auto& [key, t] : tensors_) {
    std::string c = key.substr(0, key.find('/'));
    if (c.rfind(prefix, 0) == 0) names.insert(c);
  }
  return {names.begin(), names.end()};
}

}  // namespace sl::testing

#include "fixture.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace sl::testing {

namespace {

// A minimal reader for the fixtures this project writes itself (trusted input): the 8-byte
// little-endian header length, a flat JSON object of {"dtype", "shape", "data_offsets"}
// entries, then the data. The hostile-input-proof reader lives in nn/serialize.
struct Cursor {
  const std::string& s;
  size_t i = 0;
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n')) ++i;
  }
  void expect(char c) {
    ws();
    if (i >= s.size() || s[i] != c) throw IOError(std::string("fixture: expected '") + c + "'");
    ++i;
  }
  bool peek(char c) {
    ws();
    return i < s.size() && s[i] == c;
  }
  /// A JSON string; the escapes safetensors' writer emits (\n, \", \\, \t, \/, \uXXXX below
  /// 0x80) are decoded.
  std::string str() {
    expect('"');
    std::string out;
    while (i < s.size() && s[i] != '"') {
      char ch = s[i++];
      if (ch != '\\') {
        out += ch;
        continue;
      }
      char e = s.at(i++);
      if (e == 'n') {
        out += '\n';
      } else if (e == 't') {
        out += '\t';
      } else if (e == 'u') {
        int code = std::stoi(s.substr(i, 4), nullptr, 16);
        if (code >= 0x80) throw IOError("fixture: non-ASCII \\u escape in the header");
        out += static_cast<char>(code);
        i += 4;
      } else {
        out += e;  // \" \\ \/
      }
    }
    expect('"');
    return out;
  }
  int64_t num() {
    ws();
    size_t end = i;
    while (end < s.size() && (isdigit(static_cast<unsigned char>(s[end])) || s[end] == '-')) ++end;
    int64_t v = std::stoll(s.substr(i, end - i));
    i = end;
    return v;
  }
  std::vector<int64_t> nums() {
    std::vector<int64_t> v;
    expect('[');
    while (!peek(']')) {
      v.push_back(num());
      if (peek(',')) ++i;
    }
    expect(']');
    return v;
  }
  /// __metadata__: an object of strings.
  std::map<std::string, std::string> string_map() {
    std::map<std::string, std::string> out;
    expect('{');
    while (!peek('}')) {
      std::string k = str();
      expect(':');
      out[k] = str();
      if (peek(',')) ++i;
    }
    expect('}');
    return out;
  }
};

DType dtype_of_name(const std::string& n) {
  if (n == "F32") return DType::f32;
  if (n == "F64") return DType::f64;
  if (n == "I64") return DType::i64;
  if (n == "I32") return DType::i32;
  if (n == "BOOL") return DType::b8;
  throw IOError("fixture: unsupported dtype " + n);
}

}  // namespace

Fixture::Fixture(const std::string& family, const std::string& dir) : family_(family) {
  std::string path = (dir.empty() ? std::string(SL_NN_FIXTURES) : dir) + "/" + family + ".safetensors";
  std::ifstream f(path, std::ios::binary);
  SL_CHECK_IO(f.good(), "fixture: cannot open ", path,
              " (regenerate with /usr/bin/python3 tools/gen_nn_fixtures.py)");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string bytes = ss.str();
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  std::string header = bytes.substr(8, n);
  const char* data = bytes.data() + 8 + n;
  Cursor c{header};
  c.expect('{');
  while (!c.peek('}')) {
    std::string key = c.str();
    c.expect(':');
    if (key == "__metadata__") {
      metadata_ = c.string_map();
    } else {
      c.expect('{');
      std::string dtype;
      Shape shape;
      std::vector<int64_t> offs;
      while (!c.peek('}')) {
        std::string field = c.str();
        c.expect(':');
        if (field == "dtype") dtype = c.str();
        if (field == "shape") shape = c.nums();
        if (field == "data_offsets") offs = c.nums();
        if (c.peek(',')) ++c.i;
      }
      c.expect('}');
      Tensor t = empty(shape, {.dtype = dtype_of_name(dtype)});
      SL_CHECK_IO(static_cast<size_t>(offs[1] - offs[0]) == t.nbytes(), "fixture: size of ", key);
      std::memcpy(t.data_ptr(), data + offs[0], t.nbytes());
      tensors_.insert(key, t);
    }
    if (c.peek(',')) ++c.i;
  }
}

Tensor Fixture::get(const std::string& key) const {
  const Tensor* t = tensors_.find(key);
  SL_CHECK_IO(t != nullptr, "fixture ", family_, ": no tensor '", key, "'");
  return *t;
}

std::string Fixture::meta(const std::string& key) const {
  auto it = metadata_.find(key);
  SL_CHECK_IO(it != metadata_.end(), "fixture ", family_, ": no metadata string '", key, "'");
  return it->second;
}

void Fixture::load_params(nn::Module& m, const std::string& test_case) const {
  std::string prefix = test_case + ".param.";
  nn::StateDict sd;
  for (const auto& [k, v] : tensors_) {
    if (k.rfind(prefix, 0) == 0) sd.insert(k.substr(prefix.size()), v);
  }
  nn::LoadResult r = m.load_state_dict(sd, /*strict=*/false);
  CHECK_MESSAGE(r.ok(), test_case, ": ", r.str());
}

Tensor Fixture::input(const std::string& test_case, int i) const {
  Tensor t = get(test_case + ".in." + std::to_string(i)).clone();
  if (t.is_floating_point()) t.requires_grad_();
  return t;
}

void Fixture::check_backward(const std::string& test_case, const TensorList& outs,
                             const TensorList& ins, const nn::Module* m, double rtol,
                             double atol) const {
  Tensor total;
  for (size_t j = 0; j < outs.size(); ++j) {
    std::string key = test_case + ".out." + std::to_string(j);
    if (!outs[j].defined()) continue;
    INFO(test_case, " output ", j);
    SL_CHECK_CLOSE(outs[j], get(key), rtol, atol);
    std::string gkey = test_case + ".gout." + std::to_string(j);
    if (has(gkey) && outs[j].requires_grad()) {
      Tensor term = (outs[j] * get(gkey)).sum();
      total = total.defined() ? total + term : term;
    }
  }
  if (!total.defined()) return;
  total.backward();
  for (size_t i = 0; i < ins.size(); ++i) {
    std::string key = test_case + ".gin." + std::to_string(i);
    if (!has(key)) continue;
    INFO(test_case, " grad of input ", i);
    SL_CHECK_CLOSE(ins[i].grad(), get(key), rtol, atol);
  }
  if (m == nullptr) return;
  for (const auto& [name, p] : m->named_parameters()) {
    std::string key = test_case + ".gparam." + name;
    INFO(test_case, " grad of ", name);
    REQUIRE_MESSAGE(has(key), "no PyTorch gradient for ", name);
    SL_CHECK_CLOSE(p.grad(), get(key), rtol, atol);
  }
}

bool module_gradcheck(nn::Module& m, const std::function<Tensor(const TensorList&)>& fn,
                      const TensorList& inputs, const GradcheckOptions& opts) {
  TensorList params = m.parameters();
  TensorList all = inputs;
  all.insert(all.end(), params.begin(), params.end());
  size_t n_in = inputs.size();
  return gradcheck(
      [&](const TensorList& in) {
        TensorList saved;
        for (size_t k = 0; k < params.size(); ++k) {
          const Tensor& given = in[n_in + k];
          if (given.is_same(params[k])) {
            saved.emplace_back();
            continue;
          }
          NoGradGuard ng;
          saved.push_back(params[k].detach().clone());
          params[k].detach().copy_(given);
        }
        Tensor out = fn(TensorList(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n_in)));
        NoGradGuard ng;
        for (size_t k = 0; k < params.size(); ++k) {
          if (saved[k].defined()) params[k].detach().copy_(saved[k]);
        }
        return out;
      },
      all, opts);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream is(text);
  for (std::string l; std::getline(is, l);) out.push_back(l);
  return out;
}

}  // namespace sl::testing

// Safetensors compatibility with Python's reference package (fixtures written by
// tools/gen_safetensors_fixtures.py, which documents the tensors recomputed here), round trips,
// partial reads and state-dict loading.
#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/testing.h"

using namespace sl;
using sl::testing::bits_equal;
using namespace sl::serialize;

namespace {

std::string fixture(const std::string& name) {
  return std::string(SL_SOURCE_DIR) + "/tests/fixtures/serialize/" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A fresh directory under the system temp dir, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("sl_test_st_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::string file(const std::string& n) const { return (path / n).string(); }
};

/// The tensors of all_dtypes.safetensors, recomputed from the generator's formulas.
StateDict all_dtypes_expected() {
  StateDict sd;
  sd.insert("f32", arange(6).to(DType::f32).view({2, 3}).mul(0.5).sub(1.0));
  sd.insert("f64", arange(4).to(DType::f64).div(3.0));
  sd.insert("f16", arange(5).to(DType::f16).mul(0.25));
  sd.insert("bf16", arange(5).to(DType::bf16).sub(2.0));
  sd.insert("i64", arange(3).mul(static_cast<int64_t>(1000000000000)));
  sd.insert("i32", arange(4).to(DType::i32).neg());
  sd.insert("bool", tensor({int64_t{1}, int64_t{0}, int64_t{1}}).to(DType::b8));
  sd.insert("scalar", scalar_tensor(3.5));
  sd.insert("empty", zeros({0, 3}));
  sd.insert(
      "\xc3\xbcn\xc3\xaf"
      "c\xc3\xb6"
      "d\xc3\xa9/weight",
      ones({2}));
  return sd;
}

/// Same dtype, shape and bytes.

void check_same(const StateDict& a, const StateDict& b) {
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : b) {
    CAPTURE(name);
    REQUIRE(a.contains(name));
    const Tensor& x = a.at(name);
    CHECK(x.dtype() == t.dtype());
    CHECK(x.sizes() == t.sizes());
    if (x.dtype() == t.dtype() && x.sizes() == t.sizes() && t.numel() > 0) {
      CHECK(bits_equal(x, t));
    }
  }
}

}  // namespace

TEST_CASE("safetensors: files written by Python's safetensors load with the right values") {
  Metadata md;
  StateDict sd = load_safetensors(fixture("all_dtypes.safetensors"), &md);
  check_same(sd, all_dtypes_expected());
  CHECK(md == Metadata{{"format", "pt"}});
  CHECK(sd.at("scalar").dim() == 0);

  StateDict esc = load_safetensors(fixture("escapes.safetensors"), &md);
  REQUIRE(md.size() == 1);
  CHECK(md[0].second ==
        "quote\" backslash\\ newline\n tab\t cr\r ctrl\x01\x1f del\x7f e\xcc\x81 \xc3\xa9 "
        "\xf0\x9f\x98\x80 /slash");
  CHECK(esc.contains("quote\"name"));
  CHECK(load_safetensors(fixture("empty.safetensors")).empty());
  StateDict nm = load_safetensors(fixture("no_metadata.safetensors"), &md);
  CHECK(md.empty());
  CHECK(nm.size() == 5);
}

TEST_CASE("safetensors: our writer produces the bytes Python's writer produced") {
  const char* files[] = {"all_dtypes.safetensors", "escapes.safetensors", "no_metadata.safetensors",
                         "empty.safetensors"};
  for (const char* f : files) {
    CAPTURE(f);
    std::string python_bytes = read_file(fixture(f));
    Metadata md;
    StateDict sd = deserialize_safetensors(python_bytes, &md);
    // re-insert in a different order: the writer's layout must not depend on it
    StateDict shuffled;
    auto keys = sd.keys();
    for (auto it = keys.rbegin(); it != keys.rend(); ++it) shuffled.insert(*it, sd.at(*it));
    CHECK(serialize_safetensors(shuffled, md) == python_bytes);
    TempDir dir;
    save_safetensors(dir.file("out.safetensors"), shuffled, md);
    CHECK(read_file(dir.file("out.safetensors")) == python_bytes);
  }
  // and from tensors built here, not read back from the fixture
  Metadata md{{"format", "pt"}};
  CHECK(serialize_safetensors(all_dtypes_expected(), md) ==
        read_file(fixture("all_dtypes.safetensors")));
}

TEST_CASE("safetensors: round trips of views, non-contiguous tensors and other devices") {
  Tensor base = arange(12).to(DType::f32).view({3, 4});
  StateDict sd;
  sd.insert("t", base.t());             // non-contiguous
  sd.insert("row", base.select(0, 1));  // offset view
  sd.insert("cpu1", ones({2}, {.device = Device(DeviceKind::cpu, 1)}));
  StateDict back = deserialize_safetensors(serialize_safetensors(sd));
  CHECK(bits_equal(back.at("t"), base.t().contiguous()));
  CHECK(back.at("row").to_vector<float>() == std::vector<float>{4, 5, 6, 7});
  CHECK(back.at("cpu1").device() == kCPU);
  TempDir dir;
  save_safetensors(dir.file("x.safetensors"), sd);
  StateDict on1 = load_safetensors(dir.file("x.safetensors"), nullptr, Device(DeviceKind::cpu, 1));
  CHECK(on1.at("t").device() == Device(DeviceKind::cpu, 1));
  CHECK(bits_equal(on1.at("t"), base.t().contiguous().to(Device(DeviceKind::cpu, 1))));
  // several metadata entries are written in insertion order
  Metadata md{{"z", "1"}, {"a", "2"}};
  std::string bytes = serialize_safetensors(sd, md);
  Metadata md2;
  deserialize_safetensors(bytes, &md2);
  CHECK(md2 == md);
  CHECK(bytes.size() % 8 == 0);  // header padded; data 4-byte multiples here
}

TEST_CASE("safetensors: names and metadata must be UTF-8, and non-ASCII ones round-trip") {
  StateDict sd;
  sd.insert("caf\xc3\xa9.\xf0\x9f\x98\x80", ones({2}));  // "cafe-acute.grinning-face"
  Metadata md{{"k\xc3\xa9", "v\xe2\x82\xac"}};
  Metadata md2;
  StateDict back = deserialize_safetensors(serialize_safetensors(sd, md), &md2);
  CHECK(back.contains("caf\xc3\xa9.\xf0\x9f\x98\x80"));
  CHECK(md2 == md);
  // a name that is not UTF-8 would come back as U+FFFD, so the writer refuses it, naming the byte
  StateDict bad;
  bad.insert("w\xff", ones({1}));
  SL_CHECK_THROWS(serialize_safetensors(bad), ValueError,
                  "safetensors: tensor name \"w\xef\xbf\xbd\" is not valid UTF-8 (byte 0xff at "
                  "offset 1)");
  SL_CHECK_THROWS(serialize_safetensors(sd, Metadata{{"k", "a\xe2\x82"}}), ValueError,
                  "metadata value \"a\xef\xbf\xbd\" is not valid UTF-8 (byte 0xe2 at offset 1)");
  SL_CHECK_THROWS(serialize_safetensors(sd, Metadata{{"\xed\xa0\x80", "v"}}), ValueError,
                  "metadata key");
  TempDir dir;  // nothing is written either
  CHECK_THROWS_AS(save_safetensors(dir.file("bad.safetensors"), bad), ValueError);
  CHECK(!std::filesystem::exists(dir.file("bad.safetensors")));
}

TEST_CASE("safetensors: SafetensorsFile reads single tensors and byte ranges lazily") {
  SafetensorsFile f(fixture("all_dtypes.safetensors"));
  CHECK(f.header().tensors.size() == 10);
  CHECK(bits_equal(f.read("f64"), arange(4).to(DType::f64).div(3.0)));
  const TensorEntry* e = f.header().find("f32");
  REQUIRE(e != nullptr);
  float two[2];
  f.read_bytes(*e, 8, 8, two);  // elements 2 and 3
  CHECK(two[0] == 0.0f);
  CHECK(two[1] == 0.5f);
  SL_CHECK_THROWS(f.read_bytes(*e, 20, 8, two), IndexError, "is outside tensor 'f32'");
  SL_CHECK_THROWS(f.read("nope"), IOError, "no tensor named 'nope'");
  uint32_t crc = 0;
  f.read_all(kCPU, &crc);
  std::string bytes = read_file(fixture("all_dtypes.safetensors"));
  CHECK(crc == crc32(0, bytes.data(), bytes.size()));
}

TEST_CASE("crc32 matches zlib's check value") {
  CHECK(crc32(0, "123456789", 9) == 0xCBF43926u);
  CHECK(crc32(crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u);
  CHECK(crc32(0, "", 0) == 0u);
  std::string big(100003, 'x');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  uint32_t whole = crc32(0, big.data(), big.size());
  uint32_t split = crc32(crc32(0, big.data(), 12345), big.data() + 12345, big.size() - 12345);
  CHECK(whole == split);
}

TEST_CASE("state dicts: ordered map and load_into reports missing/unexpected/mismatched") {
  StateDict sd{{"a", ones({2})}, {"b", zeros({3})}};
  CHECK(sd.keys() == std::vector<std::string>{"a", "b"});
  SL_CHECK_THROWS(sd.insert("a", ones({1})), ValueError, "state_dict: duplicate key 'a'");
  SL_CHECK_THROWS(sd.at("zz"), ValueError, "state_dict: no tensor named 'zz'");
  sd.set("a", full({2}, 7.0));
  CHECK(sd.keys() == std::vector<std::string>{"a", "b"});
  CHECK(sd.erase("a"));
  CHECK(!sd.erase("a"));
  CHECK(sd.keys() == std::vector<std::string>{"b"});

  Tensor w = zeros({2, 2}).requires_grad_(true), bias = zeros({2}, {.dtype = DType::f64});
  std::vector<std::pair<std::string, Tensor>> dst{
      {"w", w}, {"bias", bias}, {"missing", zeros({1})}};
  StateDict src{{"w", full({2, 2}, 3.0)}, {"bias", ones({3})}, {"extra", ones({1})}};
  SL_CHECK_THROWS(load_into(dst, src, true), ValueError,
                  "load_state_dict: missing keys: missing; unexpected keys: extra; shape "
                  "mismatches: bias: expected [2], got [3]");
  CHECK(w.sum().item<float>() == 0.f);  // strict failure copies nothing
  LoadReport r = load_into(dst, src, false);
  CHECK(r.missing == std::vector<std::string>{"missing"});
  CHECK(r.unexpected == std::vector<std::string>{"extra"});
  CHECK(r.mismatched.size() == 1);
  CHECK(w.sum().item<float>() == 12.f);  // the matching entry was copied into the leaf
  StateDict ok{
      {"w", ones({2, 2}, {.dtype = DType::f64})}, {"bias", ones({2})}, {"missing", ones({1})}};
  CHECK(load_into(dst, ok, true).ok());
  CHECK(bias.dtype() == DType::f64);  // converted to the destination's dtype
  CHECK(bias.sum().item<double>() == 2.0);
}

TEST_CASE("rng state converts to JSON and back exactly") {
  GeneratorState s{0xFFFFFFFFFFFFFFFFull, 1234567890123ull};
  CHECK(rng_state_from_json(rng_state_to_json(s)) == s);
  SL_CHECK_THROWS(rng_state_from_json(Json::parse(R"({"seed":"12x","offset":"0"})")), ValueError,
                  "rng state: 'seed' must be a decimal u64");
}

TEST_CASE("convert_state_dict bridges nn::StateDict (Module::state_dict) and checkpoint sections") {
  nn::StateDict module_sd{{"fc.weight", ones({2, 3})}, {"fc.bias", zeros({2})}};
  StateDict section = convert_state_dict<StateDict>(module_sd);
  CHECK(section.keys() == std::vector<std::string>{"fc.weight", "fc.bias"});
  CHECK(section.at("fc.weight").is_same(module_sd.at("fc.weight")));  // shared, not copied
  nn::StateDict back =
      convert_state_dict<nn::StateDict>(deserialize_safetensors(serialize_safetensors(section)));
  CHECK(back.size() == 2);
  CHECK(bits_equal(back.at("fc.bias"), zeros({2})));
}

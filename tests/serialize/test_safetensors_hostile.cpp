// Hostile safetensors input (issue 3, section 6): every malformed file is an IOError with a
// clear message, raised before any allocation sized by the file's claims.
#include <unistd.h>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "support/testing.h"

using namespace sl;
using namespace sl::serialize;

namespace {

/// A file image: 8-byte little-endian length, the header (padded with spaces to 8 bytes unless
/// pad is false), then the data bytes.
std::string image(const std::string& header, const std::string& data = "", bool pad = true) {
  std::string h = header;
  if (pad) h.append((8 - h.size() % 8) % 8, ' ');
  uint64_t n = h.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + h + data;
}

std::string with_length(uint64_t n, const std::string& rest) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + rest;
}

void expect_io_error(const std::string& bytes, const std::string& msg) {
  CAPTURE(msg);
  SL_CHECK_THROWS(deserialize_safetensors(bytes), IOError, msg.c_str());
}

}  // namespace

TEST_CASE("hostile safetensors: truncation and header length") {
  expect_io_error("", "<memory>: file of 0 bytes is too small to hold the 8-byte header length");
  expect_io_error("abc", "file of 3 bytes is too small");
  expect_io_error(with_length(1000, "{}"), "header length 1000 exceeds the 2 bytes that follow");
  expect_io_error(with_length(200'000'000, "{}"),
                  "header length 200000000 exceeds the 100 MB limit");
  expect_io_error(with_length(UINT64_MAX, "{}"), "exceeds the 100 MB limit");
  expect_io_error(with_length(1, "{"), "too small for a JSON object");
  // data section shorter than the header says (a truncated file)
  std::string ok =
      image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(16, '\0'));
  CHECK(deserialize_safetensors(ok).at("a").numel() == 4);
  expect_io_error(ok.substr(0, ok.size() - 1), "out of range (the data section has 15 bytes)");
  expect_io_error(ok.substr(0, 20), "header length");
}

TEST_CASE(
    "hostile safetensors: offsets that overlap, leave gaps, run out of range or leave bytes") {
  std::string d(16, '\0');
  expect_io_error(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        d.substr(0, 12)),
                  "tensor \"b\" at bytes [4, 12) overlaps tensor \"a\" ending at byte 8");
  expect_io_error(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
                        std::string(20, '\0')),
                  "gap in the data section: bytes [8, 12) before tensor \"b\"");
  expect_io_error(
      image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, '\0')),
      "gap in the data section: bytes [0, 4)");
  expect_io_error(image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", d + "xx"),
                  "the data section has 18 bytes but the tensors cover 16");
  expect_io_error(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", d),
                  "end before they begin");
  expect_io_error(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", d),
                  "data_offsets must be an array [begin, end]");
  expect_io_error(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", d),
                  "data_offsets must be non-negative integers");
  expect_io_error(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4.5]}})", d),
                  "data_offsets must be non-negative integers");
  // two tensors claiming the same bytes
  expect_io_error(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
                        std::string(4, '\0')),
                  "overlaps");
}

TEST_CASE("hostile safetensors: dtypes, shapes and their byte sizes") {
  std::string d(8, '\0');
  expect_io_error(image(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", d),
                  "tensor \"a\": shape [3] x F32 needs 12 bytes but data_offsets [0, 8] span 8");
  expect_io_error(image(R"({"a":{"dtype":"F99","shape":[2],"data_offsets":[0,8]}})", d),
                  "tensor \"a\": unknown dtype \"F99\"");
  expect_io_error(image(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", d),
                  "dtype \"U8\" is not supported by Shardlight");
  expect_io_error(image(R"({"a":{"dtype":3,"shape":[2],"data_offsets":[0,8]}})", d),
                  "dtype must be a string");
  expect_io_error(image(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", d),
                  "shape entries must be non-negative integers");
  expect_io_error(image(R"({"a":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", d),
                  "shape must be an array");
  expect_io_error(image(R"({"a":{"dtype":"F32","shape":[2]}})", d),
                  "missing dtype, shape or data_offsets");
  expect_io_error(image(R"({"a":[1,2]})", d), "expected an object with dtype");
  // numel x element size overflowing 64 bits
  expect_io_error(
      image(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})", d),
      "shape [4294967296, 4294967296, 16] overflows 64-bit sizes");
  expect_io_error(
      image(R"({"a":{"dtype":"F64","shape":[9223372036854775807,2],"data_offsets":[0,8]}})", d),
      "overflows 64-bit sizes");
  expect_io_error(
      image(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})", d),
      "overflows 64-bit sizes");  // numel fits int64, bytes do not fit u64
  expect_io_error(
      image(R"({"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,8]}})", d),
      "shape entries must be non-negative integers");
  std::string dims;
  for (int i = 0; i < 26; ++i) dims += (i ? ",1" : "1");
  expect_io_error(image(R"({"a":{"dtype":"F32","shape":[)" + dims + R"(],"data_offsets":[0,4]}})",
                        std::string(4, '\0')),
                  "shape has 26 dims (at most 25 supported)");
  // BOOL bytes must be 0 or 1
  expect_io_error(image(R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})",
                        std::string("\x01\x02", 2)),
                  "tensor 'a' (BOOL) holds byte 2 at element 1");
}

TEST_CASE("hostile safetensors: header JSON, keys, metadata and UTF-8") {
  std::string d(4, '\0');
  const char* t = R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  expect_io_error(image(std::string("{") + t + "," + t + "}", d), "duplicate key \"a\"");
  expect_io_error(image(std::string("[") + t + "]", d), "header does not start with '{'");
  expect_io_error(image(std::string("  {") + t + "}", d), "header does not start with '{'");
  expect_io_error(image(std::string("{") + t + "} junk", d), "unexpected trailing characters");
  expect_io_error(image(std::string("{") + t + ",\"\xff\xfe\":1}", d), "header is not valid UTF-8");
  expect_io_error(image(std::string("{") + t + ",\"__metadata__\":{\"k\":1}}", d),
                  "__metadata__ value for \"k\" must be a string, got integer");
  expect_io_error(image(std::string("{") + t + ",\"__metadata__\":[]}", d),
                  "__metadata__ must be an object of strings");
  expect_io_error(image(std::string("{") + t, d), "invalid JSON");
  // NUL padding instead of spaces is not JSON whitespace
  std::string nul_padded = image(std::string("{") + t + "}", d, false);
  CHECK(deserialize_safetensors(nul_padded).size() == 1);  // unpadded is fine
  std::string h = std::string("{") + t + "}";
  h.append(3, '\0');
  expect_io_error(image(h, d, false), "unexpected trailing characters");
  // deeply nested values are refused, not recursed into
  expect_io_error(image("{\"__metadata__\":" + std::string(100000, '[')), "nesting too deep");
}

TEST_CASE("hostile safetensors: a huge claimed tensor fails before any tensor allocation") {
  // 1 TiB claimed in a tiny file: rejected from the header alone
  std::string bytes = image(
      R"({"a":{"dtype":"F32","shape":[274877906944],"data_offsets":[0,1099511627776]}})", "x");
  MemoryStats before = memory_stats(kCPU);
  expect_io_error(bytes, "out of range (the data section has 1 bytes)");
  CHECK(memory_stats(kCPU).alloc_count == before.alloc_count);  // no tensor was allocated
  // the same through the file reader, which only ever reads the header
  auto path = std::filesystem::temp_directory_path() /
              ("sl_hostile_" + std::to_string(::getpid()) + ".safetensors");
  {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
  }
  std::string msg =
      path.string() + ": tensor \"a\": data_offsets [0, 1099511627776] are out of range";
  SL_CHECK_THROWS(SafetensorsFile(path.string()), IOError, msg.c_str());
  std::filesystem::remove(path);
  SL_CHECK_THROWS(SafetensorsFile("/nonexistent/x.safetensors"), IOError,
                  "/nonexistent/x.safetensors: open failed");
}

TEST_CASE("hostile safetensors: random corruptions of a valid file never crash") {
  // A deterministic mini-fuzz (the libFuzzer target in tests/fuzz goes further): flip bytes,
  // truncate, and splice; each result either parses or throws IOError.
  StateDict sd;
  sd.insert("weight", arange(12).to(DType::f32).view({3, 4}));
  sd.insert("mask", tensor({int64_t{1}, int64_t{0}, int64_t{1}}).to(DType::b8));
  sd.insert("ids", arange(5));
  const std::string valid = serialize_safetensors(sd, {{"k", "v"}});
  std::mt19937 rng(12345);
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string b = valid;
    int kind = iter % 3;
    if (kind == 0) {
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<char>(rng() & 0xFF);
    } else if (kind == 1) {
      b.resize(rng() % b.size());
    } else {
      size_t pos = 8 + rng() % (b.size() - 8);
      b.insert(pos, 1, "{}[],:\"0-e"[rng() % 10]);
    }
    try {
      deserialize_safetensors(b);
      ++parsed;
    } catch (const IOError&) {
      ++rejected;
    }
  }
  CHECK(rejected > 1000);
  CHECK(parsed + rejected == 3000);
}

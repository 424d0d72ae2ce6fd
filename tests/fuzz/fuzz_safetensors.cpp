// libFuzzer target for the safetensors reader and the JSON parser (issue 3, section 6).
//
// Every input must either parse or throw sl::Error (IOError for malformed files); anything else
// (a crash, a sanitizer report, std::bad_alloc from a size taken on trust, a hang) is a bug.
// What parses must survive a write/read round trip unchanged. Built by tools/fuzz_smoke.sh, or
// with `CXX=clang++ meson setup build-fuzz -Dfuzz=true`.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "nn/serialize/json.h"
#include "nn/serialize/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sl::serialize;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    Metadata md;
    StateDict sd = deserialize_safetensors(bytes, &md);
    Metadata md2;
    StateDict back = deserialize_safetensors(serialize_safetensors(sd, md), &md2);
    if (back.size() != sd.size() || md2 != md) __builtin_trap();
    for (const auto& [name, t] : sd) {
      const sl::Tensor* u = back.find(name);
      if (!u || u->sizes() != t.sizes() || u->dtype() != t.dtype() ||
          (t.nbytes() && std::memcmp(u->data_ptr(), t.data_ptr(), t.nbytes()) != 0)) {
        __builtin_trap();
      }
    }
  } catch (const sl::Error&) {
  }
  try {
    Json j = Json::parse(bytes, "fuzz", 64, 100000);
    // a parsed document prints and parses back to an equal value
    if (!(Json::parse(j.dump(), "fuzz-dump", 64, 100000) == j)) __builtin_trap();
  } catch (const sl::Error&) {
  }
  return 0;
}

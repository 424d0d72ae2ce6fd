// Safetensors header parsing/validation and the header writer (Note [Safetensors layout]).
#include "nn/serialize/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "core/error.h"
#include "core/utf8.h"

namespace sl::serialize {

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

namespace {

struct DTypeName {
  DType dtype;
  const char* name;
  int rank;  ///< position in the reference's Dtype enum (larger = written first)
};
constexpr DTypeName kDTypes[] = {
    {DType::b8, "BOOL", 0}, {DType::f16, "F16", 1}, {DType::bf16, "BF16", 2},
    {DType::i32, "I32", 3}, {DType::f32, "F32", 4}, {DType::f64, "F64", 5},
    {DType::i64, "I64", 6},
};
/// Dtypes the format knows but Shardlight cannot hold (named in the error message).
constexpr const char* kForeignDTypes[] = {"U8",      "I8",      "U16",     "I16",     "U32",
                                          "U64",     "F8_E5M2", "F8_E4M3", "F8_E8M0", "F4",
                                          "F6_E2M3", "F6_E3M2", "C64"};

int dtype_rank(DType t) {
  for (const auto& d : kDTypes) {
    if (d.dtype == t) return d.rank;
  }
  return -1;
}

/// Largest rank accepted in a header (kernels handle at most 25 dims).
constexpr size_t kMaxRank = 25;
/// JSON values allowed in one header (see Json::parse): about 200 MB of parsed nodes at most.
constexpr size_t kMaxHeaderValues = 2'000'000;

[[noreturn]] void bad(const char* what, const std::string& msg) {
  detail::throw_error<IOError>(what, ": ", msg);
}

std::string quoted(std::string_view name) {
  std::string out;
  json_escape_string(name.substr(0, 200), out);
  return out;
}

uint64_t non_negative_int(const Json& v, const char* what, const std::string& ctx) {
  if (!v.is_integer() || v.as_int() < 0) {
    bad(what, ctx + " must be non-negative integers (got " + std::string(v.type_name()) + ")");
  }
  return static_cast<uint64_t>(v.as_int());
}

TensorEntry parse_entry(const std::string& name, const Json& info, const char* what) {
  const std::string ctx = "tensor " + quoted(name);
  if (!info.is_object()) bad(what, ctx + ": expected an object with dtype, shape, data_offsets");
  TensorEntry e;
  e.name = name;
  const Json* dt = info.find("dtype");
  const Json* sh = info.find("shape");
  const Json* off = info.find("data_offsets");
  if (!dt || !sh || !off) bad(what, ctx + ": missing dtype, shape or data_offsets");
  if (!dt->is_string()) bad(what, ctx + ": dtype must be a string");
  if (!parse_safetensors_dtype(dt->as_string(), e.dtype)) {
    bool foreign = false;
    for (const char* f : kForeignDTypes) foreign |= dt->as_string() == f;
    bad(what, ctx + ": " +
                  (foreign ? "dtype " + quoted(dt->as_string()) + " is not supported by Shardlight"
                           : "unknown dtype " + quoted(dt->as_string())));
  }
  if (!sh->is_array()) bad(what, ctx + ": shape must be an array");
  if (sh->size() > kMaxRank) {
    bad(what, ctx + ": shape has " + std::to_string(sh->size()) + " dims (at most " +
                  std::to_string(kMaxRank) + " supported)");
  }
  // numel * element size, refusing anything that overflows 64 bits (or int64 for numel)
  uint64_t numel = 1;
  bool overflow = false;
  for (const Json& d : sh->items()) {
    uint64_t n = non_negative_int(d, what, ctx + ": shape entries");
    e.shape.push_back(static_cast<int64_t>(n));
    if (n != 0 && numel > std::numeric_limits<uint64_t>::max() / n) overflow = true;
    numel *= n;
  }
  const uint64_t esize = dtype_size(e.dtype);
  if (!overflow && numel != 0) {
    overflow = numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
               numel > std::numeric_limits<uint64_t>::max() / esize;
  }
  if (overflow) bad(what, ctx + ": shape " + shape_str(e.shape) + " overflows 64-bit sizes");
  if (!off->is_array() || off->size() != 2) {
    bad(what, ctx + ": data_offsets must be an array [begin, end]");
  }
  e.begin = non_negative_int((*off)[0], what, ctx + ": data_offsets");
  e.end = non_negative_int((*off)[1], what, ctx + ": data_offsets");
  if (e.end < e.begin) {
    bad(what, ctx + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                  "] end before they begin");
  }
  if (e.end - e.begin != numel * esize) {
    bad(what, ctx + ": shape " + shape_str(e.shape) + " x " + dt->as_string() + " needs " +
                  std::to_string(numel * esize) + " bytes but data_offsets [" +
                  std::to_string(e.begin) + ", " + std::to_string(e.end) + "] span " +
                  std::to_string(e.end - e.begin));
  }
  return e;
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
  for (const auto& d : kDTypes) {
    if (d.dtype == t) return d.name;
  }
  detail::throw_error<DTypeError>("safetensors: no name for dtype ", dtype_name(t));
}

bool parse_safetensors_dtype(std::string_view name, DType& out) {
  for (const auto& d : kDTypes) {
    if (name == d.name) {
      out = d.dtype;
      return true;
    }
  }
  return false;
}

const TensorEntry* SafetensorsHeader::find(std::string_view name) const {
  for (const auto& e : tensors) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

uint64_t parse_header_length(const uint8_t prefix[8], uint64_t total_size, const char* what) {
  if (total_size < 8) {
    bad(what, "file of " + std::to_string(total_size) +
                  " bytes is too small to hold the 8-byte header length");
  }
  uint64_t n = 0;
  std::memcpy(&n, prefix, 8);  // little-endian host
  if (n > kMaxSafetensorsHeader) {
    bad(what, "header length " + std::to_string(n) + " exceeds the 100 MB limit");
  }
  if (n > total_size - 8) {
    bad(what, "header length " + std::to_string(n) + " exceeds the " +
                  std::to_string(total_size - 8) + " bytes that follow it (truncated file?)");
  }
  if (n < 2) bad(what, "header length " + std::to_string(n) + " is too small for a JSON object");
  return n;
}

SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t data_size,
                                           const char* what) {
  if (header_json.empty() || header_json[0] != '{') {
    bad(what, "header does not start with '{'");
  }
  if (!is_valid_utf8(header_json)) bad(what, "header is not valid UTF-8");
  Json root = Json::parse(header_json, what, 8, kMaxHeaderValues);
  SafetensorsHeader h;
  h.header_size = header_json.size();
  h.data_size = data_size;
  for (const auto& [name, info] : root.members()) {
    if (name == "__metadata__") {
      if (!info.is_object()) bad(what, "__metadata__ must be an object of strings");
      for (const auto& [k, v] : info.members()) {
        if (!v.is_string()) {
          bad(what,
              "__metadata__ value for " + quoted(k) + " must be a string, got " + v.type_name());
        }
        h.metadata.emplace_back(k, v.as_string());
      }
      continue;
    }
    h.tensors.push_back(parse_entry(name, info, what));
  }
  // The byte ranges must tile [0, data_size) exactly.
  std::vector<const TensorEntry*> order;
  order.reserve(h.tensors.size());
  for (const auto& e : h.tensors) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t expected = 0;
  const TensorEntry* prev = nullptr;
  for (const TensorEntry* e : order) {
    if (e->end > data_size) {
      bad(what, "tensor " + quoted(e->name) + ": data_offsets [" + std::to_string(e->begin) + ", " +
                    std::to_string(e->end) + "] are out of range (the data section has " +
                    std::to_string(data_size) + " bytes)");
    }
    if (e->begin < expected) {
      bad(what, "tensor " + quoted(e->name) + " at bytes [" + std::to_string(e->begin) + ", " +
                    std::to_string(e->end) + ") overlaps tensor " + quoted(prev->name) +
                    " ending at byte " + std::to_string(expected));
    }
    if (e->begin > expected) {
      bad(what, "gap in the data section: bytes [" + std::to_string(expected) + ", " +
                    std::to_string(e->begin) + ") before tensor " + quoted(e->name) +
                    " belong to no tensor");
    }
    expected = e->end;
    prev = e;
  }
  if (expected != data_size) {
    bad(what, "the data section has " + std::to_string(data_size) +
                  " bytes but the tensors cover " + std::to_string(expected) +
                  " (trailing bytes belong to no tensor)");
  }
  return h;
}

SafetensorsHeader parse_safetensors(std::string_view bytes, const char* what) {
  uint64_t n =
      parse_header_length(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), what);
  return parse_safetensors_header(bytes.substr(8, n), bytes.size() - 8 - n, what);
}

namespace {

/// The header is JSON, which is UTF-8: a name or metadata string that is not would be written
/// as U+FFFD (json_escape_string) and not read back as it was, so it is refused. The message
/// shows the string as JSON would (U+FFFD in place of the bad bytes) and names the first bad byte.
void check_utf8(const std::string& s, const char* what) {
  const size_t at = utf8_invalid_offset(s);
  if (at == s.size()) return;
  std::string shown;
  json_escape_string(s.substr(0, 200), shown);
  static const char* hex = "0123456789abcdef";
  const auto b = static_cast<unsigned char>(s[at]);
  detail::throw_error<ValueError>("safetensors: ", what, " ", shown, " is not valid UTF-8 (byte 0x",
                                  hex[b >> 4], hex[b & 15], " at offset ", at,
                                  "); the header is JSON, which must be UTF-8");
}

}  // namespace

std::string make_safetensors_header(const std::vector<std::pair<std::string, const Tensor*>>& ts,
                                    const Metadata& metadata, std::vector<TensorEntry>& layout) {
  std::vector<size_t> order(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    order[i] = i;
    SL_CHECK(ts[i].second && ts[i].second->defined(), "safetensors: tensor '", ts[i].first,
             "' is undefined");
    SL_CHECK(ts[i].first != "__metadata__", "safetensors: '__metadata__' is reserved");
    check_utf8(ts[i].first, "tensor name");
  }
  for (const auto& [key, value] : metadata) {
    check_utf8(key, "metadata key");
    check_utf8(value, "metadata value");
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    int ra = dtype_rank(ts[a].second->dtype()), rb = dtype_rank(ts[b].second->dtype());
    if (ra != rb) return ra > rb;
    return ts[a].first < ts[b].first;
  });
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata.size(); ++i) {
      if (i) json += ',';
      json_escape_string(metadata[i].first, json);
      json += ':';
      json_escape_string(metadata[i].second, json);
    }
    json += '}';
  }
  layout.clear();
  std::unordered_set<std::string_view> seen;
  uint64_t offset = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const auto& [name, t] = ts[order[k]];
    SL_CHECK(seen.insert(name).second, "safetensors: duplicate tensor name '", name, "'");
    TensorEntry e{name, t->dtype(), t->sizes(), offset, offset + t->nbytes()};
    offset = e.end;
    if (json.size() > 1) json += ',';
    json_escape_string(name, json);
    json += ":{\"dtype\":\"";
    json += safetensors_dtype_name(e.dtype);
    json += "\",\"shape\":[";
    for (size_t d = 0; d < e.shape.size(); ++d) {
      if (d) json += ',';
      json += std::to_string(e.shape[d]);
    }
    json += "],\"data_offsets\":[" + std::to_string(e.begin) + "," + std::to_string(e.end) + "]}";
    layout.push_back(std::move(e));
  }
  json += '}';
  json.append((8 - json.size() % 8) % 8, ' ');
  SL_CHECK(json.size() <= kMaxSafetensorsHeader, "safetensors: header of ", json.size(),
           " bytes exceeds the 100 MB limit");
  std::string out(8, '\0');
  uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  out += json;
  return out;
}

}  // namespace sl::serialize

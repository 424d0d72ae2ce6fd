// Safetensors: the tensor file format of Hugging Face's `safetensors`, byte-compatible with the
// Python package in both directions.
//
// Note [Safetensors layout]
//   [8 bytes: N, little-endian u64][N bytes: JSON header][data section]
// The header is a JSON object mapping each tensor name to
//   {"dtype":"F32","shape":[2,3],"data_offsets":[begin,end]}
// (offsets in bytes, relative to the data section) plus an optional "__metadata__" object of
// string -> string. The reference writer emits "__metadata__" first, then tensors sorted by
// dtype alignment (descending: I64, F64, F32, I32, BF16, F16, BOOL) and then by name, packed
// back to back, and pads the header with spaces so the data section starts at a multiple of 8.
// We write exactly that, so our files are byte-identical to Python's for the same tensors and
// (at most one) metadata entry; with several metadata entries Python's order is a hash order,
// and ours is the insertion order.
//
// Reading validates everything before allocating tensor memory: N <= 100 MB and 8 + N <= file
// size; valid UTF-8 JSON; no duplicate keys; known dtypes; shapes of non-negative integers whose
// byte size does not overflow 64 bits and matches the offsets; offsets that tile the data
// section exactly (no gap, no overlap, nothing out of range, nothing left over). Every failure is
// an IOError naming the file (or "<memory>") and the offending tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/serialize/file_io.h"
#include "nn/serialize/state_dict.h"

namespace sl::serialize {

/// The header-size limit of the reference implementation.
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

/// "F32", "F64", "F16", "BF16", "I64", "I32", "BOOL".
const char* safetensors_dtype_name(DType t);
/// Inverse of safetensors_dtype_name; false for names we do not support (U8, I8, F8_*, ...).
bool parse_safetensors_dtype(std::string_view name, DType& out);

/// One tensor of a parsed header.
struct TensorEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0;  ///< byte offsets relative to the data section
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
};

/// A validated header.
struct SafetensorsHeader {
  std::vector<TensorEntry> tensors;  ///< in the header's order
  Metadata metadata;                 ///< "__metadata__" entries in the header's order
  uint64_t header_size = 0;          ///< N: JSON bytes including padding
  uint64_t data_size = 0;            ///< bytes of the data section
  uint64_t data_offset() const { return 8 + header_size; }
  /// Null when absent.
  const TensorEntry* find(std::string_view name) const;
};

/// Validates the 8-byte length prefix against the total size; returns N. `what` names the
/// source in errors. Throws IOError (file shorter than 8 bytes, N > 100 MB, 8 + N > size).
uint64_t parse_header_length(const uint8_t prefix[8], uint64_t total_size, const char* what);
/// Parses and validates header JSON (its N bytes) for a data section of data_size bytes.
SafetensorsHeader parse_safetensors_header(std::string_view header_json, uint64_t data_size,
                                           const char* what);
/// Parses the header of a whole in-memory file.
SafetensorsHeader parse_safetensors(std::string_view bytes, const char* what = "<memory>");

/// The header (length prefix + padded JSON) for tensors laid out as the reference writer lays
/// them out. Returns the entries (with offsets) in data order through `layout`.
std::string make_safetensors_header(const std::vector<std::pair<std::string, const Tensor*>>& ts,
                                    const Metadata& metadata, std::vector<TensorEntry>& layout);

/// Streams a safetensors file into `out`: the header, then each tensor's bytes. `after_header`,
/// when set, runs between the two (checkpoint tests inject faults there).
void write_safetensors(FileWriter& out, const StateDict& tensors, const Metadata& metadata = {},
                       const std::function<void()>& after_header = {});

/// A whole file in memory (for small payloads, tests and the fuzzer).
std::string serialize_safetensors(const StateDict& tensors, const Metadata& metadata = {});
/// Tensors (CPU, in header order) and metadata from an in-memory file. Throws IOError.
StateDict deserialize_safetensors(std::string_view bytes, Metadata* metadata = nullptr,
                                  const char* what = "<memory>");

/// Writes tensors to `path` atomically (a temporary file in the same folder, fsync, rename).
/// Tensors on other devices are copied to the CPU; any layout is accepted. Throws IOError.
/// Returns the CRC-32 of the bytes written.
uint32_t save_safetensors(const std::string& path, const StateDict& tensors,
                          const Metadata& metadata = {});
/// Reads a whole file. Tensors land on `device`. Throws IOError.
StateDict load_safetensors(const std::string& path, Metadata* metadata = nullptr,
                           Device device = kCPU);

/// An open safetensors file whose header has been validated; tensors are read on demand (for
/// example one shard of a large tensor), never more than the file holds.
class SafetensorsFile {
 public:
  /// Opens and validates. Throws IOError. With `dir_fd` >= 0, `path` is relative to that
  /// directory and symlinks are refused (checkpoint loading).
  explicit SafetensorsFile(const std::string& path, int dir_fd = -1);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const SafetensorsHeader& header() const { return header_; }
  uint64_t file_size() const { return file_size_; }
  const std::string& path() const { return path_; }
  /// The named tensor on `device`. Throws IOError when absent or unreadable.
  Tensor read(std::string_view name, Device device = kCPU) const;
  /// Bytes [offset, offset + n) of a tensor's data into dst. Throws IndexError out of range.
  void read_bytes(const TensorEntry& entry, uint64_t offset, uint64_t n, void* dst) const;
  /// Every tensor in data order, plus the CRC-32 of the whole file (read front to back once).
  StateDict read_all(Device device = kCPU, uint32_t* crc32 = nullptr) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  std::string header_bytes_;  ///< prefix + JSON, for the CRC
  SafetensorsHeader header_;
};

}  // namespace sl::serialize

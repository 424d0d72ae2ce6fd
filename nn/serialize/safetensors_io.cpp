// Safetensors files and buffers <-> tensors (Note [Safetensors layout]).
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/creation.h"
#include "core/error.h"
#include "core/ops/copy.h"
#include "nn/serialize/crc32.h"
#include "nn/serialize/safetensors.h"

namespace sl::serialize {
namespace {

/// The tensors of a state dict as contiguous CPU tensors (copies only where needed).
std::vector<std::pair<std::string, Tensor>> host_tensors(const StateDict& tensors) {
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    out.emplace_back(name, ops::contiguous(ops::to_device(t, kCPU)));
  }
  return out;
}

std::vector<std::pair<std::string, const Tensor*>> pointers(
    const std::vector<std::pair<std::string, Tensor>>& ts) {
  std::vector<std::pair<std::string, const Tensor*>> out;
  out.reserve(ts.size());
  for (const auto& [name, t] : ts) out.emplace_back(name, &t);
  return out;
}

/// Refuses bool bytes other than 0 and 1 (loading them into C++ bools would be undefined).
void check_bool_bytes(const Tensor& t, const TensorEntry& e, const char* what) {
  if (t.dtype() != DType::b8) return;
  const auto* p = static_cast<const uint8_t*>(t.data_ptr());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] > 1) {
      detail::throw_error<IOError>(what, ": tensor '", e.name, "' (BOOL) holds byte ",
                                   static_cast<int>(p[i]), " at element ", i, " (expected 0 or 1)");
    }
  }
}

Tensor empty_for(const TensorEntry& e) {
  return empty(e.shape, {.dtype = e.dtype});
}

}  // namespace

void write_safetensors(FileWriter& out, const StateDict& tensors, const Metadata& metadata,
                       const std::function<void()>& after_header) {
  auto host = host_tensors(tensors);
  std::vector<TensorEntry> layout;
  std::string header = make_safetensors_header(pointers(host), metadata, layout);
  out.write(header.data(), header.size());
  if (after_header) after_header();
  for (const auto& e : layout) {
    const Tensor* t = nullptr;
    for (const auto& [name, ht] : host) {
      if (name == e.name) t = &ht;
    }
    if (t->numel() > 0) out.write(t->data_ptr(), t->nbytes());
  }
}

std::string serialize_safetensors(const StateDict& tensors, const Metadata& metadata) {
  auto host = host_tensors(tensors);
  std::vector<TensorEntry> layout;
  std::string out = make_safetensors_header(pointers(host), metadata, layout);
  for (const auto& e : layout) {
    for (const auto& [name, t] : host) {
      if (name == e.name && t.numel() > 0) {
        out.append(static_cast<const char*>(t.data_ptr()), t.nbytes());
      }
    }
  }
  return out;
}

StateDict deserialize_safetensors(std::string_view bytes, Metadata* metadata, const char* what) {
  SafetensorsHeader h = parse_safetensors(bytes, what);
  StateDict out;
  for (const auto& e : h.tensors) {
    Tensor t = empty_for(e);
    if (e.nbytes() > 0) {
      std::memcpy(t.data_ptr(), bytes.data() + h.data_offset() + e.begin, e.nbytes());
    }
    check_bool_bytes(t, e, what);
    out.insert(e.name, std::move(t));
  }
  if (metadata) *metadata = std::move(h.metadata);
  return out;
}

uint32_t save_safetensors(const std::string& path, const StateDict& tensors,
                          const Metadata& metadata) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path tmp = target;
  tmp += ".tmp-" + std::to_string(::getpid());
  uint32_t crc = 0;
  try {
    FileWriter w(tmp.string());
    write_safetensors(w, tensors, metadata);
    w.sync();
    w.close();
    crc = w.crc32();
    std::error_code ec;
    fs::rename(tmp, target, ec);
    if (ec) {
      detail::throw_error<IOError>(path, ": rename from ", tmp.string(), " failed: ", ec.message());
    }
    fs::path parent = target.parent_path();
    fsync_dir(parent.empty() ? std::string(".") : parent.string());
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  return crc;
}

StateDict load_safetensors(const std::string& path, Metadata* metadata, Device device) {
  SafetensorsFile f(path);
  StateDict out = f.read_all(device);
  if (metadata) *metadata = f.header().metadata;
  return out;
}

// ---- SafetensorsFile -------------------------------------------------------------------------

SafetensorsFile::SafetensorsFile(const std::string& path, int dir_fd) : path_(path) {
  FileReader r(path, dir_fd);
  file_size_ = r.size();
  uint8_t prefix[8] = {};
  if (file_size_ >= 8) r.read_at(0, prefix, 8);
  uint64_t n = parse_header_length(prefix, file_size_, path_.c_str());
  header_bytes_.resize(8 + n);
  std::memcpy(header_bytes_.data(), prefix, 8);
  r.read_at(8, header_bytes_.data() + 8, n);
  header_ = parse_safetensors_header(std::string_view(header_bytes_).substr(8), file_size_ - 8 - n,
                                     path_.c_str());
  fd_ = r.release();
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsFile::read_bytes(const TensorEntry& entry, uint64_t offset, uint64_t n,
                                 void* dst) const {
  SL_CHECK_INDEX(offset <= entry.nbytes() && n <= entry.nbytes() - offset, path_, ": byte range [",
                 offset, ", ", offset + n, ") is outside tensor '", entry.name, "' of ",
                 entry.nbytes(), " bytes");
  if (n == 0) return;
  // the FileReader only borrows fd_ here: reads go through pread on our descriptor
  uint64_t pos = header_.data_offset() + entry.begin + offset;
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    size_t chunk = n < (uint64_t{1} << 30) ? static_cast<size_t>(n) : (size_t{1} << 30);
    ssize_t got = ::pread(fd_, p, chunk, static_cast<off_t>(pos));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw_errno(path_, "read", errno);
    }
    SL_CHECK_IO(got > 0, path_, ": unexpected end of file at byte ", pos,
                " (the file shrank after it was opened?)");
    p += got;
    n -= static_cast<uint64_t>(got);
    pos += static_cast<uint64_t>(got);
  }
}

Tensor SafetensorsFile::read(std::string_view name, Device device) const {
  const TensorEntry* e = header_.find(name);
  SL_CHECK_IO(e != nullptr, path_, ": no tensor named '", name, "'");
  Tensor t = empty_for(*e);
  read_bytes(*e, 0, e->nbytes(), t.numel() > 0 ? t.data_ptr() : nullptr);
  check_bool_bytes(t, *e, path_.c_str());
  return device == kCPU ? t : ops::to_device(t, device);
}

StateDict SafetensorsFile::read_all(Device device, uint32_t* crc) const {
  uint32_t c = serialize::crc32(0, header_bytes_.data(), header_bytes_.size());
  std::vector<const TensorEntry*> order;
  for (const auto& e : header_.tensors) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(),
                   [](const TensorEntry* a, const TensorEntry* b) { return a->begin < b->begin; });
  std::vector<Tensor> loaded(header_.tensors.size());
  for (const TensorEntry* e : order) {
    Tensor t = empty_for(*e);
    if (e->nbytes() > 0) {
      read_bytes(*e, 0, e->nbytes(), t.data_ptr());
      c = serialize::crc32(c, t.data_ptr(), e->nbytes());
    }
    check_bool_bytes(t, *e, path_.c_str());
    loaded[static_cast<size_t>(e - header_.tensors.data())] =
        device == kCPU ? t : ops::to_device(t, device);
  }
  if (crc) *crc = c;
  StateDict out;
  for (size_t i = 0; i < loaded.size(); ++i) out.insert(header_.tensors[i].name, loaded[i]);
  return out;
}

}  // namespace sl::serialize

// POSIX file helpers for writing and reading checkpoints: exact writes with a running CRC,
// fsync of files and directories, reads that refuse symlinks and non-regular files. Every
// failure is an IOError naming the path, the operation and strerror(errno).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sl::serialize {

/// A file opened for writing (created or truncated), closed by the destructor.
class FileWriter {
 public:
  /// path is relative to dir_fd when dir_fd >= 0 (openat), else to the working directory.
  explicit FileWriter(const std::string& path, int dir_fd = -1);
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  /// Writes all n bytes (retrying short writes and EINTR) and updates crc32() and size().
  void write(const void* data, size_t n);
  /// fsync(2): the bytes are on stable storage when it returns.
  void sync();
  /// Closes, reporting a failed close (e.g. deferred write errors).
  void close();
  uint64_t size() const { return size_; }
  uint32_t crc32() const { return crc_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint32_t crc_ = 0;
};

/// A regular file opened for reading. With dir_fd >= 0 the path is relative to it, must be a
/// plain name (no '/'), and symlinks are refused, so a checkpoint cannot point outside itself.
class FileReader {
 public:
  explicit FileReader(const std::string& path, int dir_fd = -1);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  /// Reads exactly n bytes at offset into dst; a short file throws IOError.
  void read_at(uint64_t offset, void* dst, uint64_t n) const;
  /// Gives up ownership of the descriptor.
  int release();

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// fsync of a directory, so renames and new entries in it are durable.
void fsync_dir(const std::string& path);

/// Writes `bytes` to `path` whole or not at all: a temporary file beside it (removed on any
/// failure), fsync, rename over `path`, fsync of the folder. Throws IOError naming the path.
void write_file_atomically(const std::string& path, std::string_view bytes);
/// "path: op failed: strerror(errno)".
[[noreturn]] void throw_errno(const std::string& path, const char* op, int err);

}  // namespace sl::serialize

#include "nn/serialize/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "nn/serialize/crc32.h"

namespace sl::serialize {

void throw_errno(const std::string& path, const char* op, int err) {
  detail::throw_error<IOError>(path, ": ", op, " failed: ", std::strerror(err));
}

// ---- FileWriter ------------------------------------------------------------------------------

FileWriter::FileWriter(const std::string& path, int dir_fd) : path_(path) {
  int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  fd_ = dir_fd >= 0 ? ::openat(dir_fd, path.c_str(), flags | O_NOFOLLOW, 0644)
                    : ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) throw_errno(path_, "open for writing", errno);
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void FileWriter::write(const void* data, size_t n) {
  SL_CHECK_IO(fd_ >= 0, path_, ": write after close");
  crc_ = serialize::crc32(crc_, data, n);
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    size_t chunk = n < (size_t{1} << 30) ? n : (size_t{1} << 30);
    ssize_t w = ::write(fd_, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_errno(path_, "write", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
    size_ += static_cast<uint64_t>(w);
  }
}

void FileWriter::sync() {
  SL_CHECK_IO(fd_ >= 0, path_, ": fsync after close");
  if (::fsync(fd_) != 0) throw_errno(path_, "fsync", errno);
}

void FileWriter::close() {
  if (fd_ < 0) return;
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw_errno(path_, "close", errno);
}

// ---- FileReader ------------------------------------------------------------------------------

FileReader::FileReader(const std::string& path, int dir_fd) : path_(path) {
  if (dir_fd >= 0) {
    SL_CHECK_IO(!path.empty() && path.find('/') == std::string::npos && path != "." && path != "..",
                path, ": refusing a file name that is not a plain name inside the directory");
    fd_ = ::openat(dir_fd, path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd_ < 0 && errno == ELOOP) {
      detail::throw_error<IOError>(path,
                                   ": is a symbolic link; refusing to follow it out of the "
                                   "checkpoint directory");
    }
  } else {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd_ < 0) throw_errno(path_, "open", errno);
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    int e = errno;
    ::close(fd_);
    fd_ = -1;
    throw_errno(path_, "stat", e);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    detail::throw_error<IOError>(path_, ": not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

int FileReader::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void FileReader::read_at(uint64_t offset, void* dst, uint64_t n) const {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    size_t chunk = n < (uint64_t{1} << 30) ? static_cast<size_t>(n) : (size_t{1} << 30);
    ssize_t r = ::pread(fd_, p, chunk, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno(path_, "read", errno);
    }
    if (r == 0) {
      detail::throw_error<IOError>(path_, ": unexpected end of file at byte ", offset,
                                   " (the file was truncated while reading?)");
    }
    p += r;
    n -= static_cast<uint64_t>(r);
    offset += static_cast<uint64_t>(r);
  }
}

void fsync_dir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno(path, "open directory", errno);
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  // some filesystems do not support fsync on directories; that is not a failure of ours
  if (rc != 0 && e != EINVAL && e != ENOTSUP) throw_errno(path, "fsync directory", e);
}

void write_file_atomically(const std::string& path, std::string_view bytes) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  fs::path tmp = target;
  tmp += ".tmp-" + std::to_string(::getpid());
  try {
    FileWriter w(tmp.string());
    w.write(bytes.data(), bytes.size());
    w.sync();
    w.close();
    if (std::rename(tmp.c_str(), target.c_str()) != 0) {
      throw_errno(path, ("rename from " + tmp.string()).c_str(), errno);
    }
    const fs::path parent = target.parent_path();
    fsync_dir(parent.empty() ? std::string(".") : parent.string());
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
}

}  // namespace sl::serialize

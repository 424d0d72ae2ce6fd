// Typed errors and the SL_CHECK family of macros.
//
// Every user-facing failure in Shardlight is one of the exception types below, all derived from
// sl::Error (itself a std::runtime_error). The message always starts with the name of the op
// that failed, then says what was received and what was expected, e.g.
//   "add: shapes [2, 3] and [4] do not broadcast (dim -1: 3 vs 4)".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace sl {

/// Base of every exception thrown by Shardlight.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

/// Shapes that do not fit together (broadcasting, matmul inner dims, view needing a copy, ...).
class ShapeError : public Error {
  using Error::Error;
};
/// A dtype that the op does not accept, or dtypes that cannot be combined.
class DTypeError : public Error {
  using Error::Error;
};
/// Tensors on different devices, or a device that is missing / not compiled in.
class DeviceError : public Error {
  using Error::Error;
};
/// A dim or element index out of range.
class IndexError : public Error {
  using Error::Error;
};
/// Any other bad argument value (negative size, bad option string, non-finite where finite needed).
class ValueError : public Error {
  using Error::Error;
};
/// Files: missing, truncated, malformed, or a failed write.
class IOError : public Error {
  using Error::Error;
};
/// Distributed runtime failures: collective mismatch, timeout, lost peer.
class DistError : public Error {
  using Error::Error;
};
/// An allocation failed (host or device); the message gives requested and available sizes.
class OutOfMemoryError : public Error {
  using Error::Error;
};
/// Autograd misuse: backward twice without retain_graph, in-place change of a saved tensor, ...
class AutogradError : public Error {
  using Error::Error;
};

namespace detail {
inline void append_all(std::ostringstream&) {}
template <class T, class... Rest>
void append_all(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append_all(os, rest...);
}
/// Concatenates all arguments with operator<< into one string.
template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  append_all(os, args...);
  return os.str();
}
template <class E, class... Args>
[[noreturn]] void throw_error(const Args&... args) {
  throw E(str_cat(args...));
}
}  // namespace detail

}  // namespace sl

/// SL_CHECK_T(ErrorType, cond, parts...): throws ErrorType with the concatenated parts when
/// cond is false. The parts are only evaluated on failure.
#define SL_CHECK_T(ErrType, cond, ...)                     \
  do {                                                     \
    if (!(cond)) [[unlikely]] {                            \
      ::sl::detail::throw_error<ErrType>(__VA_ARGS__);     \
    }                                                      \
  } while (0)

#define SL_CHECK(cond, ...) SL_CHECK_T(::sl::ValueError, cond, __VA_ARGS__)
#define SL_CHECK_SHAPE(cond, ...) SL_CHECK_T(::sl::ShapeError, cond, __VA_ARGS__)
#define SL_CHECK_DTYPE(cond, ...) SL_CHECK_T(::sl::DTypeError, cond, __VA_ARGS__)
#define SL_CHECK_DEVICE(cond, ...) SL_CHECK_T(::sl::DeviceError, cond, __VA_ARGS__)
#define SL_CHECK_INDEX(cond, ...) SL_CHECK_T(::sl::IndexError, cond, __VA_ARGS__)
#define SL_CHECK_IO(cond, ...) SL_CHECK_T(::sl::IOError, cond, __VA_ARGS__)
#define SL_CHECK_DIST(cond, ...) SL_CHECK_T(::sl::DistError, cond, __VA_ARGS__)
#define SL_CHECK_AUTOGRAD(cond, ...) SL_CHECK_T(::sl::AutogradError, cond, __VA_ARGS__)

/// Internal invariant: compiled out in release builds (NDEBUG).
#ifdef NDEBUG
#define SL_ASSERT(cond) ((void)0)
#else
#include <cassert>
#define SL_ASSERT(cond) assert(cond)
#endif

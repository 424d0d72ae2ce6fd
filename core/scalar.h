// Scalar: a number passed to an op (`t + 2`, `fill_(0.5)`, `clamp(x, 0, 20)`), remembering
// whether it was written as a floating, integral or bool value so type promotion can follow
// PyTorch's rules for wrapped numbers.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <type_traits>

#include "core/dtype.h"

namespace sl {

class Scalar {
 public:
  enum class Kind : uint8_t { floating, integral, boolean };

  Scalar() : kind_(Kind::integral), i_(0) {}
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::floating), d_(static_cast<double>(v)) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::integral), i_(static_cast<int64_t>(v)) {}  // NOLINT
  Scalar(bool v) : kind_(Kind::boolean), i_(v ? 1 : 0) {}              // NOLINT
  Scalar(Half v) : Scalar(static_cast<double>(static_cast<float>(v))) {}      // NOLINT
  Scalar(BFloat16 v) : Scalar(static_cast<double>(static_cast<float>(v))) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::floating; }
  bool is_integral() const { return kind_ == Kind::integral; }
  bool is_bool() const { return kind_ == Kind::boolean; }

  double to_double() const { return kind_ == Kind::floating ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::floating ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::floating ? d_ != 0.0 : i_ != 0; }

  /// The value converted to C++ type T (float, double, Half, int64_t, ...).
  template <class T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) {
      return to_bool();
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(to_int());
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      return T(static_cast<float>(to_double()));
    } else {
      return static_cast<T>(to_double());
    }
  }

  /// The dtype a 0-d tensor made from this scalar would have (f64 stays f64 only on request).
  DType natural_dtype() const {
    return kind_ == Kind::floating ? kDefaultFloat : kind_ == Kind::integral ? DType::i64 : DType::b8;
  }

 private:
  Kind kind_;
  union {
    double d_;
    int64_t i_;
  };
};

std::ostream& operator<<(std::ostream& os, const Scalar& s);

}  // namespace sl

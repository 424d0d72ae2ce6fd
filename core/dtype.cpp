#include "core/dtype.h"

#include <ostream>

namespace sl {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::b8:
      return 1;
  }
  detail::throw_error<DTypeError>("dtype_size: invalid dtype code ", static_cast<int>(t));
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::f16:
      return "float16";
    case DType::bf16:
      return "bfloat16";
    case DType::i64:
      return "int64";
    case DType::i32:
      return "int32";
    case DType::b8:
      return "bool";
  }
  return "invalid";
}

DType parse_dtype(const std::string& s) {
  if (s == "float32" || s == "f32" || s == "float") return DType::f32;
  if (s == "float64" || s == "f64" || s == "double") return DType::f64;
  if (s == "float16" || s == "f16" || s == "half") return DType::f16;
  if (s == "bfloat16" || s == "bf16") return DType::bf16;
  if (s == "int64" || s == "i64" || s == "long") return DType::i64;
  if (s == "int32" || s == "i32" || s == "int") return DType::i32;
  if (s == "bool" || s == "b8") return DType::b8;
  detail::throw_error<ValueError>("parse_dtype: unknown dtype '", s,
                                  "' (expected float32, float64, float16, bfloat16, int64, int32 "
                                  "or bool)");
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

namespace {
int category(DType t) { return is_bool(t) ? 0 : is_integral(t) ? 1 : 2; }
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 1) return DType::i64;  // i32 with i64
  // floating, different: f64 wins; f16 with bf16 -> f32; 16-bit with f32 -> f32
  if (a == DType::f64 || b == DType::f64) return DType::f64;
  return DType::f32;
}

}  // namespace sl

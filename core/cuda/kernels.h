// The interface between the CUDA backend's host glue (core/cuda/*.cpp, which sees Tensors and
// registers kernels) and its device code (core/cuda/*.cu, which sees only pointers, layouts and
// op codes). Internal header.
//
// Note [CUDA glue and kernels]
// Kernel files do not include core/tensor.h or the family headers, so edits there recompile
// only the small glue files, not nvcc's heavy template instantiations. The op codes below
// mirror the families' enums; the glue maps each enum value with a switch (an op added to a
// family without a CUDA kernel throws DeviceError on CUDA tensors instead of running the wrong
// kernel).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/layout.h"

namespace sl::cuda {

/// Most dims of an elementwise kernel's operands: the CPU loops' bound.
inline constexpr int kMaxDims = kMaxLayoutDims;

/// The CPU loops' coalesced layout (core/layout.h): kernels index operands through it.
using ::sl::StridedLayout;

enum class UnaryCode : uint8_t {
  neg,
  abs,
  exp,
  log,
  log1p,
  expm1,
  sqrt,
  rsqrt,
  square,
  reciprocal,
  tanh,
  sigmoid,
  relu,
  gelu,
  gelu_tanh,
  silu,
  sin,
  cos,
  sign,
  erf,
  floor,
  ceil,
  round,
  trunc,
  logical_not,
  isnan,
  isinf,
  isfinite,
  count_
};

enum class BinaryCode : uint8_t {
  add,
  sub,
  mul,
  div,
  pow,
  maximum,
  minimum,
  atan2,
  fmod,
  remainder,
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
  logical_and,
  logical_or,
  logical_xor,
  relu_backward,
  sigmoid_backward,
  tanh_backward,
  gelu_backward,
  gelu_tanh_backward,
  silu_backward,
  count_
};

/// A host Scalar as kernels see it: its value as Scalar::to_double, to_int and to_bool give it
/// (a kernel computing in type C uses the one Scalar::to<C> would).
struct DevScalar {
  double f = 0;
  int64_t i = 0;
  bool b = false;
};

// ---- copy family (copy.cu) ------------------------------------------------------------------
/// out = convert(in): L operand 0 of dtype `to`, operand 1 of dtype `from`.
void launch_convert(DType to, DType from, const StridedLayout<2>& L, cudaStream_t s);
/// Every element of operand 0 (elements of elem_size bytes: 1, 2, 4 or 8) = the low elem_size
/// bytes of `bits` (the value already converted on the host).
void launch_fill(int elem_size, uint64_t bits, const StridedLayout<1>& L, cudaStream_t s);

// ---- elementwise family (unary.cu, binary*.cu, ternary.cu) -----------------------------------
/// out = op(in); in has dtype dt; out dt (bool for predicates).
void launch_unary(UnaryCode op, DType dt, const StridedLayout<2>& L, cudaStream_t s);
/// out = op(a, b) (a + alpha b for add/sub); a, b of dtype dt; out dt or bool for predicates.
void launch_binary(BinaryCode op, DType dt, DevScalar alpha, const StridedLayout<3>& L,
                   cudaStream_t s);
/// out = cond ? a : b; operands (out, cond, a, b); cond bool, the others dt.
void launch_where(DType dt, const StridedLayout<4>& L, cudaStream_t s);
/// out = clamp(in, lo, hi) with optional bounds; NaN propagates.
void launch_clamp(DType dt, bool has_lo, DevScalar lo, bool has_hi, DevScalar hi,
                  const StridedLayout<2>& L, cudaStream_t s);
/// Sets *flag (device int32, zeroed by the caller) to 1 if any element of operand 0 (integer
/// dtype dt) is zero.
void launch_any_zero(DType dt, const StridedLayout<1>& L, int32_t* flag, cudaStream_t s);

}  // namespace sl::cuda

namespace sl::cuda {

// ---- random family (random.cu) ---------------------------------------------------------------
enum class RandomCode : uint8_t { uniform, normal, bernoulli, randint };
/// Fills n contiguous elements of dtype dt at `out` from the Philox stream (seed, offset) with
/// the per-element formulas of core/cpu/random.cpp (Note [Random streams]).
void launch_random(RandomCode dist, DType dt, void* out, int64_t n, uint64_t seed, uint64_t offset,
                   double a, double b, cudaStream_t s);

}  // namespace sl::cuda

namespace sl::cuda {

// ---- reduce family (reduce_*.cu) ---------------------------------------------------------------
enum class ReduceCode : uint8_t { sum, mean, prod, max, min, var, norm, logsumexp, all, any };
/// Output dtype of a reduction of dtype `in` (the caller has cast integer inputs of mean, var,
/// norm and logsumexp to float32): bool for all/any, int64 for integer sum/prod, else `in`.
DType reduce_out_dtype(ReduceCode op, DType in);
/// Reduces the contiguous [outer, R, inner] `in` (dtype dt) over R into the contiguous
/// [outer, inner] `out` of dtype reduce_out_dtype(op, dt).
void launch_reduce(ReduceCode op, DType dt, const void* in, void* out, int64_t outer, int64_t R,
                   int64_t inner, int64_t correction, double p, cudaStream_t s);
void launch_reduce_sum(ReduceCode op, DType dt, const void* in, void* out, int64_t outer, int64_t R,
                       int64_t inner, cudaStream_t s);
void launch_reduce_minmax(ReduceCode op, DType dt, const void* in, void* out, int64_t outer,
                          int64_t R, int64_t inner, cudaStream_t s);
void launch_reduce_stats(ReduceCode op, DType dt, const void* in, void* out, int64_t outer,
                         int64_t R, int64_t inner, int64_t correction, double p, cudaStream_t s);
/// Values (dtype dt) and int64 indices of the first max (is_max) or min along R; NaN wins.
void launch_arg_reduce(bool is_max, DType dt, const void* in, void* values, int64_t* indices,
                       int64_t outer, int64_t R, int64_t inner, cudaStream_t s);
/// Inclusive cumulative sum along R (dt floating or int64), same layout in and out.
void launch_cumsum(DType dt, const void* in, void* out, int64_t outer, int64_t R, int64_t inner,
                   cudaStream_t s);

}  // namespace sl::cuda

namespace sl::cuda {

// ---- matmul family (matmul.cu; float types go to cuBLAS in matmul.cpp) ------------------------
/// Integer batched GEMM: out[p] = beta * out[p] + alpha * a[p] @ b[p] for p < batch; a [M, K],
/// b [K, N] with element strides (sa*, sb*), out contiguous [batch, M, N]; dt int32 or int64.
void launch_int_bmm(DType dt, const void* a, const void* b, void* out, int64_t batch, int64_t M,
                    int64_t N, int64_t K, int64_t sab, int64_t sam, int64_t sak, int64_t sbb,
                    int64_t sbk, int64_t sbn, int64_t alpha, int64_t beta, cudaStream_t s);

}  // namespace sl::cuda

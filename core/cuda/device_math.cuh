// Scalar math for CUDA kernels, float and double overloads (internal header; device code).
// The formulas are those of core/cpu/math.h so both backends compute the same functions; the
// library functions themselves (expf, erff, ...) differ from glibc's by a few ulp.
#pragma once

#include <cuda_runtime.h>

namespace sl::cuda::dmath {

#define SL_DMATH_1(name, ffn, dfn)                   \
  __device__ __forceinline__ float name(float x) {   \
    return ::ffn(x);                                 \
  }                                                  \
  __device__ __forceinline__ double name(double x) { \
    return ::dfn(x);                                 \
  }

SL_DMATH_1(exp, expf, exp)
SL_DMATH_1(log, logf, log)
SL_DMATH_1(log1p, log1pf, log1p)
SL_DMATH_1(expm1, expm1f, expm1)
SL_DMATH_1(sqrt, sqrtf, sqrt)
SL_DMATH_1(tanh, tanhf, tanh)
SL_DMATH_1(sin, sinf, sin)
SL_DMATH_1(cos, cosf, cos)
SL_DMATH_1(erf, erff, erf)
SL_DMATH_1(erfc, erfcf, erfc)
SL_DMATH_1(floor, floorf, floor)
SL_DMATH_1(ceil, ceilf, ceil)
SL_DMATH_1(rint, rintf, rint)
SL_DMATH_1(trunc, truncf, trunc)
SL_DMATH_1(fabs, fabsf, fabs)
#undef SL_DMATH_1

__device__ __forceinline__ float pow(float a, float b) {
  return ::powf(a, b);
}
__device__ __forceinline__ double pow(double a, double b) {
  return ::pow(a, b);
}
__device__ __forceinline__ float atan2(float a, float b) {
  return ::atan2f(a, b);
}
__device__ __forceinline__ double atan2(double a, double b) {
  return ::atan2(a, b);
}
__device__ __forceinline__ float fmod(float a, float b) {
  return ::fmodf(a, b);
}
__device__ __forceinline__ double fmod(double a, double b) {
  return ::fmod(a, b);
}
__device__ __forceinline__ bool isinf(float x) {
  return ::isinf(x);
}
__device__ __forceinline__ bool isinf(double x) {
  return ::isinf(x);
}
__device__ __forceinline__ bool isfinite(float x) {
  return ::isfinite(x);
}
__device__ __forceinline__ bool isfinite(double x) {
  return ::isfinite(x);
}

template <class C>
__device__ __forceinline__ C sigmoid(C x) {
  return C(1) / (C(1) + exp(-x));
}

// The gelu family avoids the cancellation of 1 + erf(x / sqrt 2) and 1 + tanh(z) for negative
// x (which left only a few correct bits in the tails: a relative error of 1e-4 at x = -3 in
// float, found by the first GPU run of the binary parity test): Phi(x) = erfc(-x / sqrt 2) / 2
// and 1 + tanh(z / 2) = 2 sigmoid(z), with sigmoid from e = exp(-|z|) on both sides of 0.

/// x Phi(x). -inf gives NaN (-inf * 0), as on the CPU and in PyTorch.
template <class C>
__device__ __forceinline__ C gelu(C x) {
  return C(0.5) * x * erfc(x * C(-0.70710678118654752440));
}
/// Phi(x) + x phi(x); the second term is dropped where phi underflows to 0 (x = +-inf).
template <class C>
__device__ __forceinline__ C gelu_grad(C x) {
  const C cdf = C(0.5) * erfc(x * C(-0.70710678118654752440));
  const C pdf = C(0.39894228040143267794) * exp(C(-0.5) * x * x);
  return pdf == C(0) ? cdf : cdf + x * pdf;
}
/// x sigmoid(z), z = 2 sqrt(2 / pi) (x + 0.044715 x^3): 0.5 x (1 + tanh(z / 2)).
template <class C>
__device__ __forceinline__ C gelu_tanh(C x) {
  const C z = C(1.5957691216057307118) * (x + C(0.044715) * x * x * x);
  const C e = exp(-fabs(z));
  const C s = C(1) / (C(1) + e);
  return z >= C(0) ? x * s : (x * e) * s;  // NaN: z >= 0 is false and e is NaN
}
/// sigmoid(z) + x sigmoid'(z) dz/dx with sigmoid'(z) = e s^2; the product is dropped where e
/// underflows to 0 (it would be inf * 0 for huge |x|).
template <class C>
__device__ __forceinline__ C gelu_tanh_grad(C x) {
  const C z = C(1.5957691216057307118) * (x + C(0.044715) * x * x * x);
  const C e = exp(-fabs(z));
  const C s = C(1) / (C(1) + e);
  const C sig = z >= C(0) ? s : e * s;
  if (e == C(0)) return sig;
  const C dz = C(1.5957691216057307118) * (C(1) + C(3 * 0.044715) * x * x);
  return sig + ((x * dz) * (e * s)) * s;
}

}  // namespace sl::cuda::dmath

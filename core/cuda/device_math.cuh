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
template <class C>
__device__ __forceinline__ C gelu(C x) {
  return C(0.5) * x * (C(1) + erf(x * C(0.70710678118654752440)));
}
template <class C>
__device__ __forceinline__ C gelu_grad(C x) {
  C cdf = C(0.5) * (C(1) + erf(x * C(0.70710678118654752440)));
  C pdf = C(0.39894228040143267794) * exp(C(-0.5) * x * x);
  return cdf + x * pdf;
}
template <class C>
__device__ __forceinline__ C gelu_tanh(C x) {
  const C k = C(0.79788456080286535588);
  return C(0.5) * x * (C(1) + tanh(k * (x + C(0.044715) * x * x * x)));
}
template <class C>
__device__ __forceinline__ C gelu_tanh_grad(C x) {
  const C k = C(0.79788456080286535588);
  C inner = k * (x + C(0.044715) * x * x * x);
  C t = tanh(inner);
  C dinner = k * (C(1) + C(3) * C(0.044715) * x * x);
  return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * dinner;
}

}  // namespace sl::cuda::dmath

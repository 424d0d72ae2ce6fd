// Scalar math used by CPU kernels (internal header). Float and double overloads; written as
// plain expressions so loops that call them can be vectorised.
#pragma once

#include <cmath>

namespace sl::cpu::math {

template <class C>
inline C exp(C x) {
  return std::exp(x);
}
template <class C>
inline C tanh(C x) {
  return std::tanh(x);
}
template <class C>
inline C sigmoid(C x) {
  return C(1) / (C(1) + std::exp(-x));
}
template <class C>
inline C erf(C x) {
  return std::erf(x);
}
/// x * Phi(x), Phi the standard normal CDF.
template <class C>
inline C gelu(C x) {
  return C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440)));
}
/// d/dx gelu(x) = Phi(x) + x * phi(x).
template <class C>
inline C gelu_grad(C x) {
  C cdf = C(0.5) * (C(1) + std::erf(x * C(0.70710678118654752440)));
  C pdf = C(0.39894228040143267794) * std::exp(C(-0.5) * x * x);
  return cdf + x * pdf;
}
/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <class C>
inline C gelu_tanh(C x) {
  const C k = C(0.79788456080286535588);
  return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
}
template <class C>
inline C gelu_tanh_grad(C x) {
  const C k = C(0.79788456080286535588);
  C inner = k * (x + C(0.044715) * x * x * x);
  C t = std::tanh(inner);
  C dinner = k * (C(1) + C(3) * C(0.044715) * x * x);
  return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * dinner;
}

}  // namespace sl::cpu::math

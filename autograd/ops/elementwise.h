// Differentiable elementwise ops (NumPy broadcasting, PyTorch type promotion). Each one's
// backward is in autograd/ops/elementwise.cpp beside its forward. Errors: ShapeError when shapes
// do not broadcast, DeviceError for mixed devices, DTypeError where a dtype is not supported.
#pragma once

#include <optional>
#include <string>

#include "core/tensor.h"

namespace sl {

/// a + alpha * b. A floating alpha needs a floating result, a bool alpha a bool result
/// (DTypeError otherwise, as PyTorch).
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor add(const Tensor& a, Scalar b);
/// a - alpha * b.
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor sub(const Tensor& a, Scalar b);
Tensor rsub(const Tensor& a, Scalar b);  ///< b - a
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, Scalar b);
/// True division (integer inputs give float32).
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, Scalar b);
Tensor div(Scalar a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, Scalar b);
Tensor pow(Scalar a, const Tensor& b);
/// Elementwise max / min (NaN propagates); gradient goes to the larger (smaller) input, split
/// evenly on ties as in PyTorch.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor log1p(const Tensor& a);
Tensor expm1(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor square(const Tensor& a);
Tensor reciprocal(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
/// approximate: "none" (exact, erf) or "tanh". gelu and silu throw DTypeError (naming the op)
/// for bool and integer inputs, as PyTorch 1.13.
Tensor gelu(const Tensor& a, const std::string& approximate = "none");
Tensor silu(const Tensor& a);
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor erf(const Tensor& a);
/// Not differentiable (zero gradient almost everywhere, as in PyTorch).
Tensor sign(const Tensor& a);
Tensor floor(const Tensor& a);
Tensor ceil(const Tensor& a);
Tensor round(const Tensor& a);
/// Clamps to [min, max] (either optional); gradient passes where min <= x <= max.
Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
/// clamp(a, min_val, max_val), as torch.nn.functional.hardtanh; an integer input keeps its dtype
/// (the bounds act truncated toward zero, as PyTorch). DTypeError for bool, ValueError for
/// min_val > max_val (or a NaN bound on an integer input).
Tensor hardtanh(const Tensor& a, double min_val = -1.0, double max_val = 1.0);
/// DTypeError for bool and integer inputs, as PyTorch 1.13.
Tensor leaky_relu(const Tensor& a, double negative_slope = 0.01);

/// Comparisons and logical ops return bool tensors and are not differentiable.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, Scalar b);
Tensor logical_not(const Tensor& a);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor isnan(const Tensor& a);
Tensor isinf(const Tensor& a);
Tensor isfinite(const Tensor& a);
/// True when every element is equal within rtol/atol (|a - b| <= atol + rtol * |b|); NaNs equal
/// only when equal_nan. Shapes must broadcast.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
/// Same shape and bitwise-equal values.
bool equal(const Tensor& a, const Tensor& b);

/// cond ? a : b (cond bool, all broadcast); differentiable in a and b.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
/// a with `value` where mask is true, of a's and mask's broadcast shape; differentiable in a.
Tensor masked_fill(const Tensor& a, const Tensor& mask, Scalar value);

/// Differentiable dtype/device conversion (Tensor::to is the usual spelling).
Tensor to_dtype(const Tensor& a, DType dtype, bool copy = false);
Tensor to_device(const Tensor& a, Device device, bool copy = false);

}  // namespace sl

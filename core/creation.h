// Factory functions: tensors from sizes, values, ranges, host buffers and random streams.
// All take TensorOptions ({.dtype, .device, .requires_grad}); defaults: float32 on cpu.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"

namespace sl {

/// Uninitialised values.
Tensor empty(const Shape& sizes, TensorOptions opts = {});
Tensor zeros(const Shape& sizes, TensorOptions opts = {});
Tensor ones(const Shape& sizes, TensorOptions opts = {});
/// Every element `value` (converted to opts.dtype).
Tensor full(const Shape& sizes, Scalar value, TensorOptions opts = {});
/// A 0-d tensor; dtype from opts, or the scalar's natural dtype when opts_dtype_from_value.
Tensor scalar_tensor(Scalar value, TensorOptions opts = {});
/// [start, end) in steps of `step` (ValueError when step is 0 or the range is inconsistent).
/// The dtype defaults to int64 when all three are integers, as torch.arange; pass opts to
/// override. Integer bounds into an integer dtype are computed in int64 (exact beyond 2^53);
/// otherwise in double.
Tensor arange(Scalar end);
Tensor arange(Scalar start, Scalar end, Scalar step = 1);
Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions opts);
/// `steps` evenly spaced values from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, TensorOptions opts = {});
/// n x m identity (m defaults to n).
Tensor eye(int64_t n, int64_t m = -1, TensorOptions opts = {});

/// A tensor holding a copy of `values` with the given sizes ({n} when empty). The dtype follows
/// T (float -> float32, double -> float64, int64_t, int32_t, bool) unless opts says otherwise.
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& sizes = {},
                   std::optional<TensorOptions> opts = std::nullopt);
/// 1-d tensor from a braced list: sl::tensor({1.f, 2.f, 3.f}).
Tensor tensor(std::initializer_list<float> values, TensorOptions opts = {});
Tensor tensor(std::initializer_list<double> values, TensorOptions opts = {.dtype = DType::f64});
Tensor tensor(std::initializer_list<int64_t> values, TensorOptions opts = {.dtype = DType::i64});
/// Wraps memory owned by the caller without copying (CPU or device memory, matching
/// opts.device). `deleter`, if given, runs when the last view dies; otherwise the caller must
/// keep the memory alive. Contiguous unless strides are given.
Tensor from_blob(void* data, const Shape& sizes, TensorOptions opts = {},
                 std::function<void(void*)> deleter = {}, const Shape& strides = {});

/// Uniform [0, 1).
Tensor rand(const Shape& sizes, TensorOptions opts = {}, Generator* gen = nullptr);
/// Standard normal.
Tensor randn(const Shape& sizes, TensorOptions opts = {}, Generator* gen = nullptr);
/// Integers uniform in [low, high); int64 by default.
Tensor randint(int64_t low, int64_t high, const Shape& sizes,
               TensorOptions opts = {.dtype = DType::i64}, Generator* gen = nullptr);
/// 1 with probability p[i] (elementwise), else 0; same dtype/device as p.
Tensor bernoulli(const Tensor& p, Generator* gen = nullptr);
/// A random permutation of 0..n-1 (int64), as torch.randperm.
Tensor randperm(int64_t n, TensorOptions opts = {.dtype = DType::i64}, Generator* gen = nullptr);

Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
Tensor rand_like(const Tensor& t, Generator* gen = nullptr);
Tensor randn_like(const Tensor& t, Generator* gen = nullptr);

}  // namespace sl

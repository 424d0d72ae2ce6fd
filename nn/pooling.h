// MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, AdaptiveMaxPool2d and MaxPool1d, AvgPool1d,
// AdaptiveAvgPool1d, AdaptiveMaxPool1d, as
// torch.nn's (inputs [N, C, H, W] or [C, H, W], and [N, C, L] or [C, L]; errors as the functions
// in autograd/ops/pool.h).
#pragma once

#include <concepts>
#include <optional>

#include "autograd/ops/pool.h"
#include "nn/module.h"

namespace sl::nn {

/// stride defaults (unset) to kernel_size.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(ExpandingArray<2> kernel_size, ExpandingArray<2> stride = {},
                     ExpandingArray<2> padding = 0, ExpandingArray<2> dilation = 1,
                     bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const ExpandingArray<2> kernel_size, stride, padding, dilation;
  const bool ceil_mode;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(ExpandingArray<2> kernel_size, ExpandingArray<2> stride = {},
                     ExpandingArray<2> padding = 0, bool ceil_mode = false,
                     bool count_include_pad = true,
                     std::optional<int64_t> divisor_override = std::nullopt);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const ExpandingArray<2> kernel_size, stride, padding;
  const bool ceil_mode, count_include_pad;
  const std::optional<int64_t> divisor_override;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(ExpandingArray<2> output_size);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const ExpandingArray<2> output_size;
};

/// sl::max_pool1d over [N, C, L] or [C, L]; stride defaults (unset) to kernel_size. Throws
/// ValueError when kernel_size is unset; the rest as max_pool1d (at forward).
class MaxPool1d : public Module {
 public:
  explicit MaxPool1d(ExpandingArray<1> kernel_size, ExpandingArray<1> stride = {},
                     ExpandingArray<1> padding = 0, ExpandingArray<1> dilation = 1,
                     bool ceil_mode = false);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const ExpandingArray<1> kernel_size, stride, padding, dilation;
  const bool ceil_mode;
};

/// sl::avg_pool1d over [N, C, L] or [C, L]; stride defaults (unset) to kernel_size. Throws
/// ValueError when kernel_size is unset; the rest as avg_pool1d (at forward).
class AvgPool1d : public Module {
 public:
  explicit AvgPool1d(ExpandingArray<1> kernel_size, ExpandingArray<1> stride = {},
                     ExpandingArray<1> padding = 0, bool ceil_mode = false,
                     bool count_include_pad = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const ExpandingArray<1> kernel_size, stride, padding;
  const bool ceil_mode, count_include_pad;
};

/// sl::adaptive_avg_pool1d: [N, C, L] or [C, L] -> [..., output_size]. Throws ValueError for a
/// negative (or unset) output_size; the rest as adaptive_avg_pool1d (at forward).
class AdaptiveAvgPool1d : public Module {
 public:
  explicit AdaptiveAvgPool1d(ExpandingArray<1> output_size);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  const ExpandingArray<1> output_size;
};

/// sl::adaptive_max_pool2d: [N, C, H, W] or [C, H, W] -> [..., Ho, Wo]; output_size an int or
/// {Ho, Wo} with None entries (std::nullopt: keep the input's size). forward returns the output
/// (so the module fits in Sequential); forward_with_indices returns (output, indices) as
/// PyTorch's forward does with return_indices=True, and forward throws ValueError on a module
/// built with return_indices = true (whose PyTorch forward returns the pair). Throws ValueError
/// for a negative or unset output_size; the rest as adaptive_max_pool2d (at forward).
class AdaptiveMaxPool2d : public Module {
 public:
  explicit AdaptiveMaxPool2d(AdaptiveOutputSize<2> output_size)
      : AdaptiveMaxPool2d(Tag{}, output_size, false) {}
  /// return_indices must be a bool (so that `{2, 5}` never reads as (output_size 2, true)).
  template <std::same_as<bool> B>
  AdaptiveMaxPool2d(AdaptiveOutputSize<2> output_size, B return_indices)
      : AdaptiveMaxPool2d(Tag{}, output_size, return_indices) {}
  Tensor forward(const Tensor& x) override;
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x);
  std::string extra_repr() const override;
  const AdaptiveOutputSize<2> output_size;
  const bool return_indices;

 private:
  struct Tag {};
  AdaptiveMaxPool2d(Tag, AdaptiveOutputSize<2> output_size, bool return_indices);
};

/// sl::adaptive_max_pool1d: [N, C, L] or [C, L] -> [..., output_size]; forward,
/// forward_with_indices and return_indices as AdaptiveMaxPool2d. Throws ValueError for a negative
/// or unset output_size; the rest as adaptive_max_pool1d (at forward).
class AdaptiveMaxPool1d : public Module {
 public:
  explicit AdaptiveMaxPool1d(ExpandingArray<1> output_size)
      : AdaptiveMaxPool1d(Tag{}, output_size, false) {}
  /// return_indices must be a bool (so that `{2, 5}` never reads as (output_size 2, true)).
  template <std::same_as<bool> B>
  AdaptiveMaxPool1d(ExpandingArray<1> output_size, B return_indices)
      : AdaptiveMaxPool1d(Tag{}, output_size, return_indices) {}
  Tensor forward(const Tensor& x) override;
  std::pair<Tensor, Tensor> forward_with_indices(const Tensor& x);
  std::string extra_repr() const override;
  const ExpandingArray<1> output_size;
  const bool return_indices;

 private:
  struct Tag {};
  AdaptiveMaxPool1d(Tag, ExpandingArray<1> output_size, bool return_indices);
};

}  // namespace sl::nn

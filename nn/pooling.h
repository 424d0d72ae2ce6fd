// MaxPool2d, AvgPool2d, AdaptiveAvgPool2d and MaxPool1d, AvgPool1d, AdaptiveAvgPool1d, as
// torch.nn's (inputs [N, C, H, W] or [C, H, W], and [N, C, L] or [C, L]; errors as the functions
// in autograd/ops/pool.h).
#pragma once

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

}  // namespace sl::nn

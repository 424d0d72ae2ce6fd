// Conv1d and Conv2d, as torch.nn.Conv1d / Conv2d (zero padding; "same" and "valid" accepted).
#pragma once

#include "autograd/ops/conv.h"
#include "nn/module.h"

namespace sl::nn {

/// Options after the three positional arguments (in_channels, out_channels, kernel_size).
template <size_t D>
struct ConvOptions {
  ExpandingArray<D> stride = 1;
  ConvPadding<D> padding = 0;
  ExpandingArray<D> dilation = 1;
  int64_t groups = 1;
  bool bias = true;
  /// dtype/device of the parameters.
  TensorOptions tensor_options = {};
};
using Conv1dOptions = ConvOptions<1>;
using Conv2dOptions = ConvOptions<2>;

/// Shared by Conv1d and Conv2d: parameters weight [out, in / groups, *kernel] and bias [out]
/// (absent when !bias), initialised as PyTorch (weight kaiming_uniform(a=sqrt(5)), bias
/// U(-1/sqrt(fan_in), 1/sqrt(fan_in))). Throws ValueError for non-positive channels or kernel
/// sizes, channels not divisible by groups, padding "same" with stride > 1.
template <size_t D>
class ConvNd : public Module {
 public:
  ConvNd(const char* name, int64_t in_channels, int64_t out_channels, ExpandingArray<D> kernel_size,
         ConvOptions<D> opts);
  void reset_parameters();
  std::string extra_repr() const override;

  const int64_t in_channels, out_channels;
  const ExpandingArray<D> kernel_size;
  const ConvOptions<D> options;
  Tensor weight, bias;
};

/// input [N, C_in, L] or [C_in, L] -> [N, C_out, L_out]; errors as sl::conv1d.
class Conv1d : public ConvNd<1> {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, ExpandingArray<1> kernel_size,
         Conv1dOptions opts = {});
  Tensor forward(const Tensor& x) override;
};

/// input [N, C_in, H, W] or [C_in, H, W] -> [N, C_out, H_out, W_out]; errors as sl::conv2d.
class Conv2d : public ConvNd<2> {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size,
         Conv2dOptions opts = {});
  Tensor forward(const Tensor& x) override;
};

}  // namespace sl::nn

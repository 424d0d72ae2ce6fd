// Conv1d and Conv2d, as torch.nn.Conv1d / Conv2d (zero padding; "same" and "valid" accepted),
// and ConvTranspose1d / ConvTranspose2d, as torch.nn.ConvTranspose1d / ConvTranspose2d.
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

/// Options of the transposed convolutions after (in_channels, out_channels, kernel_size), in
/// PyTorch's order (groups before bias and dilation). Padding takes ints only, as PyTorch.
template <size_t D>
struct ConvTransposeOptions {
  ExpandingArray<D> stride = 1;
  ExpandingArray<D> padding = 0;
  ExpandingArray<D> output_padding = 0;
  int64_t groups = 1;
  bool bias = true;
  ExpandingArray<D> dilation = 1;
  /// dtype/device of the parameters.
  TensorOptions tensor_options = {};
};
using ConvTranspose1dOptions = ConvTransposeOptions<1>;
using ConvTranspose2dOptions = ConvTransposeOptions<2>;

/// Shared by ConvTranspose1d and ConvTranspose2d: parameters weight [in, out / groups, *kernel]
/// (PyTorch's transposed layout) and bias [out] (absent when !bias), initialised as PyTorch
/// (weight kaiming_uniform(a=sqrt(5)) and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)), both with
/// fan_in = weight.size(1) * prod(kernel) = out / groups * prod(kernel), as PyTorch computes it
/// on this layout). Throws ValueError for non-positive channels, kernel sizes or groups, and
/// channels not divisible by groups; an output_padding that is not smaller than either stride
/// or dilation is refused by forward, as PyTorch (forward with output_size ignores it).
template <size_t D>
class ConvTransposeNd : public Module {
 public:
  ConvTransposeNd(const char* name, int64_t in_channels, int64_t out_channels,
                  ExpandingArray<D> kernel_size, ConvTransposeOptions<D> opts);
  void reset_parameters();
  std::string extra_repr() const override;

  const int64_t in_channels, out_channels;
  const ExpandingArray<D> kernel_size;
  const ConvTransposeOptions<D> options;
  Tensor weight, bias;

 protected:
  /// The output_padding for a forward call: options.output_padding when output_size is empty,
  /// else PyTorch's _output_padding: output_size (D sizes, or the full D + 2 / D + 1 for a
  /// batched / unbatched input, whose leading sizes are ignored as PyTorch) must lie within
  /// [min, min + stride - 1] per dim, min being the size with output_padding 0; returns
  /// output_size - min. Throws ValueError otherwise.
  ExpandingArray<D> output_padding_for(const Tensor& x,
                                       const std::vector<int64_t>& output_size) const;
};

/// input [N, C_in, L] or [C_in, L] -> [N, C_out, L_out]; errors as sl::conv_transpose1d.
class ConvTranspose1d : public ConvTransposeNd<1> {
 public:
  ConvTranspose1d(int64_t in_channels, int64_t out_channels, ExpandingArray<1> kernel_size,
                  ConvTranspose1dOptions opts = {});
  Tensor forward(const Tensor& x) override;
  /// With an explicit output size (see output_padding_for): [L_out], or [N, C_out, L_out] /
  /// [C_out, L_out] whose leading sizes are not checked (as PyTorch).
  Tensor forward(const Tensor& x, const std::vector<int64_t>& output_size);
};

/// input [N, C_in, H, W] or [C_in, H, W] -> [N, C_out, H_out, W_out]; errors as
/// sl::conv_transpose2d.
class ConvTranspose2d : public ConvTransposeNd<2> {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, ExpandingArray<2> kernel_size,
                  ConvTranspose2dOptions opts = {});
  Tensor forward(const Tensor& x) override;
  /// With an explicit output size (see output_padding_for): [H_out, W_out], or 4 (batched) / 3
  /// (unbatched) sizes whose leading ones are not checked (as PyTorch).
  Tensor forward(const Tensor& x, const std::vector<int64_t>& output_size);
};

}  // namespace sl::nn

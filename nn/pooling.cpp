#include "nn/pooling.h"

namespace sl::nn {

namespace {
// PyTorch prints the argument as given: an int stays an int, a pair prints as a tuple.
std::string arg(const ExpandingArray<2>& a) {
  if (a[0] == a[1]) return std::to_string(a[0]);
  return repr::py_tuple({a[0], a[1]});
}
template <size_t D>
ExpandingArray<D> or_kernel(const ExpandingArray<D>& stride, const ExpandingArray<D>& k) {
  return stride.set ? stride : k;
}
}  // namespace

MaxPool2d::MaxPool2d(ExpandingArray<2> k, ExpandingArray<2> s, ExpandingArray<2> p,
                     ExpandingArray<2> d, bool ceil)
    : Module("MaxPool2d"),
      kernel_size(k),
      stride(or_kernel(s, k)),
      padding(p),
      dilation(d),
      ceil_mode(ceil) {
  SL_CHECK(k.set, "MaxPool2d: kernel_size must be given");
}

Tensor MaxPool2d::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "MaxPool2d: the input is undefined");
  return max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
}

std::string MaxPool2d::extra_repr() const {
  return "kernel_size=" + arg(kernel_size) + ", stride=" + arg(stride) +
         ", padding=" + arg(padding) + ", dilation=" + arg(dilation) +
         ", ceil_mode=" + repr::py_bool(ceil_mode);
}

AvgPool2d::AvgPool2d(ExpandingArray<2> k, ExpandingArray<2> s, ExpandingArray<2> p, bool ceil,
                     bool include_pad, std::optional<int64_t> divisor)
    : Module("AvgPool2d"),
      kernel_size(k),
      stride(or_kernel(s, k)),
      padding(p),
      ceil_mode(ceil),
      count_include_pad(include_pad),
      divisor_override(divisor) {
  SL_CHECK(k.set, "AvgPool2d: kernel_size must be given");
}

Tensor AvgPool2d::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "AvgPool2d: the input is undefined");
  return avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                    divisor_override);
}

std::string AvgPool2d::extra_repr() const {
  return "kernel_size=" + arg(kernel_size) + ", stride=" + arg(stride) +
         ", padding=" + arg(padding);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(ExpandingArray<2> out)
    : Module("AdaptiveAvgPool2d"), output_size(out) {
  // 0 is accepted, as PyTorch (an empty output: Note [Empty adaptive output] in core/ops/pool.cpp)
  SL_CHECK(out.set && out[0] >= 0 && out[1] >= 0,
           "AdaptiveAvgPool2d: output_size must be non-negative, got ",
           repr::py_tuple({out[0], out[1]}));
}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "AdaptiveAvgPool2d: the input is undefined");
  return adaptive_avg_pool2d(x, output_size);
}

std::string AdaptiveAvgPool2d::extra_repr() const {
  return "output_size=" + (output_size[0] == output_size[1]
                               ? std::to_string(output_size[0])
                               : repr::py_tuple({output_size[0], output_size[1]}));
}

MaxPool1d::MaxPool1d(ExpandingArray<1> k, ExpandingArray<1> s, ExpandingArray<1> p,
                     ExpandingArray<1> d, bool ceil)
    : Module("MaxPool1d"),
      kernel_size(k),
      stride(or_kernel(s, k)),
      padding(p),
      dilation(d),
      ceil_mode(ceil) {
  SL_CHECK(k.set, "MaxPool1d: kernel_size must be given");
}

Tensor MaxPool1d::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "MaxPool1d: the input is undefined");
  return max_pool1d(x, kernel_size, stride, padding, dilation, ceil_mode);
}

std::string MaxPool1d::extra_repr() const {
  // torch.nn.MaxPool1d keeps its ints as given
  return "kernel_size=" + std::to_string(kernel_size[0]) + ", stride=" + std::to_string(stride[0]) +
         ", padding=" + std::to_string(padding[0]) + ", dilation=" + std::to_string(dilation[0]) +
         ", ceil_mode=" + repr::py_bool(ceil_mode);
}

AvgPool1d::AvgPool1d(ExpandingArray<1> k, ExpandingArray<1> s, ExpandingArray<1> p, bool ceil,
                     bool include_pad)
    : Module("AvgPool1d"),
      kernel_size(k),
      stride(or_kernel(s, k)),
      padding(p),
      ceil_mode(ceil),
      count_include_pad(include_pad) {
  SL_CHECK(k.set, "AvgPool1d: kernel_size must be given");
}

Tensor AvgPool1d::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "AvgPool1d: the input is undefined");
  return avg_pool1d(x, kernel_size, stride, padding, ceil_mode, count_include_pad);
}

std::string AvgPool1d::extra_repr() const {
  // torch.nn.AvgPool1d stores _single(...) tuples, so it prints "(3,)"
  return "kernel_size=" + repr::py_tuple({kernel_size[0]}) +
         ", stride=" + repr::py_tuple({stride[0]}) + ", padding=" + repr::py_tuple({padding[0]});
}

AdaptiveAvgPool1d::AdaptiveAvgPool1d(ExpandingArray<1> out)
    : Module("AdaptiveAvgPool1d"), output_size(out) {
  // 0 is accepted, as AdaptiveAvgPool2d (Note [Empty adaptive output] in core/ops/pool.cpp)
  SL_CHECK(out.set && out[0] >= 0, "AdaptiveAvgPool1d: output_size must be non-negative, got ",
           out[0]);
}

Tensor AdaptiveAvgPool1d::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "AdaptiveAvgPool1d: the input is undefined");
  return adaptive_avg_pool1d(x, output_size);
}

std::string AdaptiveAvgPool1d::extra_repr() const {
  return "output_size=" + std::to_string(output_size[0]);
}

AdaptiveMaxPool2d::AdaptiveMaxPool2d(Tag, AdaptiveOutputSize<2> out, bool indices)
    : Module("AdaptiveMaxPool2d"), output_size(out), return_indices(indices) {
  SL_CHECK(out.set, "AdaptiveMaxPool2d: output_size must be given");
  for (size_t i = 0; i < 2; ++i) {
    // 0 is accepted, as PyTorch (an empty output: Note [Empty adaptive output])
    SL_CHECK(out[i].value_or(0) >= 0, "AdaptiveMaxPool2d: output_size must be non-negative, got ",
             extra_repr().substr(std::string("output_size=").size()));
  }
}

Tensor AdaptiveMaxPool2d::forward(const Tensor& x) {
  SL_CHECK(!return_indices,
           "AdaptiveMaxPool2d: built with return_indices=true, its forward returns (output, "
           "indices): call forward_with_indices");
  return forward_with_indices(x).first;
}

std::pair<Tensor, Tensor> AdaptiveMaxPool2d::forward_with_indices(const Tensor& x) {
  SL_CHECK(x.defined(), "AdaptiveMaxPool2d: the input is undefined");
  return adaptive_max_pool2d_with_indices(x, output_size);
}

std::string AdaptiveMaxPool2d::extra_repr() const {
  // PyTorch prints output_size as given: an int, or a tuple with None for a kept dim
  auto entry = [](const std::optional<int64_t>& v) {
    return v ? std::to_string(*v) : std::string("None");
  };
  if (output_size.scalar) return "output_size=" + entry(output_size[0]);
  return "output_size=(" + entry(output_size[0]) + ", " + entry(output_size[1]) + ")";
}

AdaptiveMaxPool1d::AdaptiveMaxPool1d(Tag, ExpandingArray<1> out, bool indices)
    : Module("AdaptiveMaxPool1d"), output_size(out), return_indices(indices) {
  SL_CHECK(out.set && out[0] >= 0, "AdaptiveMaxPool1d: output_size must be non-negative, got ",
           out[0]);
}

Tensor AdaptiveMaxPool1d::forward(const Tensor& x) {
  SL_CHECK(!return_indices,
           "AdaptiveMaxPool1d: built with return_indices=true, its forward returns (output, "
           "indices): call forward_with_indices");
  return forward_with_indices(x).first;
}

std::pair<Tensor, Tensor> AdaptiveMaxPool1d::forward_with_indices(const Tensor& x) {
  SL_CHECK(x.defined(), "AdaptiveMaxPool1d: the input is undefined");
  return adaptive_max_pool1d_with_indices(x, output_size);
}

std::string AdaptiveMaxPool1d::extra_repr() const {
  return "output_size=" + std::to_string(output_size[0]);
}

}  // namespace sl::nn

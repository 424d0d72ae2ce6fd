#include "nn/conv.h"

#include <cmath>

#include "core/creation.h"
#include "nn/init.h"

namespace sl::nn {

namespace {
template <size_t D>
std::vector<int64_t> vec(const ExpandingArray<D>& a) {
  return std::vector<int64_t>(a.v.begin(), a.v.end());
}
template <size_t D>
bool all_equal(const ExpandingArray<D>& a, int64_t x) {
  for (size_t i = 0; i < D; ++i) {
    if (a[i] != x) return false;
  }
  return true;
}
}  // namespace

template <size_t D>
ConvNd<D>::ConvNd(const char* name, int64_t in, int64_t out, ExpandingArray<D> k,
                  ConvOptions<D> opts)
    : Module(name), in_channels(in), out_channels(out), kernel_size(k), options(opts) {
  SL_CHECK(in > 0 && out > 0, name, ": in_channels and out_channels must be positive, got ", in,
           " and ", out);
  for (size_t i = 0; i < D; ++i) {
    SL_CHECK(k[i] > 0, name, ": kernel_size must be positive, got ", repr::py_tuple(vec(k)));
  }
  SL_CHECK(opts.groups > 0, name, ": groups must be positive, got ", opts.groups);
  SL_CHECK(in % opts.groups == 0, name, ": in_channels (", in, ") must be divisible by groups (",
           opts.groups, ")");
  SL_CHECK(out % opts.groups == 0, name, ": out_channels (", out, ") must be divisible by groups (",
           opts.groups, ")");
  if (opts.padding.mode == ConvPadding<D>::Mode::same) {
    SL_CHECK(all_equal(opts.stride, 1), name,
             ": padding='same' is not supported for strided "
             "convolutions (stride ",
             repr::py_tuple(vec(opts.stride)), ")");
  }
  Shape wshape{out, in / opts.groups};
  for (size_t i = 0; i < D; ++i) wshape.push_back(k[i]);
  TensorOptions to = opts.tensor_options;
  to.requires_grad = false;
  weight = register_parameter("weight", empty(wshape, to));
  bias = register_parameter("bias", opts.bias ? empty({out}, to) : Tensor());
  reset_parameters();
}

template <size_t D>
void ConvNd<D>::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(weight);
    (void)fan_out;
    double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    init::uniform_(bias, -bound, bound);
  }
}

template <size_t D>
std::string ConvNd<D>::extra_repr() const {
  // torch/nn/modules/conv.py's extra_repr: defaults are left out.
  std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) +
                  ", kernel_size=" + repr::py_tuple(vec(kernel_size)) +
                  ", stride=" + repr::py_tuple(vec(options.stride));
  const auto& p = options.padding;
  if (p.mode == ConvPadding<D>::Mode::same) {
    s += ", padding=same";
  } else if (p.mode == ConvPadding<D>::Mode::valid) {
    s += ", padding=valid";
  } else if (!all_equal(p.amount, 0)) {
    s += ", padding=" + repr::py_tuple(vec(p.amount));
  }
  if (!all_equal(options.dilation, 1)) s += ", dilation=" + repr::py_tuple(vec(options.dilation));
  if (options.groups != 1) s += ", groups=" + std::to_string(options.groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

template class ConvNd<1>;
template class ConvNd<2>;

Conv1d::Conv1d(int64_t in, int64_t out, ExpandingArray<1> k, Conv1dOptions opts)
    : ConvNd<1>("Conv1d", in, out, k, opts) {}

Tensor Conv1d::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "Conv1d: the input is undefined");
  return conv1d(x, weight, bias, options.stride, options.padding, options.dilation, options.groups);
}

Conv2d::Conv2d(int64_t in, int64_t out, ExpandingArray<2> k, Conv2dOptions opts)
    : ConvNd<2>("Conv2d", in, out, k, opts) {}

Tensor Conv2d::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "Conv2d: the input is undefined");
  return conv2d(x, weight, bias, options.stride, options.padding, options.dilation, options.groups);
}

}  // namespace sl::nn

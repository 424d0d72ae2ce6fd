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
/// torch.nn's _ConvNd.reset_parameters: kaiming_uniform_(a = sqrt(5)) on the weight, and the
/// bias uniform in +-1/sqrt(fan_in) with the fans of the weight as laid out.
void reset_conv_parameters(const Tensor& weight, const Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(weight);
    (void)fan_out;
    double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
    init::uniform_(bias, -bound, bound);
  }
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
  reset_conv_parameters(weight, bias);
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

template <size_t D>
ConvTransposeNd<D>::ConvTransposeNd(const char* name, int64_t in, int64_t out, ExpandingArray<D> k,
                                    ConvTransposeOptions<D> opts)
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
  Shape wshape{in, out / opts.groups};  // PyTorch's transposed layout
  for (size_t i = 0; i < D; ++i) wshape.push_back(k[i]);
  TensorOptions to = opts.tensor_options;
  to.requires_grad = false;
  weight = register_parameter("weight", empty(wshape, to));
  bias = register_parameter("bias", opts.bias ? empty({out}, to) : Tensor());
  reset_parameters();
}

template <size_t D>
void ConvTransposeNd<D>::reset_parameters() {
  // the fans come from the weight as laid out, so fan_in is weight.size(1) * receptive field =
  // out / groups * prod(kernel) here
  reset_conv_parameters(weight, bias);
}

template <size_t D>
std::string ConvTransposeNd<D>::extra_repr() const {
  // torch/nn/modules/conv.py's _ConvNd.extra_repr: defaults are left out
  std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) +
                  ", kernel_size=" + repr::py_tuple(vec(kernel_size)) +
                  ", stride=" + repr::py_tuple(vec(options.stride));
  if (!all_equal(options.padding, 0)) s += ", padding=" + repr::py_tuple(vec(options.padding));
  if (!all_equal(options.dilation, 1)) s += ", dilation=" + repr::py_tuple(vec(options.dilation));
  if (!all_equal(options.output_padding, 0)) {
    s += ", output_padding=" + repr::py_tuple(vec(options.output_padding));
  }
  if (options.groups != 1) s += ", groups=" + std::to_string(options.groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

template <size_t D>
ExpandingArray<D> ConvTransposeNd<D>::output_padding_for(
    const Tensor& x, const std::vector<int64_t>& output_size) const {
  const int64_t rank = x.dim(), Dn = static_cast<int64_t>(D);
  // a wrong rank is left to the op's own error
  if (output_size.empty() || (rank != Dn + 1 && rank != Dn + 2)) return options.output_padding;
  const int64_t leading = x.dim() == static_cast<int64_t>(D) + 2 ? 2 : 1;
  std::vector<int64_t> size = output_size;
  if (static_cast<int64_t>(size.size()) == static_cast<int64_t>(D) + leading) {
    size.erase(size.begin(), size.begin() + leading);
  }
  SL_CHECK(size.size() == D, type_name(), ": for ", x.dim(), "-d input, output_size must have ", D,
           " or ", static_cast<int64_t>(D) + leading, " elements, got ",
           repr::py_tuple(output_size));
  std::vector<int64_t> lo(D), hi(D), in(D);
  ExpandingArray<D> r;
  r.set = true;
  bool ok = true;
  for (size_t d = 0; d < D; ++d) {
    in[d] = x.size(x.dim() - static_cast<int64_t>(D) + static_cast<int64_t>(d));
    lo[d] = (in[d] - 1) * options.stride[d] - 2 * options.padding[d] +
            options.dilation[d] * (kernel_size[d] - 1) + 1;
    hi[d] = lo[d] + options.stride[d] - 1;
    ok = ok && size[d] >= lo[d] && size[d] <= hi[d];
    r.v[d] = size[d] - lo[d];
  }
  SL_CHECK(ok, type_name(), ": requested an output size of ", repr::py_tuple(size),
           ", but valid sizes range from ", repr::py_tuple(lo), " to ", repr::py_tuple(hi),
           " (for an input of spatial size ", repr::py_tuple(in), ")");
  return r;
}

template class ConvTransposeNd<1>;
template class ConvTransposeNd<2>;

ConvTranspose1d::ConvTranspose1d(int64_t in, int64_t out, ExpandingArray<1> k,
                                 ConvTranspose1dOptions opts)
    : ConvTransposeNd<1>("ConvTranspose1d", in, out, k, opts) {}

Tensor ConvTranspose1d::forward(const Tensor& x) {
  return forward(x, {});
}

Tensor ConvTranspose1d::forward(const Tensor& x, const std::vector<int64_t>& output_size) {
  SL_CHECK(x.defined(), "ConvTranspose1d: the input is undefined");
  return conv_transpose1d(x, weight, bias, options.stride, options.padding,
                          output_padding_for(x, output_size), options.groups, options.dilation);
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, ExpandingArray<2> k,
                                 ConvTranspose2dOptions opts)
    : ConvTransposeNd<2>("ConvTranspose2d", in, out, k, opts) {}

Tensor ConvTranspose2d::forward(const Tensor& x) {
  return forward(x, {});
}

Tensor ConvTranspose2d::forward(const Tensor& x, const std::vector<int64_t>& output_size) {
  SL_CHECK(x.defined(), "ConvTranspose2d: the input is undefined");
  return conv_transpose2d(x, weight, bias, options.stride, options.padding,
                          output_padding_for(x, output_size), options.groups, options.dilation);
}

}  // namespace sl::nn

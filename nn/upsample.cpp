#include "nn/upsample.h"

#include <cmath>

namespace sl::nn {

namespace {
const InterpolateOptions& checked(const InterpolateOptions& o) {
  constexpr const char* op = "Upsample";
  check_interpolate_mode(o, op);
  SL_CHECK(o.size.empty() != o.scale_factor.empty(), op,
           ": exactly one of size or scale_factor should be defined, got ", o.size.size(),
           " size and ", o.scale_factor.size(), " scale_factor values");
  for (int64_t s : o.size) {
    SL_CHECK(s > 0, op, ": size must be positive, got ", repr::py_tuple(o.size));
  }
  for (double s : o.scale_factor) {
    SL_CHECK(std::isfinite(s) && s > 0, op, ": scale_factor must be positive and finite, got ",
             repr::py_float(s));
  }
  return o;
}

std::string values(const std::vector<double>& v) {
  if (v.size() == 1) return repr::py_float(v[0]);
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + repr::py_float(v[i]);
  return s + ")";
}
}  // namespace

Upsample::Upsample(InterpolateOptions o) : Module("Upsample"), options(checked(o)) {}

Tensor Upsample::forward(const Tensor& x) {
  SL_CHECK(x.defined(), "Upsample: the input is undefined");
  return interpolate(x, options);
}

std::string Upsample::extra_repr() const {
  std::string info = options.scale_factor.empty()
                         ? "size=" + (options.size.size() == 1 ? std::to_string(options.size[0])
                                                               : repr::py_tuple(options.size))
                         : "scale_factor=" + values(options.scale_factor);
  // nn.Upsample has no antialias in PyTorch 1.13; shown only when set
  return info + ", mode=" + options.mode + (options.antialias ? ", antialias=True" : "");
}

}  // namespace sl::nn

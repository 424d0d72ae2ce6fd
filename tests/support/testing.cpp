#include "support/testing.h"

#include "support/fake_gpu.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>

namespace sl::testing {

std::vector<Device> test_devices() {
  std::vector<Device> d{kCPU};
  install_fake_gpu();  // a build without CUDA runs the CUDA cases on the fake GPU
  if (cuda_is_available()) {
    d.emplace_back(DeviceKind::cuda, 0);
  } else {
    report_skip("CUDA cases", "no GPU visible (or built without CUDA)");
  }
  return d;
}

void report_skip(const std::string& what, const std::string& why) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  std::string key = what + ": " + why;
  if (seen.insert(key).second) std::fprintf(stderr, "[skipped] %s\n", key.c_str());
}

doctest::skip skip_when(bool skip, const std::string& what, const std::string& why) {
  if (skip) report_skip(what + " (counted in doctest's \"skipped\")", why);
  return doctest::skip(skip);
}

doctest::skip skip_either(const doctest::skip& a, const doctest::skip& b) {
  return doctest::skip(a.data || b.data);
}

std::string compare(const Tensor& a, const Tensor& b, double rtol, double atol) {
  std::ostringstream os;
  if (!a.defined() || !b.defined()) {
    return a.defined() == b.defined() ? "" : "one tensor is undefined";
  }
  if (a.sizes() != b.sizes()) {
    os << "shape mismatch: " << shape_str(a.sizes()) << " vs " << shape_str(b.sizes());
    return os.str();
  }
  std::vector<double> x = a.detach().to_vector<double>(), y = b.detach().to_vector<double>();
  int shown = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    bool ok;
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      ok = std::isnan(x[i]) && std::isnan(y[i]);
    } else if (std::isinf(x[i]) || std::isinf(y[i])) {
      ok = x[i] == y[i];
    } else {
      ok = std::fabs(x[i] - y[i]) <= atol + rtol * std::fabs(y[i]);
    }
    if (!ok) {
      ++bad;
      if (shown++ < 8) {
        os << "  [" << i << "] " << x[i] << " vs " << y[i] << " (diff " << std::fabs(x[i] - y[i])
           << ")\n";
      }
    }
  }
  if (bad == 0) return "";
  std::ostringstream head;
  head << bad << " of " << x.size() << " elements differ beyond rtol " << rtol << ", atol "
       << atol << ":\n";
  return head.str() + os.str();
}

bool bits_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor x = a.detach().cpu().contiguous(), y = b.detach().cpu().contiguous();
  return x.numel() == 0 || std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

void set_seeded_grads(const TensorList& params, int step) {
  for (size_t k = 0; k < params.size(); ++k) {
    Generator g(static_cast<uint64_t>(100 * step + static_cast<int>(k)));
    params[k].set_grad(randn(params[k].sizes(), {.dtype = params[k].dtype()}, &g));
  }
}

}  // namespace sl::testing

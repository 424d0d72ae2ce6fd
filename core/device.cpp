#include "core/device.h"

#include <ostream>

#include "core/dispatch.h"
#include "core/error.h"

namespace sl {

const char* device_kind_name(DeviceKind k) { return k == DeviceKind::cpu ? "cpu" : "cuda"; }

Device::Device(const std::string& spec) {
  std::string kind_s = spec, idx_s;
  auto colon = spec.find(':');
  if (colon != std::string::npos) {
    kind_s = spec.substr(0, colon);
    idx_s = spec.substr(colon + 1);
  }
  if (kind_s == "cpu") {
    kind = DeviceKind::cpu;
  } else if (kind_s == "cuda") {
    kind = DeviceKind::cuda;
  } else {
    detail::throw_error<ValueError>("Device: unknown device '", spec,
                                    "' (expected cpu, cpu:N, cuda or cuda:N)");
  }
  index = 0;
  if (colon != std::string::npos) {
    bool ok = !idx_s.empty() && idx_s.size() < 4;
    for (char c : idx_s) ok = ok && c >= '0' && c <= '9';
    SL_CHECK(ok, "Device: bad index in '", spec, "' (expected a number 0..",
             kMaxDevicesPerKind - 1, ")");
    index = std::stoi(idx_s);
    SL_CHECK(index < kMaxDevicesPerKind, "Device: index ", index, " in '", spec,
             "' is above the limit ", kMaxDevicesPerKind - 1);
  }
}

std::string Device::str() const {
  if (kind == DeviceKind::cpu && index == 0) return "cpu";
  return std::string(device_kind_name(kind)) + ":" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

SL_DEFINE_KERNEL(device_count_kernel, int());

int cuda_device_count() {
  if (!device_count_kernel.has(DeviceKind::cuda)) return 0;
  return device_count_kernel(DeviceKind::cuda);
}

}  // namespace sl

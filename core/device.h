// Device: where a tensor's storage lives ("cpu", "cpu:1", "cuda:0").
//
// CPU devices with an index > 0 are *logical* CPU devices: the same memory, but their own
// allocator statistics, and ops refuse to mix them exactly as they refuse to mix two GPUs. The
// `dp` strategy uses them so that multi-device code paths are testable on a CPU-only machine.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace sl {

enum class DeviceKind : uint8_t { cpu = 0, cuda = 1 };
inline constexpr int kNumDeviceKinds = 2;
inline constexpr int kMaxDevicesPerKind = 64;

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceKind k, int i = 0) : kind(k), index(i) {}
  /// Parses "cpu", "cpu:N", "cuda", "cuda:N". Throws ValueError on anything else.
  Device(const std::string& spec);  // NOLINT: implicit, as torch::Device("cuda:0")
  Device(const char* spec) : Device(std::string(spec)) {}  // NOLINT

  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool is_cuda() const { return kind == DeviceKind::cuda; }
  /// "cpu", "cpu:1" (index shown only when nonzero for cpu), "cuda:0".
  std::string str() const;
  friend bool operator==(const Device& a, const Device& b) {
    return a.kind == b.kind && a.index == b.index;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};

std::ostream& operator<<(std::ostream& os, const Device& d);
const char* device_kind_name(DeviceKind k);

inline constexpr Device kCPU{DeviceKind::cpu, 0};

/// Number of CUDA devices visible at run time (0 when built without CUDA or no GPU present).
int cuda_device_count();
/// True when CUDA support was compiled in and at least one GPU is visible.
inline bool cuda_is_available() { return cuda_device_count() > 0; }

}  // namespace sl

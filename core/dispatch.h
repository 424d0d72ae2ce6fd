// Kernel slots: how a device backend plugs in without generic code naming it.
//
// Note [Kernel registration]
// A family header (core/ops/F.h) declares one slot per kernel with SL_DECLARE_KERNEL, and
// core/ops/F.cpp defines it with SL_DEFINE_KERNEL. Each backend's file for that family
// (core/cpu/F.cpp, core/cuda/F.cu) registers its implementation at load time with
// SL_REGISTER_KERNEL. Generic code calls `slot(device_kind, args...)`; a missing entry throws a
// DeviceError naming the kernel and the device instead of crashing. Slots are
// constant-initialised, so registration from static initialisers in any order is safe.
#pragma once

#include <array>

#include "core/device.h"
#include "core/error.h"

namespace sl {

template <class Sig>
class KernelSlot;

template <class R, class... Args>
class KernelSlot<R(Args...)> {
 public:
  using Fn = R (*)(Args...);
  constexpr explicit KernelSlot(const char* name) : name_(name), fns_{} {}

  /// Installs the implementation for a device kind (called from static registrars).
  void set(DeviceKind k, Fn f) { fns_[static_cast<int>(k)] = f; }
  bool has(DeviceKind k) const { return fns_[static_cast<int>(k)] != nullptr; }
  const char* name() const { return name_; }

  /// The implementation for `k`; throws DeviceError when the backend has none.
  Fn get(DeviceKind k) const {
    Fn f = fns_[static_cast<int>(k)];
    if (!f) [[unlikely]] {
      detail::throw_error<DeviceError>(name_, ": no kernel for device type ", device_kind_name(k),
                                       k == DeviceKind::cuda
                                           ? " (built without CUDA, or this op has no CUDA kernel)"
                                           : "");
    }
    return f;
  }
  R operator()(DeviceKind k, Args... args) const { return get(k)(static_cast<Args>(args)...); }

 private:
  const char* name_;
  std::array<Fn, kNumDeviceKinds> fns_;
};

}  // namespace sl

#define SL_DECLARE_KERNEL(name, ...) extern ::sl::KernelSlot<__VA_ARGS__> name
#define SL_DEFINE_KERNEL(name, ...) constinit ::sl::KernelSlot<__VA_ARGS__> name{#name}
#define SL_CONCAT_INNER(a, b) a##b
#define SL_CONCAT(a, b) SL_CONCAT_INNER(a, b)
#define SL_REGISTER_KERNEL(slot, kind, fn)                                      \
  [[maybe_unused]] static const bool SL_CONCAT(sl_registered_, __COUNTER__) = \
      ((slot).set((kind), (fn)), true)

// Kernel slots: how a device backend plugs in without generic code naming it.
//
// Note [Kernel registration]
// A family header (core/ops/F.h) declares one slot per kernel with SL_DECLARE_KERNEL, and
// core/ops/F.cpp defines it with SL_DEFINE_KERNEL. Each backend's file for that family
// (core/cpu/F.cpp, core/cuda/F.cu) registers its implementation at load time with
// SL_REGISTER_KERNEL. Generic code calls `slot(device_kind, args...)`; a missing entry throws a
// DeviceError naming the kernel and the device instead of crashing. Slots are
// constant-initialised, so registration from static initialisers in any order is safe.
//
// Every slot that receives an implementation also joins one list of slots, so that tests can
// stand one backend in for another: mirror_kernels(cpu, cuda) gives each slot without a CUDA
// entry the CPU's (tests/support/fake_gpu.cpp, Note [Fake GPU]).
#pragma once

#include <array>
#include <concepts>

#include "core/device.h"
#include "core/error.h"
#include "core/profiler.h"

namespace sl {

template <class Sig>
class KernelSlot;

/// For tests only: gives every kernel slot that has a `from` implementation and no `to` one the
/// `from` implementation, and returns how many it filled. Lets a test binary run device-generic
/// code on a stand-in backend (Note [Fake GPU] in tests/support/fake_gpu.h); a library or program
/// never calls it. Call it after all static registration (from main or a test's static
/// initialiser): slots registered later are not mirrored.
int mirror_kernels(DeviceKind from, DeviceKind to);

namespace detail {
/// The untyped part of a kernel slot: its name and its place in the list of slots.
class KernelSlotBase {
 public:
  const char* name() const { return name_; }

 protected:
  /// Copies the `from` entry into the empty `to` entry; false when there was nothing to copy.
  using MirrorFn = bool (*)(KernelSlotBase*, DeviceKind from, DeviceKind to);
  constexpr KernelSlotBase(const char* name, MirrorFn mirror) : name_(name), mirror_(mirror) {}
  /// Adds this slot to the list (once; called by every set()).
  void enlist();

 private:
  friend int sl::mirror_kernels(DeviceKind, DeviceKind);
  const char* name_;
  MirrorFn mirror_;
  KernelSlotBase* next_ = nullptr;
  bool listed_ = false;
};

/// The device of the first argument that names one of kind `k` (a defined Tensor, or a struct
/// with a device() member such as LstmStep), for the profiler's device timer (Note [Device
/// timer]); -1 when no argument does.
template <class... Args>
int device_index_of(DeviceKind k, const Args&... args) {
  int index = -1;
  auto names = [&](const auto& a) {
    if constexpr (requires {
                    { a.device() } -> std::convertible_to<Device>;
                  }) {
      if constexpr (requires {
                      { a.defined() } -> std::convertible_to<bool>;
                    }) {
        if (!a.defined()) return false;
      }
      const Device d = a.device();
      if (d.kind == k) {
        index = d.index;
        return true;
      }
    }
    return false;
  };
  (void)(names(args) || ...);
  (void)names;  // unused when the slot takes no arguments
  return index;
}
}  // namespace detail

template <class R, class... Args>
class KernelSlot<R(Args...)> : public detail::KernelSlotBase {
 public:
  using Fn = R (*)(Args...);
  constexpr explicit KernelSlot(const char* name) : KernelSlotBase(name, &mirror), fns_{} {}

  /// Installs the implementation for a device kind (called from static registrars).
  void set(DeviceKind k, Fn f) {
    fns_[static_cast<int>(k)] = f;
    enlist();
  }
  bool has(DeviceKind k) const { return fns_[static_cast<int>(k)] != nullptr; }

  /// The implementation for `k`; throws DeviceError when the backend has none.
  Fn get(DeviceKind k) const {
    Fn f = fns_[static_cast<int>(k)];
    if (!f) [[unlikely]] {
      detail::throw_error<DeviceError>(name(), ": no kernel for device type ", device_kind_name(k),
                                       k == DeviceKind::cuda
                                           ? " (built without CUDA, or this op has no CUDA kernel)"
                                           : "");
    }
    return f;
  }
  /// Calls the implementation for `k`; while the profiler records, as an event named after the
  /// slot, and on a device with a timer as a gpu event too (Note [Profiler]).
  R operator()(DeviceKind k, Args... args) const {
    if (profiler::is_recording()) [[unlikely]] {
      profiler::detail::KernelCall call(name(), k, detail::device_index_of(k, args...));
      return get(k)(static_cast<Args>(args)...);
    }
    return get(k)(static_cast<Args>(args)...);
  }

 private:
  static bool mirror(KernelSlotBase* base, DeviceKind from, DeviceKind to) {
    auto* self = static_cast<KernelSlot*>(base);
    if (self->has(to) || !self->has(from)) return false;
    self->fns_[static_cast<int>(to)] = self->fns_[static_cast<int>(from)];
    return true;
  }
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

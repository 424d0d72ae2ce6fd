// The device timer's slots (Note [Device timer]); backends register their entries.
#include "core/device_timer.h"

namespace sl::profiler {

SL_DEFINE_KERNEL(device_timer_mark_kernel, int64_t(int device));
SL_DEFINE_KERNEL(device_timer_resolve_kernel,
                 void(int device, std::span<const int64_t> markers, std::span<int64_t> host_ns));
SL_DEFINE_KERNEL(device_timer_release_kernel, void(int device, std::span<const int64_t> markers));

}  // namespace sl::profiler

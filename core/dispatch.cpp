#include "core/dispatch.h"

#include <mutex>

namespace sl {
namespace {
// Constant-initialised, so slots registered from any static initialiser find them ready.
constinit std::mutex g_slots_mu;
constinit detail::KernelSlotBase* g_slots = nullptr;
}  // namespace

void detail::KernelSlotBase::enlist() {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  if (listed_) return;
  listed_ = true;
  next_ = g_slots;
  g_slots = this;
}

int mirror_kernels(DeviceKind from, DeviceKind to) {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  int filled = 0;
  for (detail::KernelSlotBase* s = g_slots; s != nullptr; s = s->next_) {
    if (s->mirror_(s, from, to)) ++filled;
  }
  return filled;
}

}  // namespace sl

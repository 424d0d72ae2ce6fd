// The CUDA backend's device timer (Note [Device timer]): a pool of CUDA events per device,
// recorded on the compute stream, and their times read against an anchor event.
#include <algorithm>
#include <array>
#include <cmath>
#include <mutex>
#include <numeric>
#include <vector>

#include "core/cuda/runtime.h"
#include "core/device_timer.h"
#include "core/profiler.h"

namespace sl::cuda {
namespace {

// The markers of one device. An id is an index into events; seq says in which order they were
// recorded, which is their order on the device's one compute stream (record and seq++ happen
// under mu together).
struct MarkerPool {
  std::mutex mu;
  std::vector<cudaEvent_t> events;  // created with default flags: timing on
  std::vector<uint64_t> seq;
  std::vector<int64_t> free;
  uint64_t next_seq = 0;
  cudaEvent_t anchor = nullptr;
};

MarkerPool& pool(int device) {
  SL_CHECK_DEVICE(device >= 0 && device < raw_device_count(), "profiler: cuda:", device,
                  " is not available (", raw_device_count(), " GPU(s) visible)");
  // Never destroyed: a thread may record a marker during exit, and the events live as long as
  // the process's CUDA context.
  static auto* pools = new std::array<MarkerPool, kMaxDevicesPerKind>;
  return (*pools)[static_cast<size_t>(device)];
}

int64_t mark_hook(int device) {
  MarkerPool& p = pool(device);
  std::lock_guard<std::mutex> lock(p.mu);
  DeviceGuard g(device);  // the legacy default stream is the current device's
  int64_t id;
  if (!p.free.empty()) {
    id = p.free.back();
    p.free.pop_back();
  } else {
    // Room first (free can then hold every marker, so release never allocates).
    if (p.free.capacity() < p.events.size() + 1) {
      const size_t room = std::max<size_t>(64, 2 * p.events.size());
      p.events.reserve(room);
      p.seq.reserve(room);
      p.free.reserve(room);
    }
    cudaEvent_t ev = nullptr;
    CUDA_CHECK(cudaEventCreate(&ev));
    p.events.push_back(ev);
    p.seq.push_back(0);
    id = static_cast<int64_t>(p.events.size()) - 1;
  }
  const cudaError_t err =
      cudaEventRecord(p.events[static_cast<size_t>(id)], compute_stream(device));
  if (err != cudaSuccess) {
    p.free.push_back(id);
    detail::throw_cuda_error(err, "cudaEventRecord(marker, compute_stream(device))", __FILE__,
                             __LINE__);
  }
  p.seq[static_cast<size_t>(id)] = p.next_seq++;
  return id;
}

void resolve_hook(int device, std::span<const int64_t> markers, std::span<int64_t> host_ns) {
  MarkerPool& p = pool(device);
  std::lock_guard<std::mutex> lock(p.mu);
  DeviceGuard g(device);
  if (p.anchor == nullptr) CUDA_CHECK(cudaEventCreate(&p.anchor));
  // The anchor follows every marker on the stream; the host reads its clock once it has been
  // reached, so the times below are late by the wait's wake-up, never early.
  CUDA_CHECK(cudaEventRecord(p.anchor, compute_stream(device)));
  CUDA_CHECK(cudaEventSynchronize(p.anchor));
  const int64_t anchor_ns = profiler::now_ns();
  // Newest to oldest, each marker's time from the next one's: cudaEventElapsedTime gives float
  // milliseconds, precise to nanoseconds over the short step between neighbours, where over the
  // whole recording it would round to microseconds.
  std::vector<size_t> order(markers.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return p.seq[static_cast<size_t>(markers[a])] < p.seq[static_cast<size_t>(markers[b])];
  });
  int64_t t = anchor_ns;
  cudaEvent_t next = p.anchor;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    cudaEvent_t ev = p.events[static_cast<size_t>(markers[*it])];
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, ev, next));
    t -= std::max<int64_t>(0, std::llround(static_cast<double>(ms) * 1e6));
    host_ns[*it] = t;
    next = ev;
  }
}

void release_hook(int device, std::span<const int64_t> markers) noexcept {
  MarkerPool& p = pool(device);
  std::lock_guard<std::mutex> lock(p.mu);
  for (int64_t id : markers) {
    if (id >= 0 && static_cast<size_t>(id) < p.events.size()) p.free.push_back(id);
  }
}

SL_REGISTER_KERNEL(profiler::device_timer_mark_kernel, DeviceKind::cuda, &mark_hook);
SL_REGISTER_KERNEL(profiler::device_timer_resolve_kernel, DeviceKind::cuda, &resolve_hook);
SL_REGISTER_KERNEL(profiler::device_timer_release_kernel, DeviceKind::cuda, &release_hook);

}  // namespace
}  // namespace sl::cuda

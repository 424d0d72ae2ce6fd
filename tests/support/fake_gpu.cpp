#include "support/fake_gpu.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/caching_allocator.h"
#include "core/cuda/cuda_api.h"
#include "core/device_timer.h"
#include "core/dispatch.h"
#include "core/profiler.h"
#include "dist/process_group.h"
#include "dist/work.h"
#include "sl_config.h"

namespace sl::testing {
namespace {

/// Host memory standing in for device memory, with a capacity; events are always complete (the
/// fake GPU runs everything synchronously).
class HostMemoryBackend final : public cuda::DeviceMemoryBackend {
 public:
  void* raw_alloc(size_t nbytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (nbytes > kFakeGpuCapacity - used_) return nullptr;
    void* p = std::aligned_alloc(512, (nbytes + 511) / 512 * 512);
    if (p == nullptr) return nullptr;
    used_ += nbytes;
    sizes_[p] = nbytes;
    return p;
  }
  void raw_free(void* ptr) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(ptr);
    if (it == sizes_.end()) return;
    used_ -= it->second;
    sizes_.erase(it);
    std::free(ptr);
  }
  void mem_info(size_t* free_bytes, size_t* total_bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    *free_bytes = kFakeGpuCapacity - used_;
    *total_bytes = kFakeGpuCapacity;
  }
  cuda::EventId record_event(cuda::StreamId) override { return 1; }
  bool query_event(cuda::EventId) override { return true; }
  void wait_event(cuda::EventId) override {}
  void destroy_event(cuda::EventId) override {}
  void synchronize() override {}
  std::string name() const override { return "fake cuda:0"; }

 private:
  std::mutex mu_;
  size_t used_ = 0;
  std::map<void*, size_t> sizes_;
};

class FakeGpuAllocator final : public Allocator {
 public:
  FakeGpuAllocator() : cache_(std::make_unique<HostMemoryBackend>()) {}
  void* allocate(size_t nbytes) override { return cache_.allocate(nbytes, /*stream=*/0); }
  void deallocate(void* ptr, size_t /*nbytes*/) override { cache_.deallocate(ptr); }
  MemoryStats stats() const override { return cache_.stats(); }
  void reset_peak() override { cache_.reset_peak(); }
  void empty_cache() override { cache_.empty_cache(); }

 private:
  cuda::CachingAllocator cache_;
};

Allocator* fake_allocator(int index) {
  SL_CHECK_DEVICE(index == 0, "fake GPU: only cuda:0 exists, asked for cuda:", index);
  // Never destroyed, as the real one: tensors may outlive static destructors.
  static auto* a = new FakeGpuAllocator();
  return a;
}
int fake_device_count() { return 1; }
std::atomic<int> g_synchronize_calls{0};
void fake_synchronize(int /*device*/) {
  g_synchronize_calls.fetch_add(1);
}
std::string fake_device_name(int /*device*/) { return "fake GPU (the CPU's kernels)"; }
int fake_compute_capability(int /*device*/) { return 90; }

/// The fake GPU's device timer (Note [Device timer]): its kernels run synchronously, so a marker
/// is the host's clock when it is taken. A pool of at most g_timer_capacity markers, ids reused.
std::mutex g_timer_mu;
std::vector<int64_t> g_marker_ns;  // by id
std::vector<int64_t> g_free_markers;
int64_t g_timer_capacity = int64_t{1} << 22;
int64_t g_markers_taken = 0;

int64_t fake_mark(int device) {
  SL_CHECK_DEVICE(device == 0, "fake GPU: only cuda:0 exists, asked for cuda:", device);
  std::lock_guard<std::mutex> lock(g_timer_mu);
  int64_t id;
  if (!g_free_markers.empty()) {
    id = g_free_markers.back();
    g_free_markers.pop_back();
  } else if (static_cast<int64_t>(g_marker_ns.size()) < g_timer_capacity) {
    g_marker_ns.push_back(0);
    g_free_markers.reserve(g_marker_ns.size());
    id = static_cast<int64_t>(g_marker_ns.size()) - 1;
  } else {
    return -1;
  }
  ++g_markers_taken;
  g_marker_ns[static_cast<size_t>(id)] = profiler::now_ns();
  return id;
}
void fake_resolve(int /*device*/, std::span<const int64_t> markers, std::span<int64_t> host_ns) {
  std::lock_guard<std::mutex> lock(g_timer_mu);
  for (size_t i = 0; i < markers.size(); ++i) {
    host_ns[i] = g_marker_ns.at(static_cast<size_t>(markers[i]));
  }
}
void fake_release(int /*device*/, std::span<const int64_t> markers) {
  std::lock_guard<std::mutex> lock(g_timer_mu);
  for (int64_t id : markers) g_free_markers.push_back(id);
}

/// The fake GPU's NCCL: the collectives of `bootstrap` (the MPI world, or a single rank) on host
/// copies of the fake-GPU tensors, finished before start() returns. Same ranks, same reduction
/// order as the bootstrap group, so a run on fake GPUs gives the CPU run's bits.
class FakeNcclGroup final : public dist::ProcessGroup {
 public:
  FakeNcclGroup(dist::ProcessGroupPtr bootstrap, Device device)
      : ProcessGroup(bootstrap->rank(), bootstrap->size(), bootstrap->options()),
        bootstrap_(std::move(bootstrap)) {
    SL_CHECK_DEVICE(device.is_cuda() && device.index == 0,
                    "make_nccl_group (fake GPU): expected cuda:0, got ", device);
  }
  const char* backend() const override { return "nccl (fake GPU)"; }
  DeviceKind device_kind() const override { return DeviceKind::cuda; }

 protected:
  dist::WorkPtr start(const dist::Collective& c, const Tensor& out, const Tensor& in) override {
    using dist::CollectiveKind;
    Tensor host_out = out.defined() ? out.to(kCPU, /*force_copy=*/true) : out;
    Tensor host_in = in.defined() ? in.to(kCPU, /*force_copy=*/true) : in;
    switch (c.kind) {
      case CollectiveKind::allreduce:
        bootstrap_->allreduce(host_out, c.op)->wait();
        break;
      case CollectiveKind::broadcast:
        bootstrap_->broadcast(host_out, c.root)->wait();
        break;
      case CollectiveKind::reduce_scatter:
        bootstrap_->reduce_scatter(host_out, host_in, c.op)->wait();
        break;
      case CollectiveKind::allgather:
        bootstrap_->allgather(host_out, host_in)->wait();
        break;
      case CollectiveKind::barrier:
        bootstrap_->barrier()->wait();
        break;
    }
    if (out.defined()) Tensor(out).copy_(host_out);
    return dist::Work::completed(c.str());
  }

 private:
  dist::ProcessGroupPtr bootstrap_;
};

dist::ProcessGroupPtr make_fake_nccl_group(const dist::ProcessGroupPtr& bootstrap, Device device) {
  SL_CHECK(bootstrap != nullptr, "make_nccl_group (fake GPU): bootstrap group is null");
  return std::make_shared<FakeNcclGroup>(bootstrap, device);
}

bool g_installed = false;

}  // namespace

bool install_fake_gpu() {
  if (SL_HAVE_CUDA) return false;
  static std::once_flag once;
  std::call_once(once, [] {
    // The runtime's own slots first, so that mirroring does not give cuda:0 the CPU's allocator
    // or device count.
    allocator_kernel.set(DeviceKind::cuda, &fake_allocator);
    device_count_kernel.set(DeviceKind::cuda, &fake_device_count);
    cuda::synchronize_kernel.set(DeviceKind::cuda, &fake_synchronize);
    cuda::device_name_kernel.set(DeviceKind::cuda, &fake_device_name);
    cuda::compute_capability_kernel.set(DeviceKind::cuda, &fake_compute_capability);
    profiler::device_timer_mark_kernel.set(DeviceKind::cuda, &fake_mark);
    profiler::device_timer_resolve_kernel.set(DeviceKind::cuda, &fake_resolve);
    profiler::device_timer_release_kernel.set(DeviceKind::cuda, &fake_release);
    const int n = mirror_kernels(DeviceKind::cpu, DeviceKind::cuda);
    dist::set_nccl_stand_in(&make_fake_nccl_group);
    g_installed = true;
    std::fprintf(stderr,
                 "[fake GPU] cuda:0 is a stand-in: host memory and the CPU's kernels (%d kernel "
                 "slots mirrored), NCCL's collectives run over the MPI world on host copies. These "
                 "runs check everything around the CUDA kernels, not the "
                 "kernels: see Note [Fake GPU] in tests/support/fake_gpu.h.\n",
                 n);
  });
  return true;
}

bool fake_gpu_installed() { return g_installed; }
int fake_synchronize_calls() {
  return g_synchronize_calls.load();
}

FakeTimerCounts fake_timer_counts() {
  std::lock_guard<std::mutex> lock(g_timer_mu);
  return {g_markers_taken, static_cast<int64_t>(g_marker_ns.size() - g_free_markers.size()),
          static_cast<int64_t>(g_marker_ns.size())};
}

void set_fake_timer_capacity(int64_t markers) {
  std::lock_guard<std::mutex> lock(g_timer_mu);
  g_timer_capacity = markers;
}

}  // namespace sl::testing

// The CUDA device allocator: the caching allocator of Note [Caching allocator] over cudaMalloc,
// one per GPU, registered as the allocator of DeviceKind::cuda.
#include <array>
#include <atomic>
#include <mutex>

#include "core/allocator.h"
#include "core/cuda/caching_allocator.h"
#include "core/cuda/runtime.h"

namespace sl::cuda {
namespace {

class CudaMemoryBackend final : public DeviceMemoryBackend {
 public:
  explicit CudaMemoryBackend(int device) : device_(device) {}

  void* raw_alloc(size_t nbytes) override {
    DeviceGuard g(device_);
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it so the retry starts clean
      return nullptr;
    }
    CUDA_CHECK(err);
    return p;
  }
  void raw_free(void* ptr) override {
    DeviceGuard g(device_);
    CUDA_CHECK(cudaFree(ptr));  // waits for the device, so no queued kernel still uses ptr
  }
  void mem_info(size_t* free_bytes, size_t* total_bytes) override {
    DeviceGuard g(device_);
    CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
  }
  EventId record_event(StreamId stream) override {
    DeviceGuard g(device_);
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    try {
      CUDA_CHECK(cudaEventRecord(e, reinterpret_cast<cudaStream_t>(stream)));
    } catch (...) {
      (void)cudaEventDestroy(e);  // not left behind when recording fails
      throw;
    }
    return reinterpret_cast<EventId>(e);
  }
  bool query_event(EventId e) override {
    cudaError_t err = cudaEventQuery(reinterpret_cast<cudaEvent_t>(e));
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    CUDA_CHECK(err);
    return true;
  }
  void wait_event(EventId e) override {
    CUDA_CHECK(cudaEventSynchronize(reinterpret_cast<cudaEvent_t>(e)));
  }
  void destroy_event(EventId e) override {
    CUDA_CHECK(cudaEventDestroy(reinterpret_cast<cudaEvent_t>(e)));
  }
  void synchronize() override {
    DeviceGuard g(device_);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::string name() const override { return "cuda:" + std::to_string(device_); }

 private:
  int device_;
};

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int device)
      : device_(device), cache_(std::make_unique<CudaMemoryBackend>(device)) {}

  void* allocate(size_t nbytes) override {
    return cache_.allocate(nbytes, reinterpret_cast<StreamId>(compute_stream(device_)));
  }
  void deallocate(void* ptr, size_t /*nbytes*/) override { cache_.deallocate(ptr); }
  MemoryStats stats() const override { return cache_.stats(); }
  void reset_peak() override { cache_.reset_peak(); }
  void empty_cache() override { cache_.empty_cache(); }
  CachingAllocator& cache() { return cache_; }

 private:
  int device_;
  CachingAllocator cache_;
};

Allocator* cuda_allocator(int index) {
  // Created on first use and never destroyed: at process exit the CUDA runtime may already be
  // shut down, so freeing device memory then would fail.
  static std::array<std::once_flag, kMaxDevicesPerKind> once;
  static std::array<CudaAllocator*, kMaxDevicesPerKind> allocators{};
  auto i = static_cast<size_t>(index);
  std::call_once(once[i], [&] { allocators[i] = new CudaAllocator(index); });
  return allocators[i];
}

SL_REGISTER_KERNEL(allocator_kernel, DeviceKind::cuda, &cuda_allocator);

}  // namespace

void record_stream(Device d, void* ptr, cudaStream_t stream) {
  static_cast<CudaAllocator*>(cuda_allocator(d.index))
      ->cache()
      .record_stream(ptr, reinterpret_cast<StreamId>(stream));
}

}  // namespace sl::cuda

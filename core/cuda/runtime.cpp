#include "core/cuda/runtime.h"

#include <array>
#include <atomic>
#include <mutex>
#include <new>

#include "core/allocator.h"
#include "core/cuda/cuda_api.h"

namespace sl::cuda {

namespace detail {

const char* cublas_status_name(cublasStatus_t st) {
  switch (st) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
      return "CUBLAS_STATUS_(unknown)";
  }
}

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  // Clear a non-sticky error so that later calls are not blamed for it.
  (void)cudaGetLastError();
  std::string msg =
      ::sl::detail::str_cat("CUDA error ", cudaGetErrorName(err), " (", cudaGetErrorString(err),
                            ") in ", call, " at ", file, ":", line);
  if (err == cudaErrorMemoryAllocation) throw OutOfMemoryError(msg);
  throw CudaError(msg);
}

void throw_cublas_error(cublasStatus_t st, const char* call, const char* file, int line) {
  std::string msg = ::sl::detail::str_cat("cuBLAS error ", cublas_status_name(st), " in ", call,
                                          " at ", file, ":", line);
  if (st == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemoryError(msg);
  throw CudaError(msg);
}

}  // namespace detail

int raw_device_count() {
  static const int count = [] {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // no driver / no device: report zero GPUs
      return 0;
    }
    return n < kMaxDevicesPerKind ? n : kMaxDevicesPerKind;
  }();
  return count;
}

DeviceGuard::DeviceGuard(int device) {
  CUDA_CHECK(cudaGetDevice(&prev_));
  if (prev_ != device) {
    CUDA_CHECK(cudaSetDevice(device));
  } else {
    prev_ = -1;  // nothing to restore
  }
}

DeviceGuard::~DeviceGuard() {
  if (prev_ >= 0) (void)cudaSetDevice(prev_);
}

cudaStream_t compute_stream(int /*device*/) {
  return nullptr;
}  // legacy default stream

namespace {

struct PerDevice {
  std::once_flag props_once, cublas_once, cublaslt_once, lt_workspace_once, index_error_once;
  cudaDeviceProp props{};
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublaslt = nullptr;
  void* lt_workspace = nullptr;
  IndexErrorSlot index_error;
  /// The host's view of index_error's record; null until the slot is allocated.
  std::atomic<IndexErrorRecord*> index_error_host{nullptr};
};

PerDevice& per_device(int device) {
  static std::array<PerDevice, kMaxDevicesPerKind> all;
  SL_CHECK_DEVICE(device >= 0 && device < raw_device_count(), "cuda: device ", device,
                  " is not available (", raw_device_count(), " GPU(s) visible)");
  return all[static_cast<size_t>(device)];
}

}  // namespace

const cudaDeviceProp& device_props(int device) {
  PerDevice& d = per_device(device);
  std::call_once(d.props_once, [&] { CUDA_CHECK(cudaGetDeviceProperties(&d.props, device)); });
  return d.props;
}

cublasHandle_t cublas_handle(int device) {
  PerDevice& d = per_device(device);
  std::call_once(d.cublas_once, [&] {
    DeviceGuard g(device);
    CUBLAS_CHECK(cublasCreate(&d.cublas));
    // Default math: float32 GEMMs use TF32 only when a call asks for it through its compute
    // type (CUBLAS_COMPUTE_32F_FAST_TF32, see set_allow_tf32); 16-bit GEMMs add split-K
    // partial sums in float32 (Note [GEMM accumulation], core/cuda/matmul.cpp).
    CUBLAS_CHECK(cublasSetMathMode(
        d.cublas, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                            CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
  });
  CUBLAS_CHECK(cublasSetStream(d.cublas, compute_stream(device)));
  return d.cublas;
}

cublasLtHandle_t cublaslt_handle(int device) {
  PerDevice& d = per_device(device);
  std::call_once(d.cublaslt_once, [&] {
    DeviceGuard g(device);
    CUBLAS_CHECK(cublasLtCreate(&d.cublaslt));
  });
  return d.cublaslt;
}

void* cublaslt_workspace(int device) {
  PerDevice& d = per_device(device);
  std::call_once(d.lt_workspace_once, [&] {
    DeviceGuard g(device);
    CUDA_CHECK(cudaMalloc(&d.lt_workspace, kCublasLtWorkspaceBytes));
  });
  return d.lt_workspace;
}

Event::Event() {
  CUDA_CHECK(cudaEventCreate(&ev_));
}
Event::~Event() {
  if (ev_) (void)cudaEventDestroy(ev_);
}
void Event::record(cudaStream_t s) {
  CUDA_CHECK(cudaEventRecord(ev_, s));
}
void Event::synchronize() {
  CUDA_CHECK(cudaEventSynchronize(ev_));
}
float Event::elapsed_ms(const Event& end) const {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, ev_, end.ev_));
  return ms;
}

void stream_synchronize(int device) {
  DeviceGuard g(device);
  CUDA_CHECK(cudaStreamSynchronize(compute_stream(device)));
  check_index_error(device);
}

const IndexErrorSlot& index_error_slot(int device) {
  PerDevice& d = per_device(device);
  std::call_once(d.index_error_once, [&] {
    DeviceGuard g(device);
    void* host = nullptr;
    CUDA_CHECK(cudaHostAlloc(&host, sizeof(IndexErrorRecord),
                             cudaHostAllocMapped | cudaHostAllocPortable));
    auto* record = new (host) IndexErrorRecord{};
    void* dev = nullptr;
    CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0));
    unsigned int* claim = nullptr;
    CUDA_CHECK(cudaMalloc(&claim, sizeof(unsigned int)));
    CUDA_CHECK(cudaMemset(claim, 0, sizeof(unsigned int)));
    d.index_error.device_record = static_cast<IndexErrorRecord*>(dev);
    d.index_error.claim = claim;
    d.index_error_host.store(record, std::memory_order_release);
  });
  return d.index_error;
}

void check_index_error(int device) {
  PerDevice& d = per_device(device);
  IndexErrorRecord* record = d.index_error_host.load(std::memory_order_acquire);
  if (record == nullptr) return;
  std::optional<IndexErrorRecord> err = take_index_error(*record);
  if (!err) return;
  DeviceGuard g(device);
  CUDA_CHECK(cudaMemset(d.index_error.claim, 0, sizeof(unsigned int)));
  throw_index_error(*err, device);
}

namespace {

int cuda_device_count_hook() {
  return raw_device_count();
}
void synchronize_hook(int device) {
  DeviceGuard g(device);
  CUDA_CHECK(cudaDeviceSynchronize());
  check_index_error(device);
}
std::string device_name_hook(int device) {
  return device_props(device).name;
}
int compute_capability_hook(int device) {
  const cudaDeviceProp& p = device_props(device);
  return p.major * 10 + p.minor;
}

SL_REGISTER_KERNEL(device_count_kernel, DeviceKind::cuda, &cuda_device_count_hook);
SL_REGISTER_KERNEL(synchronize_kernel, DeviceKind::cuda, &synchronize_hook);
SL_REGISTER_KERNEL(device_name_kernel, DeviceKind::cuda, &device_name_hook);
SL_REGISTER_KERNEL(compute_capability_kernel, DeviceKind::cuda, &compute_capability_hook);

}  // namespace
}  // namespace sl::cuda

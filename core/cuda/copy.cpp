// CUDA glue of the copy family: copies between host and device, between GPUs and on one GPU
// (with dtype conversion and any strides), and fill. Host copies go through pinned staging
// buffers and synchronise the stream, except host-to-device copies from a pinned tensor, which
// are asynchronous (Note [Pinned host memory] in core/allocator.h, Note [CUDA streams and
// synchronisation]). Every copy that waits for a GPU then reports an index error its kernels
// recorded (Note [Unchecked indexing] in core/cuda/index_error.h).
#include <cstring>

#include "core/cuda/pinned_allocator.h"
#include "core/cuda/runtime.h"
#include "core/cuda/tensor_layout.h"
#include "core/ops/copy.h"

namespace sl::cuda {
namespace {

bool dense_pair(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.is_contiguous() && b.is_contiguous();
}

/// dst and src on the same GPU.
void copy_on_device(const Tensor& dst, const Tensor& src) {
  DeviceGuard g(dst.device());
  cudaStream_t s = compute_stream(dst.device());
  Tensor from = src;
  if (dst.is_same_storage(src)) {
    if (dst.data_ptr() == src.data_ptr() && dst.strides() == src.strides() &&
        dst.dtype() == src.dtype()) {
      return;  // copying a tensor onto itself
    }
    from = ops::contiguous(src, /*force_copy=*/true);  // overlapping views: go through a copy
  }
  if (dense_pair(dst, from)) {
    CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), from.data_ptr(), dst.nbytes(),
                               cudaMemcpyDeviceToDevice, s));
    return;
  }
  launch_convert(dst.dtype(), from.dtype(), make_layout<2>({&dst, &from}), s);
}

void host_to_device(const Tensor& dst, const Tensor& src) {
  Tensor host = ops::contiguous(ops::cast(src, dst.dtype()));
  Tensor target = dst.is_contiguous() ? dst : ops::empty(dst.sizes(), dst.dtype(), dst.device());
  const int device = dst.device().index;
  if (host.is_pinned()) {
    // Note [Pinned host memory]: straight from the user's pinned tensor, asynchronously; its
    // block is not reused before the stream has read it.
    DeviceGuard g(device);
    cudaStream_t s = compute_stream(device);
    CUDA_CHECK(cudaMemcpyAsync(target.data_ptr(), host.data_ptr(), target.nbytes(),
                               cudaMemcpyHostToDevice, s));
    try {
      record_pinned_use(host.storage()->data(), device, s);
    } catch (...) {
      // the copy is queued but its use could not be recorded: let it finish before the block
      // can be handed out again
      (void)cudaStreamSynchronize(s);
      throw;
    }
  } else {
    staged_host_to_device(target.data_ptr(), host.data_ptr(), target.nbytes(), device);
  }
  if (!target.is_same(dst)) copy_on_device(dst, target);
}

void device_to_host(const Tensor& dst, const Tensor& src) {
  Tensor dev = ops::contiguous(ops::cast(src, dst.dtype()));  // runs on the GPU
  Tensor target = dst.is_contiguous() ? dst : ops::empty(dst.sizes(), dst.dtype(), kCPU);
  const int device = src.device().index;
  if (target.is_pinned()) {  // straight into the user's pinned tensor
    DeviceGuard g(device);
    cudaStream_t s = compute_stream(device);
    CUDA_CHECK(cudaMemcpyAsync(target.data_ptr(), dev.data_ptr(), target.nbytes(),
                               cudaMemcpyDeviceToHost, s));
    stream_synchronize(device);  // the caller reads it next
  } else {
    staged_device_to_host(target.data_ptr(), dev.data_ptr(), target.nbytes(), device);
  }
  if (!target.is_same(dst)) ops::copy_(dst, target);  // CPU strided copy
}

void device_to_device(const Tensor& dst, const Tensor& src) {
  Tensor from = ops::contiguous(ops::cast(src, dst.dtype()));  // on src's GPU
  Tensor target = dst.is_contiguous() ? dst : ops::empty(dst.sizes(), dst.dtype(), dst.device());
  {
    // Order: src's queued work, then the copy on dst's stream, then both sides may go on.
    stream_synchronize(src.device().index);
    DeviceGuard g(dst.device());
    cudaStream_t s = compute_stream(dst.device());
    CUDA_CHECK(cudaMemcpyPeerAsync(target.data_ptr(), dst.device().index, from.data_ptr(),
                                   src.device().index, target.nbytes(), s));
    stream_synchronize(dst.device().index);  // `from` is freed to src's stream after this
  }
  if (!target.is_same(dst)) copy_on_device(dst, target);
}

void copy_cuda(const Tensor& dst, const Tensor& src) {
  const bool dc = dst.is_cuda(), sc = src.is_cuda();
  if (dc && sc) {
    if (dst.device() == src.device()) return copy_on_device(dst, src);
    return device_to_device(dst, src);
  }
  if (dc) return host_to_device(dst, src);
  return device_to_host(dst, src);
}

void fill_cuda(const Tensor& dst, Scalar value) {
  uint64_t bits = 0;
  visit_dtype(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = value.to<T>();
    static_assert(sizeof(T) <= sizeof(bits));
    std::memcpy(&bits, &v, sizeof(T));
  });
  DeviceGuard g(dst.device());
  launch_fill(static_cast<int>(dst.element_size()), bits, make_layout<1>({&dst}),
              compute_stream(dst.device()));
}

SL_REGISTER_KERNEL(copy_kernel, DeviceKind::cuda, &copy_cuda);
SL_REGISTER_KERNEL(fill_kernel, DeviceKind::cuda, &fill_cuda);

}  // namespace
}  // namespace sl::cuda

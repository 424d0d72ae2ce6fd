// CUDA glue of the index family. Indices arrive as contiguous int64, checked by generic code
// (Note [Index checks]) unless checked indexing is off; the kernels guard them either way and
// record a bad one in the device's error record (Note [Unchecked indexing]). nonzero_flat waits
// for the per-tile counts on the host to size its result.
#include "core/ops/index.h"
#include "core/cuda/kernels_core.h"
#include "core/cuda/runtime.h"
#include "core/cuda/tensor_layout.h"
#include "core/ops/copy.h"

namespace sl::cuda {
namespace {

/// An index tensor's data (int64; gather / scatter address it through its strides).
const int64_t* i64(const Tensor& t) {
  SL_ASSERT(t.dtype() == DType::i64);
  return static_cast<const int64_t*>(t.data_ptr());
}
/// A 1-d index read as a dense array (index_select, index_add).
const int64_t* i64_dense(const Tensor& t) {
  SL_ASSERT(t.dim() <= 1 && (t.numel() <= 1 || t.stride(0) == 1));
  return i64(t);
}

/// The guard of an index kernel of `op` on `d`, whose indices must lie in [0, size).
IndexGuard guard_for(Device d, const char* op, int64_t size) {
  const IndexErrorSlot& slot = index_error_slot(d.index);
  return IndexGuard{size, op, slot.device_record, slot.claim};
}

/// The geometry of gather / scatter: index's sizes, the element strides of a, b and index.
IndexGeom geom(const Tensor& index, int64_t dim, const Tensor& a, const Tensor& b) {
  SL_CHECK_SHAPE(index.dim() <= kMaxDims, "cuda index kernel: ", index.dim(),
                 " dims exceed the supported ", kMaxDims);
  IndexGeom g;
  g.ndim = static_cast<int>(index.dim());
  g.dim = static_cast<int>(dim);
  for (int d = 0; d < g.ndim; ++d) {
    g.sizes[d] = index.size(d);
    g.strides[0][d] = a.stride(d);
    g.strides[1][d] = b.stride(d);
    g.strides[2][d] = index.stride(d);
  }
  return g;
}

void index_select_cuda(const Tensor& out, const Tensor& in, const Tensor& index, const char* op) {
  SL_ASSERT(in.dim() == 3 && in.is_contiguous() && out.is_contiguous());
  DeviceGuard g(in.device());
  launch_index_select(static_cast<int>(in.element_size()), out.data_ptr(), in.data_ptr(),
                      i64_dense(index), in.size(0), in.size(1), in.size(2), index.numel(),
                      guard_for(in.device(), op, in.size(1)), compute_stream(in.device()));
}

void index_add_cuda(const Tensor& out, const Tensor& index, const Tensor& src, Scalar alpha,
                    int64_t skip, const char* op) {
  SL_ASSERT(out.dim() == 3 && out.is_contiguous() && src.is_contiguous());
  DeviceGuard g(out.device());
  launch_index_add(out.dtype(), out.data_ptr(), i64_dense(index), src.data_ptr(), dev_scalar(alpha),
                   skip, out.size(0), out.size(1), out.size(2), index.numel(),
                   guard_for(out.device(), op, out.size(1)), compute_stream(out.device()));
}

void gather_cuda(const Tensor& out, const Tensor& in, int64_t dim, const Tensor& index,
                 const char* op) {
  DeviceGuard g(in.device());
  launch_gather(static_cast<int>(in.element_size()), out.data_ptr(), in.data_ptr(), i64(index),
                geom(index, dim, out, in), guard_for(in.device(), op, in.size(dim)),
                compute_stream(in.device()));
}

void scatter_cuda(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                  bool accumulate, const char* op) {
  SL_ASSERT(src.dtype() == out.dtype());
  DeviceGuard g(out.device());
  launch_scatter(out.dtype(), out.data_ptr(), src.data_ptr(), i64(index),
                 geom(index, dim, out, src), accumulate, guard_for(out.device(), op, out.size(dim)),
                 compute_stream(out.device()));
}

Tensor nonzero_flat_cuda(const Tensor& mask) {
  SL_ASSERT(mask.dtype() == DType::b8 && mask.is_contiguous());
  const Device dev = mask.device();
  const int64_t n = mask.numel();
  const int64_t tiles = (n + kNonzeroTile - 1) / kNonzeroTile;
  const bool* m = static_cast<const bool*>(mask.data_ptr());
  Tensor counts = ops::empty({tiles}, DType::i64, dev);
  {
    DeviceGuard g(dev);
    launch_nonzero_count(m, n, static_cast<int64_t*>(counts.data_ptr()), compute_stream(dev));
  }
  // the exclusive prefix of the tile counts, on the host (the result's size is needed there)
  Tensor offsets = ops::to_device(counts, kCPU);  // waits for the counts
  int64_t* p = static_cast<int64_t*>(offsets.data_ptr());
  int64_t total = 0;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t c = p[t];
    p[t] = total;
    total += c;
  }
  Tensor out = ops::empty({total}, DType::i64, dev);
  if (total == 0) return out;
  Tensor dev_offsets = ops::to_device(offsets, dev);
  DeviceGuard g(dev);
  launch_nonzero_write(m, n, static_cast<const int64_t*>(dev_offsets.data_ptr()),
                       static_cast<int64_t*>(out.data_ptr()), compute_stream(dev));
  return out;
}

SL_REGISTER_KERNEL(index_select_kernel, DeviceKind::cuda, &index_select_cuda);
SL_REGISTER_KERNEL(index_add_kernel, DeviceKind::cuda, &index_add_cuda);
SL_REGISTER_KERNEL(gather_kernel, DeviceKind::cuda, &gather_cuda);
SL_REGISTER_KERNEL(scatter_kernel, DeviceKind::cuda, &scatter_cuda);
SL_REGISTER_KERNEL(nonzero_flat_kernel, DeviceKind::cuda, &nonzero_flat_cuda);

}  // namespace
}  // namespace sl::cuda

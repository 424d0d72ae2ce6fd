// CUDA glue of the reduce family (Note [Reduction layout]).
#include "core/ops/reduce.h"
#include "core/cuda/kernels.h"
#include "core/cuda/runtime.h"

namespace sl::cuda {
namespace {

ReduceCode reduce_code(ReduceOp op) {
  switch (op) {
#define SL_CASE(x)  \
  case ReduceOp::x: \
    return ReduceCode::x;
    SL_CASE(sum)
    SL_CASE(mean) SL_CASE(prod) SL_CASE(max) SL_CASE(min) SL_CASE(var) SL_CASE(norm)
        SL_CASE(logsumexp) SL_CASE(all) SL_CASE(any)
#undef SL_CASE
            default : break;
  }
  ::sl::detail::throw_error<DeviceError>(reduce_op_name(op), ": no CUDA kernel for this op yet");
}

void reduce_cuda(ReduceOp op, const Tensor& out, const Tensor& in, const ReduceParams& params) {
  ReduceCode code = reduce_code(op);
  SL_CHECK_DTYPE(out.dtype() == reduce_out_dtype(code, in.dtype()), reduce_op_name(op),
                 ": CUDA kernel expects a ", dtype_name(reduce_out_dtype(code, in.dtype())),
                 " output for a ", dtype_name(in.dtype()), " input, got ", dtype_name(out.dtype()));
  SL_CHECK_DTYPE(is_floating(in.dtype()) || !(op == ReduceOp::mean || op == ReduceOp::var ||
                                              op == ReduceOp::norm || op == ReduceOp::logsumexp),
                 reduce_op_name(op), ": expected a floating input, got ", dtype_name(in.dtype()));
  SL_ASSERT(in.is_contiguous() && out.is_contiguous() && in.dim() == 3);
  DeviceGuard g(out.device());
  launch_reduce(code, in.dtype(), in.data_ptr(), out.data_ptr(), in.size(0), in.size(1), in.size(2),
                params.correction, params.p, compute_stream(out.device()));
}

void arg_reduce_cuda(bool is_max, const Tensor& values, const Tensor& indices, const Tensor& in) {
  SL_ASSERT(in.is_contiguous() && in.dim() == 3);
  DeviceGuard g(in.device());
  launch_arg_reduce(is_max, in.dtype(), in.data_ptr(), values.data_ptr(),
                    static_cast<int64_t*>(indices.data_ptr()), in.size(0), in.size(1), in.size(2),
                    compute_stream(in.device()));
}

void cumsum_cuda(const Tensor& out, const Tensor& in) {
  SL_CHECK_DTYPE(is_floating(in.dtype()) || in.dtype() == DType::i64,
                 "cumsum: expected a floating or int64 input, got ", dtype_name(in.dtype()));
  DeviceGuard g(in.device());
  launch_cumsum(in.dtype(), in.data_ptr(), out.data_ptr(), in.size(0), in.size(1), in.size(2),
                compute_stream(in.device()));
}

SL_REGISTER_KERNEL(reduce_kernel, DeviceKind::cuda, &reduce_cuda);
SL_REGISTER_KERNEL(arg_reduce_kernel, DeviceKind::cuda, &arg_reduce_cuda);
SL_REGISTER_KERNEL(cumsum_kernel, DeviceKind::cuda, &cumsum_cuda);

}  // namespace
}  // namespace sl::cuda

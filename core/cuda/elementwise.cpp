// CUDA glue of the elementwise family: argument checks (with the CPU kernels' messages), op-code
// mapping (Note [CUDA glue and kernels]) and launches on the compute stream.
#include "core/ops/elementwise.h"
#include "core/cuda/runtime.h"
#include "core/cuda/tensor_layout.h"
#include "core/ops/copy.h"

namespace sl::cuda {
namespace {

UnaryCode unary_code(UnaryOp op) {
  switch (op) {
#define SL_CASE(x) \
  case UnaryOp::x: \
    return UnaryCode::x;
    SL_CASE(neg)
    SL_CASE(abs) SL_CASE(exp) SL_CASE(log) SL_CASE(log1p) SL_CASE(expm1) SL_CASE(sqrt)
        SL_CASE(rsqrt) SL_CASE(square) SL_CASE(reciprocal) SL_CASE(tanh) SL_CASE(sigmoid)
            SL_CASE(relu) SL_CASE(gelu) SL_CASE(gelu_tanh) SL_CASE(silu) SL_CASE(sin) SL_CASE(cos)
                SL_CASE(sign) SL_CASE(erf) SL_CASE(floor) SL_CASE(ceil) SL_CASE(round)
                    SL_CASE(trunc) SL_CASE(logical_not) SL_CASE(isnan) SL_CASE(isinf)
                        SL_CASE(isfinite)
#undef SL_CASE
                            default : break;
  }
  ::sl::detail::throw_error<DeviceError>(unary_op_name(op), ": no CUDA kernel for this op yet");
}

BinaryCode binary_code(BinaryOp op) {
  switch (op) {
#define SL_CASE(x)  \
  case BinaryOp::x: \
    return BinaryCode::x;
    SL_CASE(add)
    SL_CASE(sub) SL_CASE(mul) SL_CASE(div) SL_CASE(pow) SL_CASE(maximum) SL_CASE(minimum)
        SL_CASE(atan2) SL_CASE(fmod) SL_CASE(remainder) SL_CASE(eq) SL_CASE(ne) SL_CASE(lt)
            SL_CASE(le) SL_CASE(gt) SL_CASE(ge) SL_CASE(logical_and) SL_CASE(logical_or)
                SL_CASE(logical_xor) SL_CASE(relu_backward) SL_CASE(sigmoid_backward)
                    SL_CASE(tanh_backward) SL_CASE(gelu_backward) SL_CASE(gelu_tanh_backward)
                        SL_CASE(silu_backward)
#undef SL_CASE
                            default : break;
  }
  ::sl::detail::throw_error<DeviceError>(binary_op_name(op), ": no CUDA kernel for this op yet");
}

bool binary_needs_float(BinaryOp op) {
  return op == BinaryOp::div || op == BinaryOp::atan2 || op >= BinaryOp::relu_backward;
}

void unary_cuda(UnaryOp op, const Tensor& out, const Tensor& in) {
  SL_CHECK_DTYPE(!unary_op_needs_float(op) || is_floating(in.dtype()), unary_op_name(op),
                 ": expected a floating dtype, got ", dtype_name(in.dtype()));
  SL_CHECK_DTYPE(!(op == UnaryOp::neg && is_bool(in.dtype())), unary_op_name(op),
                 ": negation is not supported for bool tensors; use logical_not");
  UnaryCode code = unary_code(op);
  DeviceGuard g(out.device());
  launch_unary(code, in.dtype(), make_layout<2>({&out, &in}), compute_stream(out.device()));
}

/// Throws ValueError when an integer divisor has a zero (undefined behaviour on the GPU too);
/// reads a flag back from the device.
void check_no_zero_divisor(BinaryOp op, const Tensor& b) {
  Tensor flag = ops::empty({1}, DType::i32, b.device());
  cudaStream_t s = compute_stream(b.device());
  CUDA_CHECK(cudaMemsetAsync(flag.data_ptr(), 0, sizeof(int32_t), s));
  launch_any_zero(b.dtype(), make_layout<1>({&b}), static_cast<int32_t*>(flag.data_ptr()), s);
  int32_t host = 0;
  CUDA_CHECK(cudaMemcpyAsync(&host, flag.data_ptr(), sizeof(int32_t), cudaMemcpyDeviceToHost, s));
  stream_synchronize(b.device().index);
  SL_CHECK(host == 0, binary_op_name(op), ": integer division by zero");
}

void binary_cuda(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha) {
  const DType dt = a.dtype();
  SL_CHECK_DTYPE(!binary_needs_float(op) || is_floating(dt), binary_op_name(op),
                 ": expected a floating dtype, got ", dtype_name(dt));
  SL_CHECK_DTYPE(!(is_bool(dt) && (op == BinaryOp::fmod || op == BinaryOp::remainder ||
                                   op == BinaryOp::atan2 || op == BinaryOp::sub)),
                 binary_op_name(op), ": not supported for bool tensors");
  BinaryCode code = binary_code(op);
  DeviceGuard g(out.device());
  if (is_integral(dt) && (op == BinaryOp::fmod || op == BinaryOp::remainder)) {
    check_no_zero_divisor(op, b);
  }
  launch_binary(code, dt, dev_scalar(alpha), make_layout<3>({&out, &a, &b}),
                compute_stream(out.device()));
}

void where_cuda(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  DeviceGuard g(out.device());
  launch_where(out.dtype(), make_layout<4>({&out, &cond, &a, &b}), compute_stream(out.device()));
}

void clamp_cuda(const Tensor& out, const Tensor& in, std::optional<Scalar> lo,
                std::optional<Scalar> hi) {
  SL_CHECK_DTYPE(!is_bool(in.dtype()), "clamp: not supported for bool tensors");
  DeviceGuard g(out.device());
  launch_clamp(in.dtype(), lo.has_value(), lo ? dev_scalar(*lo) : DevScalar{}, hi.has_value(),
               hi ? dev_scalar(*hi) : DevScalar{}, make_layout<2>({&out, &in}),
               compute_stream(out.device()));
}

SL_REGISTER_KERNEL(unary_kernel, DeviceKind::cuda, &unary_cuda);
SL_REGISTER_KERNEL(binary_kernel, DeviceKind::cuda, &binary_cuda);
SL_REGISTER_KERNEL(where_kernel, DeviceKind::cuda, &where_cuda);
SL_REGISTER_KERNEL(clamp_kernel, DeviceKind::cuda, &clamp_cuda);

}  // namespace
}  // namespace sl::cuda

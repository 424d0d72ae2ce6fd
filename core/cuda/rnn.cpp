// CUDA glue of the rnn family: the four pointwise step kernels (the GEMMs around them are the
// matmul family's, so they already run on cuBLAS).
#include "core/ops/rnn.h"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/runtime.h"
#include "core/ops/copy.h"

namespace sl::cuda {
namespace {

RnnOperand op(const Tensor& t) {
  if (!t.defined()) return {};
  SL_ASSERT(t.dim() == 2 && t.stride(1) == 1);
  return {t.data_ptr(), t.stride(0)};
}
/// The lengths (int64 on the device, from the ops layer) as a contiguous tensor.
Tensor dense(const Tensor& t) {
  return t.defined() ? ops::contiguous(t) : t;
}
const int64_t* lengths(const Tensor& t) {
  return t.defined() ? static_cast<const int64_t*>(t.data_ptr()) : nullptr;
}

void lstm_step_forward_cuda(const LstmStep& s) {
  Tensor len = dense(s.lengths);
  LstmStepArgs a{op(s.gates), op(s.h_prev), op(s.c_prev), op(s.h_next),    op(s.c_next),
                 op(s.y),     lengths(len), s.t,          s.gates.size(0), s.h_prev.size(1)};
  DeviceGuard g(s.gates.device());
  launch_lstm_step_forward(s.gates.dtype(), a, compute_stream(s.gates.device()));
}

void lstm_step_backward_cuda(const LstmStepBackward& s) {
  Tensor len = dense(s.lengths);
  LstmStepBackwardArgs a{op(s.gates),  op(s.c_prev), op(s.c_next),    op(s.dh),
                         op(s.dy),     op(s.dc),     op(s.dgates),    op(s.dh_prev),
                         lengths(len), s.t,          s.gates.size(0), s.dh.size(1)};
  DeviceGuard g(s.gates.device());
  launch_lstm_step_backward(s.gates.dtype(), a, compute_stream(s.gates.device()));
}

void gru_step_forward_cuda(const GruStep& s) {
  Tensor len = dense(s.lengths);
  GruStepArgs a{op(s.gx),        op(s.gh), op(s.h_prev),
                op(s.h_next),    op(s.y),  s.bias_hh.defined() ? s.bias_hh.data_ptr() : nullptr,
                lengths(len),    s.t,      s.gx.size(0),
                s.h_prev.size(1)};
  DeviceGuard g(s.gx.device());
  launch_gru_step_forward(s.gx.dtype(), a, compute_stream(s.gx.device()));
}

void gru_step_backward_cuda(const GruStepBackward& s) {
  Tensor len = dense(s.lengths);
  GruStepBackwardArgs a{op(s.gx),     op(s.gh),  op(s.h_prev), op(s.dh),
                        op(s.dy),     op(s.dgx), op(s.dgh),    op(s.dh_prev),
                        lengths(len), s.t,       s.gx.size(0), s.dh.size(1)};
  DeviceGuard g(s.gx.device());
  launch_gru_step_backward(s.gx.dtype(), a, compute_stream(s.gx.device()));
}

SL_REGISTER_KERNEL(lstm_step_forward_kernel, DeviceKind::cuda, &lstm_step_forward_cuda);
SL_REGISTER_KERNEL(lstm_step_backward_kernel, DeviceKind::cuda, &lstm_step_backward_cuda);
SL_REGISTER_KERNEL(gru_step_forward_kernel, DeviceKind::cuda, &gru_step_forward_cuda);
SL_REGISTER_KERNEL(gru_step_backward_kernel, DeviceKind::cuda, &gru_step_backward_cuda);

}  // namespace
}  // namespace sl::cuda

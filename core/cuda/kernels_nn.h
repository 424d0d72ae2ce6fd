// The interface between the CUDA glue and the kernels of the nn-facing families (norm, dropout,
// pool, attention, rnn): pointers, sizes and scalars only (Note [CUDA glue and kernels]). A
// header per group of families, so that adding declarations here recompiles only these files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace sl::cuda {

// ---- norm family (norm.cu): all tensors contiguous; null weight / bias / outputs mean "absent".
// dt, the dtype of x, y, dy, dx: float32, float64, or 16-bit (float16 / bfloat16, computed in
// float). The saved statistics (mean, rstd, save_mean, save_invstd) have the compute dtype: dt for
// float32 / float64, float32 for a 16-bit dt. pdt, the dtype of weight, bias, running_mean,
// running_var and their gradients: dt, or float32 beside a 16-bit dt (mixed precision; DTypeError
// otherwise). ---------------------------------------------------------------------------------
void launch_layer_norm_forward(DType dt, DType pdt, const void* x, const void* w, const void* b,
                               void* y, void* mean, void* rstd, int64_t M, int64_t D, double eps,
                               cudaStream_t s);
void launch_layer_norm_backward(DType dt, DType pdt, void* dx, void* dw, void* db, const void* dy,
                                const void* x, const void* mean, const void* rstd, const void* w,
                                int64_t M, int64_t D, cudaStream_t s);
/// x [N, C, S]; running_mean / running_var may be null (then not updated; required when
/// !training).
void launch_batch_norm_forward(DType dt, DType pdt, void* y, void* save_mean, void* save_invstd,
                               const void* x, const void* w, const void* b, void* running_mean,
                               void* running_var, bool training, double momentum, double eps,
                               int64_t N, int64_t C, int64_t S, cudaStream_t s);
void launch_batch_norm_backward(DType dt, DType pdt, void* dx, void* dw, void* db, const void* dy,
                                const void* x, const void* w, const void* save_mean,
                                const void* save_invstd, bool training, int64_t N, int64_t C,
                                int64_t S, cudaStream_t s);

// ---- dropout family (dropout.cu) -----------------------------------------------------------
/// Note [Dropout mask]: keep_i = philox_uniform_f32(seed, offset, i) < float(1 - p).
void launch_dropout_forward(DType dt, void* out, bool* mask, const void* x, int64_t n, double p,
                            double scale, uint64_t seed, uint64_t offset, cudaStream_t s);
void launch_dropout_backward(DType dt, void* grad_in, const void* grad_out, const bool* mask,
                             int64_t n, double scale, cudaStream_t s);

}  // namespace sl::cuda

namespace sl::cuda {

// ---- pool family (pool.cu): float32, float64, float16, bfloat16 (16-bit computed in float),
// contiguous [P, H, W] planes ---------------------------------------------------------------
/// The fields of sl::Pool2dGeometry (core/ops/pool.h), copied so kernels need not include it.
struct PoolGeom {
  int64_t kh, kw, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, out_h, out_w;
  bool count_include_pad;
  int64_t divisor_override;
};
void launch_max_pool2d_forward(DType dt, void* out, int64_t* indices, const void* x, int64_t P,
                               int64_t H, int64_t W, const PoolGeom& g, cudaStream_t s);
/// grad_input [P, H, W] (overwritten) = the sum, per input element, of grad_out [P, Ho, Wo] over
/// the outputs whose index (from launch_max_pool2d_forward with g) is that element: a gather in
/// ascending output order, the CPU's order (Note [Max-pool backward order]), so the same bits on
/// every run; 16-bit gradients are summed in float and rounded once.
void launch_max_pool2d_backward(DType dt, void* grad_in, const void* grad_out,
                                const int64_t* indices, int64_t P, int64_t H, int64_t W,
                                const PoolGeom& g, cudaStream_t s);
void launch_avg_pool2d_forward(DType dt, void* out, const void* x, int64_t P, int64_t H, int64_t W,
                               const PoolGeom& g, cudaStream_t s);
void launch_avg_pool2d_backward(DType dt, void* grad_in, const void* grad_out, int64_t P, int64_t H,
                                int64_t W, const PoolGeom& g, cudaStream_t s);
void launch_adaptive_avg_pool2d_forward(DType dt, void* out, const void* x, int64_t P, int64_t H,
                                        int64_t W, int64_t Ho, int64_t Wo, cudaStream_t s);
void launch_adaptive_avg_pool2d_backward(DType dt, void* grad_in, const void* grad_out, int64_t P,
                                         int64_t H, int64_t W, int64_t Ho, int64_t Wo,
                                         cudaStream_t s);
/// out / indices [P, Ho, Wo] (Ho, Wo >= 1): adaptive max with the CPU kernel's rule
/// (adaptive_max_pool2d_forward_kernel in core/ops/pool.h).
void launch_adaptive_max_pool2d_forward(DType dt, void* out, int64_t* indices, const void* x,
                                        int64_t P, int64_t H, int64_t W, int64_t Ho, int64_t Wo,
                                        cudaStream_t s);
/// grad_input [P, H, W] (overwritten): a gather of grad_out at the forward's indices in ascending
/// output order, the CPU scatter's order, so the same bits (16-bit: summed in float).
void launch_adaptive_max_pool2d_backward(DType dt, void* grad_in, const void* grad_out,
                                         const int64_t* indices, int64_t P, int64_t H, int64_t W,
                                         int64_t Ho, int64_t Wo, cudaStream_t s);

}  // namespace sl::cuda

namespace sl::cuda {

// ---- attention family (attention.cu): float32, float64, float16, bfloat16 (16-bit storage,
// computed in float) ------------------------------------------------------------------------
/// probs = softmax(scale * scores (+ mask)) over the last dim of contiguous [rows = A*B*L, S]
/// (Note [Attention masks]); mask null, or of dtype mask_dt: bool, the scores' dtype, or float32
/// beside 16-bit scores (DTypeError otherwise), addressed with element strides (ma, mb, ml, ms)
/// over [A, B, L, S]. With causal, row i is query i + causal_offset (keys beyond it masked).
void launch_attention_softmax_forward(DType dt, void* probs, const void* scores, const void* mask,
                                      DType mask_dt, int64_t A, int64_t B, int64_t L, int64_t S,
                                      int64_t ma, int64_t mb, int64_t ml, int64_t ms, bool causal,
                                      int64_t causal_offset, double scale, cudaStream_t s);
/// grad_scores = scale * probs * (grad_probs - rowsum(grad_probs * probs)).
void launch_attention_softmax_backward(DType dt, void* grad_scores, const void* grad_probs,
                                       const void* probs, int64_t rows, int64_t S, double scale,
                                       cudaStream_t s);
/// Largest head dim (E and Ev) the fused attention kernel takes.
constexpr int64_t kFusedAttentionMaxHeadDim = 128;
/// out[n] = softmax(scale * q[n] k[n]^T (+ mask)) v[n] in one pass (Note [Fused attention
/// kernel], attention_fused.cu) over contiguous q [A*B, L, E], k [A*B, S, E], v [A*B, S, Ev],
/// out [A*B, L, Ev] of dtype dt (float32, float16 or bfloat16; E, Ev <= kFusedAttentionMaxHeadDim),
/// mask as for launch_attention_softmax_forward.
void launch_attention_fused_forward(DType dt, void* out, const void* q, const void* k,
                                    const void* v, const void* mask, DType mask_dt, int64_t A,
                                    int64_t B, int64_t L, int64_t S, int64_t E, int64_t Ev,
                                    int64_t ma, int64_t mb, int64_t ml, int64_t ms, bool causal,
                                    double scale, cudaStream_t s);

}  // namespace sl::cuda

namespace sl::cuda {

// ---- rnn family (rnn.cu): pointwise step kernels (Note [RNN layout])
// -------------------------------
/// An [N, width] operand: base pointer and row stride in elements (rows contiguous); null when
/// absent.
struct RnnOperand {
  void* p = nullptr;
  int64_t ld = 0;
};
struct LstmStepArgs {
  RnnOperand gates, h_prev, c_prev, h_next, c_next, y;
  const int64_t* lengths = nullptr;
  int64_t t = 0, N = 0, H = 0;
};
struct LstmStepBackwardArgs {
  RnnOperand gates, c_prev, c_next, dh, dy, dc, dgates, dh_prev;
  const int64_t* lengths = nullptr;
  int64_t t = 0, N = 0, H = 0;
};
struct GruStepArgs {
  RnnOperand gx, gh, h_prev, h_next, y;
  const void* bias_hh = nullptr;
  const int64_t* lengths = nullptr;
  int64_t t = 0, N = 0, H = 0;
};
struct GruStepBackwardArgs {
  RnnOperand gx, gh, h_prev, dh, dy, dgx, dgh, dh_prev;
  const int64_t* lengths = nullptr;
  int64_t t = 0, N = 0, H = 0;
};
void launch_lstm_step_forward(DType dt, const LstmStepArgs& a, cudaStream_t s);
void launch_lstm_step_backward(DType dt, const LstmStepBackwardArgs& a, cudaStream_t s);
void launch_gru_step_forward(DType dt, const GruStepArgs& a, cudaStream_t s);
void launch_gru_step_backward(DType dt, const GruStepBackwardArgs& a, cudaStream_t s);

}  // namespace sl::cuda

namespace sl::cuda {

// ---- ctc family (ctc.cu): float32 / float64; one block per sample
// ---------------------------------
/// log_probs [T, N, C], targets [N, S], lengths [N] (int64, contiguous, on the device);
/// log_alpha [N, T, 2S + 1] and nll [N] written as core/cpu/ctc.cpp does.
void launch_ctc_forward(DType dt, void* nll, void* log_alpha, const void* log_probs,
                        const int64_t* targets, const int64_t* input_lengths,
                        const int64_t* target_lengths, int64_t T, int64_t N, int64_t C, int64_t S,
                        int64_t blank, cudaStream_t s);
/// grad [T, N, C] (Note [CTC gradient]); log_beta is scratch of N * T * (2S + 1) elements.
void launch_ctc_backward(DType dt, void* grad, const void* grad_nll, const void* log_probs,
                         const int64_t* targets, const int64_t* input_lengths,
                         const int64_t* target_lengths, const void* nll, const void* log_alpha,
                         void* log_beta, int64_t T, int64_t N, int64_t C, int64_t S, int64_t blank,
                         bool zero_infinity, cudaStream_t s);

}  // namespace sl::cuda

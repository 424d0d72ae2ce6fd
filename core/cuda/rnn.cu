// CUDA kernels of the rnn family: the pointwise gate math of one LSTM / GRU step, one thread per
// (row, hidden unit), with the CPU kernels' formulas (core/cpu/rnn.cpp) in the compute type
// (float for 16-bit, as on the CPU). Inactive rows (t >= lengths[b]) carry the state, output 0
// and pass gradients through, as Note [RNN layout] says.
#include "core/cuda/device_math.cuh"
#include "core/cuda/float_kernels.cuh"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/loops.cuh"

namespace sl::cuda {
namespace {

template <class T>
__device__ __forceinline__ T* at(const RnnOperand& o, int64_t b, int64_t j) {
  return static_cast<T*>(o.p) + b * o.ld + j;
}

template <class C>
__device__ __forceinline__ C sig(C x) {
  return C(1) / (C(1) + dmath::exp(-x));
}

/// Calls f(b, j) for every (row b < N, hidden unit j < H) of a step that falls to this thread.
template <class F>
__device__ __forceinline__ void for_each_unit(int64_t N, int64_t H, F&& f) {
  grid_stride(N * H, [&](int64_t e) { f(e / H, e % H); });
}

template <class T>
__global__ void lstm_fwd_kernel(const LstmStepArgs a) {
  using C = comp_t<T>;
  for_each_unit(a.N, a.H, [&](int64_t b, int64_t j) {
    const int64_t H = a.H;
    T* hn = at<T>(a.h_next, b, j);
    T* cn = at<T>(a.c_next, b, j);
    if (a.lengths && a.t >= a.lengths[b]) {
      *hn = *at<T>(a.h_prev, b, j);
      *cn = *at<T>(a.c_prev, b, j);
      if (a.y.p) *at<T>(a.y, b, j) = convert<T>(0.0f);
      return;
    }
    T* g = at<T>(a.gates, b, 0);
    const C i = sig(to_comp(g[j])), f = sig(to_comp(g[H + j]));
    const C gg = dmath::tanh(to_comp(g[2 * H + j])), o = sig(to_comp(g[3 * H + j]));
    const C c = f * to_comp(*at<T>(a.c_prev, b, j)) + i * gg;
    g[j] = convert<T>(i);
    g[H + j] = convert<T>(f);
    g[2 * H + j] = convert<T>(gg);
    g[3 * H + j] = convert<T>(o);
    const T cT = convert<T>(c);
    const T hT = convert<T>(o * dmath::tanh(c));
    *cn = cT;
    *hn = hT;
    if (a.y.p) *at<T>(a.y, b, j) = hT;
  });
}

template <class T>
__global__ void lstm_bwd_kernel(const LstmStepBackwardArgs a) {
  using C = comp_t<T>;
  for_each_unit(a.N, a.H, [&](int64_t b, int64_t j) {
    const int64_t H = a.H;
    T* dhp = at<T>(a.dh_prev, b, j);
    T* dg = at<T>(a.dgates, b, 0);
    const T dhv = *at<T>(a.dh, b, j);
    if (a.lengths && a.t >= a.lengths[b]) {
      *dhp = dhv;
      const T z = convert<T>(0.0f);
      dg[j] = z;
      dg[H + j] = z;
      dg[2 * H + j] = z;
      dg[3 * H + j] = z;
      return;  // dc passes through unchanged
    }
    *dhp = convert<T>(0.0f);
    const T* g = at<T>(a.gates, b, 0);
    const C i = to_comp(g[j]), f = to_comp(g[H + j]), gg = to_comp(g[2 * H + j]);
    const C o = to_comp(g[3 * H + j]);
    const C dht = a.dy.p ? to_comp(dhv) + to_comp(*at<T>(a.dy, b, j)) : to_comp(dhv);
    const C tc = dmath::tanh(to_comp(*at<T>(a.c_next, b, j)));
    T* dcp = at<T>(a.dc, b, j);
    const C dct = to_comp(*dcp) + dht * o * (C(1) - tc * tc);
    dg[j] = convert<T>(dct * gg * i * (C(1) - i));
    dg[H + j] = convert<T>(dct * to_comp(*at<T>(a.c_prev, b, j)) * f * (C(1) - f));
    dg[2 * H + j] = convert<T>(dct * i * (C(1) - gg * gg));
    dg[3 * H + j] = convert<T>(dht * tc * o * (C(1) - o));
    *dcp = convert<T>(dct * f);
  });
}

template <class T>
__global__ void gru_fwd_kernel(const GruStepArgs a) {
  using C = comp_t<T>;
  const T* bias = static_cast<const T*>(a.bias_hh);
  for_each_unit(a.N, a.H, [&](int64_t b, int64_t j) {
    const int64_t H = a.H;
    T* hn = at<T>(a.h_next, b, j);
    const T hp = *at<T>(a.h_prev, b, j);
    if (a.lengths && a.t >= a.lengths[b]) {
      *hn = hp;
      if (a.y.p) *at<T>(a.y, b, j) = convert<T>(0.0f);
      return;
    }
    T* gx = at<T>(a.gx, b, 0);
    T* gh = at<T>(a.gh, b, 0);
    const C bh_r = bias ? to_comp(bias[j]) : C(0), bh_z = bias ? to_comp(bias[H + j]) : C(0);
    const C bh_n = bias ? to_comp(bias[2 * H + j]) : C(0);
    const C r = sig(to_comp(gx[j]) + to_comp(gh[j]) + bh_r);
    const C z = sig(to_comp(gx[H + j]) + to_comp(gh[H + j]) + bh_z);
    const C hnn = to_comp(gh[2 * H + j]) + bh_n;
    const C n = dmath::tanh(to_comp(gx[2 * H + j]) + r * hnn);
    gx[j] = convert<T>(r);
    gx[H + j] = convert<T>(z);
    gx[2 * H + j] = convert<T>(n);
    gh[2 * H + j] = convert<T>(hnn);
    const T hT = convert<T>((C(1) - z) * n + z * to_comp(hp));
    *hn = hT;
    if (a.y.p) *at<T>(a.y, b, j) = hT;
  });
}

template <class T>
__global__ void gru_bwd_kernel(const GruStepBackwardArgs a) {
  using C = comp_t<T>;
  for_each_unit(a.N, a.H, [&](int64_t b, int64_t j) {
    const int64_t H = a.H;
    T* dhp = at<T>(a.dh_prev, b, j);
    T* dgx = at<T>(a.dgx, b, 0);
    T* dgh = at<T>(a.dgh, b, 0);
    const T dhv = *at<T>(a.dh, b, j);
    if (a.lengths && a.t >= a.lengths[b]) {
      *dhp = dhv;
      const T zero = convert<T>(0.0f);
      for (int k = 0; k < 3; ++k) {
        dgx[k * H + j] = zero;
        dgh[k * H + j] = zero;
      }
      return;
    }
    const T* gx = at<T>(a.gx, b, 0);
    const T* gh = at<T>(a.gh, b, 0);
    const C r = to_comp(gx[j]), z = to_comp(gx[H + j]), n = to_comp(gx[2 * H + j]);
    const C hn = to_comp(gh[2 * H + j]);
    const C dht = a.dy.p ? to_comp(dhv) + to_comp(*at<T>(a.dy, b, j)) : to_comp(dhv);
    const C dn = dht * (C(1) - z) * (C(1) - n * n);
    const C dz = dht * (to_comp(*at<T>(a.h_prev, b, j)) - n) * z * (C(1) - z);
    const C dr = dn * hn * r * (C(1) - r);
    dgx[j] = convert<T>(dr);
    dgx[H + j] = convert<T>(dz);
    dgx[2 * H + j] = convert<T>(dn);
    dgh[j] = convert<T>(dr);
    dgh[H + j] = convert<T>(dz);
    dgh[2 * H + j] = convert<T>(dn * r);
    *dhp = convert<T>(dht * z);
  });
}

/// Launches one step kernel (launch(DevTag<T>{}, grid) with T dt's storage type) over N x H
/// units; nothing to do when N * H == 0.
template <class F>
void launch_step(DType dt, const char* op, int64_t N, int64_t H, F&& launch) {
  if (N * H == 0) return;
  visit_float(dt, op, [&](auto tag) {
    launch(tag, grid_for(N * H));
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace

void launch_lstm_step_forward(DType dt, const LstmStepArgs& a, cudaStream_t s) {
  launch_step(dt, "lstm", a.N, a.H, [&](auto tag, unsigned grid) {
    lstm_fwd_kernel<typename decltype(tag)::type><<<grid, kBlockThreads, 0, s>>>(a);
  });
}
void launch_lstm_step_backward(DType dt, const LstmStepBackwardArgs& a, cudaStream_t s) {
  launch_step(dt, "lstm_backward", a.N, a.H, [&](auto tag, unsigned grid) {
    lstm_bwd_kernel<typename decltype(tag)::type><<<grid, kBlockThreads, 0, s>>>(a);
  });
}
void launch_gru_step_forward(DType dt, const GruStepArgs& a, cudaStream_t s) {
  launch_step(dt, "gru", a.N, a.H, [&](auto tag, unsigned grid) {
    gru_fwd_kernel<typename decltype(tag)::type><<<grid, kBlockThreads, 0, s>>>(a);
  });
}
void launch_gru_step_backward(DType dt, const GruStepBackwardArgs& a, cudaStream_t s) {
  launch_step(dt, "gru_backward", a.N, a.H, [&](auto tag, unsigned grid) {
    gru_bwd_kernel<typename decltype(tag)::type><<<grid, kBlockThreads, 0, s>>>(a);
  });
}

}  // namespace sl::cuda

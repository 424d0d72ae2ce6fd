// CPU pointwise kernels of the rnn family (Note [RNN layout]): the gate math of one LSTM / GRU
// step for a batch, fused into one pass over [N, H].
//
// float rows run through the branch-free sigmoid / tanh of core/cpu/math.h (Note [Vectorisable
// float math], within 4 ulp) that the compiler vectorises, in an AVX2+FMA clone chosen at load
// time where the CPU has it; double and 16-bit rows use the standard library.
// No program here reads errno or enables FP traps; without this GCC will not if-convert the
// float selects of these loops, so they would not vectorise (NaN / inf semantics are kept).
// Set before the includes, so inline functions from headers get the same options and inline.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#endif
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/cpu/loops.h"
#include "core/cpu/math.h"
#include "core/ops/rnn.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SL_RNN_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SL_RNN_CLONES
#endif

namespace sl::cpu {
namespace {

// ---- generic (double, 16-bit) math ----------------------------------------------------------

template <class C>
inline C sigmoid_g(C x) {
  return C(1) / (C(1) + std::exp(-x));
}

// ---- LSTM -------------------------------------------------------------------------------------

/// One active row: gates g[4H] (pre-activations in, activations out), states of length H.
template <class C>
struct LstmRowMath {
  static void forward(C* g, const C* c_prev, C* c_next, C* h_next, int64_t H) {
    for (int64_t j = 0; j < H; ++j) {
      C i = sigmoid_g(g[j]), f = sigmoid_g(g[H + j]), gg = std::tanh(g[2 * H + j]);
      C o = sigmoid_g(g[3 * H + j]);
      C c = f * c_prev[j] + i * gg;
      g[j] = i;
      g[H + j] = f;
      g[2 * H + j] = gg;
      g[3 * H + j] = o;
      c_next[j] = c;
      h_next[j] = o * std::tanh(c);
    }
  }
};

SL_RNN_CLONES void lstm_row_forward_f32(float* g, const float* c_prev, float* c_next, float* h_next,
                                        int64_t H) {
#pragma omp simd
  for (int64_t j = 0; j < H; ++j) {
    float i = math::f32::sigmoid(g[j]), f = math::f32::sigmoid(g[H + j]),
          gg = math::f32::tanh(g[2 * H + j]);
    float o = math::f32::sigmoid(g[3 * H + j]);
    float c = f * c_prev[j] + i * gg;
    g[j] = i;
    g[H + j] = f;
    g[2 * H + j] = gg;
    g[3 * H + j] = o;
    c_next[j] = c;
    h_next[j] = o * math::f32::tanh(c);
  }
}

template <class C>
void lstm_row_backward(const C* g, const C* c_prev, const C* c_next, const C* dh, const C* dy,
                       C* dc, C* dg, int64_t H) {
  for (int64_t j = 0; j < H; ++j) {
    const C i = g[j], f = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
    const C dht = dy ? dh[j] + dy[j] : dh[j];
    const C tc = std::tanh(c_next[j]);
    const C dct = dc[j] + dht * o * (C(1) - tc * tc);
    dg[j] = dct * gg * i * (C(1) - i);
    dg[H + j] = dct * c_prev[j] * f * (C(1) - f);
    dg[2 * H + j] = dct * i * (C(1) - gg * gg);
    dg[3 * H + j] = dht * tc * o * (C(1) - o);
    dc[j] = dct * f;
  }
}

template <bool HasDy>
[[gnu::always_inline]] inline void lstm_row_backward_f32_impl(const float* g, const float* c_prev,
                                                              const float* c_next, const float* dh,
                                                              const float* dy, float* dc, float* dg,
                                                              int64_t H) {
#pragma omp simd
  for (int64_t j = 0; j < H; ++j) {
    const float i = g[j], f = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
    float dht = dh[j];
    if constexpr (HasDy) dht += dy[j];
    const float tc = math::f32::tanh(c_next[j]);
    const float dct = dc[j] + dht * o * (1.0f - tc * tc);
    dg[j] = dct * gg * i * (1.0f - i);
    dg[H + j] = dct * c_prev[j] * f * (1.0f - f);
    dg[2 * H + j] = dct * i * (1.0f - gg * gg);
    dg[3 * H + j] = dht * tc * o * (1.0f - o);
    dc[j] = dct * f;
  }
}

SL_RNN_CLONES void lstm_row_backward_f32(const float* g, const float* c_prev, const float* c_next,
                                         const float* dh, const float* dy, float* dc, float* dg,
                                         int64_t H) {
  if (dy) {
    lstm_row_backward_f32_impl<true>(g, c_prev, c_next, dh, dy, dc, dg, H);
  } else {
    lstm_row_backward_f32_impl<false>(g, c_prev, c_next, dh, dy, dc, dg, H);
  }
}

// ---- GRU --------------------------------------------------------------------------------------

template <class C>
void gru_row_forward(C* gx, C* gh, const C* b, const C* h_prev, C* h_next, int64_t H) {
  for (int64_t j = 0; j < H; ++j) {
    const C bh_r = b ? b[j] : C(0), bh_z = b ? b[H + j] : C(0), bh_n = b ? b[2 * H + j] : C(0);
    const C r = sigmoid_g(gx[j] + gh[j] + bh_r);
    const C z = sigmoid_g(gx[H + j] + gh[H + j] + bh_z);
    const C hn = gh[2 * H + j] + bh_n;
    const C n = std::tanh(gx[2 * H + j] + r * hn);
    gx[j] = r;
    gx[H + j] = z;
    gx[2 * H + j] = n;
    gh[2 * H + j] = hn;
    h_next[j] = (C(1) - z) * n + z * h_prev[j];
  }
}

template <bool HasBias>
[[gnu::always_inline]] inline void gru_row_forward_f32_impl(float* gx, float* gh, const float* b,
                                                            const float* h_prev, float* h_next,
                                                            int64_t H) {
#pragma omp simd
  for (int64_t j = 0; j < H; ++j) {
    float sr = gx[j] + gh[j], sz = gx[H + j] + gh[H + j], hn = gh[2 * H + j];
    if constexpr (HasBias) {
      sr += b[j];
      sz += b[H + j];
      hn += b[2 * H + j];
    }
    const float r = math::f32::sigmoid(sr);
    const float z = math::f32::sigmoid(sz);
    const float n = math::f32::tanh(gx[2 * H + j] + r * hn);
    gx[j] = r;
    gx[H + j] = z;
    gx[2 * H + j] = n;
    gh[2 * H + j] = hn;
    h_next[j] = (1.0f - z) * n + z * h_prev[j];
  }
}

SL_RNN_CLONES void gru_row_forward_f32(float* gx, float* gh, const float* b, const float* h_prev,
                                       float* h_next, int64_t H) {
  if (b) {
    gru_row_forward_f32_impl<true>(gx, gh, b, h_prev, h_next, H);
  } else {
    gru_row_forward_f32_impl<false>(gx, gh, b, h_prev, h_next, H);
  }
}

template <class C, bool HasDy>
[[gnu::always_inline]] inline void gru_row_backward_impl(const C* gx, const C* gh, const C* h_prev,
                                                         const C* dh, const C* dy, C* dgx, C* dgh,
                                                         C* dh_prev, int64_t H) {
#pragma omp simd
  for (int64_t j = 0; j < H; ++j) {
    const C r = gx[j], z = gx[H + j], n = gx[2 * H + j], hn = gh[2 * H + j];
    C dht = dh[j];
    if constexpr (HasDy) dht += dy[j];
    const C dn = dht * (C(1) - z) * (C(1) - n * n);
    const C dz = dht * (h_prev[j] - n) * z * (C(1) - z);
    const C dr = dn * hn * r * (C(1) - r);
    dgx[j] = dr;
    dgx[H + j] = dz;
    dgx[2 * H + j] = dn;
    dgh[j] = dr;
    dgh[H + j] = dz;
    dgh[2 * H + j] = dn * r;
    dh_prev[j] = dht * z;
  }
}

template <class C>
[[gnu::always_inline]] inline void gru_row_backward(const C* gx, const C* gh, const C* h_prev,
                                                    const C* dh, const C* dy, C* dgx, C* dgh,
                                                    C* dh_prev, int64_t H) {
  if (dy) {
    gru_row_backward_impl<C, true>(gx, gh, h_prev, dh, dy, dgx, dgh, dh_prev, H);
  } else {
    gru_row_backward_impl<C, false>(gx, gh, h_prev, dh, dy, dgx, dgh, dh_prev, H);
  }
}

SL_RNN_CLONES void gru_row_backward_f32(const float* gx, const float* gh, const float* h_prev,
                                        const float* dh, const float* dy, float* dgx, float* dgh,
                                        float* dh_prev, int64_t H) {
  gru_row_backward<float>(gx, gh, h_prev, dh, dy, dgx, dgh, dh_prev, H);
}

// ---- step drivers -------------------------------------------------------------------------------

/// Row b of an [N, H]-shaped view (rows contiguous).
template <class T>
T* row(const Tensor& t, int64_t b) {
  return t.data_ptr<T>() + b * t.stride(0);
}

/// Activity of each row at time t (Note [RNN layout]).
inline bool active(const int64_t* len, int64_t b, int64_t t) {
  return !len || t < len[b];
}

/// Rows per parallel task: whole rows, at least ~8k gate elements each.
inline int64_t row_grain(int64_t H) {
  return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, H));
}

/// Runs f on row b converted to the compute type C (a no-op copy for f32 / f64).
template <class T>
struct Rows {
  using C = compute_t<T>;
  static constexpr bool direct = std::is_same_v<T, C>;
};

template <class T>
void to_c(const T* src, compute_t<T>* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<compute_t<T>>(src[i]);
}
template <class T>
void from_c(const compute_t<T>* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(src[i]);
}

template <class T>
void lstm_forward_typed(const LstmStep& s) {
  using C = compute_t<T>;
  const int64_t N = s.gates.size(0), H = s.h_prev.size(1);
  const int64_t* len = s.lengths.defined() ? s.lengths.data_ptr<int64_t>() : nullptr;
  parallel_for(0, N, row_grain(4 * H), [&](int64_t b0, int64_t b1) {
    std::vector<C> buf(Rows<T>::direct ? 0 : static_cast<size_t>(7 * H));
    for (int64_t b = b0; b < b1; ++b) {
      T* hn = row<T>(s.h_next, b);
      T* cn = row<T>(s.c_next, b);
      T* y = s.y.defined() ? row<T>(s.y, b) : nullptr;
      if (!active(len, b, s.t)) {
        std::memcpy(hn, row<T>(s.h_prev, b), static_cast<size_t>(H) * sizeof(T));
        std::memcpy(cn, row<T>(s.c_prev, b), static_cast<size_t>(H) * sizeof(T));
        if (y) std::fill(y, y + H, T(0));
        continue;
      }
      T* g = row<T>(s.gates, b);
      const T* cp = row<T>(s.c_prev, b);
      if constexpr (std::is_same_v<T, float>) {
        lstm_row_forward_f32(g, cp, cn, hn, H);
      } else if constexpr (Rows<T>::direct) {
        LstmRowMath<C>::forward(g, cp, cn, hn, H);
      } else {
        C* gc = buf.data();
        C* cpc = gc + 4 * H;
        C* cnc = cpc + H;
        C* hnc = cnc + H;
        to_c(g, gc, 4 * H);
        to_c(cp, cpc, H);
        LstmRowMath<C>::forward(gc, cpc, cnc, hnc, H);
        from_c<T>(gc, g, 4 * H);
        from_c<T>(cnc, cn, H);
        from_c<T>(hnc, hn, H);
      }
      if (y) std::memcpy(y, hn, static_cast<size_t>(H) * sizeof(T));
    }
  });
}

template <class T>
void lstm_backward_typed(const LstmStepBackward& s) {
  using C = compute_t<T>;
  const int64_t N = s.gates.size(0), H = s.dh.size(1);
  const int64_t* len = s.lengths.defined() ? s.lengths.data_ptr<int64_t>() : nullptr;
  parallel_for(0, N, row_grain(4 * H), [&](int64_t b0, int64_t b1) {
    // gates 4H + c_prev, c_next, dh, dy, dc H each + dgates 4H
    std::vector<C> buf(Rows<T>::direct ? 0 : static_cast<size_t>(13 * H));
    for (int64_t b = b0; b < b1; ++b) {
      const T* dh = row<T>(s.dh, b);
      T* dhp = row<T>(s.dh_prev, b);
      T* dg = row<T>(s.dgates, b);
      if (!active(len, b, s.t)) {
        std::memcpy(dhp, dh, static_cast<size_t>(H) * sizeof(T));
        std::fill(dg, dg + 4 * H, T(0));
        continue;  // dc passes through unchanged
      }
      std::fill(dhp, dhp + H, T(0));
      const T* g = row<T>(s.gates, b);
      const T* cp = row<T>(s.c_prev, b);
      const T* cn = row<T>(s.c_next, b);
      const T* dy = s.dy.defined() ? row<T>(s.dy, b) : nullptr;
      T* dc = row<T>(s.dc, b);
      if constexpr (std::is_same_v<T, float>) {
        lstm_row_backward_f32(g, cp, cn, dh, dy, dc, dg, H);
      } else if constexpr (Rows<T>::direct) {
        lstm_row_backward<C>(g, cp, cn, dh, dy, dc, dg, H);
      } else {
        C* gc = buf.data();
        C* cpc = gc + 4 * H;
        C* cnc = cpc + H;
        C* dhc = cnc + H;
        C* dyc = dhc + H;
        C* dcc = dyc + H;
        C* dgc = dcc + H;
        to_c(g, gc, 4 * H);
        to_c(cp, cpc, H);
        to_c(cn, cnc, H);
        to_c(dh, dhc, H);
        if (dy) to_c(dy, dyc, H);
        to_c(dc, dcc, H);
        lstm_row_backward<C>(gc, cpc, cnc, dhc, dy ? dyc : nullptr, dcc, dgc, H);
        from_c<T>(dcc, dc, H);
        from_c<T>(dgc, dg, 4 * H);
      }
    }
  });
}

template <class T>
void gru_forward_typed(const GruStep& s) {
  using C = compute_t<T>;
  const int64_t N = s.gx.size(0), H = s.h_prev.size(1);
  const int64_t* len = s.lengths.defined() ? s.lengths.data_ptr<int64_t>() : nullptr;
  const T* bias = s.bias_hh.defined() ? s.bias_hh.data_ptr<T>() : nullptr;
  std::vector<C> bias_c;
  if (!Rows<T>::direct && bias) {
    bias_c.resize(static_cast<size_t>(3 * H));
    to_c(bias, bias_c.data(), 3 * H);
  }
  parallel_for(0, N, row_grain(3 * H), [&](int64_t b0, int64_t b1) {
    std::vector<C> buf(Rows<T>::direct ? 0 : static_cast<size_t>(8 * H));
    for (int64_t b = b0; b < b1; ++b) {
      T* hn = row<T>(s.h_next, b);
      const T* hp = row<T>(s.h_prev, b);
      T* y = s.y.defined() ? row<T>(s.y, b) : nullptr;
      if (!active(len, b, s.t)) {
        std::memcpy(hn, hp, static_cast<size_t>(H) * sizeof(T));
        if (y) std::fill(y, y + H, T(0));
        continue;
      }
      T* gx = row<T>(s.gx, b);
      T* gh = row<T>(s.gh, b);
      if constexpr (std::is_same_v<T, float>) {
        gru_row_forward_f32(gx, gh, bias, hp, hn, H);
      } else if constexpr (Rows<T>::direct) {
        gru_row_forward<C>(gx, gh, bias, hp, hn, H);
      } else {
        C* gxc = buf.data();
        C* ghc = gxc + 3 * H;
        C* hpc = ghc + 3 * H;
        C* hnc = hpc + H;
        to_c(gx, gxc, 3 * H);
        to_c(gh, ghc, 3 * H);
        to_c(hp, hpc, H);
        gru_row_forward<C>(gxc, ghc, bias ? bias_c.data() : nullptr, hpc, hnc, H);
        from_c<T>(gxc, gx, 3 * H);
        from_c<T>(ghc, gh, 3 * H);
        from_c<T>(hnc, hn, H);
      }
      if (y) std::memcpy(y, hn, static_cast<size_t>(H) * sizeof(T));
    }
  });
}

template <class T>
void gru_backward_typed(const GruStepBackward& s) {
  using C = compute_t<T>;
  const int64_t N = s.gx.size(0), H = s.dh.size(1);
  const int64_t* len = s.lengths.defined() ? s.lengths.data_ptr<int64_t>() : nullptr;
  parallel_for(0, N, row_grain(3 * H), [&](int64_t b0, int64_t b1) {
    std::vector<C> buf(Rows<T>::direct ? 0 : static_cast<size_t>(16 * H));
    for (int64_t b = b0; b < b1; ++b) {
      const T* dh = row<T>(s.dh, b);
      T* dhp = row<T>(s.dh_prev, b);
      T* dgx = row<T>(s.dgx, b);
      T* dgh = row<T>(s.dgh, b);
      if (!active(len, b, s.t)) {
        std::memcpy(dhp, dh, static_cast<size_t>(H) * sizeof(T));
        std::fill(dgx, dgx + 3 * H, T(0));
        std::fill(dgh, dgh + 3 * H, T(0));
        continue;
      }
      const T* gx = row<T>(s.gx, b);
      const T* gh = row<T>(s.gh, b);
      const T* hp = row<T>(s.h_prev, b);
      const T* dy = s.dy.defined() ? row<T>(s.dy, b) : nullptr;
      if constexpr (std::is_same_v<T, float>) {
        gru_row_backward_f32(gx, gh, hp, dh, dy, dgx, dgh, dhp, H);
      } else if constexpr (Rows<T>::direct) {
        gru_row_backward<C>(gx, gh, hp, dh, dy, dgx, dgh, dhp, H);
      } else {
        C* gxc = buf.data();
        C* ghc = gxc + 3 * H;
        C* hpc = ghc + 3 * H;
        C* dhc = hpc + H;
        C* dyc = dhc + H;
        C* dgxc = dyc + H;
        C* dghc = dgxc + 3 * H;
        C* dhpc = dghc + 3 * H;
        to_c(gx, gxc, 3 * H);
        to_c(gh, ghc, 3 * H);
        to_c(hp, hpc, H);
        to_c(dh, dhc, H);
        if (dy) to_c(dy, dyc, H);
        gru_row_backward<C>(gxc, ghc, hpc, dhc, dy ? dyc : nullptr, dgxc, dghc, dhpc, H);
        from_c<T>(dgxc, dgx, 3 * H);
        from_c<T>(dghc, dgh, 3 * H);
        from_c<T>(dhpc, dhp, H);
      }
    }
  });
}

void lstm_step_forward_cpu(const LstmStep& s) {
  visit_floating(s.gates.dtype(), "lstm",
                 [&](auto tag) { lstm_forward_typed<typename decltype(tag)::type>(s); });
}
void lstm_step_backward_cpu(const LstmStepBackward& s) {
  visit_floating(s.gates.dtype(), "lstm_backward",
                 [&](auto tag) { lstm_backward_typed<typename decltype(tag)::type>(s); });
}
void gru_step_forward_cpu(const GruStep& s) {
  visit_floating(s.gx.dtype(), "gru",
                 [&](auto tag) { gru_forward_typed<typename decltype(tag)::type>(s); });
}
void gru_step_backward_cpu(const GruStepBackward& s) {
  visit_floating(s.gx.dtype(), "gru_backward",
                 [&](auto tag) { gru_backward_typed<typename decltype(tag)::type>(s); });
}

SL_REGISTER_KERNEL(lstm_step_forward_kernel, DeviceKind::cpu, &lstm_step_forward_cpu);
SL_REGISTER_KERNEL(lstm_step_backward_kernel, DeviceKind::cpu, &lstm_step_backward_cpu);
SL_REGISTER_KERNEL(gru_step_forward_kernel, DeviceKind::cpu, &gru_step_forward_cpu);
SL_REGISTER_KERNEL(gru_step_backward_kernel, DeviceKind::cpu, &gru_step_backward_cpu);

}  // namespace
}  // namespace sl::cpu

// Winograd F(2x2, 3x3) convolution (Lavin & Gray, 2015) for 3x3, stride-1, dilation-1 conv2d,
// forward and both gradients.
//
// The output is cut into 2x2 tiles (TH x TW per image, the last row/column of tiles clipped
// when Ho / Wo is odd); tile (th, tw) reads the 4x4 input patch at padded rows 2th.., columns
// 2tw.. (zeros outside the input). With
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
//   A^T = [1 1 1 0; 0 1 -1 -1],
// a tile's output is A^T [sum_c (G g_oc G^T) .* (B^T d_c B)] A: per position p of the 4x4
// transformed tile, one product M[p] = U[p] @ V[p] with U[p] [O, C] the transformed weights and
// V[p] [C, tiles] the transformed inputs of all tiles of a chunk of images (>= 512 tiles where
// the batch allows). These 16 GEMMs (per group) do 2.25x fewer multiplications than the
// im2col route's [O, 9C] @ [9C, Ho Wo], which are also thin for small images.
// Backward (the adjoint of each step): dM[p] = A gy A^T per tile; grad_weight: dU[p] =
// sum over chunks of dM[p] @ V[p]^T, then G^T dU G; grad_input: dV[p] = U[p]^T @ dM[p], then
// B dV B^T scattered back onto the overlapping input patches.
// Transforms only add and subtract (and halve, exactly), so the result is close to the direct
// sum (error analysis in tests/ops/test_conv.cpp). Every value is computed in a fixed order:
// the transforms run per image plane on the thread pool, each of the 16 (per group) GEMMs is one
// bmm_kernel call in its own task, on the tile grid its shape fixes (Note [Deterministic BLAS
// tiles]), and the chunks accumulate in order, so the bits do not depend on the thread count.
// Plane loops are vectorised over the tiles of a row (even / odd columns split so that every
// access is contiguous); the 16 transformed matrices of a buffer are placed an odd number of
// cache lines apart, since the transforms stream through all 16 at once.
#include "core/cpu/conv_winograd.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/cpu/conv_shape.h"
#include "core/ops/copy.h"
#include "core/ops/matmul.h"
#include "core/ops/view.h"
#include "core/parallel.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SL_WINO_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SL_WINO_CLONES
#endif

namespace sl::cpu {
namespace {

/// Shapes of one Winograd convolution.
struct WinoDims : ConvShape {
  int64_t Ho, Wo, TH, TW, tiles, pt, pl, nb;
  WinoDims(const Tensor& input, const Tensor& weight, const Conv2dGeometry& g)
      : ConvShape(input, weight, g),
        Ho(g.out_h),
        Wo(g.out_w),
        TH((Ho + 1) / 2),
        TW((Wo + 1) / 2),
        tiles(TH * TW),
        pt(g.pad_h_begin),
        pl(g.pad_w_begin) {
    // images per chunk: >= 512 tiles per GEMM where the batch allows, V and M within 16M
    // elements
    nb = std::min(N, std::max<int64_t>(1, (512 + tiles - 1) / tiles));
    while (nb > 1 && 16 * (C + O) * nb * tiles > (int64_t{16} << 20)) --nb;
  }
};

/// e[j] = row[2j - off], o[j] = row[2j + 1 - off] for j in [0, J), zero outside [0, W).
template <class T>
[[gnu::always_inline]] inline void split_row(const T* row, int64_t W, int64_t off, int64_t J, T* e,
                                             T* o) {
  for (int parity = 0; parity < 2; ++parity) {
    T* d = parity ? o : e;
    const int64_t k = parity - off;  // d[j] = row[2j + k] where 0 <= 2j + k <= W - 1
    int64_t lo = k >= 0 ? 0 : (-k + 1) / 2;
    int64_t hi = W - 1 - k < 0 ? 0 : std::min(J, (W - 1 - k) / 2 + 1);
    lo = std::min(lo, hi);
    std::fill(d, d + lo, T(0));
#pragma omp simd
    for (int64_t j = lo; j < hi; ++j) d[j] = row[2 * j + k];
    std::fill(d + hi, d + J, T(0));
  }
}

/// V[p * ps + th * TW + tw] = (B^T d B)[p] of each tile of one input plane x [H, W]; buf holds
/// 8 * (TW + 1) elements.
template <class T>
[[gnu::always_inline]] inline void input_transform_impl(const T* x, int64_t H, int64_t W,
                                                        int64_t pt, int64_t pl, int64_t TH,
                                                        int64_t TW, T* __restrict v, int64_t ps,
                                                        T* __restrict buf) {
  const int64_t J = TW + 1;
  for (int64_t th = 0; th < TH; ++th) {
    for (int r = 0; r < 4; ++r) {
      const int64_t ih = 2 * th - pt + r;
      T* e = buf + 2 * r * J;
      if (ih < 0 || ih >= H) {
        std::fill(e, e + 2 * J, T(0));
      } else {
        split_row(x + ih * W, W, pl, J, e, e + J);
      }
    }
    T* vt = v + th * TW;
#pragma omp simd
    for (int64_t tw = 0; tw < TW; ++tw) {
      T d[4][4], e[4][4];
      for (int r = 0; r < 4; ++r) {
        d[r][0] = buf[2 * r * J + tw];
        d[r][1] = buf[(2 * r + 1) * J + tw];
        d[r][2] = buf[2 * r * J + tw + 1];
        d[r][3] = buf[(2 * r + 1) * J + tw + 1];
      }
      for (int k = 0; k < 4; ++k) {  // B^T d
        e[0][k] = d[0][k] - d[2][k];
        e[1][k] = d[1][k] + d[2][k];
        e[2][k] = d[2][k] - d[1][k];
        e[3][k] = d[1][k] - d[3][k];
      }
      for (int i = 0; i < 4; ++i) {  // (B^T d) B
        vt[(4 * i + 0) * ps + tw] = e[i][0] - e[i][2];
        vt[(4 * i + 1) * ps + tw] = e[i][1] + e[i][2];
        vt[(4 * i + 2) * ps + tw] = e[i][2] - e[i][1];
        vt[(4 * i + 3) * ps + tw] = e[i][1] - e[i][3];
      }
    }
  }
}

/// y [Ho, Wo] = A^T M A (+ bias) of each tile of one output plane, from M[p * ps + tile]; buf
/// holds 4 * TW elements.
template <class T>
[[gnu::always_inline]] inline void output_transform_impl(const T* __restrict m, int64_t ps,
                                                         int64_t TH, int64_t TW, T* y, int64_t Ho,
                                                         int64_t Wo, T bias, T* __restrict buf) {
  for (int64_t th = 0; th < TH; ++th) {
    const T* mt = m + th * TW;
#pragma omp simd
    for (int64_t tw = 0; tw < TW; ++tw) {
      T s[2][4];
      for (int j = 0; j < 4; ++j) {  // A^T M
        const T m0 = mt[j * ps + tw], m1 = mt[(4 + j) * ps + tw];
        const T m2 = mt[(8 + j) * ps + tw], m3 = mt[(12 + j) * ps + tw];
        s[0][j] = m0 + m1 + m2;
        s[1][j] = m1 - m2 - m3;
      }
      for (int a = 0; a < 2; ++a) {  // (A^T M) A: even and odd output columns
        buf[(2 * a) * TW + tw] = s[a][0] + s[a][1] + s[a][2];
        buf[(2 * a + 1) * TW + tw] = s[a][1] - s[a][2] - s[a][3];
      }
    }
    for (int a = 0; a < 2 && 2 * th + a < Ho; ++a) {
      T* row = y + (2 * th + a) * Wo;
      const T* ye = buf + 2 * a * TW;
      const T* yo = ye + TW;
      const int64_t pairs = Wo / 2;
#pragma omp simd
      for (int64_t tw = 0; tw < pairs; ++tw) {
        row[2 * tw] = ye[tw] + bias;
        row[2 * tw + 1] = yo[tw] + bias;
      }
      if (Wo % 2) row[Wo - 1] = ye[TW - 1] + bias;
    }
  }
}

/// dM[p * ps + tile] = (A gy A^T)[p] of each tile of one grad_out plane gy [Ho, Wo] (zero
/// beyond it); buf holds 4 * TW elements.
template <class T>
[[gnu::always_inline]] inline void grad_output_transform_impl(const T* gy, int64_t Ho, int64_t Wo,
                                                              int64_t TH, int64_t TW,
                                                              T* __restrict dm, int64_t ps,
                                                              T* __restrict buf) {
  for (int64_t th = 0; th < TH; ++th) {
    for (int a = 0; a < 2; ++a) {
      T* e = buf + 2 * a * TW;
      if (2 * th + a < Ho) {
        split_row(gy + (2 * th + a) * Wo, Wo, 0, TW, e, e + TW);
      } else {
        std::fill(e, e + 2 * TW, T(0));
      }
    }
    T* dt = dm + th * TW;
#pragma omp simd
    for (int64_t tw = 0; tw < TW; ++tw) {
      T r[4][2];
      for (int b = 0; b < 2; ++b) {  // A gy: rows (g0, g0 + g1, g0 - g1, -g1)
        const T g0 = buf[b * TW + tw], g1 = buf[(2 + b) * TW + tw];
        r[0][b] = g0;
        r[1][b] = g0 + g1;
        r[2][b] = g0 - g1;
        r[3][b] = -g1;
      }
      for (int i = 0; i < 4; ++i) {  // (A gy) A^T
        dt[(4 * i + 0) * ps + tw] = r[i][0];
        dt[(4 * i + 1) * ps + tw] = r[i][0] + r[i][1];
        dt[(4 * i + 2) * ps + tw] = r[i][0] - r[i][1];
        dt[(4 * i + 3) * ps + tw] = -r[i][1];
      }
    }
  }
}

/// gx [H, W] = the sum over tiles of B dV B^T placed on each tile's input patch (the adjoint of
/// input_transform_impl), from dV[p * ps + tile]. acc holds 2 * (TH + 1) * 2 * (TW + 1)
/// elements (the padded plane, even / odd columns apart), buf 16 * (TW + 1).
template <class T>
[[gnu::always_inline]] inline void input_adjoint_impl(const T* __restrict dv, int64_t ps,
                                                      int64_t TH, int64_t TW, T* gx, int64_t H,
                                                      int64_t W, int64_t pt, int64_t pl,
                                                      T* __restrict acc, T* __restrict buf) {
  const int64_t J = TW + 1, PH = 2 * TH + 2;
  std::fill(acc, acc + PH * 2 * J, T(0));
  // buf: for padded row r of a tile, c0[r], c1[r] at [0, TW) and c2[r], c3[r] shifted by one
  // (the contributions to columns 2tw, 2tw + 1, 2tw + 2, 2tw + 3), each J long.
  for (int r = 0; r < 4; ++r) {
    buf[(4 * r + 0) * J + TW] = T(0);
    buf[(4 * r + 1) * J + TW] = T(0);
    buf[(4 * r + 2) * J] = T(0);
    buf[(4 * r + 3) * J] = T(0);
  }
  for (int64_t th = 0; th < TH; ++th) {
    const T* vt = dv + th * TW;
#pragma omp simd
    for (int64_t tw = 0; tw < TW; ++tw) {
      T v[4][4], rr[4][4];
      for (int p = 0; p < 16; ++p) v[p / 4][p % 4] = vt[p * ps + tw];
      for (int k = 0; k < 4; ++k) {  // B v: rows of the patch
        rr[0][k] = v[0][k];
        rr[1][k] = v[1][k] - v[2][k] + v[3][k];
        rr[2][k] = v[2][k] + v[1][k] - v[0][k];
        rr[3][k] = -v[3][k];
      }
      for (int r = 0; r < 4; ++r) {  // (B v) B^T: columns of the patch
        buf[(4 * r + 0) * J + tw] = rr[r][0];
        buf[(4 * r + 1) * J + tw] = rr[r][1] - rr[r][2] + rr[r][3];
        buf[(4 * r + 2) * J + tw + 1] = rr[r][2] + rr[r][1] - rr[r][0];
        buf[(4 * r + 3) * J + tw + 1] = -rr[r][3];
      }
    }
    for (int r = 0; r < 4; ++r) {
      T* ae = acc + (2 * th + r) * 2 * J;
      T* ao = ae + J;
      const T* c0 = buf + 4 * r * J;
      const T* c1 = c0 + J;
      const T* c2 = c1 + J;
      const T* c3 = c2 + J;
#pragma omp simd
      for (int64_t j = 0; j < J; ++j) {
        ae[j] += c0[j] + c2[j];
        ao[j] += c1[j] + c3[j];
      }
    }
  }
  // padded (ih + pt, iw + pl) -> gx (ih, iw); buf reused for an interleaved row of 2J
  for (int64_t ih = 0; ih < H; ++ih) {
    const T* ae = acc + (ih + pt) * 2 * J;
    const T* ao = ae + J;
#pragma omp simd
    for (int64_t j = 0; j < J; ++j) {
      buf[2 * j] = ae[j];
      buf[2 * j + 1] = ao[j];
    }
    std::memcpy(gx + ih * W, buf + pl, static_cast<size_t>(W) * sizeof(T));
  }
}

// The plane kernels for each dtype, with an AVX2 clone on x86-64.
SL_WINO_CLONES void input_transform_f32(const float* x, int64_t H, int64_t W, int64_t pt,
                                        int64_t pl, int64_t TH, int64_t TW, float* v, int64_t ps,
                                        float* buf) {
  input_transform_impl(x, H, W, pt, pl, TH, TW, v, ps, buf);
}
SL_WINO_CLONES void input_transform_f64(const double* x, int64_t H, int64_t W, int64_t pt,
                                        int64_t pl, int64_t TH, int64_t TW, double* v, int64_t ps,
                                        double* buf) {
  input_transform_impl(x, H, W, pt, pl, TH, TW, v, ps, buf);
}
SL_WINO_CLONES void output_transform_f32(const float* m, int64_t ps, int64_t TH, int64_t TW,
                                         float* y, int64_t Ho, int64_t Wo, float bias, float* buf) {
  output_transform_impl(m, ps, TH, TW, y, Ho, Wo, bias, buf);
}
SL_WINO_CLONES void output_transform_f64(const double* m, int64_t ps, int64_t TH, int64_t TW,
                                         double* y, int64_t Ho, int64_t Wo, double bias,
                                         double* buf) {
  output_transform_impl(m, ps, TH, TW, y, Ho, Wo, bias, buf);
}
SL_WINO_CLONES void grad_output_transform_f32(const float* gy, int64_t Ho, int64_t Wo, int64_t TH,
                                              int64_t TW, float* dm, int64_t ps, float* buf) {
  grad_output_transform_impl(gy, Ho, Wo, TH, TW, dm, ps, buf);
}
SL_WINO_CLONES void grad_output_transform_f64(const double* gy, int64_t Ho, int64_t Wo, int64_t TH,
                                              int64_t TW, double* dm, int64_t ps, double* buf) {
  grad_output_transform_impl(gy, Ho, Wo, TH, TW, dm, ps, buf);
}
SL_WINO_CLONES void input_adjoint_f32(const float* dv, int64_t ps, int64_t TH, int64_t TW,
                                      float* gx, int64_t H, int64_t W, int64_t pt, int64_t pl,
                                      float* acc, float* buf) {
  input_adjoint_impl(dv, ps, TH, TW, gx, H, W, pt, pl, acc, buf);
}
SL_WINO_CLONES void input_adjoint_f64(const double* dv, int64_t ps, int64_t TH, int64_t TW,
                                      double* gx, int64_t H, int64_t W, int64_t pt, int64_t pl,
                                      double* acc, double* buf) {
  input_adjoint_impl(dv, ps, TH, TW, gx, H, W, pt, pl, acc, buf);
}

void input_transform(const float* x, const WinoDims& d, float* v, int64_t ps, float* buf) {
  input_transform_f32(x, d.H, d.W, d.pt, d.pl, d.TH, d.TW, v, ps, buf);
}
void input_transform(const double* x, const WinoDims& d, double* v, int64_t ps, double* buf) {
  input_transform_f64(x, d.H, d.W, d.pt, d.pl, d.TH, d.TW, v, ps, buf);
}
void output_transform(const float* m, int64_t ps, const WinoDims& d, float* y, float bias,
                      float* buf) {
  output_transform_f32(m, ps, d.TH, d.TW, y, d.Ho, d.Wo, bias, buf);
}
void output_transform(const double* m, int64_t ps, const WinoDims& d, double* y, double bias,
                      double* buf) {
  output_transform_f64(m, ps, d.TH, d.TW, y, d.Ho, d.Wo, bias, buf);
}
void grad_output_transform(const float* gy, const WinoDims& d, float* dm, int64_t ps, float* buf) {
  grad_output_transform_f32(gy, d.Ho, d.Wo, d.TH, d.TW, dm, ps, buf);
}
void grad_output_transform(const double* gy, const WinoDims& d, double* dm, int64_t ps,
                           double* buf) {
  grad_output_transform_f64(gy, d.Ho, d.Wo, d.TH, d.TW, dm, ps, buf);
}
void input_adjoint(const float* dv, int64_t ps, const WinoDims& d, float* gx, float* acc,
                   float* buf) {
  input_adjoint_f32(dv, ps, d.TH, d.TW, gx, d.H, d.W, d.pt, d.pl, acc, buf);
}
void input_adjoint(const double* dv, int64_t ps, const WinoDims& d, double* gx, double* acc,
                   double* buf) {
  input_adjoint_f64(dv, ps, d.TH, d.TW, gx, d.H, d.W, d.pt, d.pl, acc, buf);
}

/// u[p * ps + c] = (G w[c] G^T)[p] for the Cg 3x3 kernels w[c] of one output channel.
template <class T>
[[gnu::always_inline]] inline void weight_transform_impl(const T* __restrict w, int64_t Cg,
                                                         T* __restrict u, int64_t ps) {
#pragma omp simd
  for (int64_t c = 0; c < Cg; ++c) {
    const T* g = w + c * 9;
    T t[4][3];
    for (int k = 0; k < 3; ++k) {  // G g
      t[0][k] = g[k];
      t[1][k] = (g[k] + g[3 + k] + g[6 + k]) * T(0.5);
      t[2][k] = (g[k] - g[3 + k] + g[6 + k]) * T(0.5);
      t[3][k] = g[6 + k];
    }
    for (int i = 0; i < 4; ++i) {  // (G g) G^T
      u[(4 * i) * ps + c] = t[i][0];
      u[(4 * i + 1) * ps + c] = (t[i][0] + t[i][1] + t[i][2]) * T(0.5);
      u[(4 * i + 2) * ps + c] = (t[i][0] - t[i][1] + t[i][2]) * T(0.5);
      u[(4 * i + 3) * ps + c] = t[i][2];
    }
  }
}
SL_WINO_CLONES void weight_transform_f32(const float* w, int64_t Cg, float* u, int64_t ps) {
  weight_transform_impl(w, Cg, u, ps);
}
SL_WINO_CLONES void weight_transform_f64(const double* w, int64_t Cg, double* u, int64_t ps) {
  weight_transform_impl(w, Cg, u, ps);
}

/// U[p * su + o * Cg + c] = (G w[o, c] G^T)[p].
template <class T>
void weight_transform(const T* w, int64_t O, int64_t Cg, T* u, int64_t su) {
  parallel_for(0, O, std::max<int64_t>(1, 2048 / std::max<int64_t>(1, Cg)),
               [&](int64_t o0, int64_t o1) {
                 for (int64_t o = o0; o < o1; ++o) {
                   if constexpr (std::is_same_v<T, float>) {
                     weight_transform_f32(w + o * Cg * 9, Cg, u + o * Cg, su);
                   } else {
                     weight_transform_f64(w + o * Cg * 9, Cg, u + o * Cg, su);
                   }
                 }
               });
}

/// gw [O, Cg, 3, 3] = G^T dU[:, o, c] G (the adjoint of weight_transform), dU[p] su apart.
template <class T>
void weight_adjoint(const T* du, int64_t O, int64_t Cg, int64_t su, T* gw) {
  parallel_for(0, O, std::max<int64_t>(1, 2048 / std::max<int64_t>(1, Cg)),
               [&](int64_t o0, int64_t o1) {
                 for (int64_t o = o0; o < o1; ++o) {
                   for (int64_t c = 0; c < Cg; ++c) {
                     T d[4][4], t[3][4];
                     for (int p = 0; p < 16; ++p) d[p / 4][p % 4] = du[p * su + o * Cg + c];
                     for (int k = 0; k < 4; ++k) {  // G^T d
                       t[0][k] = d[0][k] + (d[1][k] + d[2][k]) * T(0.5);
                       t[1][k] = (d[1][k] - d[2][k]) * T(0.5);
                       t[2][k] = (d[1][k] + d[2][k]) * T(0.5) + d[3][k];
                     }
                     T* g = gw + (o * Cg + c) * 9;
                     for (int i = 0; i < 3; ++i) {  // (G^T d) G
                       g[3 * i + 0] = t[i][0] + (t[i][1] + t[i][2]) * T(0.5);
                       g[3 * i + 1] = (t[i][1] - t[i][2]) * T(0.5);
                       g[3 * i + 2] = (t[i][1] + t[i][2]) * T(0.5) + t[i][3];
                     }
                   }
                 }
               });
}

/// [1, rows, cols] view at element `off` of buf: a row-major matrix, or with `trans` the
/// transpose of a row-major [cols, rows] one.
Tensor mat(const Tensor& buf, int64_t off, int64_t rows, int64_t cols, bool trans) {
  return trans ? ops::as_strided(buf, {1, rows, cols}, {rows * cols, 1, rows}, off)
               : ops::as_strided(buf, {1, rows, cols}, {rows * cols, cols, 1}, off);
}

void gemm(const Tensor& c, const Tensor& a, const Tensor& b, double beta) {
  bmm_kernel(DeviceKind::cpu, c, a, b, Scalar(1.0), Scalar(beta));
}

/// Runs f(p, grp) for the 16 * G products of a step, in parallel. Each is a whole bmm_kernel
/// call (run inline in its task, on the tile grid its shape fixes), so the bits do not depend
/// on the thread count.
template <class F>
void for_each_product(int64_t G, const F& f) {
  parallel_for(0, 16 * G, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) f(b / G, b % G);
  });
}

/// Distance between the 16 transformed matrices of a buffer holding n elements each: n rounded
/// up to a cache line, plus one line when that is an even number of lines. The transforms
/// stream through all 16 at once; at a distance that is a multiple of 4 KiB (powers of two
/// channels times tiles: 512 * 128 floats) they would all share one L1 set.
template <class T>
int64_t matrix_stride(int64_t n) {
  constexpr int64_t line = 64 / static_cast<int64_t>(sizeof(T));
  int64_t s = (n + line - 1) / line * line;
  if ((s / line) % 2 == 0) s += line;
  return s;
}

/// Grain (planes per task) of a plane loop over planes of `elems` elements.
int64_t plane_grain(int64_t elems) {
  return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, elems));
}

/// V [16][C, L] of the chunk of images n0 .. n0 + nb - 1 (L = nb * tiles, image n0 + i at
/// columns [i * tiles, (i + 1) * tiles)), one input plane per task.
template <class T>
void transform_chunk_inputs(const T* x, const WinoDims& d, int64_t n0, int64_t nb, T* pv,
                            int64_t sv) {
  const int64_t L = nb * d.tiles;
  parallel_for(0, nb * d.C, plane_grain(16 * d.tiles), [&](int64_t r0, int64_t r1) {
    std::vector<T> buf(static_cast<size_t>(8 * (d.TW + 1)));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r / d.C, c = r % d.C;
      input_transform(x + ((n0 + i) * d.C + c) * d.H * d.W, d, pv + c * L + i * d.tiles, sv,
                      buf.data());
    }
  });
}

}  // namespace

bool winograd_applies(const Conv2dGeometry& g, int64_t C, int64_t O) {
  if (g.kh != 3 || g.kw != 3 || g.stride_h != 1 || g.stride_w != 1 || g.dilation_h != 1 ||
      g.dilation_w != 1) {
    return false;
  }
  // Grouped convolutions stay on im2col: 16 GEMMs per group of [O/g, C/g] x [C/g, tiles] are
  // too thin. Forward + backward, b8, 1 thread, against im2col: depthwise 64ch 56x56 2.1x and
  // 256ch 14x14 2.4x slower, 8 groups of 8/16/32 channels 1.4x/1.3x/1.9x slower.
  if (g.groups != 1) return false;
  const int64_t tiles = ((g.out_h + 1) / 2) * ((g.out_w + 1) / 2);
  return 16 * (C + O) * tiles <= (int64_t{64} << 20);
}

template <class T>
void winograd_conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight,
                             const Tensor& bias, const Conv2dGeometry& g) {
  const WinoDims d(input, weight, g);
  const auto dt = input.dtype();
  const T* x = input.data_ptr<T>();
  const T* pb = bias.defined() ? bias.data_ptr<T>() : nullptr;
  T* y = out.data_ptr<T>();
  // U [16][O, Cg], V [16][C, L], M [16][O, L] (L: the tiles of a chunk of images, image
  // n0 + i at [i * tiles, (i + 1) * tiles)), the 16 matrices su / sv / sm apart
  const int64_t Lmax = d.nb * d.tiles, su = matrix_stride<T>(d.O * d.Cg);
  const int64_t sv = matrix_stride<T>(d.C * Lmax), sm = matrix_stride<T>(d.O * Lmax);
  Tensor u = ops::empty({16 * su}, dt, kCPU);
  weight_transform(weight.data_ptr<T>(), d.O, d.Cg, u.data_ptr<T>(), su);
  Tensor v = ops::empty({16 * sv}, dt, kCPU);
  Tensor m = ops::empty({16 * sm}, dt, kCPU);
  T* pv = v.data_ptr<T>();
  T* pm = m.data_ptr<T>();
  for (int64_t n0 = 0; n0 < d.N; n0 += d.nb) {
    const int64_t nb = std::min(d.nb, d.N - n0), L = nb * d.tiles;
    transform_chunk_inputs(x, d, n0, nb, pv, sv);
    for_each_product(d.G, [&](int64_t p, int64_t grp) {
      gemm(mat(m, p * sm + grp * d.Og * L, d.Og, L, false),
           mat(u, p * su + grp * d.Og * d.Cg, d.Og, d.Cg, false),
           mat(v, p * sv + grp * d.Cg * L, d.Cg, L, false), 0.0);
    });
    parallel_for(0, nb * d.O, plane_grain(16 * d.tiles), [&](int64_t r0, int64_t r1) {
      std::vector<T> buf(static_cast<size_t>(4 * d.TW));
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t i = r / d.O, o = r % d.O;
        output_transform(pm + o * L + i * d.tiles, sm, d, y + ((n0 + i) * d.O + o) * d.Ho * d.Wo,
                         pb ? pb[o] : T(0), buf.data());
      }
    });
  }
}

template <class T>
void winograd_conv2d_backward(const Tensor& grad_input, const Tensor& grad_weight,
                              const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                              const Conv2dGeometry& g) {
  const WinoDims d(input, weight, g);
  const auto dt = input.dtype();
  const T* x = input.data_ptr<T>();
  const T* gy = grad_out.data_ptr<T>();
  const bool want_gw = grad_weight.defined(), want_gi = grad_input.defined();
  const int64_t Lmax = d.nb * d.tiles, su = matrix_stride<T>(d.O * d.Cg);
  const int64_t sv = matrix_stride<T>(d.C * Lmax), sm = matrix_stride<T>(d.O * Lmax);
  Tensor u, du;
  if (want_gi) {
    u = ops::empty({16 * su}, dt, kCPU);
    weight_transform(weight.data_ptr<T>(), d.O, d.Cg, u.data_ptr<T>(), su);
  }
  if (want_gw) du = ops::empty({16 * su}, dt, kCPU);
  Tensor v = ops::empty({16 * sv}, dt, kCPU);
  Tensor dm = ops::empty({16 * sm}, dt, kCPU);
  T* pv = v.data_ptr<T>();
  T* pdm = dm.data_ptr<T>();
  for (int64_t n0 = 0; n0 < d.N; n0 += d.nb) {
    const int64_t nb = std::min(d.nb, d.N - n0), L = nb * d.tiles;
    parallel_for(0, nb * d.O, plane_grain(16 * d.tiles), [&](int64_t r0, int64_t r1) {
      std::vector<T> buf(static_cast<size_t>(4 * d.TW));
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t i = r / d.O, o = r % d.O;
        grad_output_transform(gy + ((n0 + i) * d.O + o) * d.Ho * d.Wo, d, pdm + o * L + i * d.tiles,
                              sm, buf.data());
      }
    });
    if (want_gw) {
      transform_chunk_inputs(x, d, n0, nb, pv, sv);
      // dU[p] (+)= dM[p] @ V[p]^T, the chunks summed in order
      for_each_product(d.G, [&](int64_t p, int64_t grp) {
        gemm(mat(du, p * su + grp * d.Og * d.Cg, d.Og, d.Cg, false),
             mat(dm, p * sm + grp * d.Og * L, d.Og, L, false),
             mat(v, p * sv + grp * d.Cg * L, L, d.Cg, true), n0 == 0 ? 0.0 : 1.0);
      });
    }
    if (want_gi) {
      // dV[p] = U[p]^T @ dM[p], into V's buffer
      for_each_product(d.G, [&](int64_t p, int64_t grp) {
        gemm(mat(v, p * sv + grp * d.Cg * L, d.Cg, L, false),
             mat(u, p * su + grp * d.Og * d.Cg, d.Cg, d.Og, true),
             mat(dm, p * sm + grp * d.Og * L, d.Og, L, false), 0.0);
      });
      T* gi = grad_input.data_ptr<T>();
      parallel_for(0, nb * d.C, plane_grain(16 * d.tiles), [&](int64_t r0, int64_t r1) {
        std::vector<T> acc(static_cast<size_t>((2 * d.TH + 2) * 2 * (d.TW + 1)));
        std::vector<T> buf(static_cast<size_t>(16 * (d.TW + 1)));
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t i = r / d.C, c = r % d.C;
          input_adjoint(pv + c * L + i * d.tiles, sv, d, gi + ((n0 + i) * d.C + c) * d.H * d.W,
                        acc.data(), buf.data());
        }
      });
    }
  }
  if (want_gw) weight_adjoint(du.data_ptr<T>(), d.O, d.Cg, su, grad_weight.data_ptr<T>());
}

template void winograd_conv2d_forward<float>(const Tensor&, const Tensor&, const Tensor&,
                                             const Tensor&, const Conv2dGeometry&);
template void winograd_conv2d_forward<double>(const Tensor&, const Tensor&, const Tensor&,
                                              const Tensor&, const Conv2dGeometry&);
template void winograd_conv2d_backward<float>(const Tensor&, const Tensor&, const Tensor&,
                                              const Tensor&, const Tensor&, const Conv2dGeometry&);
template void winograd_conv2d_backward<double>(const Tensor&, const Tensor&, const Tensor&,
                                               const Tensor&, const Tensor&, const Conv2dGeometry&);

}  // namespace sl::cpu

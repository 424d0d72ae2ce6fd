// CPU kernels of the conv family: im2col / col2im around the BLAS GEMM behind bmm_kernel.
//
// Per group, the patch matrix col [C/g * kh * kw, nb * Ho * Wo] of nb images side by side is
// built (im2col; for 1x1 convolutions with stride 1 and no padding the input planes are that
// matrix), then out_g [O/g, nb * Ho * Wo] = W_g [O/g, C/g * kh * kw] @ col. nb > 1 only for
// small outputs, where one image alone makes a thin, slow product (images_per_gemm).
// Backward: grad_weight accumulates gout_g @ col^T over the images; grad_input of a stride-1
// convolution is the forward convolution of grad_out with the flipped, transposed weights (the
// same wide GEMMs), otherwise col2im(W_g^T @ gout_g).
// 3x3 stride-1 convolutions (forward and backward) take the Winograd F(2x2, 3x3) path instead
// (core/cpu/conv_winograd.cpp): 16 wide GEMMs with 2.25x fewer multiplications.
// Batches with a GEMM chunk per core run their chunks on parallel lanes, one GEMM per core (Note
// [Conv image lanes]); otherwise the GEMMs run on fixed output tiles (Note [Deterministic BLAS
// tiles]) and the patch loops split rows over the thread pool. Every result is computed in a
// fixed order, so it does not depend on the thread count.
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "core/cpu/conv_shape.h"
#include "core/cpu/conv_winograd.h"
#include "core/cpu/loops.h"
#include "core/ops/conv.h"
#include "core/ops/copy.h"
#include "core/ops/matmul.h"
#include "core/ops/view.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SL_CONV_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SL_CONV_CLONES
#endif

namespace sl::cpu {
namespace {

// Strided row copies of im2col / col2im for stride 2 (the ResNet stem and downsampling
// convolutions); float versions get an AVX2 clone, whose permutes vectorise stride 2.
template <class T>
[[gnu::always_inline]] inline void gather_strided_impl(T* d, const T* s, int64_t n,
                                                       int64_t stride) {
  if (stride == 2) {
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) d[k] = s[2 * k];
  } else {
    for (int64_t k = 0; k < n; ++k) d[k] = s[k * stride];
  }
}
template <class T>
[[gnu::always_inline]] inline void scatter_add_strided_impl(T* d, const T* s, int64_t n,
                                                            int64_t stride) {
  if (stride == 2) {
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) d[2 * k] += s[k];
  } else {
    for (int64_t k = 0; k < n; ++k) d[k * stride] += s[k];
  }
}
SL_CONV_CLONES void gather_strided_f32(float* d, const float* s, int64_t n, int64_t stride) {
  gather_strided_impl(d, s, n, stride);
}
SL_CONV_CLONES void scatter_add_strided_f32(float* d, const float* s, int64_t n, int64_t stride) {
  scatter_add_strided_impl(d, s, n, stride);
}
template <class T>
void gather_strided(T* d, const T* s, int64_t n, int64_t stride) {
  if constexpr (std::is_same_v<T, float>) {
    gather_strided_f32(d, s, n, stride);
  } else {
    gather_strided_impl(d, s, n, stride);
  }
}
template <class T>
void scatter_add_strided(T* d, const T* s, int64_t n, int64_t stride) {
  if constexpr (std::is_same_v<T, float>) {
    scatter_add_strided_f32(d, s, n, stride);
  } else {
    scatter_add_strided_impl(d, s, n, stride);
  }
}

/// A [rows, cols] matrix view (as a 1-batch [1, rows, cols] tensor) of base's storage at
/// element offset `off` from base's first element.
Tensor mat(const Tensor& base, int64_t off, int64_t rows, int64_t cols, int64_t s_row,
           int64_t s_col) {
  return ops::as_strided(base, {1, rows, cols}, {rows * cols, s_row, s_col},
                         base.storage_offset() + off);
}

/// c = a @ b + beta * c on the CPU BLAS path (c a contiguous matrix view).
void gemm(const Tensor& c, const Tensor& a, const Tensor& b, double beta) {
  bmm_kernel(DeviceKind::cpu, c, a, b, Scalar(1.0), Scalar(beta));
}

/// Valid output range [lo, hi) along one dim for kernel offset `k_off` (= k * dilation - pad):
/// out index o reads input o * stride + k_off, which must lie in [0, size).
inline void valid_range(int64_t out_size, int64_t stride, int64_t k_off, int64_t size, int64_t& lo,
                        int64_t& hi) {
  // o * stride + k_off >= 0  <=>  o >= ceil(-k_off / stride)
  lo = k_off >= 0 ? 0 : (-k_off + stride - 1) / stride;
  // o * stride + k_off <= size - 1  <=>  o <= floor((size - 1 - k_off) / stride)
  int64_t last = size - 1 - k_off;
  hi = last < 0 ? 0 : std::min(out_size, last / stride + 1);
  lo = std::min(lo, hi);
}

/// Output rows [oh0, oh1) of the patch matrix: col[(c * kh + i) * kw + j, (oh - oh0) * Wo + ow]
/// = x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (0 outside); rows of col are `ld` elements
/// apart (>= (oh1 - oh0) * Wo: several images side by side).
template <class T>
void im2col(const T* x, int64_t C, int64_t H, int64_t W, const Conv2dGeometry& g, T* col,
            int64_t ld, int64_t oh0, int64_t oh1) {
  const int64_t Ho = g.out_h, Wo = g.out_w, rows = C * g.kh * g.kw, P = (oh1 - oh0) * Wo;
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, P)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const int64_t c = r / (g.kh * g.kw), i = (r / g.kw) % g.kh, j = r % g.kw;
                   const int64_t off_h = i * g.dilation_h - g.pad_h_begin;
                   const int64_t off_w = j * g.dilation_w - g.pad_w_begin;
                   int64_t oh_lo, oh_hi, ow_lo, ow_hi;
                   valid_range(Ho, g.stride_h, off_h, H, oh_lo, oh_hi);
                   valid_range(Wo, g.stride_w, off_w, W, ow_lo, ow_hi);
                   oh_lo = std::clamp(oh_lo, oh0, oh1);
                   oh_hi = std::clamp(oh_hi, oh_lo, oh1);
                   T* dst = col + r * ld - oh0 * Wo;  // dst + oh * Wo: output row oh
                   const T* src_c = x + c * H * W;
                   std::fill(dst + oh0 * Wo, dst + oh_lo * Wo, T(0));
                   for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
                     T* d = dst + oh * Wo;
                     const T* s = src_c + (oh * g.stride_h + off_h) * W + off_w;
                     std::fill(d, d + ow_lo, T(0));
                     if (g.stride_w == 1) {
                       std::memcpy(d + ow_lo, s + ow_lo,
                                   static_cast<size_t>(ow_hi - ow_lo) * sizeof(T));
                     } else {
                       gather_strided(d + ow_lo, s + ow_lo * g.stride_w, ow_hi - ow_lo, g.stride_w);
                     }
                     std::fill(d + ow_hi, d + Wo, T(0));
                   }
                   std::fill(dst + oh_hi * Wo, dst + oh1 * Wo, T(0));
                 }
               });
}

/// x[c, ...] += sum of the col entries that im2col(..., oh0, oh1) reads from it; x is zeroed
/// first when oh0 == 0 (the first block of output rows). Rows of col are `ld` elements apart.
template <class T>
void col2im(const T* col, int64_t C, int64_t H, int64_t W, const Conv2dGeometry& g, T* x,
            int64_t ld, int64_t oh0, int64_t oh1) {
  const int64_t Ho = g.out_h, Wo = g.out_w;
  // Channels are independent; each thread owns whole channels, so the sum order is fixed.
  parallel_for(0, C, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, H * W * g.kh * g.kw)),
               [&](int64_t c0, int64_t c1) {
                 for (int64_t c = c0; c < c1; ++c) {
                   T* dst_c = x + c * H * W;
                   if (oh0 == 0) std::fill(dst_c, dst_c + H * W, T(0));
                   for (int64_t i = 0; i < g.kh; ++i) {
                     for (int64_t j = 0; j < g.kw; ++j) {
                       const int64_t r = (c * g.kh + i) * g.kw + j;
                       const int64_t off_h = i * g.dilation_h - g.pad_h_begin;
                       const int64_t off_w = j * g.dilation_w - g.pad_w_begin;
                       int64_t oh_lo, oh_hi, ow_lo, ow_hi;
                       valid_range(Ho, g.stride_h, off_h, H, oh_lo, oh_hi);
                       valid_range(Wo, g.stride_w, off_w, W, ow_lo, ow_hi);
                       oh_lo = std::clamp(oh_lo, oh0, oh1);
                       oh_hi = std::clamp(oh_hi, oh_lo, oh1);
                       const T* src = col + r * ld - oh0 * Wo;  // src + oh * Wo: row oh
                       for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
                         const T* s = src + oh * Wo;
                         T* d = dst_c + (oh * g.stride_h + off_h) * W + off_w;
                         scatter_add_strided(d + ow_lo * g.stride_w, s + ow_lo, ow_hi - ow_lo,
                                             g.stride_w);
                       }
                     }
                   }
                 }
               });
}

/// Largest patch buffer (elements) of one GEMM.
constexpr int64_t kMaxPatchElems = int64_t{8} << 20;
/// Largest patch block (elements) of one image (Note [Conv patch blocks]).
constexpr int64_t kMaxPatchBlockElems = int64_t{128} << 10;

/// Images per GEMM chunk, chunks, and lanes running them (Note [Conv image lanes]).
struct ConvPlan {
  int64_t nb, chunks, lanes;
};

bool is_pointwise(const Conv2dGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h_begin == 0 &&
         g.pad_h_end == 0 && g.pad_w_begin == 0 && g.pad_w_end == 0;
}

/// Images per GEMM: small outputs (late ResNet stages: 7 x 7) make thin products that run at
/// half the BLAS's speed, so several images' patch matrices are laid side by side until a
/// product has >= 512 columns, keeping the patch buffer within 8M elements.
int64_t images_per_gemm(const Conv2dGeometry& g, int64_t N, int64_t K) {
  const int64_t HWo = g.out_h * g.out_w;
  int64_t nb = std::min(N, std::max<int64_t>(1, (512 + HWo - 1) / HWo));
  while (nb > 1 && K * nb * HWo > kMaxPatchElems) --nb;
  return nb;
}

// Note [Conv image lanes]
// The im2col path cuts the batch into chunks of nb images, one GEMM each. With several chunks
// per hardware thread's worth of images, the chunks are dealt to `lanes` (one per hardware
// thread): lane l runs chunks l, l + lanes, ... in order with its own patch buffers, and the
// lanes run in parallel. Each GEMM then runs whole on one core, where splitting every GEMM into
// row bands over the cores packed its shared operand once per band and left the bands uneven
// (256 output channels: 144 + 112 rows); conv2d 128->256 stride 2, batch 8, took 17.3 ms at 2
// threads against 23.6 at 1. nb is then raised so that every lane gets the same number of
// chunks (8 images, nb 3: chunks of 4, one per lane). grad_weight sums over chunks: each lane
// accumulates its chunks, then the lanes' sums are added in lane order. The plan depends on
// the shape and the machine's core count only, never on set_num_threads, so the bits do not
// depend on the thread count. Batches too small for a chunk per lane keep one lane, and the
// GEMMs split into row bands as before (Note [Deterministic BLAS tiles]).
ConvPlan plan_chunks(const Conv2dGeometry& g, int64_t N, int64_t K) {
  static const int64_t hw =
      std::clamp<int64_t>(static_cast<int64_t>(std::thread::hardware_concurrency()), 1, 256);
  const int64_t HWo = g.out_h * g.out_w;
  int64_t nb = images_per_gemm(g, N, K);
  if (hw > 1 && N >= nb * hw) {
    const int64_t per_lane = N / (nb * hw);  // >= 1 chunk of >= nb images per lane
    const int64_t wider = (N + per_lane * hw - 1) / (per_lane * hw);
    if (K * wider * HWo <= kMaxPatchElems) nb = wider;
  }
  const int64_t chunks = (N + nb - 1) / nb;
  return {nb, chunks, std::min(hw, chunks)};
}

/// Runs lane(l) for every lane: in parallel on the pool when there are several, directly
/// otherwise (so that a single lane's GEMMs still split into row bands).
template <class F>
void for_each_lane(int64_t lanes, const F& lane) {
  if (lanes == 1) return lane(0);
  parallel_for(0, lanes, 1, [&](int64_t l0, int64_t l1) {
    for (int64_t l = l0; l < l1; ++l) lane(l);
  });
}

/// Copies rows [0, rows) of src (row stride src_ld) to dst (row stride dst_ld), `len` each.
template <class T>
void copy_rows(const T* src, int64_t src_ld, T* dst, int64_t dst_ld, int64_t rows, int64_t len) {
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, len)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   std::memcpy(dst + r * dst_ld, src + r * src_ld,
                               static_cast<size_t>(len) * sizeof(T));
                 }
               });
}

// Note [Conv patch blocks]
// An image's patch matrix [K, Ho * Wo] can be far larger than the caches: DeepSpeech2's second
// convolution (16 channels, 21x11 kernel, 250 frames) makes 3696 x 5250 (77 MB) per image, which
// im2col wrote to memory and the BLAS read back to pack it, and the backward twice more (the
// grad_weight GEMM's patches, grad_input's col2im). When one image's patch matrix exceeds
// kMaxPatchBlockElems (128 Ki elements: 512 KB in f32, a core's L2 here) and each GEMM takes
// one image, the loops run over blocks of whole output rows instead, each block's patches
// [K, rows * Wo] within that size (but at least one row): im2col of the block, its GEMMs, col2im
// of the block, so the BLAS reads the patches back from the caches.
// The forward GEMM writes the block to a buffer copied into the output (the output's rows are
// Ho * Wo apart); grad_weight adds each block's product in row order, and col2im adds each
// block's rows in order (so a sum over output rows runs block by block, in a fixed order: the
// bits still depend on the shapes only, never on the thread count).

/// Shapes shared by the forward and backward loops.
struct ConvDims : ConvShape {
  int64_t Ho, Wo, HWo, K, HW;
  bool direct;  ///< 1x1, stride 1, no padding: the input plane is the patch matrix
  ConvPlan plan;
  int64_t nb;          ///< images per GEMM (plan.nb)
  int64_t block_rows;  ///< output rows per patch block (Note [Conv patch blocks]; Ho: one block)
  ConvDims(const Tensor& input, const Tensor& weight, const Conv2dGeometry& g)
      : ConvShape(input, weight, g),
        Ho(g.out_h),
        Wo(g.out_w),
        HWo(g.out_h * g.out_w),
        K(Cg * g.kh * g.kw),
        HW(H * W),
        direct(is_pointwise(g)),
        plan(plan_chunks(g, N, Cg * g.kh * g.kw)),
        nb(plan.nb),
        block_rows(
            !direct && nb == 1 && K * HWo > kMaxPatchBlockElems
                ? std::clamp<int64_t>(kMaxPatchBlockElems / std::max<int64_t>(1, K * Wo), 1, Ho)
                : Ho) {}
  int64_t in_off(int64_t n, int64_t grp) const { return (n * C + grp * Cg) * HW; }
  int64_t out_off(int64_t n, int64_t grp) const { return (n * O + grp * Og) * HWo; }
  /// End of the block of output rows that starts at oh0: min(Ho, oh0 + block_rows).
  int64_t block_end(int64_t oh0) const { return std::min(Ho, oh0 + block_rows); }
  /// Columns of one image's block of output rows [oh0, block_end(oh0)).
  int64_t block_cols(int64_t oh0) const { return (block_end(oh0) - oh0) * Wo; }
};

/// Fills output rows [oh0, oh0 + block_rows) of the patch matrices of images [n0, n0 + nb) of
/// group grp into col [K, nb * P], P = d.block_cols(oh0) (P = HWo when unblocked).
template <class T>
void fill_patches(const T* x, const ConvDims& d, const Conv2dGeometry& g, int64_t n0, int64_t nb,
                  int64_t grp, int64_t oh0, T* col) {
  const int64_t P = d.block_cols(oh0), L = nb * P, oh1 = d.block_end(oh0);
  for (int64_t i = 0; i < nb; ++i) {
    const T* xi = x + d.in_off(n0 + i, grp);
    if (d.direct) {  // never blocked: P = HWo
      copy_rows(xi, d.HW, col + i * P, L, d.K, P);
    } else {
      im2col(xi, d.Cg, d.H, d.W, g, col + i * P, L, oh0, oh1);
    }
  }
}

template <class T>
void conv2d_forward_typed(const Tensor& out, const Tensor& input, const Tensor& weight,
                          const Tensor& bias, const Conv2dGeometry& g) {
  if (winograd_applies(g, input.size(1), weight.size(0))) {
    winograd_conv2d_forward<T>(out, input, weight, bias, g);
    return;
  }
  const ConvDims d(input, weight, g);
  const T* x = input.data_ptr<T>();
  T* po = out.data_ptr<T>();
  const T* pb = bias.defined() ? bias.data_ptr<T>() : nullptr;
  const bool blocked = d.block_rows < d.Ho;
  const int64_t P_max = d.block_rows * d.Wo;  // columns of one image's largest block
  for_each_lane(d.plan.lanes, [&](int64_t lane) {
    // this lane's patch matrix and, for several images or a block of rows, its GEMM output
    Tensor col, tmp;
    if (!d.direct || d.nb > 1) col = ops::empty({d.K, d.nb * P_max}, input.dtype(), kCPU);
    if (d.nb > 1 || blocked) tmp = ops::empty({d.Og, d.nb * P_max}, input.dtype(), kCPU);
    for (int64_t c = lane; c < d.plan.chunks; c += d.plan.lanes) {
      const int64_t n0 = c * d.nb, nb = std::min(d.nb, d.N - n0);
      for (int64_t grp = 0; grp < d.G; ++grp)
        for (int64_t oh0 = 0; oh0 < d.Ho; oh0 += d.block_rows) {
          const int64_t P = d.block_cols(oh0), L = nb * P;
          Tensor b;
          if (d.direct && nb == 1) {
            b = mat(input, d.in_off(n0, grp), d.K, L, L, 1);
          } else {
            fill_patches(x, d, g, n0, nb, grp, oh0, col.data_ptr<T>());
            b = mat(col, 0, d.K, L, L, 1);
          }
          Tensor a = mat(weight, grp * d.Og * d.K, d.Og, d.K, d.K, 1);
          if (nb == 1 && !blocked) {
            // straight into the output, the bias pre-filled (the GEMM accumulates onto it)
            const int64_t off = d.out_off(n0, grp);
            if (pb) {
              for (int64_t o = 0; o < d.Og; ++o) {
                std::fill(po + off + o * d.HWo, po + off + (o + 1) * d.HWo, pb[grp * d.Og + o]);
              }
            }
            gemm(mat(out, off, d.Og, L, L, 1), a, b, pb ? 1.0 : 0.0);
            continue;
          }
          gemm(mat(tmp, 0, d.Og, L, L, 1), a, b, 0.0);
          // tmp [Og, nb * P] -> out[n0 + i, grp * Og + o, oh0 * Wo + (0 .. P)] (+ bias)
          const T* pt = tmp.data_ptr<T>();
          parallel_for(0, nb * d.Og, std::max<int64_t>(1, 16384 / P), [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) {
              const int64_t i = r / d.Og, o = r % d.Og;
              const T* src = pt + o * L + i * P;
              T* dst = po + d.out_off(n0 + i, grp) + o * d.HWo + oh0 * d.Wo;
              const T bv = pb ? pb[grp * d.Og + o] : T(0);
              for (int64_t k = 0; k < P; ++k) dst[k] = src[k] + bv;
            }
          });
        }
    }
  });
}

/// Whether grad_input of a stride-1 convolution can be computed as a forward convolution of
/// grad_out (needs padding <= dilation * (kernel - 1) on every side).
bool stride_one_transpose(const Conv2dGeometry& g) {
  const int64_t eh = g.dilation_h * (g.kh - 1), ew = g.dilation_w * (g.kw - 1);
  return g.stride_h == 1 && g.stride_w == 1 && g.pad_h_begin <= eh && g.pad_h_end <= eh &&
         g.pad_w_begin <= ew && g.pad_w_end <= ew;
}

/// Geometry of that convolution: grad_out [N, O, Ho, Wo] -> [N, C, H, W] with the padding
/// d * (k - 1) - pad on each side (so the output size is the input's).
Conv2dGeometry transposed_geometry(const Conv2dGeometry& g, const Tensor& input) {
  Conv2dGeometry t = g;
  const int64_t eh = g.dilation_h * (g.kh - 1), ew = g.dilation_w * (g.kw - 1);
  t.pad_h_begin = eh - g.pad_h_begin;
  t.pad_h_end = eh - g.pad_h_end;
  t.pad_w_begin = ew - g.pad_w_begin;
  t.pad_w_end = ew - g.pad_w_end;
  t.out_h = input.size(2);
  t.out_w = input.size(3);
  return t;
}

/// W' [C, O / g, kh, kw] with W'[grp * Cg + c, o, i, j] = W[grp * Og + o, c, kh-1-i, kw-1-j].
template <class T>
Tensor flipped_weight(const Tensor& weight, const Conv2dGeometry& g) {
  const int64_t O = weight.size(0), Cg = weight.size(1), kh = g.kh, kw = g.kw;
  const int64_t G = g.groups, Og = O / G;
  Tensor f = ops::empty({G * Cg, Og, kh, kw}, weight.dtype(), kCPU);
  const T* w = weight.data_ptr<T>();
  T* pf = f.data_ptr<T>();
  for (int64_t grp = 0; grp < G; ++grp)
    for (int64_t o = 0; o < Og; ++o)
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t i = 0; i < kh; ++i)
          for (int64_t j = 0; j < kw; ++j) {
            pf[(((grp * Cg + c) * Og + o) * kh + i) * kw + j] =
                w[(((grp * Og + o) * Cg + c) * kh + (kh - 1 - i)) * kw + (kw - 1 - j)];
          }
  return f;
}

template <class T>
void conv2d_backward_typed(const Tensor& grad_input, const Tensor& grad_weight,
                           const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                           const Tensor& weight, const Conv2dGeometry& g) {
  const ConvDims d(input, weight, g);
  const T* gout = grad_out.data_ptr<T>();
  const T* x = input.data_ptr<T>();
  if (grad_bias.defined()) {
    T* gb = grad_bias.data_ptr<T>();
    parallel_for(0, d.O, 1, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        double acc = 0;
        for (int64_t n = 0; n < d.N; ++n) {
          const T* p = gout + (n * d.O + o) * d.HWo;
          for (int64_t i = 0; i < d.HWo; ++i) acc += static_cast<double>(p[i]);
        }
        gb[o] = static_cast<T>(acc);
      }
    });
  }
  if (winograd_applies(g, input.size(1), weight.size(0))) {
    if (grad_input.defined() || grad_weight.defined()) {
      winograd_conv2d_backward<T>(grad_input, grad_weight, grad_out, input, weight, g);
    }
    return;
  }
  T* gi = grad_input.defined() ? grad_input.data_ptr<T>() : nullptr;
  if (gi && stride_one_transpose(g)) {
    // Stride 1: grad_input is the convolution of grad_out with the flipped, transposed
    // weights. Its GEMMs are [C/g, O/g * kh * kw] @ patches, as wide as the forward's, where
    // the col2im route multiplies through a thin inner dim of O/g (2x slower at 64 channels).
    conv2d_forward_typed<T>(grad_input, grad_out, flipped_weight<T>(weight, g), Tensor(),
                            transposed_geometry(g, input));
    gi = nullptr;
  }
  if (!gi && !grad_weight.defined()) return;
  // Note [Conv image lanes]: lane 0 sums its chunks' grad_weight in place, the other lanes in
  // their own buffers, added to it in lane order at the end.
  std::vector<Tensor> gw_lane(static_cast<size_t>(d.plan.lanes));
  if (grad_weight.defined()) {
    gw_lane[0] = grad_weight;
    for (size_t l = 1; l < gw_lane.size(); ++l) {
      gw_lane[l] = ops::empty(grad_weight.sizes(), grad_weight.dtype(), kCPU);
    }
  }
  const int64_t P_max = d.block_rows * d.Wo;  // columns of one image's largest block
  for_each_lane(d.plan.lanes, [&](int64_t lane) {
    Tensor col, gbuf;
    if (!d.direct || d.nb > 1) col = ops::empty({d.K, d.nb * P_max}, input.dtype(), kCPU);
    if (d.nb > 1) gbuf = ops::empty({d.Og, d.nb * d.HWo}, input.dtype(), kCPU);
    const Tensor& gw = gw_lane[static_cast<size_t>(lane)];
    for (int64_t c = lane; c < d.plan.chunks; c += d.plan.lanes) {
      const int64_t n0 = c * d.nb, nb = std::min(d.nb, d.N - n0);
      for (int64_t grp = 0; grp < d.G; ++grp)
        for (int64_t oh0 = 0; oh0 < d.Ho; oh0 += d.block_rows) {
          // (nb > 1: never blocked, P = HWo)
          const int64_t P = d.block_cols(oh0), L = nb * P;
          // gout of these images' rows [oh0, oh0 + P / Wo) as [Og, L]
          Tensor go;
          if (nb == 1) {
            go = mat(grad_out, d.out_off(n0, grp) + oh0 * d.Wo, d.Og, L, d.HWo, 1);
          } else {
            T* pg = gbuf.data_ptr<T>();
            for (int64_t i = 0; i < nb; ++i) {
              copy_rows(gout + d.out_off(n0 + i, grp), d.HWo, pg + i * d.HWo, L, d.Og, d.HWo);
            }
            go = mat(gbuf, 0, d.Og, L, L, 1);
          }
          if (gw.defined()) {
            Tensor colT;  // [L, K] view of the patch matrix
            if (d.direct && nb == 1) {
              colT = mat(input, d.in_off(n0, grp), L, d.K, 1, d.HWo);
            } else {
              fill_patches(x, d, g, n0, nb, grp, oh0, col.data_ptr<T>());
              colT = mat(col, 0, L, d.K, 1, L);
            }
            gemm(mat(gw, grp * d.Og * d.K, d.Og, d.K, d.K, 1), go, colT,
                 c == lane && oh0 == 0 ? 0.0 : 1.0);
          }
          if (gi) {
            Tensor wT = mat(weight, grp * d.Og * d.K, d.K, d.Og, 1, d.K);  // W_g^T [K, Og]
            if (d.direct && nb == 1) {
              gemm(mat(grad_input, d.in_off(n0, grp), d.K, L, L, 1), wT, go, 0.0);
              continue;
            }
            gemm(mat(col, 0, d.K, L, L, 1), wT, go, 0.0);
            const T* pc = col.data_ptr<T>();
            for (int64_t i = 0; i < nb; ++i) {
              T* gii = gi + d.in_off(n0 + i, grp);
              if (d.direct) {
                copy_rows(pc + i * P, L, gii, d.HW, d.K, P);
              } else {
                col2im(pc + i * P, d.Cg, d.H, d.W, g, gii, L, oh0, d.block_end(oh0));
              }
            }
          }
        }
    }
  });
  if (grad_weight.defined() && d.plan.lanes > 1) {
    T* gw = grad_weight.data_ptr<T>();
    const int64_t n = grad_weight.numel();
    parallel_for(0, n, 16384, [&](int64_t i0, int64_t i1) {
      for (size_t l = 1; l < gw_lane.size(); ++l) {
        const T* p = gw_lane[l].data_ptr<T>();
        for (int64_t i = i0; i < i1; ++i) gw[i] += p[i];
      }
    });
  }
}

void conv2d_forward_cpu(const Tensor& out, const Tensor& input, const Tensor& weight,
                        const Tensor& bias, const Conv2dGeometry& g) {
  switch (input.dtype()) {
    case DType::f32:
      return conv2d_forward_typed<float>(out, input, weight, bias, g);
    case DType::f64:
      return conv2d_forward_typed<double>(out, input, weight, bias, g);
    default:
      detail::throw_error<DTypeError>("conv2d: unsupported dtype ", dtype_name(input.dtype()));
  }
}

void conv2d_backward_cpu(const Tensor& grad_input, const Tensor& grad_weight,
                         const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                         const Tensor& weight, const Conv2dGeometry& g) {
  switch (input.dtype()) {
    case DType::f32:
      return conv2d_backward_typed<float>(grad_input, grad_weight, grad_bias, grad_out, input,
                                          weight, g);
    case DType::f64:
      return conv2d_backward_typed<double>(grad_input, grad_weight, grad_bias, grad_out, input,
                                           weight, g);
    default:
      detail::throw_error<DTypeError>("conv2d_backward: unsupported dtype ",
                                      dtype_name(input.dtype()));
  }
}

SL_REGISTER_KERNEL(conv2d_forward_kernel, DeviceKind::cpu, &conv2d_forward_cpu);
SL_REGISTER_KERNEL(conv2d_backward_kernel, DeviceKind::cpu, &conv2d_backward_cpu);

}  // namespace
}  // namespace sl::cpu

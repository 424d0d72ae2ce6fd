// CPU kernels of the conv family: im2col / col2im around the BLAS GEMM behind bmm_kernel.
//
// Per image and group, the input patch matrix col [C/g * kh * kw, Ho * Wo] is built (im2col;
// skipped for 1x1 convolutions with stride 1 and no padding, where the input already is that
// matrix), then out_g [O/g, Ho*Wo] = W_g [O/g, C/g*kh*kw] @ col. Backward: grad_weight
// accumulates gout_g @ col^T over the images, grad_input is col2im(W_g^T @ gout_g).
// GEMMs run on the BLAS's threads; the patch loops split rows over the OpenMP pool. Every
// result is computed in a fixed order, so it does not depend on the thread count.
#include <algorithm>
#include <cstring>

#include "core/cpu/loops.h"
#include "core/ops/conv.h"
#include "core/ops/copy.h"
#include "core/ops/matmul.h"
#include "core/ops/view.h"

namespace sl::cpu {
namespace {

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

/// col[(c * kh + i) * kw + j, oh * Wo + ow] = x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (0
/// outside).
template <class T>
void im2col(const T* x, int64_t C, int64_t H, int64_t W, const Conv2dGeometry& g, T* col) {
  const int64_t Ho = g.out_h, Wo = g.out_w, rows = C * g.kh * g.kw;
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, Ho * Wo)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const int64_t c = r / (g.kh * g.kw), i = (r / g.kw) % g.kh, j = r % g.kw;
                   const int64_t off_h = i * g.dilation_h - g.pad_h_begin;
                   const int64_t off_w = j * g.dilation_w - g.pad_w_begin;
                   int64_t oh_lo, oh_hi, ow_lo, ow_hi;
                   valid_range(Ho, g.stride_h, off_h, H, oh_lo, oh_hi);
                   valid_range(Wo, g.stride_w, off_w, W, ow_lo, ow_hi);
                   T* dst = col + r * Ho * Wo;
                   const T* src_c = x + c * H * W;
                   std::fill(dst, dst + oh_lo * Wo, T(0));
                   for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
                     T* d = dst + oh * Wo;
                     const T* s = src_c + (oh * g.stride_h + off_h) * W + off_w;
                     std::fill(d, d + ow_lo, T(0));
                     if (g.stride_w == 1) {
                       std::memcpy(d + ow_lo, s + ow_lo,
                                   static_cast<size_t>(ow_hi - ow_lo) * sizeof(T));
                     } else {
                       const int64_t sw = g.stride_w;
                       for (int64_t ow = ow_lo; ow < ow_hi; ++ow) d[ow] = s[ow * sw];
                     }
                     std::fill(d + ow_hi, d + Wo, T(0));
                   }
                   std::fill(dst + oh_hi * Wo, dst + Ho * Wo, T(0));
                 }
               });
}

/// x[c, ...] = sum of the col entries that im2col reads from it (x is overwritten).
template <class T>
void col2im(const T* col, int64_t C, int64_t H, int64_t W, const Conv2dGeometry& g, T* x) {
  const int64_t Ho = g.out_h, Wo = g.out_w;
  // Channels are independent; each thread owns whole channels, so the sum order is fixed.
  parallel_for(0, C, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, H * W * g.kh * g.kw)),
               [&](int64_t c0, int64_t c1) {
                 for (int64_t c = c0; c < c1; ++c) {
                   T* dst_c = x + c * H * W;
                   std::fill(dst_c, dst_c + H * W, T(0));
                   for (int64_t i = 0; i < g.kh; ++i) {
                     for (int64_t j = 0; j < g.kw; ++j) {
                       const int64_t r = (c * g.kh + i) * g.kw + j;
                       const int64_t off_h = i * g.dilation_h - g.pad_h_begin;
                       const int64_t off_w = j * g.dilation_w - g.pad_w_begin;
                       int64_t oh_lo, oh_hi, ow_lo, ow_hi;
                       valid_range(Ho, g.stride_h, off_h, H, oh_lo, oh_hi);
                       valid_range(Wo, g.stride_w, off_w, W, ow_lo, ow_hi);
                       const T* src = col + r * Ho * Wo;
                       for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
                         const T* s = src + oh * Wo;
                         T* d = dst_c + (oh * g.stride_h + off_h) * W + off_w;
                         const int64_t sw = g.stride_w;
                         for (int64_t ow = ow_lo; ow < ow_hi; ++ow) d[ow * sw] += s[ow];
                       }
                     }
                   }
                 }
               });
}

bool is_pointwise(const Conv2dGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h_begin == 0 &&
         g.pad_h_end == 0 && g.pad_w_begin == 0 && g.pad_w_end == 0;
}

template <class T>
void conv2d_forward_typed(const Tensor& out, const Tensor& input, const Tensor& weight,
                          const Tensor& bias, const Conv2dGeometry& g) {
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t O = weight.size(0), G = g.groups, Cg = C / G, Og = O / G;
  const int64_t HWo = g.out_h * g.out_w, K = Cg * g.kh * g.kw;
  const bool direct = is_pointwise(g);
  Tensor col = direct ? Tensor() : ops::empty({K, HWo}, input.dtype(), kCPU);
  T* po = out.data_ptr<T>();
  const T* pb = bias.defined() ? bias.data_ptr<T>() : nullptr;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t grp = 0; grp < G; ++grp) {
      const int64_t in_off = (n * C + grp * Cg) * H * W;
      const int64_t out_off = (n * O + grp * Og) * HWo;
      Tensor b;
      if (direct) {
        b = mat(input, in_off, K, HWo, HWo, 1);
      } else {
        im2col(input.data_ptr<T>() + in_off, Cg, H, W, g, col.data_ptr<T>());
        b = mat(col, 0, K, HWo, HWo, 1);
      }
      if (pb) {
        for (int64_t o = 0; o < Og; ++o) {
          std::fill(po + out_off + o * HWo, po + out_off + (o + 1) * HWo, pb[grp * Og + o]);
        }
      }
      gemm(mat(out, out_off, Og, HWo, HWo, 1), mat(weight, grp * Og * K, Og, K, K, 1), b,
           pb ? 1.0 : 0.0);
    }
  }
}

template <class T>
void conv2d_backward_typed(const Tensor& grad_input, const Tensor& grad_weight,
                           const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                           const Tensor& weight, const Conv2dGeometry& g) {
  const int64_t N = input.size(0), C = input.size(1), H = input.size(2), W = input.size(3);
  const int64_t O = weight.size(0), G = g.groups, Cg = C / G, Og = O / G;
  const int64_t HWo = g.out_h * g.out_w, K = Cg * g.kh * g.kw;
  const bool direct = is_pointwise(g);
  const T* gout = grad_out.data_ptr<T>();

  if (grad_bias.defined()) {
    T* gb = grad_bias.data_ptr<T>();
    parallel_for(0, O, 1, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        double s = 0;
        for (int64_t n = 0; n < N; ++n) {
          const T* p = gout + (n * O + o) * HWo;
          for (int64_t i = 0; i < HWo; ++i) s += static_cast<double>(p[i]);
        }
        gb[o] = static_cast<T>(s);
      }
    });
  }
  if (!grad_input.defined() && !grad_weight.defined()) return;
  Tensor col = direct ? Tensor() : ops::empty({K, HWo}, input.dtype(), kCPU);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t grp = 0; grp < G; ++grp) {
      const int64_t in_off = (n * C + grp * Cg) * H * W;
      const int64_t out_off = (n * O + grp * Og) * HWo;
      Tensor go = mat(grad_out, out_off, Og, HWo, HWo, 1);
      if (grad_weight.defined()) {
        Tensor colT;  // [HWo, K] view of the patch matrix
        if (direct) {
          colT = mat(input, in_off, HWo, K, 1, HWo);
        } else {
          im2col(input.data_ptr<T>() + in_off, Cg, H, W, g, col.data_ptr<T>());
          colT = mat(col, 0, HWo, K, 1, HWo);
        }
        gemm(mat(grad_weight, grp * Og * K, Og, K, K, 1), go, colT, n == 0 ? 0.0 : 1.0);
      }
      if (grad_input.defined()) {
        Tensor wT = mat(weight, grp * Og * K, K, Og, 1, K);  // W_g^T [K, Og]
        if (direct) {
          gemm(mat(grad_input, in_off, K, HWo, HWo, 1), wT, go, 0.0);
        } else {
          gemm(mat(col, 0, K, HWo, HWo, 1), wT, go, 0.0);
          col2im(col.data_ptr<T>(), Cg, H, W, g, grad_input.data_ptr<T>() + in_off);
        }
      }
    }
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

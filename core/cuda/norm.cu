// CUDA kernels of the norm family (Note [Norm statistics]): the CPU kernels' formulas, with
// statistics accumulated in double in a fixed order. Inputs and outputs are float32, float64, or
// 16-bit (float16 / bfloat16) storage whose arithmetic is done in float (comp_t, as the CPU does
// after casting to float32): the saved statistics and the per-channel coefficients have that
// compute type (float32 for 16-bit inputs), and weight / bias / running statistics / their
// gradients have the input's dtype or, beside a 16-bit input, float32 (mixed precision).
//  - layer norm: G threads per row (32 when D <= 1024, else 256), three passes over the row
//    (mean, variance, output; the later ones read from cache); parameter gradients are column
//    sums over row chunks, combined in order by a second kernel;
//  - batch norm: per-channel sums over chunks of the batch, combined in order, then an
//    elementwise pass with per-channel scale and shift.
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/float_kernels.cuh"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/loops.cuh"
#include "core/cuda/reduce.cuh"

namespace sl::cuda {
namespace {

/// T: storage of x and y; W: of weight and bias (T, or float beside a 16-bit T); statistics and
/// arithmetic in C = comp_t<T>.
template <int G, class T, class W, class C = comp_t<T>>
__global__ void __launch_bounds__(kBlockThreads)
    layer_norm_fwd_kernel(const T* x, const W* w, const W* b, T* y, C* mean, C* rstd, int64_t M,
                          int64_t D, double eps) {
  __shared__ double buf[kBlockThreads];
  constexpr int kRows = kBlockThreads / G;
  const int lane = static_cast<int>(threadIdx.x) % G;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kRows; base < M;
       base += static_cast<int64_t>(gridDim.x) * kRows) {
    const int64_t m = base + threadIdx.x / G;
    const bool valid = m < M;
    const T* xr = x + (valid ? m : 0) * D;
    double s = 0;
    if (valid) {
#pragma unroll 4  // no stores in the loop: the unrolled loads are all in flight at once
      for (int64_t d = lane; d < D; d += G) s += static_cast<double>(to_comp(xr[d]));
    }
    const double mu = group_sum<G>(s, buf) / static_cast<double>(D);
    double ss = 0;
    if (valid) {
#pragma unroll 4
      for (int64_t d = lane; d < D; d += G) {
        double v = static_cast<double>(to_comp(xr[d])) - mu;
        ss += v * v;
      }
    }
    const double r = 1.0 / ::sqrt(group_sum<G>(ss, buf) / static_cast<double>(D) + eps);
    if (!valid) continue;
    if (lane == 0) {
      mean[m] = static_cast<C>(mu);
      rstd[m] = static_cast<C>(r);
    }
    const C tm = static_cast<C>(mu), tr = static_cast<C>(r);
    T* yr = y + m * D;
    for (int64_t d = lane; d < D; d += G) {
      C v = (to_comp(xr[d]) - tm) * tr;
      if (w) v = v * to_comp(w[d]);
      if (b) v = v + to_comp(b[d]);
      yr[d] = convert<T>(v);
    }
  }
}

template <int G, class T, class W, class C = comp_t<T>>
__global__ void __launch_bounds__(kBlockThreads)
    layer_norm_bwd_input_kernel(T* dx, const T* dy, const T* x, const C* mean, const C* rstd,
                                const W* w, int64_t M, int64_t D) {
  __shared__ double buf[kBlockThreads];
  constexpr int kRows = kBlockThreads / G;
  const int lane = static_cast<int>(threadIdx.x) % G;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kRows; base < M;
       base += static_cast<int64_t>(gridDim.x) * kRows) {
    const int64_t m = base + threadIdx.x / G;
    const bool valid = m < M;
    const int64_t row = (valid ? m : 0) * D;
    const C mu = mean[valid ? m : 0], r = rstd[valid ? m : 0];
    double sg = 0, sgx = 0;  // sum(g), sum(g * xhat) with g = dy * w
    if (valid) {
      for (int64_t d = lane; d < D; d += G) {
        const C g = w ? to_comp(dy[row + d]) * to_comp(w[d]) : to_comp(dy[row + d]);
        sg += static_cast<double>(g);
        sgx += static_cast<double>(g) * static_cast<double>((to_comp(x[row + d]) - mu) * r);
      }
    }
    const C a = static_cast<C>(group_sum<G>(sg, buf) / static_cast<double>(D));
    const C c = static_cast<C>(group_sum<G>(sgx, buf) / static_cast<double>(D));
    if (!valid) continue;
    for (int64_t d = lane; d < D; d += G) {
      const C g = w ? to_comp(dy[row + d]) * to_comp(w[d]) : to_comp(dy[row + d]);
      dx[row + d] = convert<T>(r * (g - a - (to_comp(x[row + d]) - mu) * r * c));
    }
  }
}

constexpr int kColTile = 32;  // columns per block (threadIdx.x)
constexpr int kColRows = 8;   // threads per column (threadIdx.y)

/// partial[chunk][d] = (sum over the chunk's rows of dy * xhat, of dy).
template <class T, class C = comp_t<T>>
__global__ void layer_norm_bwd_params_kernel(const T* dy, const T* x, const C* mean, const C* rstd,
                                             double2* partial, int64_t M, int64_t D,
                                             int64_t rows_per_chunk) {
  __shared__ double2 buf[kColRows][kColTile];
  const int64_t d = static_cast<int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t m1 = m0 + rows_per_chunk < M ? m0 + rows_per_chunk : M;
  double aw = 0, ab = 0;
  if (d < D) {
    for (int64_t m = m0 + threadIdx.y; m < m1; m += kColRows) {
      const C g = to_comp(dy[m * D + d]);
      aw += static_cast<double>(g * ((to_comp(x[m * D + d]) - mean[m]) * rstd[m]));
      ab += static_cast<double>(g);
    }
  }
  buf[threadIdx.y][threadIdx.x] = make_double2(aw, ab);
  __syncthreads();
  if (threadIdx.y == 0 && d < D) {
    double2 t = buf[0][threadIdx.x];
    for (int k = 1; k < kColRows; ++k) {
      t.x += buf[k][threadIdx.x].x;
      t.y += buf[k][threadIdx.x].y;
    }
    partial[static_cast<int64_t>(blockIdx.y) * D + d] = t;
  }
}

template <class W>
__global__ void layer_norm_bwd_params_final_kernel(const double2* partial, W* dw, W* db,
                                                   int64_t chunks, int64_t D) {
  const int64_t d = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= D) return;
  double aw = 0, ab = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    aw += partial[c * D + d].x;
    ab += partial[c * D + d].y;
  }
  if (dw) dw[d] = convert<W>(aw);
  if (db) db[d] = convert<W>(ab);
}

// ---- batch norm ------------------------------------------------------------------------------

enum class ChannelSum : int { values, sq_dev, grad };

/// partial[c * chunks + k] = sums over batch chunk k of channel c:
///   values: (x, 0); sq_dev: ((x - mean[c])^2, 0); grad: (dy, dy * (x - mean[c])).
/// mean_t: the saved mean, in the compute type Cm.
template <class T, class Cm = comp_t<T>>
__global__ void __launch_bounds__(kBlockThreads)
    channel_partial_kernel(ChannelSum what, const T* x, const T* dy, const double* mean_d,
                           const Cm* mean_t, double2* partial, int64_t N, int64_t C, int64_t S,
                           int64_t n_per_chunk) {
  __shared__ double buf[kBlockThreads];
  const int64_t c = blockIdx.x, k = blockIdx.y;
  const int64_t n0 = k * n_per_chunk;
  const int64_t n1 = n0 + n_per_chunk < N ? n0 + n_per_chunk : N;
  const int64_t count = n1 > n0 ? (n1 - n0) * S : 0;
  const double mu = what == ChannelSum::sq_dev ? mean_d[c]
                    : what == ChannelSum::grad ? static_cast<double>(mean_t[c])
                                               : 0.0;
  double a = 0, b = 0;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t n = n0 + j / S, i = j % S;
    const int64_t at = (n * C + c) * S + i;
    const double v = static_cast<double>(to_comp(x[at]));
    if (what == ChannelSum::values) {
      a += v;
    } else if (what == ChannelSum::sq_dev) {
      const double dv = v - mu;
      a += dv * dv;
    } else {
      const double g = static_cast<double>(to_comp(dy[at]));
      a += g;
      b += g * (v - mu);
    }
  }
  a = group_sum<kBlockThreads>(a, buf);
  b = group_sum<kBlockThreads>(b, buf);
  if (threadIdx.x == 0) partial[c * gridDim.y + k] = make_double2(a, b);
}

/// Sums each channel's chunks in order: out[c] = sum_k partial[c * chunks + k].
__global__ void channel_combine_kernel(const double2* partial, double2* out, int64_t C,
                                       int64_t chunks) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  double2 t = make_double2(0, 0);
  for (int64_t k = 0; k < chunks; ++k) {
    t.x += partial[c * chunks + k].x;
    t.y += partial[c * chunks + k].y;
  }
  out[c] = t;
}

__global__ void mean_from_sums_kernel(const double2* sums, double* mean, int64_t C, double cnt) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c < C) mean[c] = sums[c].x / cnt;
}

/// Per channel: statistics, running-stat update, saved statistics, and y = x * scale + shift.
/// P: storage of the parameters and running statistics; Cm: the compute type (statistics and
/// coefficients).
template <class P, class Cm>
__global__ void bn_fwd_stats_kernel(const double* mean_d, const double2* ss, const P* w, const P* b,
                                    P* rm, P* rv, Cm* save_mean, Cm* save_invstd, Cm* scale,
                                    Cm* shift, bool training, double momentum, double eps,
                                    int64_t C, double cnt) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  double mu, invstd;
  if (training) {
    mu = mean_d[c];
    invstd = 1.0 / ::sqrt(ss[c].x / cnt + eps);
    if (rm) {
      rm[c] = convert<P>((1.0 - momentum) * static_cast<double>(to_comp(rm[c])) + momentum * mu);
      rv[c] = convert<P>((1.0 - momentum) * static_cast<double>(to_comp(rv[c])) +
                         momentum * ss[c].x / (cnt - 1.0));
    }
  } else {
    mu = static_cast<double>(to_comp(rm[c]));
    invstd = 1.0 / ::sqrt(static_cast<double>(to_comp(rv[c])) + eps);
  }
  save_mean[c] = static_cast<Cm>(mu);
  save_invstd[c] = static_cast<Cm>(invstd);
  const Cm sc = static_cast<Cm>((w ? static_cast<double>(to_comp(w[c])) : 1.0) * invstd);
  scale[c] = sc;
  shift[c] = static_cast<Cm>((b ? static_cast<double>(to_comp(b[c])) : 0.0) -
                             mu * static_cast<double>(sc));
}

/// out = x * k[c] + xin * a[c] + shift[c] over contiguous [N, C, S] (a, shift may be null: the
/// term is left out). Forward: x * scale + shift; backward: dy * k + x * a + b, or dy * k.
template <class T, class Cm = comp_t<T>>
__global__ void channel_affine_kernel(T* out, const T* x, const Cm* k, const T* xin, const Cm* a,
                                      const Cm* shift, int64_t total, int64_t C, int64_t S) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const int64_t c = (i / S) % C;
    Cm v = to_comp(x[i]) * k[c];
    if (a) v = v + to_comp(xin[i]) * a[c];
    if (shift) v = v + shift[c];
    out[i] = convert<T>(v);
  }
}

/// Backward per channel: parameter gradients and the coefficients of dx = dy*k + x*a + b.
template <class P, class Cm>
__global__ void bn_bwd_coef_kernel(const double2* sums, const P* w, const Cm* save_mean,
                                   const Cm* save_invstd, P* dw, P* db, Cm* k, Cm* a, Cm* b,
                                   bool training, int64_t C, double cnt) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const double mu = static_cast<double>(save_mean[c]);
  const double invstd = static_cast<double>(save_invstd[c]);
  const double sdy = sums[c].x, sdyx = sums[c].y;
  if (db) db[c] = convert<P>(sdy);
  if (dw) dw[c] = convert<P>(sdyx * invstd);
  const double wc = w ? static_cast<double>(to_comp(w[c])) : 1.0;
  if (training) {
    const double kk = wc * invstd;
    const double aa = -kk * invstd * invstd * sdyx / cnt;
    const double bb = -kk * sdy / cnt - aa * mu;
    k[c] = static_cast<Cm>(kk);
    a[c] = static_cast<Cm>(aa);
    b[c] = static_cast<Cm>(bb);
  } else {
    k[c] = static_cast<Cm>(wc * invstd);
  }
}

int64_t bn_chunks(int64_t N, int64_t C) {
  int64_t want = (1024 + C - 1) / C;
  return want < 1 ? 1 : (want > N ? (N > 0 ? N : 1) : want);
}

unsigned blocks_for(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : b);
}

/// Per-channel sums (two doubles) over the batch, into sums[C].
template <class T>
void channel_sums(ChannelSum what, const T* x, const T* dy, const double* mean_d,
                  const comp_t<T>* mean_t, double2* sums, int64_t N, int64_t C, int64_t S,
                  cudaStream_t s) {
  const int64_t chunks = bn_chunks(N, C);
  const int64_t per = (N + chunks - 1) / chunks;
  DeviceScratch partial(static_cast<size_t>(C * chunks) * sizeof(double2));
  channel_partial_kernel<T>
      <<<dim3(static_cast<unsigned>(C), static_cast<unsigned>(chunks)), kBlockThreads, 0, s>>>(
          what, x, dy, mean_d, mean_t, partial.as<double2>(), N, C, S, per);
  CUDA_CHECK_LAUNCH();
  channel_combine_kernel<<<blocks_for(C, 128), 128, 0, s>>>(partial.as<double2>(), sums, C, chunks);
  CUDA_CHECK_LAUNCH();
}

/// Calls f(DevTag<T>{}, DevTag<P>{}) with T the device storage type of the floating dtype dt and
/// P that of the parameters' dtype pdt, which must be dt or, beside a 16-bit dt, float32.
/// Throws DTypeError otherwise.
template <class F>
void visit_float_params(DType dt, DType pdt, const char* op, F&& f) {
  const bool half = dt == DType::f16 || dt == DType::bf16;
  SL_CHECK_DTYPE(pdt == dt || (half && pdt == DType::f32), op, ": parameters of dtype ",
                 dtype_name(pdt), " beside an input of dtype ", dtype_name(dt), " (expected ",
                 dtype_name(dt), ", or float32 beside a 16-bit input)");
  visit_float(dt, op, [&](auto tag) {
    if constexpr (is_half_v<typename decltype(tag)::type>) {
      if (pdt == DType::f32) return f(tag, DevTag<float>{});
    }
    f(tag, tag);
  });
}

}  // namespace

void launch_layer_norm_forward(DType dt, DType pdt, const void* x, const void* w, const void* b,
                               void* y, void* mean, void* rstd, int64_t M, int64_t D, double eps,
                               cudaStream_t s) {
  visit_float_params(dt, pdt, "layer_norm", [&](auto xtag, auto ptag) {
    using T = typename decltype(xtag)::type;
    using W = typename decltype(ptag)::type;
    using C = comp_t<T>;
    const T* px = static_cast<const T*>(x);
    const W* pw = static_cast<const W*>(w);
    const W* pb = static_cast<const W*>(b);
    T* py = static_cast<T*>(y);
    C* pm = static_cast<C*>(mean);
    C* pr = static_cast<C*>(rstd);
    if (D <= 1024) {
      constexpr int rows = kBlockThreads / 32;
      unsigned g = static_cast<unsigned>(std::min<int64_t>((M + rows - 1) / rows, kMaxBlocks));
      layer_norm_fwd_kernel<32, T, W>
          <<<g, kBlockThreads, 0, s>>>(px, pw, pb, py, pm, pr, M, D, eps);
    } else {
      unsigned g = static_cast<unsigned>(std::min<int64_t>(M, kMaxBlocks));
      layer_norm_fwd_kernel<kBlockThreads, T, W>
          <<<g, kBlockThreads, 0, s>>>(px, pw, pb, py, pm, pr, M, D, eps);
    }
    CUDA_CHECK_LAUNCH();
  });
}

void launch_layer_norm_backward(DType dt, DType pdt, void* dx, void* dw, void* db, const void* dy,
                                const void* x, const void* mean, const void* rstd, const void* w,
                                int64_t M, int64_t D, cudaStream_t s) {
  visit_float_params(dt, pdt, "layer_norm_backward", [&](auto xtag, auto ptag) {
    using T = typename decltype(xtag)::type;
    using W = typename decltype(ptag)::type;
    using C = comp_t<T>;
    const T* pdy = static_cast<const T*>(dy);
    const T* px = static_cast<const T*>(x);
    const C* pm = static_cast<const C*>(mean);
    const C* pr = static_cast<const C*>(rstd);
    if (dx) {
      T* pdx = static_cast<T*>(dx);
      const W* pw = static_cast<const W*>(w);
      if (D <= 1024) {
        constexpr int rows = kBlockThreads / 32;
        unsigned g = static_cast<unsigned>(std::min<int64_t>((M + rows - 1) / rows, kMaxBlocks));
        layer_norm_bwd_input_kernel<32, T, W>
            <<<g, kBlockThreads, 0, s>>>(pdx, pdy, px, pm, pr, pw, M, D);
      } else {
        unsigned g = static_cast<unsigned>(std::min<int64_t>(M, kMaxBlocks));
        layer_norm_bwd_input_kernel<kBlockThreads, T, W>
            <<<g, kBlockThreads, 0, s>>>(pdx, pdy, px, pm, pr, pw, M, D);
      }
      CUDA_CHECK_LAUNCH();
    }
    if (dw || db) {
      // row chunks of at least 64 rows, at most 256 chunks: the cut depends only on M
      const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(256, M / 64));
      const int64_t per = (M + chunks - 1) / chunks;
      DeviceScratch partial(static_cast<size_t>(chunks * D) * sizeof(double2));
      dim3 grid(static_cast<unsigned>((D + kColTile - 1) / kColTile),
                static_cast<unsigned>(chunks));
      layer_norm_bwd_params_kernel<T><<<grid, dim3(kColTile, kColRows), 0, s>>>(
          pdy, px, pm, pr, partial.as<double2>(), M, D, per);
      CUDA_CHECK_LAUNCH();
      layer_norm_bwd_params_final_kernel<W><<<blocks_for(D, 256), 256, 0, s>>>(
          partial.as<double2>(), static_cast<W*>(dw), static_cast<W*>(db), chunks, D);
      CUDA_CHECK_LAUNCH();
    }
  });
}

void launch_batch_norm_forward(DType dt, DType pdt, void* y, void* save_mean, void* save_invstd,
                               const void* x, const void* w, const void* b, void* running_mean,
                               void* running_var, bool training, double momentum, double eps,
                               int64_t N, int64_t C, int64_t S, cudaStream_t s) {
  visit_float_params(dt, pdt, "batch_norm", [&](auto xtag, auto ptag) {
    using T = typename decltype(xtag)::type;
    using P = typename decltype(ptag)::type;
    using Cm = comp_t<T>;
    const T* px = static_cast<const T*>(x);
    const double cnt = static_cast<double>(N * S);
    DeviceScratch mean_d(static_cast<size_t>(C) * sizeof(double));
    DeviceScratch sums(static_cast<size_t>(C) * sizeof(double2));
    DeviceScratch coef(static_cast<size_t>(2 * C) * sizeof(Cm));
    if (training) {
      channel_sums<T>(ChannelSum::values, px, nullptr, nullptr, nullptr, sums.as<double2>(), N, C,
                      S, s);
      mean_from_sums_kernel<<<blocks_for(C, 128), 128, 0, s>>>(sums.as<double2>(),
                                                               mean_d.as<double>(), C, cnt);
      CUDA_CHECK_LAUNCH();
      channel_sums<T>(ChannelSum::sq_dev, px, nullptr, mean_d.as<double>(), nullptr,
                      sums.as<double2>(), N, C, S, s);
    }
    Cm* scale = coef.as<Cm>();
    Cm* shift = scale + C;
    bn_fwd_stats_kernel<P, Cm><<<blocks_for(C, 128), 128, 0, s>>>(
        mean_d.as<double>(), sums.as<double2>(), static_cast<const P*>(w), static_cast<const P*>(b),
        static_cast<P*>(running_mean), static_cast<P*>(running_var), static_cast<Cm*>(save_mean),
        static_cast<Cm*>(save_invstd), scale, shift, training, momentum, eps, C, cnt);
    CUDA_CHECK_LAUNCH();
    const int64_t total = N * C * S;
    channel_affine_kernel<T, Cm><<<grid_for(total), kBlockThreads, 0, s>>>(
        static_cast<T*>(y), px, scale, nullptr, nullptr, shift, total, C, S);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_batch_norm_backward(DType dt, DType pdt, void* dx, void* dw, void* db, const void* dy,
                                const void* x, const void* w, const void* save_mean,
                                const void* save_invstd, bool training, int64_t N, int64_t C,
                                int64_t S, cudaStream_t s) {
  visit_float_params(dt, pdt, "batch_norm_backward", [&](auto xtag, auto ptag) {
    using T = typename decltype(xtag)::type;
    using P = typename decltype(ptag)::type;
    using Cm = comp_t<T>;
    const T* px = static_cast<const T*>(x);
    const T* pdy = static_cast<const T*>(dy);
    const double cnt = static_cast<double>(N * S);
    DeviceScratch sums(static_cast<size_t>(C) * sizeof(double2));
    DeviceScratch coef(static_cast<size_t>(3 * C) * sizeof(Cm));
    channel_sums<T>(ChannelSum::grad, px, pdy, nullptr, static_cast<const Cm*>(save_mean),
                    sums.as<double2>(), N, C, S, s);
    Cm* k = coef.as<Cm>();
    Cm* a = k + C;
    Cm* b = a + C;
    bn_bwd_coef_kernel<P, Cm><<<blocks_for(C, 128), 128, 0, s>>>(
        sums.as<double2>(), static_cast<const P*>(w), static_cast<const Cm*>(save_mean),
        static_cast<const Cm*>(save_invstd), static_cast<P*>(dw), static_cast<P*>(db), k, a, b,
        training, C, cnt);
    CUDA_CHECK_LAUNCH();
    if (dx) {
      const int64_t total = N * C * S;
      channel_affine_kernel<T, Cm><<<grid_for(total), kBlockThreads, 0, s>>>(
          static_cast<T*>(dx), pdy, k, training ? px : nullptr, training ? a : nullptr,
          training ? b : nullptr, total, C, S);
      CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace sl::cuda

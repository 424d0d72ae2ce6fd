// CUDA kernels of the norm family (Note [Norm statistics]): the CPU kernels' formulas, with
// statistics accumulated in double in a fixed order.
//  - layer norm: G threads per row (32 when D <= 1024, else 256), three passes over the row
//    (mean, variance, output; the later ones read from cache); parameter gradients are column
//    sums over row chunks, combined in order by a second kernel;
//  - batch norm: per-channel sums over chunks of the batch, combined in order, then an
//    elementwise pass with per-channel scale and shift.
#include "core/cuda/block_reduce.cuh"
#include "core/cuda/kernels_nn.h"
#include "core/cuda/loops.cuh"
#include "core/cuda/reduce.cuh"

namespace sl::cuda {
namespace {

template <int G, class T>
__global__ void __launch_bounds__(kBlockThreads)
    layer_norm_fwd_kernel(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t M,
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
    if (valid)
      for (int64_t d = lane; d < D; d += G) s += static_cast<double>(xr[d]);
    const double mu = group_sum<G>(s, buf) / static_cast<double>(D);
    double ss = 0;
    if (valid) {
      for (int64_t d = lane; d < D; d += G) {
        double v = static_cast<double>(xr[d]) - mu;
        ss += v * v;
      }
    }
    const double r = 1.0 / ::sqrt(group_sum<G>(ss, buf) / static_cast<double>(D) + eps);
    if (!valid) continue;
    if (lane == 0) {
      mean[m] = static_cast<T>(mu);
      rstd[m] = static_cast<T>(r);
    }
    const T tm = static_cast<T>(mu), tr = static_cast<T>(r);
    T* yr = y + m * D;
    for (int64_t d = lane; d < D; d += G) {
      T v = (xr[d] - tm) * tr;
      if (w) v = v * w[d];
      if (b) v = v + b[d];
      yr[d] = v;
    }
  }
}

template <int G, class T>
__global__ void __launch_bounds__(kBlockThreads)
    layer_norm_bwd_input_kernel(T* dx, const T* dy, const T* x, const T* mean, const T* rstd,
                                const T* w, int64_t M, int64_t D) {
  __shared__ double buf[kBlockThreads];
  constexpr int kRows = kBlockThreads / G;
  const int lane = static_cast<int>(threadIdx.x) % G;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kRows; base < M;
       base += static_cast<int64_t>(gridDim.x) * kRows) {
    const int64_t m = base + threadIdx.x / G;
    const bool valid = m < M;
    const int64_t row = (valid ? m : 0) * D;
    const T mu = mean[valid ? m : 0], r = rstd[valid ? m : 0];
    double sg = 0, sgx = 0;  // sum(g), sum(g * xhat) with g = dy * w
    if (valid) {
      for (int64_t d = lane; d < D; d += G) {
        const T g = w ? dy[row + d] * w[d] : dy[row + d];
        sg += static_cast<double>(g);
        sgx += static_cast<double>(g) * static_cast<double>((x[row + d] - mu) * r);
      }
    }
    const T a = static_cast<T>(group_sum<G>(sg, buf) / static_cast<double>(D));
    const T c = static_cast<T>(group_sum<G>(sgx, buf) / static_cast<double>(D));
    if (!valid) continue;
    for (int64_t d = lane; d < D; d += G) {
      const T g = w ? dy[row + d] * w[d] : dy[row + d];
      dx[row + d] = r * (g - a - (x[row + d] - mu) * r * c);
    }
  }
}

constexpr int kColTile = 32;  // columns per block (threadIdx.x)
constexpr int kColRows = 8;   // threads per column (threadIdx.y)

/// partial[chunk][d] = (sum over the chunk's rows of dy * xhat, of dy).
template <class T>
__global__ void layer_norm_bwd_params_kernel(const T* dy, const T* x, const T* mean, const T* rstd,
                                             double2* partial, int64_t M, int64_t D,
                                             int64_t rows_per_chunk) {
  __shared__ double2 buf[kColRows][kColTile];
  const int64_t d = static_cast<int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t m0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t m1 = m0 + rows_per_chunk < M ? m0 + rows_per_chunk : M;
  double aw = 0, ab = 0;
  if (d < D) {
    for (int64_t m = m0 + threadIdx.y; m < m1; m += kColRows) {
      const T g = dy[m * D + d];
      aw += static_cast<double>(g * ((x[m * D + d] - mean[m]) * rstd[m]));
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

template <class T>
__global__ void layer_norm_bwd_params_final_kernel(const double2* partial, T* dw, T* db,
                                                   int64_t chunks, int64_t D) {
  const int64_t d = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= D) return;
  double aw = 0, ab = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    aw += partial[c * D + d].x;
    ab += partial[c * D + d].y;
  }
  if (dw) dw[d] = static_cast<T>(aw);
  if (db) db[d] = static_cast<T>(ab);
}

// ---- batch norm ------------------------------------------------------------------------------

enum class ChannelSum : int { values, sq_dev, grad };

/// partial[c * chunks + k] = sums over batch chunk k of channel c:
///   values: (x, 0); sq_dev: ((x - mean[c])^2, 0); grad: (dy, dy * (x - mean[c])).
template <class T>
__global__ void __launch_bounds__(kBlockThreads)
    channel_partial_kernel(ChannelSum what, const T* x, const T* dy, const double* mean_d,
                           const T* mean_t, double2* partial, int64_t N, int64_t C, int64_t S,
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
    const double v = static_cast<double>(x[at]);
    if (what == ChannelSum::values) {
      a += v;
    } else if (what == ChannelSum::sq_dev) {
      const double dv = v - mu;
      a += dv * dv;
    } else {
      const double g = static_cast<double>(dy[at]);
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
template <class T>
__global__ void bn_fwd_stats_kernel(const double* mean_d, const double2* ss, const T* w, const T* b,
                                    T* rm, T* rv, T* save_mean, T* save_invstd, T* scale, T* shift,
                                    bool training, double momentum, double eps, int64_t C,
                                    double cnt) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  double mu, invstd;
  if (training) {
    mu = mean_d[c];
    invstd = 1.0 / ::sqrt(ss[c].x / cnt + eps);
    if (rm) {
      rm[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(rm[c]) + momentum * mu);
      rv[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(rv[c]) +
                             momentum * ss[c].x / (cnt - 1.0));
    }
  } else {
    mu = static_cast<double>(rm[c]);
    invstd = 1.0 / ::sqrt(static_cast<double>(rv[c]) + eps);
  }
  save_mean[c] = static_cast<T>(mu);
  save_invstd[c] = static_cast<T>(invstd);
  const T sc = static_cast<T>((w ? static_cast<double>(w[c]) : 1.0) * invstd);
  scale[c] = sc;
  shift[c] = static_cast<T>((b ? static_cast<double>(b[c]) : 0.0) - mu * static_cast<double>(sc));
}

/// out = x * k[c] + xin * a[c] + shift[c] over contiguous [N, C, S] (a, shift may be null: the
/// term is left out). Forward: x * scale + shift; backward: dy * k + x * a + b, or dy * k.
template <class T>
__global__ void channel_affine_kernel(T* out, const T* x, const T* k, const T* xin, const T* a,
                                      const T* shift, int64_t total, int64_t C, int64_t S) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const int64_t c = (i / S) % C;
    T v = x[i] * k[c];
    if (a) v = v + xin[i] * a[c];
    if (shift) v = v + shift[c];
    out[i] = v;
  }
}

/// Backward per channel: parameter gradients and the coefficients of dx = dy*k + x*a + b.
template <class T>
__global__ void bn_bwd_coef_kernel(const double2* sums, const T* w, const T* save_mean,
                                   const T* save_invstd, T* dw, T* db, T* k, T* a, T* b,
                                   bool training, int64_t C, double cnt) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const double mu = static_cast<double>(save_mean[c]);
  const double invstd = static_cast<double>(save_invstd[c]);
  const double sdy = sums[c].x, sdyx = sums[c].y;
  if (db) db[c] = static_cast<T>(sdy);
  if (dw) dw[c] = static_cast<T>(sdyx * invstd);
  const double wc = w ? static_cast<double>(w[c]) : 1.0;
  if (training) {
    const double kk = wc * invstd;
    const double aa = -kk * invstd * invstd * sdyx / cnt;
    const double bb = -kk * sdy / cnt - aa * mu;
    k[c] = static_cast<T>(kk);
    a[c] = static_cast<T>(aa);
    b[c] = static_cast<T>(bb);
  } else {
    k[c] = static_cast<T>(wc * invstd);
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
void channel_sums(ChannelSum what, const T* x, const T* dy, const double* mean_d, const T* mean_t,
                  double2* sums, int64_t N, int64_t C, int64_t S, cudaStream_t s) {
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

template <class F>
void float_or_double(DType dt, const char* op, F&& f) {
  if (dt == DType::f32) return f(float{});
  if (dt == DType::f64) return f(double{});
  ::sl::detail::throw_error<DTypeError>(op, ": unsupported dtype ", dtype_name(dt));
}

}  // namespace

void launch_layer_norm_forward(DType dt, const void* x, const void* w, const void* b, void* y,
                               void* mean, void* rstd, int64_t M, int64_t D, double eps,
                               cudaStream_t s) {
  float_or_double(dt, "layer_norm", [&](auto z) {
    using T = decltype(z);
    const T* px = static_cast<const T*>(x);
    const T* pw = static_cast<const T*>(w);
    const T* pb = static_cast<const T*>(b);
    T* py = static_cast<T*>(y);
    T* pm = static_cast<T*>(mean);
    T* pr = static_cast<T*>(rstd);
    if (D <= 1024) {
      constexpr int rows = kBlockThreads / 32;
      unsigned g = static_cast<unsigned>(std::min<int64_t>((M + rows - 1) / rows, kMaxBlocks));
      layer_norm_fwd_kernel<32, T><<<g, kBlockThreads, 0, s>>>(px, pw, pb, py, pm, pr, M, D, eps);
    } else {
      unsigned g = static_cast<unsigned>(std::min<int64_t>(M, kMaxBlocks));
      layer_norm_fwd_kernel<kBlockThreads, T>
          <<<g, kBlockThreads, 0, s>>>(px, pw, pb, py, pm, pr, M, D, eps);
    }
    CUDA_CHECK_LAUNCH();
  });
}

void launch_layer_norm_backward(DType dt, void* dx, void* dw, void* db, const void* dy,
                                const void* x, const void* mean, const void* rstd, const void* w,
                                int64_t M, int64_t D, cudaStream_t s) {
  float_or_double(dt, "layer_norm_backward", [&](auto z) {
    using T = decltype(z);
    const T* pdy = static_cast<const T*>(dy);
    const T* px = static_cast<const T*>(x);
    const T* pm = static_cast<const T*>(mean);
    const T* pr = static_cast<const T*>(rstd);
    if (dx) {
      T* pdx = static_cast<T*>(dx);
      const T* pw = static_cast<const T*>(w);
      if (D <= 1024) {
        constexpr int rows = kBlockThreads / 32;
        unsigned g = static_cast<unsigned>(std::min<int64_t>((M + rows - 1) / rows, kMaxBlocks));
        layer_norm_bwd_input_kernel<32, T>
            <<<g, kBlockThreads, 0, s>>>(pdx, pdy, px, pm, pr, pw, M, D);
      } else {
        unsigned g = static_cast<unsigned>(std::min<int64_t>(M, kMaxBlocks));
        layer_norm_bwd_input_kernel<kBlockThreads, T>
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
      layer_norm_bwd_params_final_kernel<T><<<blocks_for(D, 256), 256, 0, s>>>(
          partial.as<double2>(), static_cast<T*>(dw), static_cast<T*>(db), chunks, D);
      CUDA_CHECK_LAUNCH();
    }
  });
}

void launch_batch_norm_forward(DType dt, void* y, void* save_mean, void* save_invstd, const void* x,
                               const void* w, const void* b, void* running_mean, void* running_var,
                               bool training, double momentum, double eps, int64_t N, int64_t C,
                               int64_t S, cudaStream_t s) {
  float_or_double(dt, "batch_norm", [&](auto z) {
    using T = decltype(z);
    const T* px = static_cast<const T*>(x);
    const double cnt = static_cast<double>(N * S);
    DeviceScratch mean_d(static_cast<size_t>(C) * sizeof(double));
    DeviceScratch sums(static_cast<size_t>(C) * sizeof(double2));
    DeviceScratch coef(static_cast<size_t>(2 * C) * sizeof(T));
    if (training) {
      channel_sums<T>(ChannelSum::values, px, nullptr, nullptr, nullptr, sums.as<double2>(), N, C,
                      S, s);
      mean_from_sums_kernel<<<blocks_for(C, 128), 128, 0, s>>>(sums.as<double2>(),
                                                               mean_d.as<double>(), C, cnt);
      CUDA_CHECK_LAUNCH();
      channel_sums<T>(ChannelSum::sq_dev, px, nullptr, mean_d.as<double>(), nullptr,
                      sums.as<double2>(), N, C, S, s);
    }
    T* scale = coef.as<T>();
    T* shift = scale + C;
    bn_fwd_stats_kernel<T><<<blocks_for(C, 128), 128, 0, s>>>(
        mean_d.as<double>(), sums.as<double2>(), static_cast<const T*>(w), static_cast<const T*>(b),
        static_cast<T*>(running_mean), static_cast<T*>(running_var), static_cast<T*>(save_mean),
        static_cast<T*>(save_invstd), scale, shift, training, momentum, eps, C, cnt);
    CUDA_CHECK_LAUNCH();
    const int64_t total = N * C * S;
    channel_affine_kernel<T><<<grid_for(total), kBlockThreads, 0, s>>>(
        static_cast<T*>(y), px, scale, nullptr, nullptr, shift, total, C, S);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_batch_norm_backward(DType dt, void* dx, void* dw, void* db, const void* dy,
                                const void* x, const void* w, const void* save_mean,
                                const void* save_invstd, bool training, int64_t N, int64_t C,
                                int64_t S, cudaStream_t s) {
  float_or_double(dt, "batch_norm_backward", [&](auto z) {
    using T = decltype(z);
    const T* px = static_cast<const T*>(x);
    const T* pdy = static_cast<const T*>(dy);
    const double cnt = static_cast<double>(N * S);
    DeviceScratch sums(static_cast<size_t>(C) * sizeof(double2));
    DeviceScratch coef(static_cast<size_t>(3 * C) * sizeof(T));
    channel_sums<T>(ChannelSum::grad, px, pdy, nullptr, static_cast<const T*>(save_mean),
                    sums.as<double2>(), N, C, S, s);
    T* k = coef.as<T>();
    T* a = k + C;
    T* b = a + C;
    bn_bwd_coef_kernel<T><<<blocks_for(C, 128), 128, 0, s>>>(
        sums.as<double2>(), static_cast<const T*>(w), static_cast<const T*>(save_mean),
        static_cast<const T*>(save_invstd), static_cast<T*>(dw), static_cast<T*>(db), k, a, b,
        training, C, cnt);
    CUDA_CHECK_LAUNCH();
    if (dx) {
      const int64_t total = N * C * S;
      channel_affine_kernel<T><<<grid_for(total), kBlockThreads, 0, s>>>(
          static_cast<T*>(dx), pdy, k, training ? px : nullptr, training ? a : nullptr,
          training ? b : nullptr, total, C, S);
      CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace sl::cuda

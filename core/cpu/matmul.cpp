// CPU GEMM: OpenBLAS (cblas) for f32/f64 when available, Eigen otherwise and for other dtypes.
// 16-bit floats are widened to f32, multiplied, and rounded back.
#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "sl_config.h"  // SL_HAVE_CBLAS: without it the BLAS path silently compiles out

#include "core/cpu/eigen.h"  // Note [Eigen's fast math]
#include "core/cpu/loops.h"
#include "core/int_wrap.h"
#include "core/ops/copy.h"
#include "core/ops/matmul.h"
#include "core/ops/view.h"

#if SL_HAVE_CBLAS
#include <cblas.h>
#endif

namespace sl::cpu {
namespace {

// Note [Deterministic BLAS tiles]
// A product's bits must not depend on the thread count. OpenBLAS's own threading and Eigen's
// (whose cache blocking takes the thread count into account) both break that, so either runs
// single-threaded on a grid of output tiles fixed by the shape and the machine alone
// (gemm_tiles), which our pool runs in parallel: each output element is computed by the same call
// whatever the thread count.

/// Row bands start at multiples of this many rows (Note [One call for row bands]).
constexpr int64_t kRowBandAlign = 24;

/// The output tiles of one product (Note [Deterministic BLAS tiles]): [tm, tn] blocks.
struct TileGrid {
  int64_t tm, tn;
};

/// Splits the output rows (or, for fewer than 64 rows per band, the larger output dim) into one
/// band per hardware thread (row bands rounded up to kRowBandAlign, column bands to 64), or
/// nothing for small products and batches with at least that many matrices. Each band repacks the
/// operand it shares with the others (all of B for a band of rows), so bands are as few and as
/// large as the machine's parallelism allows: fixed 512-row bands ran 2048 x 768 x 3072 at 91%
/// of one cblas_sgemm call at 1 thread and 2048^3 at 86% of OpenBLAS's own 2-thread run, while
/// fixed 1024-row bands left 512 x 1024 conv GEMMs on one core. The grid depends on the shape
/// and the machine only, never on the thread count set through the API, so results stay
/// identical for any set_num_threads.
TileGrid gemm_tiles(int64_t batch, int64_t M, int64_t N, int64_t K) {
  static const int64_t bands =
      std::clamp<int64_t>(static_cast<int64_t>(std::thread::hardware_concurrency()), 1, 256);
  const bool small = M * N * K <= (int64_t{1} << 18);
  if (small || bands == 1 || batch >= bands) return {M, N};
  auto band = [](int64_t n, int64_t align) {
    return ((n + bands - 1) / bands + align - 1) / align * align;
  };
  // rows when every band keeps at least 64 of them (contiguous output rows), else columns
  return M >= 64 * bands || M >= N ? TileGrid{band(M, kRowBandAlign), N} : TileGrid{M, band(N, 64)};
}

#if SL_HAVE_CBLAS
// Note [One call for row bands]
// OpenBLAS's sums depend on where a product's bounds fall relative to its micro-kernel's register
// tiles. On the development machine (Zen 3, Debian's OpenBLAS 0.3.21, single-threaded), cutting
// a product into row bands that start at multiples of 24 rows changed no bit in 384 products (12
// shapes from 130 x 70 x 1000 to 2048^3 and 4100 x 100 x 5000, float and double, every
// transpose, 2 to 7 bands); at multiples of 8 rows, 136 of the 192 float ones changed, and
// column bands changed them wherever they started (48 to 384 columns). So row bands start at
// multiples of kRowBandAlign (24: a multiple of every register-tile height OpenBLAS's x86 sgemm
// and dgemm kernels use), and where the bands would run one after the other anyway (one thread,
// or inside another parallel loop) a single call computes them all: the same bits, without
// packing the shared operand once per band, which cost 0-3% of a transformer-sized GEMM at 1
// thread and 11% of 256 x 256 x 2048. Each process first checks that the join is exact for its
// BLAS and dtype (row_bands_join_exactly) and otherwise keeps the separate calls.

/// Smallest row band (rows x N x K multiply-adds) that one call may replace (Note [One call for
/// row bands]): OpenBLAS builds may route small products to other kernels (SkylakeX's
/// small-matrix kernels take up to about 2^20), whose sums need not match the large kernels'.
constexpr int64_t kMinJoinedBand = int64_t{1} << 22;

/// Whether one call over all rows gives, bit for bit, what separate calls on row bands that
/// start at multiples of kRowBandAlign give, for T on this machine's BLAS (Note [One call for
/// row bands]). Checked once per process on products with bands just above kMinJoinedBand.
template <class T>
bool row_bands_join_exactly() {
  static const bool exact = [] {
    const int M = 2 * 96, N = 96, K = 480;  // two 96-row bands of 4.4M multiply-adds
    std::vector<T> a(static_cast<size_t>(M) * K), b(static_cast<size_t>(K) * N);
    uint32_t state = 12345u;  // any fixed values in [-1, 1)
    auto next = [&state] {
      state = state * 1664525u + 1013904223u;
      return static_cast<T>(static_cast<int32_t>(state >> 8) - (1 << 23)) / static_cast<T>(1 << 23);
    };
    for (T& v : a) v = next();
    for (T& v : b) v = next();
    std::vector<T> whole(static_cast<size_t>(M) * N), banded(whole.size());
    for (int t = 0; t < 4; ++t) {
      const bool ta = (t & 1) != 0, tb = (t & 2) != 0;
      const int lda = ta ? M : K, ldb = tb ? K : N;
      auto gemm = [&](int m0, int m, T* c) {
        const T* pa = a.data() + (ta ? m0 : static_cast<size_t>(m0) * lda);
        const auto TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
        if constexpr (std::is_same_v<T, float>) {
          cblas_sgemm(CblasRowMajor, TA, TB, m, N, K, 1.0f, pa, lda, b.data(), ldb, 0.0f, c, N);
        } else {
          cblas_dgemm(CblasRowMajor, TA, TB, m, N, K, 1.0, pa, lda, b.data(), ldb, 0.0, c, N);
        }
      };
      gemm(0, M, whole.data());
      gemm(0, M / 2, banded.data());
      gemm(M / 2, M / 2, banded.data() + static_cast<size_t>(M / 2) * N);
      if (std::memcmp(whole.data(), banded.data(), whole.size() * sizeof(T)) != 0) return false;
    }
    return true;
  }();
  return exact;
}
#endif

/// c[M, N] (row stride ldc) = alpha * a b + beta * c, one single-threaded Eigen product.
template <class T>
void gemm_eigen(int64_t M, int64_t N, int64_t K, const T* a, int64_t sam, int64_t sak, const T* b,
                int64_t sbk, int64_t sbn, T* c, int64_t ldc, T alpha, T beta) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Strides = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
  Eigen::Map<const Mat, 0, Strides> A(a, M, K, Strides(sam, sak));
  Eigen::Map<const Mat, 0, Strides> B(b, K, N, Strides(sbk, sbn));
  Eigen::Map<Mat, 0, Eigen::OuterStride<>> C(c, M, N, Eigen::OuterStride<>(ldc));
  if (beta == T(0)) {
    C.noalias() = alpha * (A * B);
  } else {
    C *= beta;
    C.noalias() += alpha * (A * B);
  }
}

template <class T>
void bmm_typed(const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha_s, Scalar beta_s) {
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const T alpha = alpha_s.to<T>(), beta = beta_s.to<T>();
  const T* pa = a.data_ptr<T>();
  const T* pb = b.data_ptr<T>();
  T* pc = out.data_ptr<T>();
  const int64_t sab = a.stride(0), sam = a.stride(1), sak = a.stride(2);
  const int64_t sbb = b.stride(0), sbk = b.stride(1), sbn = b.stride(2);
#if SL_HAVE_CBLAS
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    BlasMatrix la = blas_matrix(M, K, sam, sak), lb = blas_matrix(K, N, sbk, sbn);
    if (la.ok && lb.ok) {
      // Note [Deterministic BLAS tiles]: the BLAS runs single-threaded (core/parallel.cpp)
      auto [tm, tn] = gemm_tiles(B, M, N, K);
      // Note [One call for row bands]: bands that would run one after the other become one call
      if (tm < M && tn == N && (get_num_threads() == 1 || detail::in_parallel_region())) {
        const int64_t last_band = M % tm == 0 ? tm : M % tm;  // the smallest
        if (last_band * N * K >= kMinJoinedBand && row_bands_join_exactly<T>()) tm = M;
      }
      const int64_t mt = M == 0 ? 1 : (M + tm - 1) / tm, nt = N == 0 ? 1 : (N + tn - 1) / tn;
      auto ta = la.trans ? CblasTrans : CblasNoTrans;
      auto tb = lb.trans ? CblasTrans : CblasNoTrans;
      auto tile = [&](int64_t t) {
        const int64_t p = t / (mt * nt), i0 = (t / nt) % mt * tm, j0 = t % nt * tn;
        const int m = static_cast<int>(std::min(tm, M - i0)),
                  n = static_cast<int>(std::min(tn, N - j0));
        const T* ta_ptr = pa + p * sab + i0 * sam;
        const T* tb_ptr = pb + p * sbb + j0 * sbn;
        T* tc_ptr = pc + p * M * N + i0 * N + j0;
        if constexpr (std::is_same_v<T, float>) {
          cblas_sgemm(CblasRowMajor, ta, tb, m, n, static_cast<int>(K), alpha, ta_ptr,
                      static_cast<int>(la.ld), tb_ptr, static_cast<int>(lb.ld), beta, tc_ptr,
                      static_cast<int>(N));
        } else {
          cblas_dgemm(CblasRowMajor, ta, tb, m, n, static_cast<int>(K), alpha, ta_ptr,
                      static_cast<int>(la.ld), tb_ptr, static_cast<int>(lb.ld), beta, tc_ptr,
                      static_cast<int>(N));
        }
      };
      parallel_for(0, B * mt * nt, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) tile(t);
      });
      return;
    }
  }
#endif
  // Note [Deterministic BLAS tiles]: Eigen single-threaded, on the same grid of output tiles.
  // Integers are multiplied as the unsigned type of their width, which has the same bits and
  // wraps (Note [Integer wraparound]); W is T for the floating types.
  using W = wrap_t<T>;
  const W w_alpha = static_cast<W>(alpha), w_beta = static_cast<W>(beta);
  const W* wa = reinterpret_cast<const W*>(pa);
  const W* wb = reinterpret_cast<const W*>(pb);
  W* wc = reinterpret_cast<W*>(pc);
  Eigen::setNbThreads(1);
  auto [tm, tn] = gemm_tiles(B, M, N, K);
  const int64_t mt = M == 0 ? 1 : (M + tm - 1) / tm, nt = N == 0 ? 1 : (N + tn - 1) / tn;
  parallel_for(0, B * mt * nt, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t p = t / (mt * nt), i0 = (t / nt) % mt * tm, j0 = t % nt * tn;
      gemm_eigen<W>(std::min(tm, M - i0), std::min(tn, N - j0), K, wa + p * sab + i0 * sam, sam,
                    sak, wb + p * sbb + j0 * sbn, sbk, sbn, wc + p * M * N + i0 * N + j0, N,
                    w_alpha, w_beta);
    }
  });
}

void bmm_cpu(const Tensor& out, const Tensor& a, const Tensor& b, Scalar alpha, Scalar beta) {
  // BLAS needs one unit stride per matrix: ops::blas_operand copies the operands that have none.
  auto fix = &ops::blas_operand;
  switch (a.dtype()) {
    case DType::f32:
      return bmm_typed<float>(out, fix(a), fix(b), alpha, beta);
    case DType::f64:
      return bmm_typed<double>(out, fix(a), fix(b), alpha, beta);
    case DType::i64:
      return bmm_typed<int64_t>(out, a, b, alpha, beta);
    case DType::i32:
      return bmm_typed<int32_t>(out, a, b, alpha, beta);
    case DType::f16:
    case DType::bf16: {
      Tensor a32 = ops::cast(a, DType::f32), b32 = ops::cast(b, DType::f32);
      Tensor o32 = ops::empty(out.sizes(), DType::f32, out.device());
      if (beta.to_double() != 0.0) ops::copy_(o32, out);
      bmm_typed<float>(o32, fix(a32), fix(b32), alpha, beta);
      ops::copy_(out, o32);
      return;
    }
    default:
      detail::throw_error<DTypeError>("bmm: unsupported dtype ", dtype_name(a.dtype()));
  }
}

SL_REGISTER_KERNEL(bmm_kernel, DeviceKind::cpu, &bmm_cpu);

}  // namespace
}  // namespace sl::cpu

// CUDA kernel of the matmul family for integer dtypes (cuBLAS has no integer GEMM of these
// types): one thread per output element, accumulating in the element type like the CPU's Eigen
// path, as the unsigned type of its width so that it wraps (Note [Integer wraparound]). Integer
// matmuls are rare; this is written for correctness, not speed.
#include "core/cuda/loops.cuh"
#include "core/int_wrap.h"

namespace sl::cuda {
namespace {

template <class T>
__global__ void int_bmm_kernel(const T* a, const T* b, T* out, int64_t batch, int64_t M, int64_t N,
                               int64_t K, int64_t sab, int64_t sam, int64_t sak, int64_t sbb,
                               int64_t sbk, int64_t sbn, T alpha, T beta) {
  const int64_t total = batch * M * N;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t n = t % N, m = (t / N) % M, p = t / (M * N);
    const T* ar = a + p * sab + m * sam;
    const T* bc = b + p * sbb + n * sbn;
    using W = wrap_t<T>;
    W acc = 0;
    for (int64_t k = 0; k < K; ++k) acc = static_cast<W>(acc + W(ar[k * sak]) * W(bc[k * sbk]));
    W prev = beta == T(0) ? W(0) : static_cast<W>(W(beta) * W(out[t]));
    out[t] = static_cast<T>(static_cast<W>(prev + W(alpha) * acc));
  }
}

template <class T>
void run_int_bmm(const void* a, const void* b, void* out, int64_t batch, int64_t M, int64_t N,
                 int64_t K, int64_t sab, int64_t sam, int64_t sak, int64_t sbb, int64_t sbk,
                 int64_t sbn, int64_t alpha, int64_t beta, cudaStream_t s) {
  int_bmm_kernel<T><<<grid_for(batch * M * N), kBlockThreads, 0, s>>>(
      static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), batch, M, N, K, sab,
      sam, sak, sbb, sbk, sbn, static_cast<T>(alpha), static_cast<T>(beta));
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_int_bmm(DType dt, const void* a, const void* b, void* out, int64_t batch, int64_t M,
                    int64_t N, int64_t K, int64_t sab, int64_t sam, int64_t sak, int64_t sbb,
                    int64_t sbk, int64_t sbn, int64_t alpha, int64_t beta, cudaStream_t s) {
  if (dt == DType::i32) {
    run_int_bmm<int32_t>(a, b, out, batch, M, N, K, sab, sam, sak, sbb, sbk, sbn, alpha, beta, s);
  } else if (dt == DType::i64) {
    run_int_bmm<int64_t>(a, b, out, batch, M, N, K, sab, sam, sak, sbb, sbk, sbn, alpha, beta, s);
  } else {
    ::sl::detail::throw_error<DTypeError>("bmm: no CUDA integer kernel for ", dtype_name(dt));
  }
}

}  // namespace sl::cuda

// When the cuBLASLt epilogue GEMM (core/cuda/matmul.cpp) takes a case, as plain functions of the
// shapes and addresses (internal header; no CUDA types, so the rules are unit-tested in every
// build, tests/cuda/test_cuda_matmul.cpp).
//
// Note [cuBLASLt epilogue limits]
// cuBLASLt's bias epilogues have shape and alignment pitfalls that only a GPU shows; PyTorch's
// addmm (aten/src/ATen/native/cuda/Blas.cpp) keeps the same cases away from them:
//  - a dimension of 1 (a single row, a single output, K = 1): public reports of the bias missing
//    from some outputs (one-row products, older GPUs and CUDA 11) and of
//    CUBLAS_STATUS_INVALID_VALUE from the heuristic; PyTorch requires every size > 1;
//  - a dimension of 65535 * 32 or more: PyTorch requires every size below it (a grid-dimension
//    limit of 65535 blocks);
//  - a bias vector whose address is not a multiple of 16 bytes (a bias sliced out of a larger
//    tensor): Marian NMT found the epilogue failing on an A100 below 16-byte alignment.
// The first two decline the case (the caller runs the GEMM, then adds the bias and applies the
// activation: the path every device without Lt takes); the third copies the bias into a fresh,
// aligned buffer first. All three are cheap to avoid and costly to meet on a GPU run.
#pragma once

#include <cstdint>

namespace sl::cuda {

/// Largest dimension (exclusive) the epilogue path takes (Note [cuBLASLt epilogue limits]).
inline constexpr int64_t kLtMaxDim = int64_t{65535} * 32;
/// Alignment in bytes cuBLASLt's bias epilogues need of the bias vector.
inline constexpr uintptr_t kLtBiasAlignment = 16;

/// True when out [M, N] = a [M, K] @ b [K, N] (+ bias) may go to cuBLASLt's epilogues: every
/// dimension in [2, kLtMaxDim).
inline bool lt_epilogue_dims_ok(int64_t M, int64_t N, int64_t K) {
  for (int64_t d : {M, N, K}) {
    if (d < 2 || d >= kLtMaxDim) return false;
  }
  return true;
}

/// True when a bias vector at `address` can be handed to the epilogue as it is (else it is
/// copied to a fresh buffer first).
inline bool lt_bias_aligned(uintptr_t address) {
  return address % kLtBiasAlignment == 0;
}

}  // namespace sl::cuda

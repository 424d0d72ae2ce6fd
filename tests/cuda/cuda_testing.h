// Helpers for the CUDA tests: skipping visibly without a GPU, moving tensors, and the tolerances
// used to compare a CUDA result with the CPU one.
#pragma once

#include <functional>
#include <string>

#include "core/cuda/cuda_api.h"
#include "sl_config.h"
#include "support/fake_gpu.h"
#include "support/testing.h"

/// Returns from the test case (reporting "[skipped] CUDA test: <what>") when no GPU is visible.
#define SL_REQUIRE_CUDA(what)                                               \
  do {                                                                      \
    if (!::sl::testing::gpu_visible()) {                                    \
      ::sl::testing::report_skip(std::string("CUDA test: ") + (what),       \
                                 "no GPU visible (or built without CUDA)"); \
      return;                                                               \
    }                                                                       \
  } while (0)

namespace sl::testing {

/// Whether cuda:0 exists, after installing the fake GPU in a build without CUDA (Note [Fake GPU]).
inline bool gpu_visible() {
  install_fake_gpu();
  return ::sl::cuda::is_available();
}

/// Decorator for a test case that needs a GPU (`count` GPUs) from its first line:
/// TEST_CASE("name" * sl::testing::needs_gpu()). The reason to skip: these cases compare CUDA
/// kernels with the CPU, so without a visible GPU (or in a build without CUDA) there is nothing
/// to run. doctest then skips the case and counts it as skipped in its summary, not as passed,
/// and the binary prints that reason once. Evaluated when the binary registers its cases; the
/// body still starts with SL_REQUIRE_CUDA, which guards runs that force skipped cases (doctest's
/// --no-skip).
inline doctest::skip needs_gpu(int count = 1) {
  return skip_when(
      !gpu_visible() || ::sl::cuda::device_count() < count,
      "CUDA test cases that need " +
          (count == 1 ? std::string("a GPU") : std::to_string(count) + " GPUs"),
      gpu_visible() ? "too few GPUs visible" : "no GPU visible (or built without CUDA)");
}

/// Decorator for a test case of what happens without a GPU: skipped (and counted so) when one is
/// visible, the fake one included.
inline doctest::skip needs_no_gpu() {
  return skip_when(gpu_visible(), "test cases of the behaviour without a GPU", "a GPU is visible");
}

/// Decorator for a test case that needs cuDNN: as needs_gpu(), and skipped in a build without
/// cuDNN. On the fake GPU (Note [Fake GPU]) the case runs only when `on_fake`: a conv parity case
/// can (the CPU's conv stands in for cuDNN's), a comparison of cuDNN with the own kernels cannot.
inline doctest::skip needs_cudnn(bool on_fake) {
  const bool fake = gpu_visible() && fake_gpu_installed();
  return skip_when(!gpu_visible() || (fake ? !on_fake : !SL_HAVE_CUDNN),
                   "CUDA test cases that need cuDNN",
                   !gpu_visible() ? "no GPU visible (or built without CUDA)"
                   : fake         ? "the GPU is the fake one (Note [Fake GPU])"
                                  : "built without cuDNN");
}

/// Decorator for a test case whose subject is the CUDA runtime or a CUDA library itself (pinned
/// memory, asynchronous errors, cuBLASLt or cuDNN paths): as needs_gpu(), and skipped on the
/// fake GPU too, where those do not exist.
inline doctest::skip needs_real_gpu() {
  return skip_when(!gpu_visible() || fake_gpu_installed(), "CUDA test cases that need a real GPU",
                   fake_gpu_installed() ? "the GPU is the fake one (Note [Fake GPU])"
                                        : "no GPU visible (or built without CUDA)");
}

/// False (after reporting a skip once) on the fake GPU, whose kernels are the CPU's: the norm,
/// pooling and attention-softmax ops hand 16-bit storage to a GPU's kernels as it is, and the
/// CPU's kernels take none (on the CPU those ops compute 16-bit inputs in float32 before the
/// kernel). True on a real GPU. `what` names the family in the skip message.
inline bool gpu_kernels_take_16bit(const char* what) {
  if (!fake_gpu_installed()) return true;
  report_skip(std::string("16-bit ") + what + " cases on the fake GPU",
              "its kernels are the CPU's, which take no 16-bit storage (Note [Fake GPU])");
  return false;
}

inline const Device kGPU{DeviceKind::cuda, 0};

/// Tolerances for comparing a GPU result with the CPU result of the same op.
struct Tol {
  double rtol, atol;
};

/// Elementwise math: CUDA's libm (expf, erff, tanhf, powf, ...) is within 2 ulp of the correctly
/// rounded result, glibc within 1, so f32 results may differ by a few ulp (1e-5 relative is ~80
/// ulp, comfortably above); double functions likewise within ~2 ulp; 16-bit results are computed
/// in float on both sides and rounded, so a float difference of one ulp can move the 16-bit
/// result by one of its ulps (f16: 2^-10 ~ 1e-3, bf16: 2^-7 ~ 7.8e-3); integers and bools are
/// exact.
inline Tol elementwise_tol(DType dt) {
  switch (dt) {
    case DType::f64:
      return {1e-12, 1e-14};
    case DType::f32:
      return {1e-5, 1e-6};
    case DType::f16:
      return {2e-3, 1e-4};
    case DType::bf16:
      return {1.6e-2, 1e-3};
    default:
      return {0, 0};
  }
}

/// Sums and products: both sides accumulate floats in double but in different orders, so results
/// agree to double rounding before the final conversion (f64 relative 1e-12 for sums of a few
/// thousand terms); lower types are exact up to that final rounding (one ulp).
inline Tol reduce_tol(DType dt) {
  switch (dt) {
    case DType::f64:
      return {1e-12, 1e-12};
    case DType::f32:
      return {1e-6, 1e-6};
    case DType::f16:
      return {1e-3, 1e-3};
    case DType::bf16:
      return {8e-3, 8e-3};
    default:
      return {0, 0};
  }
}

/// Runs fn on `inputs` (CPU tensors; those with requires_grad are differentiated) and on their
/// copies on cuda:0, backpropagates the same random upstream gradient through both results, and
/// compares the outputs and every input gradient with |gpu - cpu| <= atol + rtol |cpu|.
void check_gpu_parity(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                      double rtol, double atol);
/// As above, with the gradients compared at `grad_tol` (for an op whose backward sums: the two
/// devices add in different orders).
void check_gpu_parity(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                      Tol tol, Tol grad_tol);

}  // namespace sl::testing

/// Compares a GPU tensor with its CPU reference using tolerance `tol`.
#define SL_CHECK_CLOSE_TOL(gpu, cpu, tol) SL_CHECK_CLOSE((gpu), (cpu), (tol).rtol, (tol).atol)

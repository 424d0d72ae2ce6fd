// Shared test helpers: tolerant comparison with a readable report, device lists, error matchers.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <shardlight/shardlight.h>

namespace sl::testing {

/// Devices every op-case runs on: cpu, plus cuda:0 when a GPU is present. Without one, the
/// CUDA cases are reported as skipped (once per process) rather than silently passing.
std::vector<Device> test_devices();
/// Prints "[skipped] <what>: <why>" once per distinct message (a visible skip).
void report_skip(const std::string& what, const std::string& why);
/// A doctest decorator: when `skip`, reports "<what> (counted in doctest's "skipped"): <why>"
/// once and skips the case, so that a case that cannot run is counted as skipped, not passed.
doctest::skip skip_when(bool skip, const std::string& what, const std::string& why);
/// A skip decorator that skips when either condition does. Two skip decorators chained with `*`
/// do not combine: doctest applies them in order and the last one decides (a GPU machine without
/// espeak-ng ran a case marked needs_espeak(...) * needs_gpu_trainer(...), and failed).
doctest::skip skip_either(const doctest::skip& a, const doctest::skip& b);

/// Empty string when a and b have the same shape and |a - b| <= atol + rtol * |b| everywhere
/// (compared in float64 on the CPU; NaNs must match); otherwise a description of the first
/// mismatches.
std::string compare(const Tensor& a, const Tensor& b, double rtol, double atol);

/// Whether a and b have the same dtype, shape and bytes (compared on the CPU, as contiguous
/// copies; NaNs equal when their bits are).
bool bits_equal(const Tensor& a, const Tensor& b);

/// Gives parameter k of `params` a standard-normal gradient of its shape and dtype, drawn from a
/// generator seeded 100 * step + k: each step of an optimizer test gets its own reproducible
/// gradients.
void set_seeded_grads(const TensorList& params, int step);

/// Whether the CPU allocator keeps freed blocks for reuse: it does not under AddressSanitizer
/// (Note [CPU large-block cache] in core/allocator.cpp), so that ASan sees every use after free.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kCacheOn = false;
#else
inline constexpr bool kCacheOn = true;
#endif

}  // namespace sl::testing

/// CHECK that two tensors agree; the failure message lists the mismatching elements.
#define SL_CHECK_CLOSE(a, b, rtol, atol)                                 \
  do {                                                                   \
    std::string sl_cmp_msg_ = ::sl::testing::compare((a), (b), (rtol), (atol)); \
    CHECK_MESSAGE(sl_cmp_msg_.empty(), sl_cmp_msg_);                     \
  } while (0)

/// CHECK that expr throws ErrType whose message contains `substr`.
#define SL_CHECK_THROWS(expr, ErrType, substr) \
  CHECK_THROWS_WITH_AS(expr, doctest::Contains(substr), ErrType)

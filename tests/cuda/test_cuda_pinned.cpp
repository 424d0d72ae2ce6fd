// Pinned host memory (Note [Pinned host memory] in core/allocator.h): pin_memory / is_pinned,
// direct and staged host <-> device copies, and the reuse of cached pinned blocks.
#include "core/allocator.h"
#include "cuda_testing.h"

using namespace sl;

namespace {

/// True (after reporting a skip) when this build has a GPU backend and a visible GPU, so pinned
/// memory exists. Pinned memory needs a real GPU: the fake GPU (Note [Fake GPU]) has none.
bool pinned_available(const char* what) {
  if (cuda::is_available() && !::sl::testing::fake_gpu_installed()) return true;
  ::sl::testing::report_skip(std::string("CUDA test: ") + what,
                             "no GPU visible (or built without CUDA)");
  return false;
}

const Device kCuda0{DeviceKind::cuda, 0};

}  // namespace

TEST_CASE("pin_memory: without a GPU it throws a DeviceError that says why" *
          sl::testing::needs_no_gpu()) {
  Tensor x = ones({4});
  CHECK(!x.is_pinned());
  SL_CHECK_THROWS(x.pin_memory(), DeviceError, "pin_memory: pinned memory needs a GPU");
  // nothing pinned, nothing counted
  CHECK(pinned_memory_stats().reserved_bytes == 0);
  empty_pinned_cache();  // no-op
}

TEST_CASE("pin_memory: pinned copies of CPU tensors round-trip through the GPU exactly" *
          sl::testing::needs_real_gpu()) {
  if (!pinned_available("pinned round trip")) return;
  for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::i64, DType::b8}) {
    CAPTURE(dt);
    Tensor h = (randn({33, 17}) * 10).to(dt);
    Tensor p = h.t().pin_memory();  // from a strided view: a contiguous pinned copy
    CHECK(p.is_pinned());
    CHECK(p.is_cpu());
    CHECK(p.is_contiguous());
    CHECK(!h.is_pinned());
    CHECK(p.pin_memory().is_same(p));  // already pinned: itself
    SL_CHECK_CLOSE(p, h.t(), 0, 0);
    Tensor d = p.to(kCuda0);  // direct, asynchronous host -> device
    SL_CHECK_CLOSE(d.cpu(), h.t(), 0, 0);
    Tensor back = zeros({17, 33}, {.dtype = dt}).pin_memory();
    back.copy_(d);  // direct device -> host into pinned memory
    SL_CHECK_CLOSE(back, h.t(), 0, 0);
    // views of pinned storage are pinned; a non-contiguous one goes through a staged copy
    CHECK(p.t().is_pinned());
    SL_CHECK_CLOSE(p.t().to(kCuda0).cpu(), h, 0, 0);
  }
  SL_CHECK_THROWS(zeros({2}, {.device = kCuda0}).pin_memory(), DeviceError,
                  "pin_memory: expected a CPU tensor");
}

TEST_CASE("pin_memory: freed pinned blocks are cached and reused (statistics)" *
          sl::testing::needs_real_gpu()) {
  if (!pinned_available("pinned block reuse")) return;
  cuda::synchronize();
  empty_pinned_cache();
  const MemoryStats s0 = pinned_memory_stats();
  Tensor h = randn({1000});
  { Tensor p = h.pin_memory(); }
  const MemoryStats s1 = pinned_memory_stats();
  CHECK(s1.reserved_bytes > s0.reserved_bytes);
  CHECK(s1.live_bytes == s0.live_bytes);  // freed again
  CHECK(s1.alloc_count == s0.alloc_count + 1);
  { Tensor q = h.pin_memory(); }  // same size class: the cached block, no new page-locking
  const MemoryStats s2 = pinned_memory_stats();
  CHECK(s2.reserved_bytes == s1.reserved_bytes);
  CHECK(s2.alloc_count == s1.alloc_count + 1);
  empty_pinned_cache();
  CHECK(pinned_memory_stats().reserved_bytes == s0.reserved_bytes);
}

TEST_CASE("pin_memory: a pinned source freed before its asynchronous copy ran is not reused" *
          sl::testing::needs_real_gpu()) {
  if (!pinned_available("pinned source lifetime")) return;
  Tensor h = randn({1 << 16});
  Tensor d;
  {
    Tensor p = h.pin_memory();
    d = p.to(kCuda0);  // queued; p dies right after
  }
  // same size class: would get p's block if its copy had not been waited for
  Tensor other = full({1 << 16}, 7.0f).pin_memory();
  SL_CHECK_CLOSE(d.cpu(), h, 0, 0);
  SL_CHECK_CLOSE(other, full({1 << 16}, 7.0f), 0, 0);
}

TEST_CASE("pinned staging: large pageable copies go in chunks and reuse their buffers" *
          sl::testing::needs_real_gpu()) {
  if (!pinned_available("staged copies")) return;
  // 2.5 staging chunks of float32 in each direction (kStageChunkBytes is 4 MiB)
  const int64_t n = (int64_t{5} << 20) / 2;
  Tensor h = randn({n});
  Tensor d = h.to(kCuda0);           // pageable -> device through two pinned buffers
  SL_CHECK_CLOSE(d.cpu(), h, 0, 0);  // and back
  const MemoryStats s1 = pinned_memory_stats();
  CHECK(s1.live_bytes == 0);  // staging buffers are returned after each copy
  CHECK(s1.reserved_bytes >= 2 * (int64_t{4} << 20));  // ... and cached
  Tensor d2 = (h * 2).to(kCuda0);
  SL_CHECK_CLOSE(d2.cpu(), h * 2, 0, 0);
  CHECK(pinned_memory_stats().reserved_bytes == s1.reserved_bytes);
}

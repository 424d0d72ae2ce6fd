// CUDA device plumbing: visibility, errors without a GPU, allocator statistics, copies between
// host and device with every dtype conversion, fill.
#include <cstring>

#include "core/ops/copy.h"
#include "cuda_testing.h"

using namespace sl;
using sl::testing::kGPU;

TEST_CASE("cuda: without a GPU, CUDA devices are refused with a DeviceError") {
  CHECK(cuda::is_compiled() == (SL_HAVE_CUDA != 0));
  CHECK(cuda::device_count() == cuda_device_count());
  if (cuda::is_available()) {
    // With a GPU: an index past the last one is refused the same way.
    std::string bad = "cuda:" + std::to_string(cuda::device_count());
    SL_CHECK_THROWS(zeros({2}, {.device = Device(bad)}), DeviceError, "is not available");
    SL_CHECK_THROWS(cuda::synchronize(cuda::device_count()), DeviceError, "is not available");
    CHECK(cuda::compute_capability(0) >= 50);
    CHECK(!cuda::device_name(0).empty());
    return;
  }
  CHECK(cuda::device_count() == 0);
  SL_CHECK_THROWS(zeros({2}, {.device = "cuda:0"}), DeviceError,
                  "get_allocator: device cuda:0 is not available (0 cuda device(s) visible)");
  SL_CHECK_THROWS(ones({3}).to(Device("cuda")), DeviceError, "is not available");
  SL_CHECK_THROWS(cuda::synchronize(0), DeviceError, "synchronize: cuda:0 is not available");
  SL_CHECK_THROWS(cuda::device_name(0), DeviceError, "device_name: cuda:0 is not available");
  SL_CHECK_THROWS(memory_stats(Device("cuda:0")), DeviceError, "is not available");
  cuda::synchronize();  // all (zero) devices: nothing to do
}

TEST_CASE("cuda: TF32, cuDNN determinism and checked-indexing switches") {
  CHECK(!cuda::allow_tf32());  // full float32 precision by default
  cuda::set_allow_tf32(true);
  CHECK(cuda::allow_tf32());
  cuda::set_allow_tf32(false);
  CHECK(cuda::cudnn_deterministic());  // deterministic convolutions by default
  cuda::set_cudnn_deterministic(false);
  CHECK(!cuda::cudnn_deterministic());
  cuda::set_cudnn_deterministic(true);
  CHECK(cuda::checked_indexing());
  cuda::set_checked_indexing(false);
  CHECK(!cuda::checked_indexing());
  cuda::set_checked_indexing(true);
}

TEST_CASE("cuda: allocator statistics follow tensors; empty_cache returns cached memory" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("allocator statistics");
  cuda::synchronize();
  empty_cache(kGPU);
  MemoryStats before = memory_stats(kGPU);
  {
    Tensor t = empty({1000, 256}, {.device = kGPU});  // 1 024 000 bytes
    MemoryStats s = memory_stats(kGPU);
    CHECK(s.live_bytes - before.live_bytes == 1024000);
    CHECK(s.reserved_bytes >= s.live_bytes);
    CHECK(s.peak_bytes >= s.live_bytes);
    CHECK(s.live_allocs == before.live_allocs + 1);
  }
  MemoryStats after = memory_stats(kGPU);
  CHECK(after.live_bytes == before.live_bytes);
  CHECK(after.reserved_bytes >= before.reserved_bytes);  // cached, not returned
  empty_cache(kGPU);
  CHECK(memory_stats(kGPU).reserved_bytes <= after.reserved_bytes);
  reset_peak_memory_stats(kGPU);
  CHECK(memory_stats(kGPU).peak_bytes == memory_stats(kGPU).live_bytes);
}

TEST_CASE("cuda: an impossible allocation throws OutOfMemoryError with the sizes" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("out of memory");
  // 2^46 floats = 256 TiB: more than any GPU has.
  SL_CHECK_THROWS(empty({int64_t{1} << 46}, {.device = kGPU}), OutOfMemoryError,
                  "cuda:0: out of memory: requested 281474976710656 bytes");
  // The device stays usable.
  Tensor t = ones({4}, {.device = kGPU});
  CHECK(t.sum().item<float>() == 4.0f);
}

TEST_CASE("cuda: host <-> device copies round-trip every dtype exactly" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("host/device round trip");
  for (DType dt :
       {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::b8}) {
    CAPTURE(dt);
    Tensor h = (randn({37, 13}) * 10).to(dt);
    Tensor d = h.to(kGPU);
    CHECK(d.is_cuda());
    CHECK(d.dtype() == dt);
    SL_CHECK_CLOSE(d.cpu(), h, 0, 0);
    // non-contiguous source and destination
    Tensor dt_view = h.t().to(kGPU);
    SL_CHECK_CLOSE(dt_view.cpu(), h.t(), 0, 0);
    Tensor dst = zeros({13, 37}, {.dtype = dt, .device = kGPU});
    dst.t().copy_(h);  // host -> strided device
    SL_CHECK_CLOSE(dst.cpu(), h.t(), 0, 0);
    Tensor host_dst = zeros({13, 37}, {.dtype = dt});
    host_dst.t().copy_(d);  // device -> strided host
    SL_CHECK_CLOSE(host_dst, h.t(), 0, 0);
  }
}

TEST_CASE("cuda: dtype conversions on the device match the CPU's" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("device dtype conversion");
  const DType all[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                       DType::i64, DType::i32, DType::b8};
  // values that exercise rounding, negatives, zero and large magnitudes
  Tensor base =
      tensor({0.0, -0.0, 1.5, -2.5, 3.7, -1e4, 65504.0, 1e-5, 0.33333333333, 7.0, -0.5, 60000.0},
             {.dtype = DType::f64});
  for (DType from : all) {
    Tensor src = base.to(from);
    Tensor gsrc = src.to(kGPU);
    for (DType to : all) {
      CAPTURE(from);
      CAPTURE(to);
      SL_CHECK_CLOSE(gsrc.to(to).cpu(), src.to(to), 0, 0);
      // strided (broadcast) source converted into a contiguous destination on the device
      Tensor g2 = empty({3, 12}, {.dtype = to, .device = kGPU});
      g2.copy_(gsrc);
      Tensor c2 = empty({3, 12}, {.dtype = to});
      c2.copy_(src);
      SL_CHECK_CLOSE(g2.cpu(), c2, 0, 0);
    }
  }
}

TEST_CASE("cuda: device-to-device copies, overlapping views, fill" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("device copies and fill");
  Tensor a = arange(24).to(DType::f32).view({4, 6}).to(kGPU);
  Tensor b = a.clone();
  CHECK(!b.is_same_storage(a));
  SL_CHECK_CLOSE(b.cpu(), a.cpu(), 0, 0);
  // copy a view onto an overlapping view of the same storage: behaves as if through a copy
  Tensor flat = arange(10).to(DType::f32).to(kGPU);
  Tensor ref = arange(10).to(DType::f32);
  flat.narrow(0, 1, 8).copy_(flat.narrow(0, 0, 8));
  ref.narrow(0, 1, 8).copy_(ref.narrow(0, 0, 8).clone());
  SL_CHECK_CLOSE(flat.cpu(), ref, 0, 0);
  for (DType dt :
       {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::b8}) {
    CAPTURE(dt);
    Tensor g = empty({5, 7}, {.dtype = dt, .device = kGPU});
    g.fill_(3);
    SL_CHECK_CLOSE(g.cpu(), full({5, 7}, 3, {.dtype = dt}), 0, 0);
    g.t().narrow(0, 1, 3).fill_(1);  // strided fill
    Tensor c = full({5, 7}, 3, {.dtype = dt});
    c.t().narrow(0, 1, 3).fill_(1);
    SL_CHECK_CLOSE(g.cpu(), c, 0, 0);
  }
  Tensor z = zeros({0, 3}, {.device = kGPU});
  CHECK(z.numel() == 0);
  CHECK(z.cpu().numel() == 0);
}

TEST_CASE("cuda: copies between two GPUs; ops refuse to mix them" * sl::testing::needs_gpu(2)) {
  SL_REQUIRE_CUDA("copies between two GPUs");
  Device g1(DeviceKind::cuda, 1);
  Tensor x = randn({33, 5}).to(kGPU);
  Tensor y = x.to(g1);
  CHECK(y.device() == g1);
  SL_CHECK_CLOSE(y.cpu(), x.cpu(), 0, 0);
  Tensor yt = zeros({5, 33}, {.device = g1});
  yt.t().copy_(x.to(DType::f64));
  SL_CHECK_CLOSE(yt.t().cpu(), x.cpu(), 0, 0);
  SL_CHECK_THROWS(x + y, DeviceError, "expected all tensors on the same device");
}

// The fake GPU: the CUDA test suite's stand-in device in builds without CUDA.
//
// Note [Fake GPU]
// A build without the CUDA backend still builds the CUDA test suite (tests/cuda) and runs it
// against a stand-in cuda:0 (meson test `cuda_fake`), as it runs the op-case table's CUDA cases
// (test_devices(), tests/core/test_op_table.cpp) and the trainer's --device cuda (sl_train_fake,
// tests/train/test_cnn_job.cpp). Its memory is host memory, managed by the real caching
// allocator (Note [Caching allocator]) over a host backend with a fixed capacity; every kernel
// slot's CUDA entry is the CPU kernel (sl::mirror_kernels); and make_nccl_group gives a group
// that runs each collective over its bootstrap group (the MPI world) on host copies
// (dist::set_nccl_stand_in), so ddp and ZeRO with CUDA parameters run on several ranks.
// Tensors really are on DeviceKind::cuda, so everything around the kernels runs as it would on a
// GPU: device checks and moves in the ops, autograd, nn modules, optimizers, autocast and
// GradScaler, checkpoint recomputation, the dist strategies' device buffers, the allocator's
// statistics and its out-of-memory error, the profiler's gpu events (its device timer reads the
// host clock, Note [Device timer]), and the test code itself (every call, shape and tolerance
// expression). It says nothing about the CUDA kernels or NCCL: a parity case compares
// the CPU with itself. The cases whose subject is the CUDA runtime itself (pinned memory,
// asynchronous index errors, cuBLASLt and cuDNN paths and counters) are marked needs_real_gpu()
// and skip on it. A build with CUDA never installs it: there, cuda:0 is a GPU or absent.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sl::testing {

/// "Device memory" of the fake GPU: far above what the suite allocates, far below the
/// impossible allocation of the out-of-memory test.
inline constexpr size_t kFakeGpuCapacity = size_t{16} << 30;

/// Installs the fake GPU once (later calls return at once) and returns true; returns false when
/// the build has CUDA (nothing is installed then). Called by the CUDA test helpers before they
/// ask whether a GPU is visible.
bool install_fake_gpu();
/// True when the fake GPU is installed.
bool fake_gpu_installed();
/// How often the fake GPU's synchronize hook (sl::cuda::synchronize) has run so far: the stand-in
/// for a stream synchronisation, which tests count where one orders asynchronous copies. 0 when
/// the fake GPU is not installed.
int fake_synchronize_calls();

/// The fake GPU's device timer (Note [Device timer]; a marker is the host clock when taken):
/// markers taken so far, those taken and not yet released, and the pool's size.
struct FakeTimerCounts {
  int64_t taken = 0;
  int64_t in_use = 0;
  int64_t pool = 0;
};
FakeTimerCounts fake_timer_counts();
/// Caps the fake timer's pool at `markers` (past it, a mark finds none and the profiler drops
/// the gpu event); the default is far above any test's needs. A pool already larger keeps its
/// markers.
void set_fake_timer_capacity(int64_t markers);

}  // namespace sl::testing

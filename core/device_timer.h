// The device timer: how the profiler learns what a device's stream spent on each kernel call.
//
// Note [Device timer]
// A backend whose kernels run asynchronously registers three hooks for its DeviceKind (kernel
// slots, Note [Kernel registration]): mark, resolve and release. While the profiler records, a
// kernel slot call whose arguments name a device of that kind (core/dispatch.h) takes a marker
// before the call and one after it (mark: the marker is recorded on the device's compute stream,
// so it is reached when the stream has run everything queued before it). stop() hands each
// device's markers to resolve, which waits for the stream, records one more marker (the anchor),
// reads the host's steady clock once the anchor has been reached, and gives every marker the
// host-clock time anchor_host - (anchor - marker), the difference measured on the device. So the
// device's times sit on the host's timeline up to the time it takes the host to see the anchor
// (a wait's wake-up: they are late by that, never early) and the drift of the two clocks over
// the recording; their differences (the gpu events' durations and gaps) are the device's own.
// release returns markers to the backend's pool (CUDA events are slow to create, so they are
// created once and reused); stop() releases every marker it was given, and a call that ends
// after its recording did releases its own. Markers in use are bounded by the profiler: a call
// takes its two only when its gpu event fits within Options::max_events, and a mark that finds
// no marker (-1) makes the event dropped.
// The CUDA backend's hooks are in core/cuda/device_timer.cpp (cudaEventRecord on the compute
// stream, cudaEventElapsedTime); the fake GPU's (tests/support/fake_gpu.cpp) read the host clock
// at mark, since its kernels run synchronously.
#pragma once

#include <cstdint>
#include <span>

#include "core/dispatch.h"

namespace sl::profiler {

// The profiler calls these through .get(kind) (never slot(kind, ...), which would profile the
// hook itself); has(kind) says whether a kind has a timer.

/// Records a marker from `device`'s pool on its compute stream (in stream order with its
/// kernels) and returns its id (>= 0), or -1 when the pool can give none. Throws the backend's
/// error (CudaError) when recording fails.
SL_DECLARE_KERNEL(device_timer_mark_kernel, int64_t(int device));
/// Waits until `device` has reached every marker in `markers` (ids mark returned since their last
/// release, all recorded), then writes each one's time on the host's steady clock (now_ns()'s
/// base) to the same place of `host_ns` (of the same size). Throws the backend's error when
/// waiting or reading the device's clock fails.
SL_DECLARE_KERNEL(device_timer_resolve_kernel,
                  void(int device, std::span<const int64_t> markers, std::span<int64_t> host_ns));
/// Returns `markers` to `device`'s pool; throws nothing.
SL_DECLARE_KERNEL(device_timer_release_kernel, void(int device, std::span<const int64_t> markers));

}  // namespace sl::profiler

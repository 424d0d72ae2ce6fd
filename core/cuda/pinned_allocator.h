// The CUDA backend's pinned host memory (Note [Pinned host memory] in core/allocator.h): a
// caching allocator of page-locked blocks, and copies between pageable host memory and a GPU
// staged through it. Internal header; host glue only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "core/allocator.h"

namespace sl::cuda {

/// Bytes per staging chunk of staged copies (two chunks are in flight at a time).
inline constexpr size_t kStageChunkBytes = size_t{4} << 20;

/// The process-wide pinned host allocator, created on first use. Blocks (sizes by
/// pinned_block_size: powers of two up to 1 MiB, multiples of 2 MiB above; from cudaHostAlloc
/// with cudaHostAllocPortable so every GPU may use them) are cached when freed and handed out
/// again for a request of the same rounded size once the copies queued from them
/// (record_pinned_use) have run; empty_cache() returns the unused ones to the driver, and so
/// does process exit (before the CUDA runtime shuts down). Statistics: live/peak = bytes
/// requested by live allocations, reserved = bytes page-locked.
Allocator& pinned_allocator();

/// Tells the pinned allocator that work queued on `stream` of `device` (an asynchronous copy)
/// reads the pinned block starting at `block` (a pinned Storage's data()), so the block is not
/// reused before the stream gets past that point. The block keeps one event per (device,
/// stream), re-recorded by each call (Note [Pinned block uses] in pinned_uses.h), so a block
/// copied from every step holds a bounded number of events. Throws ValueError for an unknown
/// block.
void record_pinned_use(void* block, int device, cudaStream_t stream);

/// Copies n bytes from pageable host memory to device memory of `device` on its compute stream,
/// in chunks of kStageChunkBytes through two pinned buffers (the memcpy into one overlaps the
/// DMA from the other). Returns when the copy has completed; then, having waited for the
/// stream, throws IndexError for an index error recorded on `device` (check_index_error).
void staged_host_to_device(void* dst, const void* src, size_t n, int device);
/// Copies n bytes from device memory of `device` to pageable host memory likewise (the DMA of a
/// chunk overlaps the memcpy out of the previous one). Returns when the data is in dst; throws
/// IndexError as staged_host_to_device does (n > 0 only: an empty copy waits for nothing).
void staged_device_to_host(void* dst, const void* src, size_t n, int device);

}  // namespace sl::cuda

// The error record of unchecked indexing (internal header of the CUDA backend; no CUDA types,
// so it is built, and its host half unit-tested, in every build).
//
// Note [Unchecked indexing]
// With sl::cuda::set_checked_indexing(false), generic code does not range-check index tensors
// that live on a GPU (Note [Index checks] in core/ops/index.h); the index-family kernels of
// core/cuda/index.cu guard every index instead. An index outside [0, size) never reaches memory:
// the element that needs it is skipped (gather / index_select write 0 there, scatter /
// scatter_add / index_add / one_hot leave the output element as it was), and the first bad index
// is written to the device's IndexErrorRecord:
//   - the record lives in mapped pinned host memory (cudaHostAllocMapped), one per GPU, made on
//     the GPU's first index kernel (core/cuda/runtime.cpp, index_guard);
//   - a word in device memory (IndexGuard::claim, 0 when free) is claimed with atomicCAS, so
//     one thread writes the record between two reports (the first to claim it; among several
//     bad indices of one kernel, any one of them); it writes op, index and size, makes them
//     visible to the host (__threadfence_system) and sets `set` last;
//   - the host reads it after every wait for the GPU's compute stream: sl::cuda::synchronize,
//     every copy between host and device, and the other points that read a value back
//     (Note [CUDA streams and synchronisation]); when set, it clears the record and the claim and
//     throws the IndexError of index_error_message. Each error is reported once.
// A kernel whose indices are all in range pays one compare per index (an unsigned compare that
// covers negative values too) and a branch that is never taken; in checked mode indices are
// known to be in range, so the record is never written, and the host's read is one load.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sl::cuda {

/// The first out-of-range index a kernel met since the last report (Note [Unchecked indexing]).
/// Written by the device (all fields, then `set`), read and cleared by the host.
struct IndexErrorRecord {
  int32_t set = 0;  ///< 1 once the fields below hold an error
  int32_t reserved = 0;
  const char* op = nullptr;  ///< the op's name: a string literal, stored by the device unread
  int64_t index = 0;         ///< the bad index value
  int64_t size = 0;          ///< valid indices are [0, size)
};

/// The message for an error recorded on cuda:`device`: "gather: index 7 is out of range
/// (expected 0 <= index < 5); ..." followed by the note that it was detected asynchronously.
std::string index_error_message(const IndexErrorRecord& r, int device);

/// When `r` holds an error (set != 0, taken with one atomic exchange, so among threads calling
/// this at once exactly one gets it): returns a copy and clears `r`. Otherwise nullopt, leaving
/// `r` as it is. Device threads write `r` only while holding the claim word, which the caller
/// releases after this returns an error.
std::optional<IndexErrorRecord> take_index_error(IndexErrorRecord& r);

/// Throws IndexError with index_error_message(r, device).
[[noreturn]] void throw_index_error(const IndexErrorRecord& r, int device);

}  // namespace sl::cuda

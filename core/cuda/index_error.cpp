#include "core/cuda/index_error.h"

#include <atomic>

#include "core/error.h"

namespace sl::cuda {

std::string index_error_message(const IndexErrorRecord& r, int device) {
  return ::sl::detail::str_cat(
      r.op ? r.op : "index op", ": index ", r.index, " is out of range (expected 0 <= index < ",
      r.size, "); detected asynchronously at a synchronisation point of cuda:", device,
      ", not where the op ran (unchecked indexing mode, sl::cuda::set_checked_indexing(false); "
      "turn it on to throw from the op itself): the op skipped the output elements that needed a "
      "bad index");
}

std::optional<IndexErrorRecord> take_index_error(IndexErrorRecord& r) {
  if (std::atomic_ref<int32_t>(r.set).load(std::memory_order_acquire) == 0) return std::nullopt;
  IndexErrorRecord copy = r;
  r.op = nullptr;
  r.index = 0;
  r.size = 0;
  std::atomic_ref<int32_t>(r.set).store(0, std::memory_order_release);
  return copy;
}

void throw_index_error(const IndexErrorRecord& r, int device) {
  throw IndexError(index_error_message(r, device));
}

}  // namespace sl::cuda

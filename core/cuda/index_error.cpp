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
  // One exchange, not a load and a later store: two host threads at a synchronisation point of
  // the same device (a loader thread's copy, the main thread's item()) must not both see `set`
  // and report the error twice. The fields stay put after `set` is cleared: no device thread
  // writes them until the caller releases the claim word.
  if (std::atomic_ref<int32_t>(r.set).exchange(0, std::memory_order_acq_rel) == 0) {
    return std::nullopt;
  }
  IndexErrorRecord copy = r;
  copy.set = 1;
  r.op = nullptr;
  r.index = 0;
  r.size = 0;
  return copy;
}

void throw_index_error(const IndexErrorRecord& r, int device) {
  throw IndexError(index_error_message(r, device));
}

}  // namespace sl::cuda

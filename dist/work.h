// Work: the waitable handle every asynchronous collective returns.
//
// A backend creates a Work when a collective is issued and completes it (successfully or with an
// error) when the collective has finished, possibly on its communication thread. The caller may
// overlap computation with the collective and wait() later; wait() never blocks forever: it
// throws DistError after the timeout, naming the collective, so a lost peer becomes an error
// instead of a hang.
//
// The collective's tensors belong to it until wait() has returned (or is_completed() returned
// true): reading or writing them before, on the host or with a kernel, races with it, and so
// does any use of them after a Work dropped without waiting. For CUDA tensors this includes
// kernels queued on the compute stream after the collective was issued: they are not ordered
// after it until wait() (Note [NCCL stream ordering] in dist/nccl/process_group_nccl.cpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace sl::dist {

class Work {
 public:
  /// `what` describes the collective for error messages ("allreduce #12 (float32 x 1000)");
  /// `default_timeout` is what wait() without an argument uses.
  Work(std::string what, std::chrono::milliseconds default_timeout);
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  /// True once the collective finished (successfully or not). Never blocks.
  bool is_completed() const;
  /// True once finished without error.
  bool is_success() const;
  /// Blocks until the collective finished, then rethrows its error (a DistError) if it failed.
  /// Throws DistError when it does not finish within `timeout` (default: the group's timeout).
  /// After a successful wait, runs the backend's after-wait step (set_after_wait) on this thread.
  void wait() { wait(default_timeout_); }
  void wait(std::chrono::milliseconds timeout);
  /// Orders what the caller queues next on its compute stream after the collective, without
  /// blocking the host where the backend orders streams itself (an after-wait step was set:
  /// NCCL): it runs that step and returns, even before the collective finished. A failure found
  /// later (an NCCL error, the timeout) breaks the group, so it surfaces at the group's next
  /// collective or wait. Without such a step (MPI, host collectives) it is wait(). Rethrows this
  /// collective's error when it is already known.
  void wait_stream();
  const std::string& what() const { return what_; }
  /// The name wait() records under while the profiler is on (Note [Profiler]): a string that
  /// lives until the process ends, e.g. "wait allreduce". Default "wait".
  void set_wait_name(const char* name) { wait_name_ = name; }

  /// Backend side: marks the collective done; `error` null on success. First runs the callbacks
  /// added with on_complete (outside the lock), then wakes the waiters. Idempotent: only the
  /// first call counts.
  void complete(std::exception_ptr error = nullptr);
  /// Runs `fn` when the work completes (immediately, on this thread, if it already has); `fn`
  /// must not throw. Used to release buffers and chain follow-up steps.
  void on_complete(std::function<void()> fn);
  /// Backend side: `fn` runs on the waiting thread each time wait() returns without error, after
  /// the host wait, and that wait_stream() runs instead of a host wait; what it throws, they
  /// throw. The NCCL backend makes the waiter's compute stream wait for the collective there.
  /// Set before the Work is handed to the caller.
  void set_after_wait(std::function<void()> fn);

  /// A Work that is already complete (single-rank groups, empty collectives).
  static std::shared_ptr<Work> completed(std::string what);

 private:
  std::string what_;
  std::chrono::milliseconds default_timeout_;
  const char* wait_name_ = "wait";
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool completing_ = false;
  std::exception_ptr error_;
  std::vector<std::function<void()>> callbacks_;
  std::function<void()> after_wait_;
};

using WorkPtr = std::shared_ptr<Work>;

/// Waits for every work in order (each with its default timeout); rethrows the first error.
void wait_all(const std::vector<WorkPtr>& works);

/// Runs `fn` on a thread of its own and waits at most `timeout` for it, for a blocking call that
/// has no timeout of its own (ncclCommInitRank). Returns when `fn` returns and rethrows what it
/// throws. After `timeout` it throws DistError "<what>: did not finish within T s; <hint>" and
/// leaves `fn` running on its detached thread, since a blocked call cannot be interrupted: the
/// caller must treat what `fn` was doing as failed. `fn` must own everything it touches (capture
/// by value or shared_ptr): it may outlive the caller's frame.
void run_with_timeout(const std::string& what, std::chrono::milliseconds timeout,
                      const std::string& hint, std::function<void()> fn);

}  // namespace sl::dist

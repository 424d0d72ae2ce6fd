// CommThread: one thread that runs queued tasks in the order they were posted.
//
// Backends whose library must be driven from a single thread (MPI, see Note [MPI communication
// thread]) post every call here; the FIFO order is what makes collectives run in issue order.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace sl::dist {

class CommThread {
 public:
  CommThread();
  /// Stops after draining the queue (see stop()).
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  /// Queues `task`; tasks run one at a time in posting order. A task must not throw (backends
  /// catch and complete their Work with the error). Returns false (and drops the task) once
  /// stop() has been called.
  bool post(std::function<void()> task);
  /// Posts `task` and blocks until it ran; rethrows what it threw. Must not be called from the
  /// communication thread itself.
  void run_sync(const std::function<void()>& task);
  /// Runs the tasks still queued, then ends the thread and joins it. Idempotent.
  void stop();
  bool on_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sl::dist

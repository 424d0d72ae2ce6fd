#include "dist/comm_thread.h"

#include <exception>
#include <future>

#include "core/error.h"
#include "core/profiler.h"

namespace sl::dist {

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  stop();
}

bool CommThread::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void CommThread::run_sync(const std::function<void()>& task) {
  SL_ASSERT(!on_thread());
  std::promise<void> done;
  auto fut = done.get_future();
  bool queued = post([&] {
    try {
      task();
      done.set_value();
    } catch (...) {
      done.set_exception(std::current_exception());
    }
  });
  SL_CHECK_DIST(queued,
                "communication thread: already stopped (the distributed runtime was "
                "finalized)");
  fut.get();
}

void CommThread::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable() && !on_thread()) thread_.join();
}

void CommThread::loop() {
  profiler::set_thread_name("communication");
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace sl::dist

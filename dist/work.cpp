#include "dist/work.h"

#include <thread>
#include <vector>

#include "core/error.h"
#include "core/profiler.h"

namespace sl::dist {

Work::Work(std::string what, std::chrono::milliseconds default_timeout)
    : what_(std::move(what)), default_timeout_(default_timeout) {}

bool Work::is_completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool Work::is_success() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ && !error_;
}

void Work::wait(std::chrono::milliseconds timeout) {
  profiler::Scope scope(wait_name_, profiler::Category::wait);
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
    double secs = static_cast<double>(timeout.count()) / 1000.0;
    detail::throw_error<DistError>(
        what_, ": did not complete within ", secs,
        " s; a peer rank may have died, stalled, or issued a different collective (run with "
        "SL_DIST_DEBUG=1 to compare the ranks' collectives; SL_DIST_TIMEOUT sets the timeout)");
  }
  if (error_) std::rethrow_exception(error_);
  std::function<void()> after = after_wait_;
  lock.unlock();
  if (after) after();
}

void Work::complete(std::exception_ptr error) {
  // Callbacks run before waiters wake up, so whatever a callback releases or finishes is done
  // by the time wait() returns. A callback added meanwhile joins the next round.
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_ || completing_) return;
    completing_ = true;
    error_ = std::move(error);
    callbacks.swap(callbacks_);
  }
  for (;;) {
    for (auto& fn : callbacks) fn();
    callbacks.clear();
    std::lock_guard<std::mutex> lock(mu_);
    if (callbacks_.empty()) {
      done_ = true;
      break;
    }
    callbacks.swap(callbacks_);
  }
  cv_.notify_all();
}

void Work::on_complete(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) {
      callbacks_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

void Work::wait_stream() {
  std::function<void()> step;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_ && error_) std::rethrow_exception(error_);
    step = after_wait_;
  }
  if (!step) {
    wait();
    return;
  }
  step();
}

void Work::set_after_wait(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  after_wait_ = std::move(fn);
}

std::shared_ptr<Work> Work::completed(std::string what) {
  auto w = std::make_shared<Work>(std::move(what), std::chrono::milliseconds(0));
  w->complete();
  return w;
}

void wait_all(const std::vector<WorkPtr>& works) {
  for (const auto& w : works) {
    if (w) w->wait();
  }
}

void run_with_timeout(const std::string& what, std::chrono::milliseconds timeout,
                      const std::string& hint, std::function<void()> fn) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::exception_ptr error;
  };
  auto st = std::make_shared<State>();  // shared with the thread, which may outlive this call
  std::thread t([st, fn = std::move(fn)] {
    std::exception_ptr error;
    try {
      fn();
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(st->mu);
    st->error = error;
    st->done = true;
    st->cv.notify_all();
  });
  bool done = false;
  {
    std::unique_lock<std::mutex> lock(st->mu);
    done = st->cv.wait_for(lock, timeout, [&] { return st->done; });
  }
  if (!done) {
    t.detach();
    detail::throw_error<DistError>(what, ": did not finish within ",
                                   static_cast<double>(timeout.count()) / 1000.0, " s; ", hint);
  }
  t.join();
  if (st->error) std::rethrow_exception(st->error);
}

}  // namespace sl::dist

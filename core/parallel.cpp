// The shared CPU thread pool behind parallel_for (see Note [Thread pool] in core/parallel.h).
#include "core/parallel.h"

#include <omp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/profiler.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SL_CPU_RELAX() _mm_pause()
#else
#define SL_CPU_RELAX() ((void)0)
#endif

extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace sl {

namespace {

int initial_threads() {
  if (const char* env = std::getenv("SL_NUM_THREADS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && v >= 1 && v <= 4096) return static_cast<int>(v);
  }
  int n = static_cast<int>(std::thread::hardware_concurrency());
  return n >= 1 ? n : 1;
}

std::atomic<int>& thread_setting() {
  static std::atomic<int> n = [] {
    // The BLAS always runs single-threaded: its own threading gives bits that depend on the
    // thread count, so matmul parallelises over fixed output tiles on this pool instead
    // (Note [Deterministic BLAS tiles] in core/cpu/matmul.cpp).
    if (openblas_set_num_threads) openblas_set_num_threads(1);
    return initial_threads();
  }();
  return n;
}
/// Applies the setting (and the BLAS's single thread) when the library loads, before any kernel.
[[maybe_unused]] const bool kThreadsInitialised = (thread_setting(), true);

/// Set while this thread runs chunks (workers always; the caller during run_chunks).
thread_local bool t_in_region = false;

/// How long an idle worker spins for the next job before sleeping.
constexpr auto kSpin = std::chrono::microseconds(50);

/// Index part of the claim word that no job reaches: the word is "closed" while a job is set up.
constexpr uint64_t kClosed = 0xffffffffu;

/// Testing only (detail::set_pool_claim_yield_for_testing): every n-th claim yields between
/// reading the claim word and checking it, to widen the window Note [Closing the claim word]
/// is about. 0 (off) in normal runs; then it costs one relaxed load per claim.
std::atomic<int> g_claim_yield_every{0};
void maybe_yield_for_testing() {
  const int every = g_claim_yield_every.load(std::memory_order_relaxed);
  if (every <= 0) return;
  thread_local unsigned count = 0;
  if (++count % static_cast<unsigned>(every) == 0) std::this_thread::yield();
}

// Note [Closing the claim word]
// Workers + the calling thread claim chunk indices from `state_` (generation << 32 | next
// index). A claim reads the word, checks the index against `nchunks_`, and takes it with a
// compare-exchange, which succeeds only if the word has not changed: a worker that wakes late
// never runs an index of a newer job with an older job's body.
//
// The word and the count are two atomics, so a worker can read the word of the finished job
// (generation G, index n_G: nothing left) and, a moment later, the count of the next job. If
// that count is larger, the index looks free. The first version of run() stored the new count
// before the new word, so the compare-exchange could still find the old word and succeed: the
// worker ran index n_G of the new job a second time and counted it in `done_`, which the caller
// waits to see equal the job's chunk count. Seen first as a CI hang (about 1 ASan suite run in
// 20 on 2 cores with 3 threads): `done_` went past the count while the caller was not looking,
// and it spun forever with the workers asleep. Seen the other way round, the caller returned
// before a chunk had finished.
//
// So run() first closes the word (new generation, index kClosed) and only then writes the job's
// fields and count, with release; a claim reads the count with acquire. A worker that sees the
// new count therefore sees the closed word too, and its compare-exchange against the old word
// fails. The test "parallel: back-to-back jobs of different sizes..." widens the window with
// set_pool_claim_yield_for_testing; without this order it hangs or over-counts within seconds.
//
// A job's fields stay valid until every claimed chunk has finished, which the caller waits for.
class ThreadPool {
 public:
  explicit ThreadPool(int workers) {
    threads_.reserve(static_cast<size_t>(workers));
    for (int i = 0; i < workers; ++i) {
      threads_.emplace_back([this, i] {
        profiler::set_thread_name("pool worker " + std::to_string(i + 1));
        worker_loop();
      });
    }
  }
  ~ThreadPool() {
    stop_.store(true);
    generation_.fetch_add(1);
    generation_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int workers() const { return static_cast<int>(threads_.size()); }
  /// Caller holds the pool's run mutex. See Note [Closing the claim word].
  void run(int64_t nchunks, void (*body)(void*, int64_t), void* ctx) {
    const uint32_t gen = ++job_gen_;
    state_.store((uint64_t{gen} << 32) | kClosed, std::memory_order_relaxed);
    body_ = body;
    ctx_ = ctx;
    done_.store(0, std::memory_order_relaxed);
    failed_.store(false, std::memory_order_relaxed);
    err_ = nullptr;
    nchunks_.store(nchunks, std::memory_order_release);
    state_.store(uint64_t{gen} << 32, std::memory_order_release);
    generation_.store(gen, std::memory_order_release);
    generation_.notify_all();
    while (claim_and_run(gen)) {
    }
    // Wait for chunks still running on workers; yield so a preempted worker can finish.
    int spins = 0;
    while (done_.load(std::memory_order_acquire) != nchunks) {
      if (++spins < 2000) {
        SL_CPU_RELAX();
      } else {
        std::this_thread::yield();
      }
    }
    if (err_) std::rethrow_exception(err_);
  }

 private:
  bool claim_and_run(uint32_t gen) {
    uint64_t v = state_.load(std::memory_order_acquire);
    for (;;) {
      if (static_cast<uint32_t>(v >> 32) != gen) return false;
      const int64_t idx = static_cast<int64_t>(v & kClosed);
      maybe_yield_for_testing();
      if (idx >= nchunks_.load(std::memory_order_acquire)) return false;
      if (state_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) {
        try {
          body_(ctx_, idx);
        } catch (...) {
          if (!failed_.exchange(true)) err_ = std::current_exception();
        }
        done_.fetch_add(1, std::memory_order_release);
        return true;
      }
    }
  }

  void worker_loop() {
    t_in_region = true;
    uint32_t seen = 0;
    for (;;) {
      uint32_t g = generation_.load(std::memory_order_acquire);
      if (g == seen) {
        auto until = std::chrono::steady_clock::now() + kSpin;
        for (int i = 0; g == seen; ++i) {
          SL_CPU_RELAX();
          g = generation_.load(std::memory_order_acquire);
          if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
        }
        if (g == seen) {
          generation_.wait(seen, std::memory_order_acquire);
          continue;
        }
      }
      if (stop_.load()) return;
      seen = g;
      while (claim_and_run(g)) {
      }
    }
  }

  std::vector<std::thread> threads_;
  uint32_t job_gen_ = 0;  // the caller's counter (under the run mutex)
  std::atomic<uint32_t> generation_{0};
  std::atomic<uint64_t> state_{0};
  std::atomic<int64_t> nchunks_{0};
  std::atomic<int64_t> done_{0};
  void (*body_)(void*, int64_t) = nullptr;
  void* ctx_ = nullptr;
  std::atomic<bool> failed_{false};
  std::exception_ptr err_;
  std::atomic<bool> stop_{false};
};

/// The pool and the mutex that makes one caller at a time use it. Deliberately never destroyed:
/// workers sleeping in a futex at exit are harmless, and joining them from a static destructor
/// could race with other static destructors still running kernels.
struct PoolHolder {
  std::mutex run_mutex;
  std::unique_ptr<ThreadPool> pool;
  pid_t owner_pid = 0;                  // after fork() the child has no workers: rebuild
  ThreadPool* forked_orphan = nullptr;  // the parent's pool in a child; kept reachable, unused
};
PoolHolder& holder() {
  static PoolHolder* h = new PoolHolder;
  return *h;
}

}  // namespace

int get_num_threads() {
  return thread_setting().load(std::memory_order_relaxed);
}

void set_num_threads(int n) {
  SL_CHECK(n >= 1, "set_num_threads: expected a thread count >= 1, got ", n);
  thread_setting().store(n, std::memory_order_relaxed);
}

namespace detail {

bool in_parallel_region() {
  return t_in_region || omp_in_parallel() != 0;
}

int thread_count_hint(int64_t work, int64_t grain) {
  if (in_parallel_region()) return 1;
  int nt = get_num_threads();
  if (grain < 1) grain = 1;
  // ceil(work / grain) without work + grain - 1, which overflows for a grain of INT64_MAX (the
  // "never split" grain some loops pass)
  const int64_t max_useful = work / grain + (work % grain != 0 ? 1 : 0);
  return static_cast<int>(max_useful < nt ? max_useful : nt);
}

void run_chunks(int64_t nchunks, void (*body)(void*, int64_t), void* ctx) {
  auto inline_all = [&] {
    for (int64_t i = 0; i < nchunks; ++i) body(ctx, i);
  };
  SL_CHECK(nchunks < static_cast<int64_t>(kClosed), "run_chunks: expected fewer than ", kClosed,
           " chunks, got ", nchunks);
  if (nchunks <= 1 || t_in_region) return inline_all();
  PoolHolder& h = holder();
  std::unique_lock<std::mutex> lock(h.run_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return inline_all();  // another thread is using the pool
  const int want_workers = get_num_threads() - 1;
  if (want_workers < 1) return inline_all();
  if (h.owner_pid != getpid()) {
    h.forked_orphan = h.pool.release();  // a forked child: the parent's workers are not here
    h.owner_pid = getpid();
  }
  if (!h.pool || h.pool->workers() != want_workers) {
    h.pool.reset();
    h.pool = std::make_unique<ThreadPool>(want_workers);
  }
  t_in_region = true;
  try {
    h.pool->run(nchunks, body, ctx);
  } catch (...) {
    t_in_region = false;
    throw;
  }
  t_in_region = false;
}

void set_pool_claim_yield_for_testing(int every) {
  g_claim_yield_every.store(every < 0 ? 0 : every, std::memory_order_relaxed);
}

}  // namespace detail
}  // namespace sl

// The CPU thread pool (core/parallel.h): coverage of parallel_for, exceptions, nesting, and the
// determinism rule: the same inputs give the same bits whatever the thread count.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/ops/elementwise.h"
#include "core/parallel.h"
#include "support/testing.h"

using namespace sl;

namespace {

/// Restores the thread count a test changed.
struct ThreadsGuard {
  int saved = get_num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

bool same_bits(const Tensor& a, const Tensor& b) {
  Tensor x = a.contiguous(), y = b.contiguous();
  if (x.sizes() != y.sizes() || x.dtype() != y.dtype()) return false;
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

}  // namespace

TEST_CASE("parallel: parallel_for covers every index once with 1 to 4 threads") {
  ThreadsGuard guard;
  for (int threads : {1, 2, 3, 4}) {
    set_num_threads(threads);
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{100003}}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      parallel_for(0, n, 16, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      int64_t wrong = 0;
      for (auto& h : hits) wrong += h.load() != 1;
      CHECK_MESSAGE(wrong == 0, "threads=", threads, " n=", n);
    }
  }
}

TEST_CASE("parallel: back-to-back jobs of different sizes run each chunk once (claim race)") {
  // Note [Closing the claim word] (core/parallel.cpp): a worker that read the finished job's
  // claim word and then the next, larger job's chunk count could run one chunk twice. Then the
  // caller either returned before a chunk finished or spun forever. Workers here yield in the
  // middle of every third claim, and jobs alternate 64 chunks with 2 to 6, on more threads than
  // this machine may have cores, so the window is open thousands of times. With the old order
  // this failed or hung within a few thousand jobs (measured: see the note).
  ThreadsGuard guard;
  struct HookGuard {
    ~HookGuard() { detail::set_pool_claim_yield_for_testing(0); }
  } hook;
  detail::set_pool_claim_yield_for_testing(3);
  struct Job {
    std::atomic<int>* hits;
    std::atomic<int>* finished;
  };
  // Runs on its own thread so that a hang is reported instead of stalling the suite.
  auto stress = [](int threads) {
    set_num_threads(threads);
    std::vector<std::atomic<int>> hits(64);
    std::atomic<int> finished{0};
    for (int it = 0; it < 20000; ++it) {
      const int n = (it & 1) ? 64 : 2 + it % 5;
      for (int i = 0; i < n; ++i) hits[static_cast<size_t>(i)].store(0);
      finished.store(0);
      Job job{hits.data(), &finished};
      detail::run_chunks(
          n,
          [](void* c, int64_t i) {
            auto* j = static_cast<Job*>(c);
            j->hits[i].fetch_add(1);
            j->finished->fetch_add(1);
          },
          &job);
      if (finished.load() != n) {
        return "job " + std::to_string(it) + ": run_chunks returned after " +
               std::to_string(finished.load()) + " of " + std::to_string(n) + " chunks";
      }
      for (int i = 0; i < n; ++i) {
        if (hits[static_cast<size_t>(i)].load() != 1) {
          return "job " + std::to_string(it) + ": chunk " + std::to_string(i) + " ran " +
                 std::to_string(hits[static_cast<size_t>(i)].load()) + " times";
        }
      }
    }
    return std::string();
  };
  for (int threads : {3, 4}) {
    auto result = std::async(std::launch::async, stress, threads);
    // 20000 jobs take well under a second; 60 s means the pool is stuck. The stuck thread cannot
    // be stopped, so the test binary exits with the reason.
    if (result.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      std::fprintf(stderr, "parallel claim race: %d threads: run_chunks hung (60 s)\n", threads);
      std::fflush(stderr);
      std::_Exit(1);
    }
    const std::string err = result.get();
    CHECK_MESSAGE(err.empty(), "threads=", threads, ": ", err);
  }
}

TEST_CASE("parallel: an exception in a chunk reaches the caller and the pool still works") {
  ThreadsGuard guard;
  set_num_threads(2);
  CHECK_THROWS_WITH_AS(parallel_for(0, 1 << 16, 1,
                                    [](int64_t b, int64_t) {
                                      if (b == 0) throw std::runtime_error("chunk 0 failed");
                                    }),
                       "chunk 0 failed", std::runtime_error);
  std::atomic<int64_t> total{0};
  parallel_for(0, 1 << 16, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
  CHECK(total.load() == (1 << 16));
}

TEST_CASE("parallel: nested parallel_for runs inline and still covers the range") {
  ThreadsGuard guard;
  set_num_threads(2);
  std::atomic<int64_t> total{0};
  parallel_for(0, 64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      parallel_for(0, 100, 1, [&](int64_t b2, int64_t e2) { total.fetch_add(e2 - b2); });
    }
  });
  CHECK(total.load() == 64 * 100);
}

TEST_CASE("parallel: a grain of INT64_MAX runs the whole range as one call") {
  // "never split": the thread-count hint computes ceil(work / grain) without overflowing (it
  // once added grain - 1 to the work, undefined behaviour that UBSan reported from an integer
  // remainder's zero-divisor scan)
  ThreadsGuard guard;
  set_num_threads(2);
  CHECK(sl::detail::thread_count_hint(1000, INT64_MAX) == 1);
  CHECK(sl::detail::thread_count_hint(INT64_MAX, INT64_MAX) == 1);
  CHECK(sl::detail::thread_count_hint(INT64_MAX, 1) == 2);
  std::atomic<int> calls{0};
  std::atomic<int64_t> covered{0};
  parallel_for(0, 1000, INT64_MAX, [&](int64_t b, int64_t e) {
    calls.fetch_add(1);
    covered.fetch_add(e - b);
  });
  CHECK(calls.load() == 1);
  CHECK(covered.load() == 1000);
  // the integer remainder's scan for zero divisors is such a loop
  Tensor a = arange(1, 1001, 1, {.dtype = DType::i64});
  Tensor r = ops::binary(BinaryOp::remainder, a, full({1000}, 7, {.dtype = DType::i64}));
  CHECK(r.select(0, 9).item<int64_t>() == 10 % 7);
}

TEST_CASE("parallel: set_num_threads rejects counts below 1") {
  ThreadsGuard guard;
  SL_CHECK_THROWS(set_num_threads(0), ValueError, "set_num_threads: expected a thread count >= 1");
}

TEST_CASE("parallel: parallel_reduce splits into the same blocks whatever the thread count") {
  ThreadsGuard guard;
  // Values of very different magnitudes, so that a different summation order changes the bits.
  std::vector<float> v(200003);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = static_cast<float>((i % 7 == 0 ? 1e7 : 1.0) * (i % 2 ? 1.0 : -0.999) + 0.1 * i);
  }
  auto run = [&] {
    return parallel_reduce<float>(
        0, static_cast<int64_t>(v.size()), 1000, 0.0f,
        [&](int64_t b, int64_t e) {
          float s = 0;
          for (int64_t i = b; i < e; ++i) s += v[static_cast<size_t>(i)];
          return s;
        },
        [](float a, float b) { return a + b; });
  };
  set_num_threads(1);
  const float one = run();
  for (int threads : {2, 3, 4}) {
    set_num_threads(threads);
    float r = run();
    CHECK_MESSAGE(std::memcmp(&r, &one, sizeof r) == 0, "threads=", threads, ": ", r, " vs ", one);
  }
}

TEST_CASE("parallel: kernels give identical bits with 1, 2 and 3 threads") {
  ThreadsGuard guard;
  Generator gen(1234);
  Tensor x = randn({300, 700}, {}, &gen);
  Tensor w = randn({700, 2200}, {}, &gen);  // [300, 2200]: one column band per hardware thread
  Tensor big = randn({1 << 18}, {}, &gen);
  auto compute = [&] {
    return std::vector<Tensor>{
        big.sum(),          // one output: parallel over the reduced dim
        x.sum({0}),         // many outputs
        x.var({1}),         //
        x.logsumexp({1}),   //
        x.matmul(w),        // BLAS tiles fixed by the shape (Note [Deterministic BLAS tiles])
        x.gelu(),           // elementwise
        (x * 3 + x.exp()),  // broadcast binary ops
    };
  };
  set_num_threads(1);
  std::vector<Tensor> ref = compute();
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    for (int rep = 0; rep < 2; ++rep) {  // and the same bits on a second run
      std::vector<Tensor> got = compute();
      for (size_t i = 0; i < ref.size(); ++i) {
        CHECK_MESSAGE(same_bits(got[i], ref[i]), "result ", i, " threads=", threads);
      }
    }
  }
}

TEST_CASE("parallel: matmul row bands joined into one call at 1 thread give the 2-thread bits") {
  // Note [One call for row bands] (core/cpu/matmul.cpp): at 1 thread these products run as one
  // BLAS call where 2+ threads run one call per row band; both must give the same bits, for
  // float and double and with either operand transposed (the BLAS sees the transpose flags).
  ThreadsGuard guard;
  Generator gen(77);
  std::vector<std::pair<Tensor, Tensor>> cases;
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor a = randn({601, 900}, {.dtype = dt}, &gen);  // 601 rows: bands of 312 and 289
    Tensor b = randn({900, 500}, {.dtype = dt}, &gen);
    Tensor at = randn({900, 601}, {.dtype = dt}, &gen).t();
    Tensor bt = randn({500, 900}, {.dtype = dt}, &gen).t();
    cases.push_back({a, b});
    cases.push_back({at, b});
    cases.push_back({a, bt});
    cases.push_back({at, bt});
  }
  auto compute = [&] {
    std::vector<Tensor> r;
    for (auto& [a, b] : cases) r.push_back(a.matmul(b));
    return r;
  };
  set_num_threads(1);
  std::vector<Tensor> one = compute();
  set_num_threads(2);
  std::vector<Tensor> two = compute();
  for (size_t i = 0; i < one.size(); ++i) {
    CHECK_MESSAGE(same_bits(one[i], two[i]), "case ", i);
    // and both are the product: against a float64 reference (f32 sums of 900 terms of size ~1:
    // rounding error well below 1e-3)
    SL_CHECK_CLOSE(one[i].to(DType::f64),
                   cases[i].first.to(DType::f64).matmul(cases[i].second.to(DType::f64)), 1e-4,
                   1e-3);
  }
}

// Single-process tests of the process-group layer: the single-rank group, argument checks,
// Work timeouts, run_with_timeout, the debug fingerprint and launcher detection.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include "../support/testing.h"
#include "dist/comm_thread.h"
#include "dist/debug.h"
#include "dist/process_group.h"

using namespace sl;
using namespace sl::dist;

TEST_CASE("single group: collectives complete at once with one-rank semantics") {
  auto pg = make_single_group();
  CHECK(pg->rank() == 0);
  CHECK(pg->size() == 1);
  Tensor t = tensor({1.f, 2.f, 3.f});
  auto w = pg->allreduce(t, ReduceOp::avg);
  CHECK(w->is_completed());
  w->wait();
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3});
  Tensor out = zeros({3});
  pg->reduce_scatter(out, t)->wait();
  CHECK(out.to_vector<float>() == std::vector<float>{1, 2, 3});
  Tensor g = zeros({3});
  pg->allgather(g, tensor({4.f, 5.f, 6.f}))->wait();
  CHECK(g.to_vector<float>() == std::vector<float>{4, 5, 6});
  pg->allgather(g, g)->wait();  // in place
  CHECK(g.to_vector<float>() == std::vector<float>{4, 5, 6});
  pg->broadcast(t, 0)->wait();
  pg->barrier()->wait();
  CHECK(pg->stats().total().calls == 6);
  CHECK(pg->stats().total().sent_bytes == 0);  // nothing leaves a single rank
  CHECK(pg->next_seq() == 6);
}

TEST_CASE("collective argument errors") {
  auto pg = make_single_group();
  SL_CHECK_THROWS(pg->allreduce(Tensor()), ValueError, "allreduce: tensor is an undefined tensor");
  SL_CHECK_THROWS(pg->allreduce(zeros({3, 4}).t()), ValueError,
                  "allreduce: tensor must be contiguous");
  SL_CHECK_THROWS(pg->allreduce(zeros({3}, {.dtype = DType::i64}), ReduceOp::avg), DTypeError,
                  "allreduce: avg needs a floating dtype, got int64");
  SL_CHECK_THROWS(pg->reduce_scatter(zeros({2}), zeros({3})), ShapeError,
                  "reduce_scatter: input has 3 elements, expected output's 2 x 1 ranks = 2");
  SL_CHECK_THROWS(pg->reduce_scatter(zeros({3}), zeros({3}, {.dtype = DType::f64})), DTypeError,
                  "reduce_scatter: output is float32 but input is float64");
  SL_CHECK_THROWS(pg->allgather(zeros({4}), zeros({3})), ShapeError,
                  "allgather: output has 4 elements, expected input's 3 x 1 ranks = 3");
  SL_CHECK_THROWS(pg->broadcast(zeros({3}), 1), IndexError,
                  "broadcast: root 1 is not a rank in [0, 1)");
  SL_CHECK_THROWS(make_nccl_group(pg, Device("cpu")), DeviceError, "make_nccl_group");
}

TEST_CASE("Work: wait times out with a DistError naming the collective; callbacks run once") {
  Work w("allreduce #7 (sum, float32 x 10)", std::chrono::milliseconds(50));
  CHECK(!w.is_completed());
  SL_CHECK_THROWS(w.wait(), DistError,
                  "allreduce #7 (sum, float32 x 10): did not complete within 0.05 s");
  int calls = 0;
  w.on_complete([&] { ++calls; });
  std::thread t([&] { w.complete(); });
  w.wait(std::chrono::milliseconds(5000));
  t.join();
  w.complete();  // idempotent
  CHECK(calls == 1);
  CHECK(w.is_success());
  w.on_complete([&] { ++calls; });  // already complete: runs at once
  CHECK(calls == 2);

  Work failed("barrier #1", std::chrono::milliseconds(1000));
  failed.complete(std::make_exception_ptr(DistError("barrier #1: peer lost")));
  SL_CHECK_THROWS(failed.wait(), DistError, "peer lost");
  CHECK(!failed.is_success());
}

TEST_CASE("Work: the after-wait step runs on the waiting thread after each successful wait") {
  // The NCCL backend makes the waiter's compute stream wait for the collective here.
  Work w("allreduce #3 (sum, float32 x 4)", std::chrono::milliseconds(5000));
  std::atomic<int> steps{0};
  std::thread::id ran_on;
  w.set_after_wait([&] {
    ran_on = std::this_thread::get_id();
    ++steps;
  });
  std::thread t([&] { w.complete(); });
  t.join();
  CHECK(steps == 0);  // completing does not run it
  w.wait();
  CHECK(steps == 1);
  CHECK(ran_on == std::this_thread::get_id());
  w.wait();  // every wait orders the waiter again
  CHECK(steps == 2);

  Work failed("broadcast #4 (float32 x 4)", std::chrono::milliseconds(1000));
  failed.set_after_wait([&] { ++steps; });
  failed.complete(std::make_exception_ptr(DistError("broadcast #4: peer lost")));
  SL_CHECK_THROWS(failed.wait(), DistError, "peer lost");
  CHECK(steps == 2);  // not after a failed collective

  Work throwing("barrier #5", std::chrono::milliseconds(1000));
  throwing.set_after_wait([] { throw DistError("barrier #5: stream wait failed"); });
  throwing.complete();
  SL_CHECK_THROWS(throwing.wait(), DistError, "stream wait failed");
}

TEST_CASE("Work: wait_stream orders the stream without a host wait where the backend can") {
  using namespace std::chrono_literals;
  // with a stream step (NCCL): it runs at once, before the collective finished
  Work pending("allgather #6 (float64 x 9)", 5000ms);
  std::atomic<int> steps{0};
  pending.set_after_wait([&] { ++steps; });
  pending.wait_stream();
  CHECK(steps == 1);
  CHECK_FALSE(pending.is_completed());
  pending.complete();
  // a failure already known is thrown, and the step does not run
  Work failed("allreduce #7 (float64 x 4)", 5000ms);
  failed.set_after_wait([&] { ++steps; });
  failed.complete(std::make_exception_ptr(DistError("allreduce #7: peer lost")));
  SL_CHECK_THROWS(failed.wait_stream(), DistError, "peer lost");
  CHECK(steps == 1);
  // without one (host collectives) it is wait(): it blocks until done, then times out
  Work host("allgather #8 (float64 x 9)", 50ms);
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    host.complete();
  });
  host.wait_stream();
  CHECK(host.is_completed());
  t.join();
  Work lost("allgather #9 (float64 x 9)", 20ms);
  SL_CHECK_THROWS(lost.wait_stream(), DistError, "allgather #9");
}

TEST_CASE("run_with_timeout: returns, rethrows, or gives up on a blocked call with a DistError") {
  using namespace std::chrono_literals;
  auto result = std::make_shared<int>(0);
  run_with_timeout("init", 5s, "hint", [result] { *result = 42; });
  CHECK(*result == 42);
  SL_CHECK_THROWS(
      run_with_timeout("init", 5s, "hint", [] { detail::throw_error<DeviceError>("no such GPU"); }),
      DeviceError, "no such GPU");
  // A call that blocks until released: the caller gets the error after the timeout, not a
  // hang; the call finishes later on its own thread, which owns what it uses.
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto finished = std::make_shared<std::atomic<bool>>(false);
  auto t0 = std::chrono::steady_clock::now();
  SL_CHECK_THROWS(run_with_timeout("rank 1/2 make_nccl_group: ncclCommInitRank on cuda:0", 200ms,
                                   "a peer rank may have died",
                                   [release, finished] {
                                     while (!release->load()) std::this_thread::sleep_for(1ms);
                                     finished->store(true);
                                   }),
                  DistError,
                  "rank 1/2 make_nccl_group: ncclCommInitRank on cuda:0: did not finish within "
                  "0.2 s; a peer rank may have died");
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(waited >= 0.2);
  CHECK(waited < 30.0);  // the timeout, not the call, ended the wait (a loaded machine is slow)
  CHECK(!finished->load());
  release->store(true);
  for (int i = 0; i < 10000 && !finished->load(); ++i) std::this_thread::sleep_for(1ms);
  CHECK(finished->load());
}

TEST_CASE("CommThread runs tasks in posting order and rethrows from run_sync") {
  CommThread th;
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) th.post([&order, i] { order.push_back(i); });
  th.run_sync([] {});
  std::vector<int> want(50);
  for (int i = 0; i < 50; ++i) want[static_cast<size_t>(i)] = i;
  CHECK(order == want);
  CHECK_THROWS_AS(th.run_sync([] { throw DistError("boom"); }), DistError);
  th.stop();
  CHECK(!th.post([] {}));
}

TEST_CASE("debug fingerprints: round trip and mismatch description") {
  Collective a{CollectiveKind::allreduce, ReduceOp::sum, DType::f32, 10, 0, 5};
  Collective b{CollectiveKind::allgather, ReduceOp::sum, DType::bf16, 4, 0, 5};
  CHECK(from_fingerprint(fingerprint(a)).same_call(a));
  CHECK(from_fingerprint(fingerprint(b)).same_call(b));
  CHECK(a.str() == "allreduce #5 (sum, float32 x 10)");
  CHECK(b.str() == "allgather #5 (bfloat16 x 4)");
  CHECK(describe_mismatch({fingerprint(a), fingerprint(a), fingerprint(a)}, 1).empty());
  std::string m = describe_mismatch({fingerprint(a), fingerprint(b), fingerprint(a)}, 2);
  CHECK(m.find("rank 2/3: the ranks issued different collectives at #5") == 0);
  CHECK(m.find("rank 0: allreduce #5 (sum, float32 x 10); rank 1: allgather #5 (bfloat16 x 4)") !=
        std::string::npos);
  Fingerprint junk{99, 0, 0, 0, 0, 0};
  CHECK(describe_mismatch({fingerprint(a), junk}, 0).find("rank 1: <unreadable>") !=
        std::string::npos);
}

TEST_CASE("detect_launch: no launcher variables means one rank") {
  // The suite itself is not started by mpirun.
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK")) {
    sl::testing::report_skip("detect_launch", "the test binary itself runs under a launcher");
    return;
  }
  LaunchInfo li = detect_launch();
  CHECK(!li.launched);
  CHECK(li.size == 1);
}

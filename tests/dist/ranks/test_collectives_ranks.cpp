// Runs on every rank under mpirun (launched by tests/dist/test_dist_launch.cpp). Each case issues
// the same collectives on every rank; expected values are closed forms of the rank numbers.
#include <chrono>
#include <thread>

#include "../../support/testing.h"
#include "dist/process_group.h"

using namespace sl;
using namespace sl::dist;

namespace {

/// Rank r's contribution: element i is (r + 1) * (i + 1) (fits f16/bf16 exactly for small n).
Tensor rank_values(int r, int64_t n, DType dt) {
  return (arange(n).to(DType::f64).add(1.0) * double(r + 1)).to(dt);
}

}  // namespace

TEST_CASE("world: rank and size come from the launcher") {
  auto pg = world();
  LaunchInfo li = detect_launch();
  REQUIRE(li.launched);
  CHECK(std::string(pg->backend()) == "mpi");
  CHECK(pg->rank() == li.rank);
  CHECK(pg->size() == li.size);
}

TEST_CASE("allreduce sum, avg and max for every dtype") {
  auto pg = world();
  int n = pg->size(), r = pg->rank();
  const int64_t len = 7;
  double tri = n * (n + 1) / 2.0;  // sum over ranks of (rank + 1)
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32}) {
    CAPTURE(dtype_name(dt));
    Tensor t = rank_values(r, len, dt);
    pg->allreduce(t, ReduceOp::sum)->wait();
    Tensor want = (arange(len).to(DType::f64).add(1.0) * tri).to(dt);
    SL_CHECK_CLOSE(t, want, 0, 0);  // small integers: exact in every dtype

    t = rank_values(r, len, dt);
    pg->allreduce(t, ReduceOp::max)->wait();
    SL_CHECK_CLOSE(t, rank_values(n - 1, len, dt), 0, 0);
    if (is_floating(dt)) {
      t = rank_values(r, len, dt);
      pg->allreduce(t, ReduceOp::avg)->wait();
      // (i+1) * tri / n: a division, exact in f32/f64; f16/bf16 round to their 11/8-bit mantissa
      double tol = dt == DType::bf16 ? 8e-3 : (dt == DType::f16 ? 1e-3 : 1e-7);
      SL_CHECK_CLOSE(t.to(DType::f64), (arange(len).to(DType::f64).add(1.0) * (tri / n)), tol, 0);
    }
  }
  Tensor b = full({3}, r == 0 ? 1 : 0, {.dtype = DType::b8});
  pg->allreduce(b, ReduceOp::sum)->wait();
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, true, true});
}

TEST_CASE("reduce_scatter and allgather, in place and not") {
  auto pg = world();
  int n = pg->size(), r = pg->rank();
  const int64_t shard = 5;
  Tensor in = rank_values(r, shard * n, DType::f32);
  Tensor out = zeros({shard});
  pg->reduce_scatter(out, in)->wait();
  double tri = n * (n + 1) / 2.0;
  Tensor full_sum = arange(shard * n).to(DType::f64).add(1.0) * tri;
  SL_CHECK_CLOSE(out, full_sum.narrow(0, r * shard, shard).to(DType::f32), 0, 0);

  Tensor gathered = zeros({n * shard}, {.dtype = DType::f64});
  Tensor mine = full({shard}, double(r), {.dtype = DType::f64});
  pg->allgather(gathered, mine)->wait();
  Tensor want = arange(n).to(DType::f64).unsqueeze(1).expand({n, shard}).reshape({n * shard});
  SL_CHECK_CLOSE(gathered, want, 0, 0);

  Tensor buf = zeros({n * shard}, {.dtype = DType::f64});
  Tensor own = buf.narrow(0, r * shard, shard);
  own.fill_(double(r));
  pg->allgather(buf, own)->wait();  // in place: own is this rank's shard of buf
  SL_CHECK_CLOSE(buf, want, 0, 0);
}

TEST_CASE("broadcast from every root; barrier") {
  auto pg = world();
  for (int root = 0; root < pg->size(); ++root) {
    Tensor t = full({4}, double(pg->rank() * 10), {.dtype = DType::i64});
    pg->broadcast(t, root)->wait();
    CHECK(t.to_vector<int64_t>() == std::vector<int64_t>(4, root * 10));
  }
  pg->barrier()->wait();
}

TEST_CASE("collectives are asynchronous and complete in issue order without wait()") {
  auto pg = world();
  // Several collectives in flight at once; the communication thread completes them in order
  // while this thread does something else (no MPI call is made from here).
  std::vector<Tensor> ts;
  std::vector<WorkPtr> works;
  for (int i = 0; i < 4; ++i) {
    ts.push_back(full({1000}, double(i + 1)));
    works.push_back(pg->allreduce(ts.back()));
  }
  auto t0 = std::chrono::steady_clock::now();
  while (!works.back()->is_completed() &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(works.back()->is_completed());
  for (int i = 0; i < 4; ++i) {
    CHECK(works[static_cast<size_t>(i)]->is_completed());  // earlier ones finished first
    works[static_cast<size_t>(i)]->wait();
    CHECK(ts[static_cast<size_t>(i)].to_vector<float>()[999] == float((i + 1) * pg->size()));
  }
}

TEST_CASE("stats count calls and ring-model bytes") {
  auto pg = world();
  int n = pg->size();
  pg->reset_stats();
  Tensor t = zeros({100});
  pg->allreduce(t)->wait();
  Tensor out = zeros({10});
  Tensor in = zeros({10 * n});
  pg->reduce_scatter(out, in)->wait();
  CommStats s = pg->stats();
  CHECK(s[CollectiveKind::allreduce].calls == 1);
  CHECK(s[CollectiveKind::allreduce].payload_bytes == 400);
  CHECK(s[CollectiveKind::allreduce].sent_bytes == 2 * (n - 1) * 400 / n);
  CHECK(s[CollectiveKind::reduce_scatter].sent_bytes == (n - 1) * 40);
  CHECK(s.total().calls == 2);
}

TEST_CASE("SL_DIST_DEBUG: ranks that disagree get a DistError naming each rank's collective") {
  auto pg = world();
  if (!pg->options().debug) {
    sl::testing::report_skip("debug mismatch", "SL_DIST_DEBUG is not set for this run");
    return;
  }
  int r = pg->rank();
  Tensor t = zeros({10 + r});  // every rank a different count
  auto w = pg->allreduce(t);
  SL_CHECK_THROWS(w->wait(), DistError, "the ranks issued different collectives");
  try {
    w->wait();
  } catch (const DistError& e) {
    CHECK(std::string(e.what()).find("rank 1: allreduce") != std::string::npos);
  }
  // The mismatched collective was not run, so the group is still usable.
  Tensor u = ones({3});
  pg->allreduce(u)->wait();
  CHECK(u.to_vector<float>()[0] == float(pg->size()));
}

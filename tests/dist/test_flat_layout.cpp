// FlatLayout (Note [Flat buffer layout]): hand-worked small layouts, plus an element-by-element
// oracle that checks, for many random layouts, that every parameter element has exactly one
// owner and that pieces, shard offsets and owner_of agree with each other.
#include <map>
#include <random>

#include "../support/testing.h"
#include "dist/flat_layout.h"

using namespace sl;
using namespace sl::dist;

namespace {

/// Checks every invariant of the layout element by element (independent of pieces_in_bucket's
/// interval arithmetic: ownership is derived from the flat offset of each single element).
void check_invariants(const FlatLayout& L) {
  const int n = L.world_size();
  // buckets tile each group's buffer, padded to multiples of n
  for (size_t gi = 0; gi < L.groups().size(); ++gi) {
    const FlatGroup& g = L.groups()[gi];
    int64_t off = 0, shard_off = 0;
    for (int b : g.buckets) {
      const Bucket& bk = L.buckets()[static_cast<size_t>(b)];
      CHECK(bk.offset == off);
      CHECK(bk.shard_offset == shard_off);
      CHECK(bk.padded_numel % n == 0);
      CHECK(bk.padded_numel - bk.numel < n);
      CHECK(bk.shard_numel * n == bk.padded_numel);
      off += bk.padded_numel;
      shard_off += bk.shard_numel;
    }
    CHECK(g.numel == off);
    CHECK(g.shard_numel * n == g.numel);
  }
  // element oracle: owner and shard offset of every parameter element
  std::map<std::tuple<int, int64_t>, std::pair<int, int64_t>> want;  // (param, i) -> (rank, soff)
  for (size_t p = 0; p < L.params().size(); ++p) {
    const ParamSlot& s = L.slots()[p];
    const Bucket& b = L.buckets()[static_cast<size_t>(s.bucket)];
    CHECK(L.params()[p].dtype == L.groups()[static_cast<size_t>(s.group)].dtype);
    for (int64_t i = 0; i < s.numel; ++i) {
      int64_t flat = s.offset + i;
      REQUIRE(flat >= b.offset);
      REQUIRE(flat < b.offset + b.numel);
      int rank = static_cast<int>((flat - b.offset) / b.shard_numel);
      int64_t soff = b.shard_offset + (flat - b.offset) % b.shard_numel;
      want[{static_cast<int>(p), i}] = {rank, soff};
      CHECK(L.owner_of(s.group, flat) == std::make_pair(rank, soff));
    }
  }
  std::map<std::tuple<int, int64_t>, std::pair<int, int64_t>> got;
  for (const Piece& pc : L.all_pieces()) {
    CHECK(pc.numel() > 0);
    for (int64_t i = pc.param_begin; i < pc.param_end; ++i) {
      auto key = std::make_tuple(pc.param, i);
      CHECK(got.count(key) == 0);  // owned once
      got[key] = {pc.rank, pc.shard_offset + (i - pc.param_begin)};
      CHECK(pc.flat_offset + (i - pc.param_begin) ==
            L.slots()[static_cast<size_t>(pc.param)].offset + i);
    }
  }
  CHECK(got == want);
  // pieces_of_param covers the parameter in element order
  for (size_t p = 0; p < L.params().size(); ++p) {
    int64_t next = 0;
    for (const Piece& pc : L.pieces_of_param(static_cast<int>(p))) {
      CHECK(pc.param_begin == next);
      next = pc.param_end;
    }
    CHECK(next == L.params()[p].numel);
  }
  // each rank's pieces fit in its shard, in increasing shard order
  for (int r = 0; r < n; ++r) {
    std::vector<int64_t> last(L.groups().size(), 0);
    for (const Piece& pc : L.pieces_of_rank(r)) {
      CHECK(pc.rank == r);
      CHECK(pc.shard_offset >= last[static_cast<size_t>(pc.group)]);
      last[static_cast<size_t>(pc.group)] = pc.shard_offset + pc.numel();
      CHECK(last[static_cast<size_t>(pc.group)] <=
            L.groups()[static_cast<size_t>(pc.group)].shard_numel);
    }
  }
}

}  // namespace

TEST_CASE("flat layout: one bucket, reverse order, padding to the world size") {
  // sizes 3, 1, 5 (f32), N = 2: flat order p2 p1 p0 at offsets 0, 5, 6; 9 elements pad to 10.
  FlatLayout L({{3, DType::f32}, {1, DType::f32}, {5, DType::f32}}, 2);
  REQUIRE(L.groups().size() == 1);
  REQUIRE(L.buckets().size() == 1);
  CHECK(L.slots()[2].offset == 0);
  CHECK(L.slots()[1].offset == 5);
  CHECK(L.slots()[0].offset == 6);
  CHECK(L.groups()[0].numel == 10);
  CHECK(L.groups()[0].shard_numel == 5);
  // rank 0 owns flat [0, 5) = all of p2; rank 1 owns [5, 10) = p1, p0 and one pad element
  CHECK(L.pieces_of_rank(0) == std::vector<Piece>{{2, 0, 0, 0, 0, 5, 0, 0}});
  CHECK(L.pieces_of_rank(1) ==
        std::vector<Piece>{{1, 1, 0, 0, 0, 1, 5, 0}, {0, 1, 0, 0, 0, 3, 6, 1}});
  check_invariants(L);
}

TEST_CASE("flat layout: a parameter smaller than the world size") {
  FlatLayout L({{1, DType::f32}, {2, DType::f32}}, 3);  // flat: p1 (2), p0 (1) -> exactly 3
  CHECK(L.groups()[0].numel == 3);
  CHECK(L.pieces_of_param(1).size() == 2);  // split between ranks 0 and 1
  CHECK(L.pieces_of_param(0) == std::vector<Piece>{{0, 2, 0, 0, 0, 1, 2, 2 - 2}});
  FlatLayout tiny({{1, DType::f32}}, 4);  // one element, 3 ranks own only padding
  CHECK(tiny.groups()[0].numel == 4);
  CHECK(tiny.pieces_of_rank(0).size() == 1);
  for (int r = 1; r < 4; ++r) CHECK(tiny.pieces_of_rank(r).empty());
  check_invariants(L);
  check_invariants(tiny);
}

TEST_CASE("flat layout: buckets close at the cap, never split a parameter") {
  // f32, cap 16 bytes = 4 elements. Flat order p4 p3 p2 p1 p0:
  // p4 (5) crosses the cap alone; p3+p2 (4) reach it; p1+p0 (4) reach it.
  FlatLayout L(
      {{2, DType::f32}, {2, DType::f32}, {2, DType::f32}, {2, DType::f32}, {5, DType::f32}}, 3, 16);
  REQUIRE(L.buckets().size() == 3);
  CHECK(L.buckets()[0].params == std::vector<int>{4});
  CHECK(L.buckets()[1].params == std::vector<int>{3, 2});
  CHECK(L.buckets()[2].params == std::vector<int>{1, 0});
  CHECK(L.buckets()[0].padded_numel == 6);
  CHECK(L.buckets()[1].offset == 6);
  CHECK(L.buckets()[1].padded_numel == 6);
  CHECK(L.buckets()[2].shard_offset == 4);
  check_invariants(L);
}

TEST_CASE("flat layout: mixed dtypes get one group each") {
  FlatLayout L({{4, DType::f32}, {3, DType::f64}, {2, DType::f32}, {5, DType::bf16}}, 2);
  REQUIRE(L.groups().size() == 3);
  CHECK(L.groups()[0].dtype == DType::f32);
  CHECK(L.groups()[0].params == std::vector<int>{2, 0});
  CHECK(L.groups()[1].dtype == DType::f64);
  CHECK(L.groups()[1].numel == 4);
  CHECK(L.groups()[2].dtype == DType::bf16);
  CHECK(L.slots()[3].group == 2);
  check_invariants(L);
  // the cap is in bytes, so an f64 bucket holds half as many elements as an f32 one
  FlatLayout M({{2, DType::f64}, {2, DType::f64}, {2, DType::f32}, {2, DType::f32}}, 1, 16);
  CHECK(M.buckets().size() == 3);  // f64: [p1], [p0]; f32: [p3, p2]
}

TEST_CASE("flat layout: random layouts at world sizes 1..5 satisfy every invariant") {
  std::mt19937 rng(1234);
  const DType dts[] = {DType::f32, DType::f64, DType::bf16};
  for (int trial = 0; trial < 40; ++trial) {
    int np = 1 + static_cast<int>(rng() % 7);
    std::vector<ParamSpec> ps;
    for (int i = 0; i < np; ++i) {
      ps.push_back({static_cast<int64_t>(rng() % 13), dts[rng() % (trial % 2 ? 3 : 1)]});
    }
    int n = 1 + trial % 5;
    int64_t cap = 4 + static_cast<int64_t>(rng() % 40);
    CAPTURE(trial);
    FlatLayout L(ps, n, cap);
    check_invariants(L);
  }
}

TEST_CASE("flat layout: the pieces' parameter ranges describe ownership independently of N") {
  // The same parameter elements, re-cut for 2 and 3 ranks, are each owned exactly once: the
  // property sharded checkpoints rely on to reshard N -> M.
  std::vector<ParamSpec> ps = {{7, DType::f32}, {1, DType::f32}, {10, DType::f32}};
  for (int n : {1, 2, 3, 4}) {
    FlatLayout L(ps, n);
    int64_t total = 0;
    for (const Piece& pc : L.all_pieces()) total += pc.numel();
    CHECK(total == 18);
  }
}

TEST_CASE("flat layout: each group's first bucket closes at the first cap") {
  // f32 parameters of 100, 100, 20 and 20 elements, laid out in reverse: p3, p2, p1, p0.
  const std::vector<ParamSpec> ps = {{100, DType::f32}, {100, DType::f32}, {20, DType::f32},
                                     {20, DType::f32},  {30, DType::f64},  {30, DType::f64}};
  auto params_of = [](const FlatLayout& L) {
    std::vector<std::vector<int>> out;
    for (const Bucket& b : L.buckets()) out.push_back(b.params);
    return out;
  };
  using V = std::vector<std::vector<int>>;
  // caps 800 bytes, first 100: p3 (80 B) stays open, p2 crosses 100 and closes it; p1 and p0
  // reach 800 B; in the f64 group p5 (240 B) alone crosses 100, p4 follows
  FlatLayout L(ps, 2, 800, 100);
  CHECK(L.first_bucket_cap_bytes() == 100);
  CHECK(params_of(L) == V{{3, 2}, {1, 0}, {5}, {4}});
  // no first cap, and a first cap above the cap: the cap alone
  CHECK(params_of(FlatLayout(ps, 2, 800)) == V{{3, 2, 1, 0}, {5, 4}});
  FlatLayout M(ps, 2, 800, 4000);
  CHECK(M.first_bucket_cap_bytes() == 800);
  CHECK(params_of(M) == V{{3, 2, 1, 0}, {5, 4}});
  // the pieces still cover every parameter exactly once
  int64_t total = 0;
  for (const Piece& pc : L.all_pieces()) total += pc.numel();
  CHECK(total == 300);
}

TEST_CASE("flat layout: errors") {
  SL_CHECK_THROWS(FlatLayout({{1, DType::f32}}, 0), ValueError,
                  "FlatLayout: world size must be >= 1, got 0");
  SL_CHECK_THROWS(FlatLayout({{-1, DType::f32}}, 1), ValueError,
                  "FlatLayout: parameter 0 has negative numel -1");
  SL_CHECK_THROWS(FlatLayout({{1, DType::f32}}, 1, 0), ValueError,
                  "FlatLayout: bucket_cap_bytes must be >= 1, got 0");
  SL_CHECK_THROWS(FlatLayout({{1, DType::f32}}, 1, 8, 0), ValueError,
                  "FlatLayout: first_bucket_cap_bytes must be >= 1, got 0");
  FlatLayout L({{3, DType::f32}}, 2);
  SL_CHECK_THROWS(L.pieces_of_rank(2), IndexError, "pieces_of_rank: rank 2 is not in [0, 2)");
  SL_CHECK_THROWS(L.owner_of(0, 4), IndexError,
                  "owner_of: offset 4 is outside group 0's 4 elements");
}

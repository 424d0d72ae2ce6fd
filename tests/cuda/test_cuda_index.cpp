// Checked and unchecked indexing (sl::cuda::set_checked_indexing, Note [Index checks] in
// core/ops/index.h, Note [Unchecked indexing] in core/cuda/index_error.h).
//
// Here on every machine: the switch, the CPU's checks (on in both modes), and the host half of
// the error record (message, report once, clear). With a GPU: both modes give the CPU's results
// for in-range indices (negative ones included: rejected in both); an out-of-range index in
// unchecked mode is thrown at the next synchronisation point, once, naming the op; and the kernels
// never touch memory outside their output (sentinels around it). The sorted path of the
// accumulating kernels (Note [Sorted index_add] in core/cuda/index_plan.h): its plan and run walk
// on every machine, its kernels against the CPU's bits and their guards with a GPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <random>

#include "core/cuda/index_error.h"
#include "core/cuda/index_plan.h"
#include "core/ops/index.h"
#include "cuda_testing.h"
#include "nn/loss.h"

using namespace sl;
using sl::testing::check_gpu_parity;
using sl::testing::kGPU;
namespace F = sl::nn::functional;

namespace {

/// Turns checked indexing off for its scope and back on after (also when a CHECK throws).
struct UncheckedIndexing {
  UncheckedIndexing() { cuda::set_checked_indexing(false); }
  ~UncheckedIndexing() { cuda::set_checked_indexing(true); }
  UncheckedIndexing(const UncheckedIndexing&) = delete;
  UncheckedIndexing& operator=(const UncheckedIndexing&) = delete;
};

Tensor i64s(std::vector<int64_t> v, Device d = kCPU) {
  return from_vector<int64_t>(v).to(d);
}

/// One call of every index op, with its index taken from `idx` (values in [0, 4) are in range:
/// every indexed dim has size 4); `d` is the device of every tensor.
struct IndexOpCase {
  const char* op;
  std::function<Tensor(const Tensor& idx, Device d)> run;
};

std::vector<IndexOpCase> index_op_cases() {
  // x [3, 4] and its source / weight tensors, the same values on every device
  auto x = [](Device d) { return arange(0, 12, 1, {.dtype = DType::f32}).view({3, 4}).to(d); };
  auto src = [](Device d) {
    return (arange(0, 9, 1, {.dtype = DType::f32}) + 100).view({3, 3}).to(d);
  };
  return {
      {"index_select", [=](const Tensor& i, Device d) { return index_select(x(d), 1, i); }},
      {"index_add", [=](const Tensor& i, Device d) { return index_add(x(d), 1, i, src(d), 2); }},
      {"gather",
       [=](const Tensor& i, Device d) {
         return gather(x(d), 1, i.view({1, 3}).expand({3, 3}));
       }},
      {"scatter",
       [=](const Tensor& i, Device d) {
         return scatter(x(d), 1, i.view({1, 3}).expand({3, 3}).contiguous(), src(d));
       }},
      {"scatter",
       [=](const Tensor& i, Device d) {
         return scatter(x(d), 1, i.view({1, 3}).expand({3, 3}).contiguous(), 7.5);
       }},
      {"scatter_add",
       [=](const Tensor& i, Device d) {
         return scatter_add(x(d), 1, i.view({1, 3}).expand({3, 3}).contiguous(), src(d));
       }},
      {"embedding",
       [=](const Tensor& i, Device d) {
         return embedding(x(d).t().contiguous(), i.view({3, 1}));
       }},
      {"one_hot", [=](const Tensor& i, Device) { return one_hot(i, 4); }},
  };
}

/// Values of magnitudes 2^-e .. 2^e with random signs (e = 12; 6 for the 16-bit types, whose
/// sums of ~100 such values must stay finite), integers in [-1000, 1000): float sums of them
/// round at almost every step, so adding in another order than the CPU's changes the bits.
/// Floating values require grad.
Tensor mixed_magnitudes(const Shape& s, DType dt) {
  if (!is_floating(dt)) return randint(-1000, 1000, s, {.dtype = dt});
  const int64_t e = (dt == DType::f16 || dt == DType::bf16) ? 6 : 12;
  // float64 values drawn in float64 (53-bit mantissas), so their sums depend on the order too
  const DType draw = dt == DType::f64 ? DType::f64 : DType::f32;
  Tensor scale = (randint(-e, e + 1, s, {.dtype = draw}) * std::log(2.0)).exp();
  return (randn(s, {.dtype = draw}) * scale).to(dt).requires_grad_();
}

/// The message of the exception fn throws ("" when it throws none).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

/// k indices in [0, n) (about k / n per target), with `bad` at positions 1, 98, 195, ... when
/// given.
std::vector<int64_t> repeated_targets(int64_t k, int64_t n, std::optional<int64_t> bad = {}) {
  std::mt19937_64 rng(1234);
  std::vector<int64_t> v(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    v[static_cast<size_t>(j)] = (bad && j % 97 == 1) ? *bad : static_cast<int64_t>(rng() % n);
  }
  return v;
}

}  // namespace

// ---- here on every machine ----------------------------------------------------------------

TEST_CASE("cuda indexing: the checked-indexing switch round-trips and decides host checks") {
  REQUIRE(cuda::checked_indexing());  // the default
  CHECK(ops::index_checks_on_host(kCPU));
  CHECK(ops::index_checks_on_host(Device(DeviceKind::cuda, 0)));
  {
    UncheckedIndexing off;
    CHECK(!cuda::checked_indexing());
    CHECK(ops::index_checks_on_host(kCPU));  // the CPU always checks
    CHECK(!ops::index_checks_on_host(Device(DeviceKind::cuda, 0)));
    CHECK(!ops::index_checks_on_host(Device(DeviceKind::cuda, 1)));
  }
  CHECK(cuda::checked_indexing());
  CHECK(ops::index_checks_on_host(Device(DeviceKind::cuda, 0)));
}

TEST_CASE("cuda indexing: CPU index tensors are checked at the op in both modes") {
  for (bool checked : {true, false}) {
    CAPTURE(checked);
    cuda::set_checked_indexing(checked);
    for (const IndexOpCase& c : index_op_cases()) {
      CAPTURE(c.op);
      CHECK(c.run(i64s({0, 3, 1}), kCPU).defined());
      SL_CHECK_THROWS(c.run(i64s({0, 4, 1}), kCPU), IndexError,
                      (std::string(c.op) + ": index 4 is out of range").c_str());
      // negative indices are rejected, not wrapped
      SL_CHECK_THROWS(c.run(i64s({0, -1, 1}), kCPU), IndexError,
                      (std::string(c.op) + ": index -1 is out of range").c_str());
    }
    Tensor logits = zeros({2, 4});
    SL_CHECK_THROWS(F::cross_entropy(logits, i64s({1, 4})), IndexError,
                    "cross_entropy: target 4 is out of bounds for 4 classes");
    // ignore_index is not an index
    CHECK(F::cross_entropy(logits, i64s({1, -100})).defined());
    // the dtype check is the same in both modes
    SL_CHECK_THROWS(index_select(zeros({4}), 0, ones({2})), DTypeError,
                    "index_select: index must be int64 or int32, got float32");
  }
  cuda::set_checked_indexing(true);
}

TEST_CASE("cuda indexing: an error record gives one IndexError naming the op, then is clear") {
  cuda::IndexErrorRecord r;
  CHECK(!cuda::take_index_error(r).has_value());  // nothing recorded: nothing to report
  r.op = "gather";
  r.index = 7;
  r.size = 5;
  CHECK(!cuda::take_index_error(r).has_value());  // fields without `set` are not an error
  CHECK(r.index == 7);                            // and are left as they are
  r.set = 1;
  std::optional<cuda::IndexErrorRecord> e = cuda::take_index_error(r);
  REQUIRE(e.has_value());
  CHECK(std::strcmp(e->op, "gather") == 0);
  CHECK(e->index == 7);
  CHECK(e->size == 5);
  // cleared: reported once
  CHECK(r.set == 0);
  CHECK(r.op == nullptr);
  CHECK(!cuda::take_index_error(r).has_value());

  const std::string msg = cuda::index_error_message(*e, 1);
  CHECK(msg.rfind("gather: index 7 is out of range (expected 0 <= index < 5)", 0) == 0);
  CHECK(msg.find("asynchronously") != std::string::npos);
  CHECK(msg.find("cuda:1") != std::string::npos);
  CHECK(msg.find("set_checked_indexing(false)") != std::string::npos);
  SL_CHECK_THROWS(cuda::throw_index_error(*e, 1), IndexError, msg.c_str());

  cuda::IndexErrorRecord neg{.set = 1, .op = "scatter_add", .index = -3, .size = 4};
  SL_CHECK_THROWS(cuda::throw_index_error(*cuda::take_index_error(neg), 0), IndexError,
                  "scatter_add: index -3 is out of range (expected 0 <= index < 4)");
}

TEST_CASE("cuda indexing: the sorted path's plan, and its runs add in the index's order") {
  // when the accumulating kernels sort (Note [Sorted index_add])
  CHECK(!cuda::sorted_accumulate(1, 255, 1));  // 36 launches cost more than 255 entries
  CHECK(cuda::sorted_accumulate(1, 1000, 1));
  CHECK(cuda::sorted_accumulate(768, 65536, 1));  // embedding backward: outer 1, inner D, k tokens
  CHECK(cuda::sorted_accumulate(cuda::kSortedMaxColumns - 1, 5000, 1));
  CHECK(!cuda::sorted_accumulate(cuda::kSortedMaxColumns, 5000, 1));
  CHECK(!cuda::sorted_accumulate(4096, 32, 1));
  CHECK(cuda::sorted_accumulate(1, int64_t{1} << 20, 1));  // a 1-d scatter_add
  // scatter sorts every line: many lines of a few hundred entries cost more to sort than to walk
  CHECK(!cuda::sorted_accumulate(60000, 256, 60000));
  CHECK(!cuda::sorted_accumulate(1024, 4096, 1024));
  CHECK(cuda::sorted_accumulate(16, 4096, 16));
  // the sort's scratch stays under ~4 GiB: 2^27 entries at most
  CHECK(cuda::sorted_accumulate(1, int64_t{1} << 27, 1));
  CHECK(!cuda::sorted_accumulate(1, (int64_t{1} << 27) + 1, 1));
  CHECK(!cuda::sorted_accumulate(2, int64_t{1} << 27, 2));
  CHECK(!cuda::sorted_accumulate(1, 1, 1));
  // the shapes of the GPU cases below take the sorted path
  CHECK(cuda::sorted_accumulate(64, 5000, 1));
  CHECK(cuda::sorted_accumulate(60, 1000, 1));
  CHECK(cuda::sorted_accumulate(1, 5000, 1));
  CHECK(cuda::sorted_accumulate(7, 3000, 7));
  CHECK(cuda::sorted_accumulate(4, 3000, 4));

  // The kernels' run walk on the host: a stable sort of the index (positions as the tie-break,
  // as launch_sort orders), laid out `stride` apart as one line of scatter's [before, len,
  // after] index, cut into runs; walking each run adds into its target in the order of the plain
  // loop over j, so the float sums are the same bits, and a run's last position is the last j.
  const int64_t k = 3000, n = 40, stride = 3;
  const std::vector<int64_t> index = repeated_targets(k, n);
  std::mt19937 rng(99);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> expo(-12, 12);
  std::vector<float> src(static_cast<size_t>(k));
  for (float& x : src) x = std::ldexp(normal(rng), expo(rng));
  const float alpha = 0.3f;
  std::vector<float> want(n, 1.0f), got(n, 1.0f), reversed(n, 1.0f);
  std::vector<int64_t> last(n, -1);
  for (int64_t j = 0; j < k; ++j) {
    const int64_t t = index[static_cast<size_t>(j)];
    want[t] = want[t] + alpha * src[static_cast<size_t>(j)];
    last[t] = j;
  }
  for (int64_t j = k - 1; j >= 0; --j) {
    const int64_t t = index[static_cast<size_t>(j)];
    reversed[t] = reversed[t] + alpha * src[static_cast<size_t>(j)];
  }
  // the sums depend on the order (else this case would show nothing)
  REQUIRE(std::memcmp(want.data(), reversed.data(), want.size() * sizeof(float)) != 0);

  std::vector<int64_t> perm(static_cast<size_t>(k));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
    return index[static_cast<size_t>(a)] < index[static_cast<size_t>(b)];
  });
  std::vector<int64_t> sorted(static_cast<size_t>(k * stride), -7), pos(sorted.size(), -7);
  for (int64_t r = 0; r < k; ++r) {
    sorted[static_cast<size_t>(r * stride)] = index[static_cast<size_t>(perm[r])];
    pos[static_cast<size_t>(r * stride)] = perm[static_cast<size_t>(r)];
  }
  int64_t runs = 0, walked = 0, out_of_order = 0, wrong_last = 0;
  for (int64_t p = 0; p < k; ++p) {
    if (!cuda::run_starts(sorted.data(), stride, p)) continue;
    ++runs;
    const int64_t t = sorted[static_cast<size_t>(p * stride)];
    float y = got[t];
    int64_t prev = -1;
    cuda::walk_run(sorted.data(), pos.data(), stride, k, p, [&](int64_t j) {
      out_of_order += j <= prev || index[static_cast<size_t>(j)] != t ? 1 : 0;
      prev = j;
      ++walked;
      y = y + alpha * src[static_cast<size_t>(j)];
    });
    got[t] = y;
    wrong_last += cuda::run_last(sorted.data(), pos.data(), stride, k, p) != last[t] ? 1 : 0;
  }
  CHECK(runs == n);  // every target occurs (k / n = 75 entries each on average)
  CHECK(walked == k);
  CHECK(out_of_order == 0);
  CHECK(wrong_last == 0);
  CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
}

// ---- with a GPU ---------------------------------------------------------------------------

TEST_CASE("cuda indexing: unchecked and checked modes give the CPU's results" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("unchecked indexing parity");
  for (bool checked : {true, false}) {
    CAPTURE(checked);
    cuda::set_checked_indexing(checked);
    for (const IndexOpCase& c : index_op_cases()) {
      CAPTURE(c.op);
      for (const std::vector<int64_t>& v :
           {std::vector<int64_t>{0, 3, 1}, std::vector<int64_t>{3, 3, 3},
            std::vector<int64_t>{2, 0, 2}}) {
        Tensor want = c.run(i64s(v), kCPU);
        SL_CHECK_CLOSE(c.run(i64s(v, kGPU), kGPU).cpu(), want, 0, 0);
        // int32 indices are widened in both modes
        SL_CHECK_CLOSE(c.run(i64s(v, kGPU).to(DType::i32), kGPU).cpu(), want, 0, 0);
      }
    }
    // the composite users of the index family
    Tensor logits = randn({5, 4});
    Tensor tgt = i64s({3, 0, -100, 2, 1});
    SL_CHECK_CLOSE(F::cross_entropy(logits.to(kGPU), tgt.to(kGPU)).cpu(),
                   F::cross_entropy(logits, tgt), 1e-6, 1e-6);
    Tensor w = randn({4, 3}).requires_grad_();
    Tensor wg = w.detach().to(kGPU).requires_grad_();
    Tensor ids = i64s({1, 3, 1, 0});
    embedding(w, ids, 1).sum().backward();
    embedding(wg, ids.to(kGPU), 1).sum().backward();
    SL_CHECK_CLOSE(wg.grad().cpu(), w.grad(), 0, 0);
    Tensor m = randn({6}).gt(0);
    Tensor xs = randn({6});
    SL_CHECK_CLOSE(masked_select(xs.to(kGPU), m.to(kGPU)).cpu(), masked_select(xs, m), 0, 0);
    cuda::synchronize();  // nothing recorded
  }
  cuda::set_checked_indexing(true);
}

TEST_CASE("cuda indexing: checked mode throws at the op, as before" * sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("checked indexing");
  REQUIRE(cuda::checked_indexing());
  for (const IndexOpCase& c : index_op_cases()) {
    CAPTURE(c.op);
    SL_CHECK_THROWS(c.run(i64s({0, 4, 1}, kGPU), kGPU), IndexError,
                    (std::string(c.op) + ": index 4 is out of range for").c_str());
    SL_CHECK_THROWS(c.run(i64s({0, -1, 1}, kGPU), kGPU), IndexError,
                    (std::string(c.op) + ": index -1 is out of range for").c_str());
  }
  cuda::synchronize();  // the errors were the ops' own: nothing is left to report
}

// The cases below test what only a GPU does (late reports, kernel guards), so they skip on the
// fake GPU (Note [Fake GPU]), whose CPU kernels would read and write outside their operands.

TEST_CASE("cuda indexing: unchecked mode reports a bad index at the next synchronisation, once" *
          sl::testing::needs_real_gpu()) {
  SL_REQUIRE_CUDA("unchecked indexing errors");
  UncheckedIndexing off;
  cuda::synchronize();
  for (const IndexOpCase& c : index_op_cases()) {
    CAPTURE(c.op);
    for (int64_t bad : {int64_t{4}, int64_t{-1}, int64_t{1} << 40}) {
      CAPTURE(bad);
      (void)c.run(i64s({0, bad, 1}, kGPU), kGPU);  // no throw, no synchronisation
      const std::string want = std::string(c.op) + ": index " + std::to_string(bad) +
                               " is out of range (expected 0 <= index < 4); detected "
                               "asynchronously";
      SL_CHECK_THROWS(cuda::synchronize(), IndexError, want.c_str());
      cuda::synchronize();  // reported once: cleared
      // the device works on: the next op's result is right
      SL_CHECK_CLOSE(c.run(i64s({0, 3, 1}, kGPU), kGPU).cpu(), c.run(i64s({0, 3, 1}), kCPU), 0, 0);
      cuda::synchronize();
    }
  }
  // a device-to-host copy of any tensor is a synchronisation point too (item(), cpu())
  Tensor x = arange(0, 4, 1, {.dtype = DType::f32}).to(kGPU);
  Tensor unrelated = ones({3}).to(kGPU);
  Tensor g = gather(x, 0, i64s({2, 9}, kGPU));
  SL_CHECK_THROWS(unrelated.sum().item<float>(), IndexError, "gather: index 9 is out of range");
  CHECK(unrelated.sum().item<float>() == 3.0f);
  // the element of the bad index was skipped: gather writes 0 there
  SL_CHECK_CLOSE(g.cpu(), from_vector<float>({2, 0}), 0, 0);
  (void)index_select(x, 0, i64s({-2}, kGPU));
  SL_CHECK_THROWS(unrelated.cpu(), IndexError, "index_select: index -2 is out of range");
  // only the first error since the last report is kept (the index tensors are made first: their
  // host-to-device copies are synchronisation points, which would report the gather's error)
  Tensor five = i64s({5}, kGPU), six = i64s({6}, kGPU);
  (void)gather(x, 0, five);
  (void)scatter(x, 0, six, 1.0);
  SL_CHECK_THROWS(cuda::synchronize(0), IndexError, "gather: index 5 is out of range");
  cuda::synchronize(0);
  // an error recorded in unchecked mode is still reported after checked mode is back on
  (void)gather(x, 0, i64s({8}, kGPU));
  cuda::set_checked_indexing(true);
  SL_CHECK_THROWS(cuda::synchronize(), IndexError, "gather: index 8 is out of range");
  cuda::set_checked_indexing(false);
  // a class-index loss: its targets go through the guarded gather
  SL_CHECK_THROWS((F::cross_entropy(zeros({2, 4}).to(kGPU), i64s({1, 6}, kGPU)).item<float>()),
                  IndexError, "gather: index 6 is out of range (expected 0 <= index < 4)");
  cuda::synchronize();
}

TEST_CASE("cuda indexing: bad indices skip their elements, in range ones are applied" *
          sl::testing::needs_real_gpu()) {
  SL_REQUIRE_CUDA("unchecked indexing semantics");
  UncheckedIndexing off;
  Tensor x = arange(0, 4, 1, {.dtype = DType::f32}).to(kGPU);
  Tensor idx = i64s({3, 4, -1, 0}, kGPU);
  Tensor src = from_vector<float>({10, 20, 30, 40}).to(kGPU);
  Tensor sc = scatter(x, 0, idx, src);
  Tensor sa = scatter_add(x, 0, idx, src);
  Tensor ia = index_add(x, 0, idx, src);
  Tensor is = index_select(x, 0, idx);
  Tensor oh = one_hot(idx, 4);
  SL_CHECK_THROWS(cuda::synchronize(), IndexError, "is out of range");
  SL_CHECK_CLOSE(sc.cpu(), from_vector<float>({40, 1, 2, 10}), 0, 0);
  SL_CHECK_CLOSE(sa.cpu(), from_vector<float>({40, 1, 2, 13}), 0, 0);
  SL_CHECK_CLOSE(ia.cpu(), from_vector<float>({40, 1, 2, 13}), 0, 0);
  SL_CHECK_CLOSE(is.cpu(), from_vector<float>({3, 0, 0, 0}), 0, 0);
  SL_CHECK_CLOSE(oh.cpu(), i64s({0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}).view({4, 4}), 0,
                 0);
  cuda::synchronize();
}

TEST_CASE("cuda indexing: kernels never write or read outside their operands" *
          sl::testing::needs_real_gpu()) {
  SL_REQUIRE_CUDA("index kernel guards");
  // The kernels are called directly (no host check in any mode) on views in the middle of
  // buffers filled with a sentinel: an index one past either end would land in the sentinel.
  constexpr int64_t n = 8;
  const float sentinel = -12345.0f;
  auto guarded = [&](float fill) {
    Tensor buf = full({3 * n}, sentinel, {.device = kGPU});
    buf.narrow(0, n, n).fill_(fill);
    return buf;
  };
  auto check_sentinels = [&](const Tensor& buf) {
    Tensor b = buf.cpu();
    SL_CHECK_CLOSE(b.narrow(0, 0, n), full({n}, sentinel), 0, 0);
    SL_CHECK_CLOSE(b.narrow(0, 2 * n, n), full({n}, sentinel), 0, 0);
  };
  for (int64_t bad : {n, int64_t{-1}, 2 * n - 1, int64_t{-n}}) {
    CAPTURE(bad);
    Tensor idx = i64s({bad, 2}, kGPU);
    Tensor src = from_vector<float>({5, 6}).to(kGPU);
    {  // scatter writes: out is the middle of the buffer
      Tensor buf = guarded(0);
      scatter_kernel(DeviceKind::cuda, buf.narrow(0, n, n), 0, idx, src, false, "scatter");
      SL_CHECK_THROWS(cuda::synchronize(), IndexError,
                      ("scatter: index " + std::to_string(bad)).c_str());
      check_sentinels(buf);
      CHECK(buf.narrow(0, n, n).to_vector<float>()[2] == 6.0f);
    }
    {  // index_add writes [1, n, 1]
      Tensor buf = guarded(1);
      index_add_kernel(DeviceKind::cuda, buf.narrow(0, n, n).view({1, n, 1}), idx,
                       src.view({1, 2, 1}), 1, -1, "index_add");
      SL_CHECK_THROWS(cuda::synchronize(), IndexError,
                      ("index_add: index " + std::to_string(bad)).c_str());
      check_sentinels(buf);
      CHECK(buf.narrow(0, n, n).to_vector<float>()[2] == 7.0f);
    }
    {  // index_select and gather read: `in` is the middle of the buffer; out gets 0 for bad
      Tensor buf = guarded(3);
      Tensor out = empty({1, 2, 1}, {.device = kGPU});
      index_select_kernel(DeviceKind::cuda, out, buf.narrow(0, n, n).view({1, n, 1}), idx,
                          "index_select");
      SL_CHECK_THROWS(cuda::synchronize(), IndexError, "index_select: index");
      SL_CHECK_CLOSE(out.cpu().view({2}), from_vector<float>({0, 3}), 0, 0);
      Tensor gout = empty({2}, {.device = kGPU});
      gather_kernel(DeviceKind::cuda, gout, buf.narrow(0, n, n), 0, idx, "gather");
      SL_CHECK_THROWS(cuda::synchronize(), IndexError, "gather: index");
      SL_CHECK_CLOSE(gout.cpu(), from_vector<float>({0, 3}), 0, 0);
      check_sentinels(buf);
    }
  }
  cuda::synchronize();
}

// ---- the sorted path of the accumulating kernels (Note [Sorted index_add]) ------------------
// Tolerance 0 throughout: on the sorted path each output element is still written by one thread
// that adds in the CPU's order (ascending j) with the CPU's rounding at every step (the product
// by alpha rounded before the sum, the 16-bit types rounded after each addition), so the results
// are the CPU's bits; the values span many binades, where another order would change them.

TEST_CASE("cuda indexing: index_add with few columns and a long index (sorted) is the CPU's" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("sorted index_add parity");
  manual_seed(41);
  const int64_t k = 5000, V = 50, D = 64;  // ~100 entries per target
  REQUIRE(cuda::sorted_accumulate(D, k, 1));
  const Tensor ids = from_vector<int64_t>(repeated_targets(k, V));
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32}) {
    CAPTURE(dt);
    // embedding backward's shape: outer = 1, inner = D
    check_gpu_parity(
        [&](const TensorList& t) { return index_add(t[0], 0, ids.to(t[0].device()), t[1]); },
        {mixed_magnitudes({V, D}, dt), mixed_magnitudes({k, D}, dt)}, 0, 0);
    // alpha != 1 (integers take an integer alpha)
    const Scalar alpha = is_floating(dt) ? Scalar(0.3) : Scalar(3);
    check_gpu_parity(
        [&](const TensorList& t) { return index_add(t[0], 0, ids.to(t[0].device()), t[1], alpha); },
        {mixed_magnitudes({V, D}, dt), mixed_magnitudes({k, D}, dt)}, 0, 0);
  }
  // outer > 1: dim 1 of [3, V, 20] (60 columns), 1000 entries
  REQUIRE(cuda::sorted_accumulate(3 * 20, 1000, 1));
  const Tensor ids1 = from_vector<int64_t>(repeated_targets(1000, V));
  check_gpu_parity(
      [&](const TensorList& t) { return index_add(t[0], 1, ids1.to(t[0].device()), t[1], 0.7); },
      {mixed_magnitudes({3, V, 20}, DType::f32), mixed_magnitudes({3, 1000, 20}, DType::f32)}, 0,
      0);
  // embedding's backward itself: index_add into zeros skipping padding_idx (a run of its own);
  // tolerance 0 for the 16-bit types too, as above: the same additions in the same order
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    CAPTURE(dt);
    check_gpu_parity(
        [&](const TensorList& t) {
          return embedding(t[0], ids.view({50, 100}).to(t[0].device()), 3);
        },
        {mixed_magnitudes({V, D}, dt)}, 0, 0);
  }
}

TEST_CASE("cuda indexing: scatter and scatter_add along few long lines (sorted) are the CPU's" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("sorted scatter parity");
  manual_seed(42);
  const int64_t V = 50;
  const Tensor idx1 = from_vector<int64_t>(repeated_targets(5000, V));  // one line
  // dim 0 of [V, 7]: 7 lines whose entries lie 7 apart; dim 1 of [4, V]: 4 contiguous lines
  const Tensor idx0 = from_vector<int64_t>(repeated_targets(3000 * 7, V)).view({3000, 7});
  const Tensor idx2 = from_vector<int64_t>(repeated_targets(4 * 3000, V)).view({4, 3000});
  REQUIRE(cuda::sorted_accumulate(1, 5000, 1));
  REQUIRE(cuda::sorted_accumulate(7, 3000, 7));
  REQUIRE(cuda::sorted_accumulate(4, 3000, 4));
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32}) {
    CAPTURE(dt);
    auto on = [](const Tensor& i, const Tensor& like) { return i.to(like.device()); };
    check_gpu_parity(
        [&](const TensorList& t) { return scatter_add(t[0], 0, on(idx1, t[0]), t[1]); },
        {mixed_magnitudes({V}, dt), mixed_magnitudes({5000}, dt)}, 0, 0);
    check_gpu_parity([&](const TensorList& t) { return scatter(t[0], 0, on(idx1, t[0]), t[1]); },
                     {mixed_magnitudes({V}, dt), mixed_magnitudes({5000}, dt)}, 0, 0);
    check_gpu_parity(
        [&](const TensorList& t) { return scatter_add(t[0], 0, on(idx0, t[0]), t[1]); },
        {mixed_magnitudes({V, 7}, dt), mixed_magnitudes({3000, 7}, dt)}, 0, 0);
    check_gpu_parity([&](const TensorList& t) { return scatter(t[0], 0, on(idx0, t[0]), t[1]); },
                     {mixed_magnitudes({V, 7}, dt), mixed_magnitudes({3000, 7}, dt)}, 0, 0);
    // a src larger than the index (only its leading part is read: strided lines)
    check_gpu_parity(
        [&](const TensorList& t) { return scatter_add(t[0], 1, on(idx2, t[0]), t[1]); },
        {mixed_magnitudes({4, V}, dt), mixed_magnitudes({5, 3100}, dt)}, 0, 0);
    check_gpu_parity([&](const TensorList& t) { return scatter(t[0], 1, on(idx2, t[0]), t[1]); },
                     {mixed_magnitudes({4, V}, dt), mixed_magnitudes({5, 3100}, dt)}, 0, 0);
  }
  // dim 1 of [2, V, 3]: sizes before and after the dim, 6 lines each `after` = 3 apart, at
  // offsets b * len * after + a of the sorted index (the kernel's line numbering)
  const Tensor idx3 = from_vector<int64_t>(repeated_targets(2 * 3000 * 3, V)).view({2, 3000, 3});
  REQUIRE(cuda::sorted_accumulate(6, 3000, 6));
  for (bool add : {true, false}) {
    CAPTURE(add);
    check_gpu_parity(
        [&](const TensorList& t) {
          const Tensor i = idx3.to(t[0].device());
          return add ? scatter_add(t[0], 1, i, t[1]) : scatter(t[0], 1, i, t[1]);
        },
        {mixed_magnitudes({2, V, 3}, DType::f32), mixed_magnitudes({2, 3000, 3}, DType::f32)}, 0,
        0);
  }
  // a scalar (an expanded src) and bool, which only scatter takes
  Tensor base = randn({V});
  SL_CHECK_CLOSE(scatter(base.to(kGPU), 0, idx1.to(kGPU), 2.5).cpu(), scatter(base, 0, idx1, 2.5),
                 0, 0);
  Tensor flags = randn({5000}).gt(0);
  Tensor none = zeros({V}, {.dtype = DType::b8});
  SL_CHECK_CLOSE(scatter(none.to(kGPU), 0, idx1.to(kGPU), flags.to(kGPU)).cpu(),
                 scatter(none, 0, idx1, flags), 0, 0);
}

// In checked mode the op checks the index on the host before any kernel runs, so this case
// tests that the error does not depend on the index's length (which decides the kernel), not the
// sorted kernels themselves: the unchecked case below runs them on bad indices.
TEST_CASE("cuda indexing: checked mode throws the same error for short and long indices" *
          sl::testing::needs_gpu()) {
  SL_REQUIRE_CUDA("checked indexing, sorted path");
  REQUIRE(cuda::checked_indexing());
  const int64_t V = 50, D = 64;
  for (int64_t bad : {V, int64_t{-1}}) {
    CAPTURE(bad);
    std::vector<std::string> msgs;
    for (int64_t k : {int64_t{3}, int64_t{5000}}) {  // simple, then sorted
      CAPTURE(k);
      Tensor ids = i64s(repeated_targets(k, V, bad), kGPU);
      Tensor src = randn({k, D}).to(kGPU);
      const std::string want =
          "index " + std::to_string(bad) + " is out of range for dim 0 of size 50";
      const std::string ia = error_of([&] {
        (void)index_add(zeros({V, D}).to(kGPU), 0, ids, src);
      });
      const std::string sa = error_of(
          [&] { (void)scatter_add(zeros({V}).to(kGPU), 0, ids, src.select(1, 0).contiguous()); });
      const std::string sc = error_of(
          [&] { (void)scatter(zeros({V}).to(kGPU), 0, ids, src.select(1, 0).contiguous()); });
      CHECK(ia.find("index_add: " + want) != std::string::npos);
      CHECK(sa.find("scatter_add: " + want) != std::string::npos);
      CHECK(sc.find("scatter: " + want) != std::string::npos);
      msgs.push_back(ia + "|" + sa + "|" + sc);
    }
    CHECK(msgs[0] == msgs[1]);
  }
  cuda::synchronize();  // the errors were the ops' own: nothing is left to report
}

// Skipped on the fake GPU (needs_real_gpu), for the reason given above the unchecked cases: its
// kernels are the CPU's, which have no late report and, called directly with bad indices, would
// read and write outside their operands.
TEST_CASE("cuda indexing: unchecked mode on the sorted path skips bad runs, reports them once" *
          sl::testing::needs_real_gpu()) {
  SL_REQUIRE_CUDA("unchecked indexing, sorted path");
  UncheckedIndexing off;
  cuda::synchronize();
  manual_seed(43);
  const int64_t k = 5000, V = 50, D = 64;
  REQUIRE(cuda::sorted_accumulate(D, k, 1));
  for (int64_t bad : {V, int64_t{-1}, int64_t{1} << 40}) {
    CAPTURE(bad);
    const std::vector<int64_t> v = repeated_targets(k, V, bad);
    std::vector<int64_t> good_pos, good_ids;
    for (int64_t j = 0; j < k; ++j) {
      if (v[static_cast<size_t>(j)] == bad) continue;
      good_pos.push_back(j);
      good_ids.push_back(v[static_cast<size_t>(j)]);
    }
    const Tensor keep = i64s(good_pos), kept = i64s(good_ids);
    const Tensor x = mixed_magnitudes({V, D}, DType::f32).detach();
    const Tensor src = mixed_magnitudes({k, D}, DType::f32).detach();
    const Tensor x1 = x.select(1, 0).contiguous(), src1 = src.select(1, 0).contiguous();
    const Tensor ids = i64s(v, kGPU);
    const std::string tail = " is out of range (expected 0 <= index < 50); detected asynchronously";
    const std::string at = ": index " + std::to_string(bad) + tail;
    // each op is reported at the next synchronisation, once; the runs of good targets were
    // applied in order: the CPU's result without the bad entries
    Tensor ia = index_add(x.to(kGPU), 0, ids, src.to(kGPU), 0.3);
    SL_CHECK_THROWS(cuda::synchronize(), IndexError, ("index_add" + at).c_str());
    cuda::synchronize();
    SL_CHECK_CLOSE(ia.cpu(), index_add(x, 0, kept, index_select(src, 0, keep), 0.3), 0, 0);
    Tensor sa = scatter_add(x1.to(kGPU), 0, ids, src1.to(kGPU));
    SL_CHECK_THROWS(cuda::synchronize(), IndexError, ("scatter_add" + at).c_str());
    cuda::synchronize();
    SL_CHECK_CLOSE(sa.cpu(), scatter_add(x1, 0, kept, index_select(src1, 0, keep)), 0, 0);
    Tensor sc = scatter(x1.to(kGPU), 0, ids, src1.to(kGPU));
    SL_CHECK_THROWS(cuda::synchronize(), IndexError, ("scatter" + at).c_str());
    cuda::synchronize();
    SL_CHECK_CLOSE(sc.cpu(), scatter(x1, 0, kept, index_select(src1, 0, keep)), 0, 0);
  }
  // kernels called directly (no host check in any mode) on the sorted path never write outside
  // their output: it is the middle of a buffer filled with a sentinel
  constexpr int64_t n = 8, kk = 1000;
  REQUIRE(cuda::sorted_accumulate(1, kk, 1));
  const float sentinel = -12345.0f;
  for (int64_t bad : {n, int64_t{-1}, 2 * n - 1, int64_t{-n}}) {
    CAPTURE(bad);
    std::vector<int64_t> v = repeated_targets(kk, n, bad);
    const Tensor idx = i64s(v, kGPU);
    const Tensor src = ones({kk}).to(kGPU);
    int64_t hits2 = 0;
    for (int64_t t : v) hits2 += t == 2 ? 1 : 0;
    for (int op = 0; op < 3; ++op) {
      CAPTURE(op);
      Tensor buf = full({3 * n}, sentinel, {.device = kGPU});
      buf.narrow(0, n, n).fill_(1.0f);
      const char* name = op == 0 ? "index_add" : op == 1 ? "scatter_add" : "scatter";
      if (op == 0) {
        index_add_kernel(DeviceKind::cuda, buf.narrow(0, n, n).view({1, n, 1}), idx,
                         src.view({1, kk, 1}), 1, -1, name);
      } else {
        scatter_kernel(DeviceKind::cuda, buf.narrow(0, n, n), 0, idx, src, op == 1, name);
      }
      SL_CHECK_THROWS(cuda::synchronize(), IndexError,
                      (std::string(name) + ": index " + std::to_string(bad)).c_str());
      Tensor b = buf.cpu();
      SL_CHECK_CLOSE(b.narrow(0, 0, n), full({n}, sentinel), 0, 0);
      SL_CHECK_CLOSE(b.narrow(0, 2 * n, n), full({n}, sentinel), 0, 0);
      CHECK(b.to_vector<float>()[n + 2] == (op == 2 ? 1.0f : 1.0f + static_cast<float>(hits2)));
    }
  }
  cuda::synchronize();
}

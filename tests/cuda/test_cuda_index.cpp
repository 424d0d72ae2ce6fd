// Checked and unchecked indexing (sl::cuda::set_checked_indexing, Note [Index checks] in
// core/ops/index.h, Note [Unchecked indexing] in core/cuda/index_error.h).
//
// Here on every machine: the switch, the CPU's checks (on in both modes), and the host half of
// the error record (message, report once, clear). With a GPU: both modes give the CPU's results
// for in-range indices (negative ones included: rejected in both); an out-of-range index in
// unchecked mode is thrown at the next synchronisation point, once, naming the op; and the kernels
// never touch memory outside their output (sentinels around it).
#include <cstring>
#include <functional>

#include "core/cuda/index_error.h"
#include "core/ops/index.h"
#include "cuda_testing.h"
#include "nn/loss.h"

using namespace sl;
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
  // only the first error since the last report is kept
  (void)gather(x, 0, i64s({5}, kGPU));
  (void)scatter(x, 0, i64s({6}, kGPU), 1.0);
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

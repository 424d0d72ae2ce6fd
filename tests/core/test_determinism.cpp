// Determinism: the same inputs give the same bits twice, and with 1 or 2 threads (reductions
// split their work in fixed blocks, see Note [Reduction layout]).
#include <functional>

#include "support/testing.h"

using namespace sl;

namespace {

/// Runs f with 1 thread, then twice with 2 threads; all three results must be bitwise equal.
void check_thread_invariant(const char* what, const std::function<Tensor()>& f) {
  CAPTURE(what);
  int saved = get_num_threads();
  set_num_threads(1);
  Tensor a = f();
  set_num_threads(2);
  Tensor b = f();
  Tensor c = f();
  set_num_threads(saved);
  CHECK(equal(a, b));
  CHECK(equal(b, c));
}

}  // namespace

TEST_CASE("reductions give the same bits with 1 or 2 threads") {
  manual_seed(21);
  // 1M elements: the all-dims sum crosses many 16384-element blocks; [3, 200000] reduces long
  // rows with several outputs; [4096, 64] reduces many short columns.
  Tensor big = randn({1 << 20});
  Tensor rows = randn({3, 200000});
  Tensor cols = randn({4096, 64}).to(DType::f64);
  check_thread_invariant("sum all", [&] { return big.sum(); });
  check_thread_invariant("mean rows", [&] { return rows.mean({1}); });
  check_thread_invariant("var rows", [&] { return rows.var({1}); });
  check_thread_invariant("std all", [&] { return big.std(); });
  check_thread_invariant("norm", [&] { return big.norm(); });
  check_thread_invariant("norm p=3 rows", [&] { return rows.norm(3, {1}); });
  check_thread_invariant("logsumexp rows", [&] { return rows.logsumexp({1}); });
  check_thread_invariant("sum cols f64", [&] { return cols.sum({0}); });
  check_thread_invariant("amax cols", [&] { return cols.amax({0}); });
  check_thread_invariant("argmax rows", [&] { return argmax(rows, 1); });
  check_thread_invariant("cumsum", [&] { return rows.cumsum(1); });
  check_thread_invariant("sum f16", [&] { return big.to(DType::f16).sum(); });
}

TEST_CASE("matmul, softmax and elementwise ops give the same bits with 1 or 2 threads") {
  manual_seed(22);
  Tensor a = randn({96, 128}), b = randn({128, 80}), x = randn({300000});
  check_thread_invariant("mm", [&] { return mm(a, b); });
  check_thread_invariant("bmm", [&] {
    return bmm(a.view({2, 48, 128}), b.view({1, 128, 80}).expand({2, 128, 80}));
  });
  check_thread_invariant("softmax", [&] { return softmax(a, 1); });
  check_thread_invariant("gelu", [&] { return gelu(x); });
  check_thread_invariant("add broadcast", [&] { return x.view({-1, 100}) + x.narrow(0, 0, 100); });
  // column sums over several 64-column tiles (bias gradients)
  Tensor cols = randn({2048, 300});
  check_thread_invariant("sum cols f32", [&] { return cols.sum({0}); });
  // attention heads: [B, H, L, D] views whose batch dims do not merge (one bmm per batch index)
  Tensor q = randn({4, 32, 8, 16}), k = randn({4, 32, 8, 16});
  check_thread_invariant("matmul head-split views", [&] {
    return matmul(q.permute({0, 2, 1, 3}), k.permute({0, 2, 3, 1}));
  });
  // linear's weight gradient g^T x and bias gradient
  Tensor lx = randn({256, 96}), lw = randn({80, 96}).requires_grad_();
  Tensor lb = zeros({80}).requires_grad_();
  check_thread_invariant("linear weight and bias gradients", [&] {
    lw.set_grad(Tensor());
    lb.set_grad(Tensor());
    linear(lx, lw, lb).square().sum().backward();
    return cat({lw.grad().view({-1}), lb.grad()}, 0);
  });
}

TEST_CASE("random streams are reproducible and independent of the thread count") {
  check_thread_invariant("randn", [] {
    manual_seed(123);
    return randn({100000});
  });
  check_thread_invariant("rand f64", [] {
    manual_seed(7);
    return rand({50000}, {.dtype = DType::f64});
  });
}

TEST_CASE("backward gives the same bits twice") {
  auto run = [] {
    manual_seed(5);
    Tensor w = randn({64, 32}).requires_grad_();
    Tensor x = randn({128, 64});
    Tensor idx = randint(0, 64, {500});
    Tensor loss = (softmax(mm(x, w), 1) * 3).sum() + index_select(w, 0, idx).square().sum();
    loss.backward();
    return w.grad();
  };
  Tensor g1 = run(), g2 = run();
  CHECK(equal(g1, g2));
  check_thread_invariant("backward", run);
}

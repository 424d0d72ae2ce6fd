// Long autograd graphs (Note [Deep graph teardown] in autograd/node.cpp): freeing and
// differentiating a chain of many recorded ops must not recurse once per node.
#include <pthread.h>

#include <functional>

#include "support/testing.h"

using namespace sl;

namespace {

/// Runs `fn` on a thread whose stack is only `stack_bytes`, so that per-node recursion over a
/// chain of tens of thousands of nodes would overflow it (crash) instead of passing silently on
/// the main thread's 8 MiB stack. Returns false if the thread could not be started.
bool run_on_small_stack(size_t stack_bytes, std::function<void()> fn) {
  pthread_attr_t attr;
  if (pthread_attr_init(&attr) != 0) return false;
  pthread_attr_setstacksize(&attr, stack_bytes);
  pthread_t th;
  auto trampoline = [](void* arg) -> void* {
    (*static_cast<std::function<void()>*>(arg))();
    return nullptr;
  };
  bool ok = pthread_create(&th, &attr, trampoline, &fn) == 0;
  pthread_attr_destroy(&attr);
  if (ok) pthread_join(th, nullptr);
  return ok;
}

// 60k nodes: recursive teardown used ~100 bytes of stack per node (a 1M-node chain crashed on
// the 8 MiB main stack before the fix), so 6 MB would be needed against the 256 KiB given.
constexpr int kChain = 60000;
constexpr size_t kStack = 256 * 1024;

}  // namespace

TEST_CASE("a long chain of recorded ops is freed without deep recursion") {
  bool freed = false;
  REQUIRE(run_on_small_stack(kStack, [&] {
    Tensor x = full({1}, 1.0, {.dtype = DType::f64, .requires_grad = true});
    {
      Tensor y = x;
      for (int i = 0; i < kChain; ++i) y = y * 1.0;
      CHECK(y.grad_fn() != nullptr);
    }  // the last reference to the whole chain goes here
    freed = true;
  }));
  CHECK(freed);
}

TEST_CASE("backward through a long chain, then freeing it, on a small stack") {
  double grad = 0, expected = 0;
  REQUIRE(run_on_small_stack(kStack, [&] {
    Tensor x = full({1}, 0.5, {.dtype = DType::f64, .requires_grad = true});
    Tensor y = x;
    // y = x * c^n with c = 1 + 1e-6: dy/dx = c^n, computed independently in closed form
    const double c = 1.0 + 1e-6;
    for (int i = 0; i < kChain; ++i) y = y * c;
    y.sum().backward();
    grad = x.grad().item<double>();
    expected = std::pow(c, kChain);
  }));
  // n multiplications by c in f64 round n times: relative error at most n * 2^-53 ~ 7e-12
  CHECK(grad == doctest::Approx(expected).epsilon(1e-10));
}

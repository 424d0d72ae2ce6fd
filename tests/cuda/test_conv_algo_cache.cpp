// The cuDNN convolution algorithm cache (Note [Convolution algorithm cache] in
// core/cuda/conv_algo_cache.h) and the set_cudnn_benchmark switch. Plain host code: these run in
// every build, with or without a GPU (on a GPU, test_cuda_nn.cpp's conv cases check that each
// geometry is chosen once and that benchmark mode computes the same convolution).
#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/cuda/conv_algo_cache.h"
#include "cuda_testing.h"

using namespace sl;
using sl::cuda::ConvAlgoCache;
using sl::cuda::ConvAlgoChoice;
using sl::cuda::ConvAlgoKey;
using sl::cuda::ConvPass;

namespace {

/// The forward pass of a 3x3 convolution of [8, 16, 32, 32] into 32 channels.
ConvAlgoKey base_key() {
  ConvAlgoKey k;
  k.device = 0;
  k.pass = ConvPass::forward;
  k.dtype = static_cast<int>(DType::f32);
  k.x = {8, 16, 32, 32};
  k.w = {32, 16, 3, 3};
  k.y = {8, 32, 32, 32};
  k.pad = {1, 1};
  k.stride = {1, 1};
  k.dilation = {1, 1};
  k.groups = 1;
  return k;
}

ConvAlgoChoice choice(int algo, const char* text) {
  ConvAlgoChoice c;
  c.algo = algo;
  c.math = 3;
  c.workspace = 1024;
  c.description = text;
  return c;
}

}  // namespace

TEST_CASE("conv algorithm cache: one choice per key, reused") {
  ConvAlgoCache cache;
  int calls = 0;
  auto choose = [&] {
    ++calls;
    return choice(1, "first");
  };
  ConvAlgoChoice a = cache.get(base_key(), choose);
  ConvAlgoChoice b = cache.get(base_key(), [&] {
    ++calls;
    return choice(2, "second");  // never asked: the key is cached
  });
  CHECK(calls == 1);
  CHECK(a.algo == 1);
  CHECK(b.algo == 1);
  CHECK(b.workspace == 1024);
  CHECK(cache.size() == 1);
  CHECK(cache.misses() == 1);
  CHECK(cache.descriptions() == std::vector<std::string>{"first"});
  cache.clear();
  CHECK(cache.size() == 0);
  CHECK(cache.misses() == 0);
  CHECK(cache.descriptions().empty());
  CHECK(cache.get(base_key(), [] { return choice(2, "second"); }).algo == 2);
}

TEST_CASE("conv algorithm cache: every field of the key selects its own choice") {
  // Each mutation changes one field the algorithm depends on; each must miss once, and the
  // unchanged key must still hit afterwards.
  const std::vector<std::function<void(ConvAlgoKey&)>> changes = {
      [](ConvAlgoKey& k) { k.device = 1; },
      [](ConvAlgoKey& k) { k.pass = ConvPass::backward_data; },
      [](ConvAlgoKey& k) { k.pass = ConvPass::backward_filter; },
      [](ConvAlgoKey& k) { k.dtype = static_cast<int>(DType::f64); },
      [](ConvAlgoKey& k) { k.x[0] = 9; },
      [](ConvAlgoKey& k) { k.x[3] = 33; },
      [](ConvAlgoKey& k) { k.w[2] = 5; },
      [](ConvAlgoKey& k) { k.w[1] = 8; },
      [](ConvAlgoKey& k) { k.y[2] = 16; },
      [](ConvAlgoKey& k) { k.pad[1] = 0; },
      [](ConvAlgoKey& k) { k.stride[0] = 2; },
      [](ConvAlgoKey& k) { k.dilation[1] = 2; },
      [](ConvAlgoKey& k) { k.groups = 2; },
      [](ConvAlgoKey& k) { k.tf32 = true; },
      [](ConvAlgoKey& k) { k.deterministic = false; },
      [](ConvAlgoKey& k) { k.benchmark = true; },
  };
  ConvAlgoCache cache;
  int calls = 0;
  cache.get(base_key(), [&] {
    ++calls;
    return choice(0, "base");
  });
  for (size_t i = 0; i < changes.size(); ++i) {
    CAPTURE(i);
    ConvAlgoKey k = base_key();
    changes[i](k);
    CHECK_FALSE(k == base_key());
    const int before = calls;
    ConvAlgoChoice c = cache.get(k, [&] {
      ++calls;
      return choice(static_cast<int>(i) + 1, "changed");
    });
    CHECK(calls == before + 1);
    CHECK(c.algo == static_cast<int>(i) + 1);
    CHECK(cache.get(base_key(), [&] { return choice(-1, "never"); }).algo == 0);
  }
  CHECK(cache.size() == changes.size() + 1);
  // Equal keys hash alike (the map's contract).
  CHECK(sl::cuda::ConvAlgoKeyHash{}(base_key()) == sl::cuda::ConvAlgoKeyHash{}(base_key()));
}

TEST_CASE("conv algorithm cache: a failed choice stores nothing") {
  ConvAlgoCache cache;
  CHECK_THROWS_AS(
      cache.get(base_key(), []() -> ConvAlgoChoice { throw std::runtime_error("cuDNN failed"); }),
      std::runtime_error);
  CHECK(cache.size() == 0);
  CHECK(cache.descriptions().empty());
  int calls = 0;
  cache.get(base_key(), [&] {
    ++calls;
    return choice(4, "retried");
  });
  CHECK(calls == 1);
  CHECK(cache.size() == 1);
}

TEST_CASE("conv algorithm cache: choices are made outside the lock; the first stored wins") {
  // Two threads miss the same key at once. Each choice waits (up to 10 s) until the other thread
  // has entered its own: if choose() ran under the cache's lock, the second thread could not
  // enter and both waits would time out.
  ConvAlgoCache cache;
  std::atomic<int> inside{0};
  std::atomic<bool> met_other[2] = {false, false};
  ConvAlgoChoice got[2];
  auto run = [&](int t) {
    got[t] = cache.get(base_key(), [&] {
      inside.fetch_add(1);
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (inside.load() < 2 && std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();
      }
      met_other[t] = inside.load() == 2;
      return choice(10 + t, t == 0 ? "thread 0" : "thread 1");
    });
  };
  std::thread a(run, 0), b(run, 1);
  a.join();
  b.join();
  CHECK(met_other[0]);
  CHECK(met_other[1]);
  CHECK(cache.size() == 1);
  CHECK(cache.misses() == 2);
  CHECK(got[0].algo == got[1].algo);  // both return the stored choice
  CHECK(cache.descriptions().size() == 1);
  CHECK(cache.get(base_key(), [] { return choice(-1, "never"); }).algo == got[0].algo);
}

TEST_CASE("cuda: cudnn benchmark switch and the list of choices") {
  CHECK(!cuda::cudnn_benchmark());  // heuristics by default, as PyTorch
  cuda::set_cudnn_benchmark(true);
  CHECK(cuda::cudnn_benchmark());
  cuda::set_cudnn_benchmark(false);
  CHECK(!cuda::cudnn_benchmark());
  // The public list is the process-wide cache's.
  CHECK(cuda::cudnn_conv_choices() == cuda::conv_algo_cache().descriptions());
  CHECK(cuda::conv_algo_cache().size() == cuda::cudnn_conv_choices().size());
  CHECK(sl::cuda::sizes4_str({128, 64, 32, 32}) == "[128, 64, 32, 32]");
}

// The cache of cuDNN convolution algorithm choices: plain host code (no CUDA types), built in
// every build so its rules are tested on any machine (tests/cuda/test_conv_algo_cache.cpp).
//
// Note [Convolution algorithm cache]
// A cuDNN convolution needs an algorithm (and a math type and workspace size) for each of its
// three passes: forward, backward-data and backward-filter. core/cuda/conv.cpp chooses one per
// pass the first time it meets a convolution and keeps the choice here, keyed by everything that
// can change the choice: the device, the pass, the dtype, the input, weight and output sizes
// (after any explicit asymmetric padding), padding, stride, dilation and groups, and the three
// switches that change which algorithms qualify or how they are ranked (set_allow_tf32,
// set_cudnn_deterministic, set_cudnn_benchmark). Every later call with the same key reuses the
// choice: no descriptor query, heuristic call or benchmark runs again (PyTorch keeps the same
// kind of cache, keyed the same way).
//
// How a choice is made (conv.cpp):
//  - heuristics (the default): the first usable algorithm of cuDNN's ranked list
//    (cudnnGet*Algorithm_v7), deterministic ones only unless set_cudnn_deterministic(false);
//  - benchmark (set_cudnn_benchmark(true), as torch.backends.cudnn.benchmark): cuDNN runs every
//    algorithm on the call's own buffers (cudnnFind*AlgorithmEx) with the largest workspace the
//    allocator gives, up to 1 GiB, and the fastest usable one is kept. The first call of each
//    new key pays for the timing runs (milliseconds to seconds), so benchmark mode suits fixed
//    shapes; inputs whose sizes change every step (variable-length speech batches) benchmark
//    every new size. The timed runs write the pass's output buffer, which the real call then
//    overwrites; inputs are only read.
// "Usable": cuDNN reported success, the workspace fits the limit, and for float32 without TF32
// the algorithm's math type uses no tensor cores (the descriptor is set to CUDNN_FMA_MATH, so a
// tensor-core ranking would not describe what runs).
//
// Entries are never evicted (one per distinct key and pass; a few hundred bytes each). The
// cache is shared by all threads: a choice made by two threads at once is made twice and the
// first one stored wins (both are valid).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace sl::cuda {

/// The three passes of a convolution, each with its own algorithm.
enum class ConvPass : uint8_t { forward, backward_data, backward_filter };

/// Everything that selects a convolution algorithm (Note [Convolution algorithm cache]).
struct ConvAlgoKey {
  int device = 0;
  ConvPass pass = ConvPass::forward;
  int dtype = 0;  ///< the DType as an integer
  std::array<int64_t, 4> x{}, w{}, y{};
  std::array<int64_t, 2> pad{}, stride{}, dilation{};
  int64_t groups = 1;
  bool tf32 = false, deterministic = true, benchmark = false;

  bool operator==(const ConvAlgoKey&) const = default;
};

/// One pass's choice: the cuDNN algorithm and math type (cuDNN enum values as integers), the
/// workspace it needs, and how it was found.
struct ConvAlgoChoice {
  int algo = 0;
  int math = 0;
  size_t workspace = 0;
  /// A line for cudnn_conv_choices(): the key and the choice in words.
  std::string description;
};

struct ConvAlgoKeyHash {
  size_t operator()(const ConvAlgoKey& k) const noexcept;
};

/// Thread-safe map from key to choice.
class ConvAlgoCache {
 public:
  /// The choice stored for `key`; when there is none, calls `choose` (without holding the lock)
  /// and stores its result. An exception from `choose` propagates and stores nothing.
  ConvAlgoChoice get(const ConvAlgoKey& key, const std::function<ConvAlgoChoice()>& choose);
  /// Number of entries.
  size_t size() const;
  /// How many times get() called `choose` (hits are the other calls).
  size_t misses() const;
  /// Descriptions of the entries in the order they were stored.
  std::vector<std::string> descriptions() const;
  /// Drops every entry (the miss counter too).
  void clear();

 private:
  mutable std::mutex mu_;
  std::unordered_map<ConvAlgoKey, ConvAlgoChoice, ConvAlgoKeyHash> map_;
  std::vector<std::string> order_;
  size_t misses_ = 0;
};

/// The process-wide cache used by the cuDNN convolutions.
ConvAlgoCache& conv_algo_cache();

/// "[128, 64, 32, 32]" for a key's 4-d sizes (used in descriptions).
std::string sizes4_str(const std::array<int64_t, 4>& s);

}  // namespace sl::cuda

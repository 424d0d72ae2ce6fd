#include "models/mlm.h"

#include <algorithm>
#include <limits>

#include "core/creation.h"
#include "core/error.h"

namespace sl::models {
namespace {

/// splitmix64 (Steele, Lea and Flood 2014): one 64-bit output per call, a full-period sequence.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};

}  // namespace

uint64_t mlm_row_key(uint64_t seed, int64_t epoch, int64_t example) {
  SplitMix64 g{seed};
  uint64_t k = g.next() ^ static_cast<uint64_t>(epoch);
  g.state = k;
  k = g.next() ^ static_cast<uint64_t>(example);
  g.state = k;
  return g.next();
}

MlmBatch mask_for_mlm(const Tensor& ids, std::span<const uint64_t> row_keys,
                      const MlmMaskingOptions& o) {
  SL_CHECK(ids.defined(), "mask_for_mlm: ids is undefined");
  SL_CHECK_DTYPE(ids.dtype() == DType::i64, "mask_for_mlm: ids must be int64, got ",
                 dtype_name(ids.dtype()));
  SL_CHECK_SHAPE(ids.dim() == 2, "mask_for_mlm: ids must be [B, L], got ", shape_str(ids.sizes()));
  SL_CHECK_DEVICE(ids.device().is_cpu(), "mask_for_mlm: ids must be on the CPU, got ",
                  ids.device().str());
  const int64_t B = ids.size(0), L = ids.size(1);
  SL_CHECK(static_cast<int64_t>(row_keys.size()) == B, "mask_for_mlm: ", row_keys.size(),
           " row keys for ", B, " rows");
  auto prob_ok = [](double p) { return p >= 0.0 && p <= 1.0; };
  SL_CHECK(prob_ok(o.mask_prob) && prob_ok(o.mask_token_prob) && prob_ok(o.random_token_prob) &&
               o.mask_token_prob + o.random_token_prob <= 1.0,
           "mask_for_mlm: probabilities must lie in [0, 1] with mask_token_prob + "
           "random_token_prob <= 1, got mask_prob ",
           o.mask_prob, ", mask_token_prob ", o.mask_token_prob, ", random_token_prob ",
           o.random_token_prob);
  SL_CHECK(o.vocab_size > 0 && o.mask_id >= 0 && o.mask_id < o.vocab_size, "mask_for_mlm: mask_id ",
           o.mask_id, " is outside the vocabulary [0, ", o.vocab_size, ")");

  Tensor src = ids.contiguous();
  Tensor inputs = src.clone();
  Tensor labels = full({B, L}, o.ignore_index, TensorOptions{.dtype = DType::i64});
  const int64_t* in = src.data_ptr<int64_t>();
  int64_t* out = inputs.data_ptr<int64_t>();
  int64_t* lab = labels.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    SplitMix64 g{row_keys[b]};
    int64_t chosen = 0, best = -1;
    double best_u = std::numeric_limits<double>::infinity();
    for (int64_t t = 0; t < L; ++t) {
      const int64_t id = in[b * L + t];
      SL_CHECK(id >= 0 && id < o.vocab_size, "mask_for_mlm: id ", id, " at row ", b, ", position ",
               t, " is outside the vocabulary [0, ", o.vocab_size, ")");
      // Three draws per position whatever happens, so a position's draws do not depend on the
      // positions before it.
      const double u = g.uniform(), v = g.uniform();
      const uint64_t r = g.next();
      if (std::find(o.never_mask.begin(), o.never_mask.end(), id) != o.never_mask.end()) continue;
      if (u < best_u) best_u = u, best = t;
      if (u >= o.mask_prob) continue;
      ++chosen;
      lab[b * L + t] = id;
      if (v < o.mask_token_prob) {
        out[b * L + t] = o.mask_id;
      } else if (v < o.mask_token_prob + o.random_token_prob) {
        out[b * L + t] = static_cast<int64_t>(r % static_cast<uint64_t>(o.vocab_size));
      }
    }
    if (chosen == 0 && best >= 0 && o.mask_prob > 0) {
      // Note [MLM row keys]: at least one label per row; it is masked as [MASK].
      lab[b * L + best] = in[b * L + best];
      out[b * L + best] = o.mask_id;
    }
  }
  return {inputs, labels};
}

}  // namespace sl::models

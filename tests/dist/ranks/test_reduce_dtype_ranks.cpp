// Gradients communicated in another dtype (StrategyOptions::reduce_dtype, Note [Gradient
// communication dtype]), under mpirun with 2 and 3 ranks: the reduced gradients against a
// reference built here from every rank's local gradients and the formats' rounding rule, the
// bytes on the wire, and training under each mode.
#include <cmath>

#include "../../support/testing.h"
#include "../support/tiny_training.h"
#include "dist/flat_strategy.h"
#include "dist/process_group.h"

using namespace sl;
using namespace sl::dist;
using sl::testing::OptKind;
using sl::testing::TinyTrainer;
using sl::testing::TrainConfig;

namespace {

struct Format {
  DType dtype;
  int mantissa_bits;  // explicit fraction bits
  int min_exponent;   // exponent of the smallest normal number
  double unit_roundoff() const { return std::ldexp(1.0, -mantissa_bits - 1); }
  double smallest_quantum() const { return std::ldexp(1.0, min_exponent - mantissa_bits); }
};
constexpr Format kBF16{DType::bf16, 7, -126};
constexpr Format kF16{DType::f16, 10, -14};

/// x rounded to the nearest value of `f` (ties to even), from the format's definition (a
/// p-bit significand, gradual underflow below 2^min_exponent), not from core/half.h. The
/// library casts float64 through float32 (as PyTorch does), so the value is first rounded to
/// float32. Values here stay far below the formats' largest finite numbers.
double round_to(const Format& f, double x) {
  x = static_cast<double>(static_cast<float>(x));
  if (x == 0 || !std::isfinite(x)) return x;
  double q = std::ldexp(1.0, std::max(std::ilogb(x), f.min_exponent) - f.mantissa_bits);
  return std::nearbyint(x / q) * q;  // x / q is exact: q is a power of two
}

/// This rank's gradients of one step of TinyTrainer (config `c`, step 0, no accumulation),
/// computed with plain autograd on a fresh model, laid out as the strategy's flat group buffers
/// (float64, zero padding).
std::vector<std::vector<double>> local_flat_grads(const TrainConfig& c, const FlatLayout& layout,
                                                  int rank, int world_size) {
  auto net = sl::testing::make_tiny_net();
  auto [x, y] = sl::testing::global_batch(0, c.global_batch);
  int64_t share = c.global_batch / world_size;
  x = x.narrow(0, rank * share, share);
  y = y.narrow(0, rank * share, share);
  ((net->forward(x) - y).square().mean() / 1.0).backward();  // TinyTrainer's loss, accum 1
  std::vector<std::vector<double>> flat;
  for (const FlatGroup& g : layout.groups()) flat.emplace_back(static_cast<size_t>(g.numel), 0.0);
  size_t i = 0;
  for (const auto& [name, p] : net->named_parameters()) {
    const ParamSlot& s = layout.slots()[i++];
    std::vector<double> v = p.grad().to(DType::f64).contiguous().to_vector<double>();
    REQUIRE(static_cast<int64_t>(v.size()) == s.numel);
    std::copy(v.begin(), v.end(), flat[static_cast<size_t>(s.group)].begin() + s.offset);
  }
  return flat;
}

/// Every rank's local flat group buffers: out[r][group][element].
std::vector<std::vector<std::vector<double>>> gather_all(
    const std::vector<std::vector<double>>& mine) {
  auto pg = world();
  std::vector<std::vector<std::vector<double>>> all(static_cast<size_t>(pg->size()));
  for (const std::vector<double>& g : mine) {
    auto n = static_cast<int64_t>(g.size());
    Tensor in = from_vector(g, {n});
    Tensor out = zeros({n * pg->size()}, {.dtype = DType::f64});
    pg->allgather(out, in)->wait();  // float64 carries float32 and float64 gradients exactly
    std::vector<double> v = out.to_vector<double>();
    for (int r = 0; r < pg->size(); ++r) {
      all[static_cast<size_t>(r)].emplace_back(v.begin() + r * n, v.begin() + (r + 1) * n);
    }
  }
  return all;
}

/// The strategy's reduced gradients of each group, as flat buffers: ddp's gradient buffers;
/// zero1/zero2: only this rank's slice of each bucket is filled (`owned` marks those elements).
std::vector<std::vector<double>> reduced_flat_grads(const FlatStrategy& s, int rank,
                                                    std::vector<std::vector<bool>>& owned) {
  const FlatBuffers& fb = s.flat();
  const FlatLayout& L = fb.layout();
  std::vector<std::vector<double>> out;
  owned.clear();
  for (size_t g = 0; g < L.groups().size(); ++g) {
    auto n = static_cast<size_t>(L.groups()[g].numel);
    if (s.kind() == StrategyKind::ddp) {
      out.push_back(fb.grad_buffer(static_cast<int>(g)).to(DType::f64).to_vector<double>());
      owned.emplace_back(n, true);
      continue;
    }
    out.emplace_back(n, 0.0);
    owned.emplace_back(n, false);
    for (int b : L.groups()[g].buckets) {
      const Bucket& bk = L.buckets()[static_cast<size_t>(b)];
      std::vector<double> v = fb.shard_slice_view(s.grad_shards()[g], b)
                                  .to(DType::f64)
                                  .contiguous()
                                  .to_vector<double>();
      int64_t begin = bk.offset + rank * bk.shard_numel;
      for (int64_t k = 0; k < bk.shard_numel; ++k) {
        out[g][static_cast<size_t>(begin + k)] = v[static_cast<size_t>(k)];
        owned[g][static_cast<size_t>(begin + k)] = true;
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("reduce_dtype: each bucket is rounded, divided and summed in bf16 or f16, then widened") {
  auto pg = world();
  const int n = pg->size(), rank = pg->rank();
  const TrainConfig c{.opt = OptKind::sgd, .steps = 1};
  for (const Format& f : {kBF16, kF16}) {
    for (const char* kind : {"ddp", "zero1", "zero2"}) {
      CAPTURE(kind);
      CAPTURE(dtype_name(f.dtype));
      TinyTrainer t(kind, c, pg, {.reduce_dtype = f.dtype});
      t.run(0, 1);
      auto* fs = dynamic_cast<FlatStrategy*>(t.strategy.get());
      REQUIRE(fs != nullptr);
      const FlatLayout& L = fs->flat().layout();
      REQUIRE(L.groups().size() == 2);  // float32 weights and the float64 scale: both converted
      auto all = gather_all(local_flat_grads(c, L, rank, n));
      std::vector<std::vector<bool>> owned;
      auto got = reduced_flat_grads(*fs, rank, owned);
      int checked = 0, differs_from_exact_mean = 0;
      for (size_t g = 0; g < got.size(); ++g) {
        for (size_t i = 0; i < got[g].size(); ++i) {
          if (!owned[g][i]) continue;
          CAPTURE(g);
          CAPTURE(i);
          double v = got[g][i];
          // travelled in the reduced format: representable there
          CHECK(round_to(f, v) == v);
          double mean = 0, abs_sum = 0;
          for (int r = 0; r < n; ++r) {
            mean += all[static_cast<size_t>(r)][g][i] / n;
            abs_sum += std::abs(all[static_cast<size_t>(r)][g][i]) / n;
          }
          if (v != mean) ++differs_from_exact_mean;
          if (n == 2) {
            // One sum of two values, whatever the backend's order: exactly
            // round(round(round(g0) / 2) + round(round(g1) / 2)).
            double t0 = round_to(f, round_to(f, all[0][g][i]) / 2);
            double t1 = round_to(f, round_to(f, all[1][g][i]) / 2);
            CHECK(v == round_to(f, t0 + t1));
          } else {
            // n terms, each rounded twice (cast, division: 2u), summed in some order with n - 1
            // roundings ((n - 1)u of the terms' absolute sum): (n + 1)u sum|g_r| / n, 1% for
            // the second-order terms, and one smallest quantum per rounding for underflow.
            double tol =
                (n + 1) * f.unit_roundoff() * abs_sum * 1.01 + (n + 1) * f.smallest_quantum();
            CHECK(std::abs(v - mean) <= tol);
          }
          ++checked;
        }
      }
      CHECK(checked >= 5 * 7 / n);  // this rank's share of fc1.weight at least
      // a reduction in the kept dtype would match the exact mean nearly everywhere
      CHECK(differs_from_exact_mean > checked / 2);
    }
  }
}

TEST_CASE("reduce_dtype: the gradient collectives carry 2 bytes per element instead of 4 or 8") {
  auto pg = world();
  // One bucket: the communication buffers' peak is then one bucket's, whatever the timing. With
  // the tests' 16-byte buckets it depended on how many were in flight at once, which the
  // SL_DIST_DEBUG agreement checks and sanitizer slowdowns change (f32 peaked at 180 bytes
  // against bf16's 192 on 3 ranks under ASan).
  const TrainConfig c{.opt = OptKind::sgd, .steps = 1, .bucket_cap = 1 << 20};
  for (const char* kind : {"ddp", "zero1", "zero2"}) {
    CAPTURE(kind);
    const CollectiveKind ck =
        std::string(kind) == "ddp" ? CollectiveKind::allreduce : CollectiveKind::reduce_scatter;
    int64_t payload[2] = {0, 0}, comm_buffers[2] = {0, 0};
    int64_t saved = 0;  // what the casts save over the buckets: (kept size - 2) per element
    for (int i = 0; i < 2; ++i) {
      StrategyOptions o;
      if (i == 1) o.reduce_dtype = DType::bf16;
      TinyTrainer t(kind, c, pg, o);
      pg->reset_stats();
      t.run(0, 1);
      payload[i] = pg->stats()[ck].payload_bytes;
      comm_buffers[i] = t.strategy->memory_report().comm_buffer_bytes;
      if (i == 1) {
        const FlatLayout& L = dynamic_cast<FlatStrategy&>(*t.strategy).flat().layout();
        for (const Bucket& b : L.buckets()) {
          auto kept =
              static_cast<int64_t>(dtype_size(L.groups()[static_cast<size_t>(b.group)].dtype));
          saved += b.padded_numel * (kept - 2);
        }
      }
    }
    CHECK(saved > 0);
    CHECK(payload[0] - payload[1] == saved);
    // memory_report counts the casts' copies as communication buffers: extra in ddp and zero1
    // (their gradient buffers stay in the kept dtype); zero2 stages gradients in bf16 and so
    // needs less than in float32
    MESSAGE(std::string(kind) << ": comm buffer peak float32 " << comm_buffers[0] << " bytes, bf16 "
                              << comm_buffers[1]);
    if (std::string(kind) == "zero2") {
      CHECK(comm_buffers[1] < comm_buffers[0]);
    } else {
      CHECK(comm_buffers[1] > comm_buffers[0]);
    }
  }
}

TEST_CASE("reduce_dtype bf16: zero1 and zero2 train as ddp does with it") {
  auto pg = world();
  const TrainConfig configs[] = {
      {.opt = OptKind::sgd},
      {.opt = OptKind::adamw, .clip = 0.3},
  };
  for (const TrainConfig& c : configs) {
    CAPTURE(c.str());
    const StrategyOptions o{.reduce_dtype = DType::bf16};
    auto ddp = sl::testing::train_strategy("ddp", c, pg, o);
    auto f32 = sl::testing::train_strategy("ddp", c, pg);
    for (const auto& r : ddp.steps) CHECK(r.taken);
    // From the float32 run: the bf16 rounding shows, and stays small. Each step's reduced
    // gradient is off by at most (n + 1)u = (n + 1) 2^-8 of the mean of the ranks' |g_r| (test
    // above); the ranks' local gradients stay under 0.75 (0.57 and 0.70 at step 0 on 2 and 3
    // ranks), so by < 4 * 2^-8 * 0.75 < 0.012 on 3 ranks; 10 steps of lr <= 0.1 with momentum's
    // gain <= 10 add up to at most 10 * 0.1 * 10 * 0.012 = 0.12 (a rough bound that ignores how
    // the gradients follow the parameters; measured: 1.6e-4 to 1.1e-3).
    double max_diff = 0;
    for (size_t i = 0; i < ddp.params.size(); ++i) {
      max_diff = std::max(max_diff, (ddp.params[i] - f32.params[i]).abs().max().item<double>());
    }
    CHECK(max_diff > 0);
    CHECK(max_diff < 0.12);
    for (const char* kind : {"zero1", "zero2"}) {
      CAPTURE(kind);
      auto z = sl::testing::train_strategy(kind, c, pg, o);
      for (size_t i = 0; i < z.params.size(); ++i) {
        CAPTURE(i);
        if (pg->size() == 2) {
          // the same reduced gradients bit for bit (one sum of two values, test above); the
          // steps differ from ddp's as in the float32 tests: f32 rounding of the clip norm
          SL_CHECK_CLOSE(z.params[i], ddp.params[i], 1e-5, 1e-6);
        } else {
          // with 3 ranks an MPI may add the three bf16 terms in another order in its allreduce
          // than in its reduce-scatter (Open MPI here does not: equal bits); two orders' sums
          // differ by at most 2 (n - 1)u = 4 * 2^-8 of the mean |g_r| < 0.75 per step, which 10
          // steps as above turn into at most 0.12 (a rough bound)
          SL_CHECK_CLOSE(z.params[i], ddp.params[i], 0.0, 0.12);
        }
      }
    }
  }
}

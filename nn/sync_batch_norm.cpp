#include "nn/sync_batch_norm.h"

#include <cmath>
#include <vector>

#include "autograd/function.h"
#include "autograd/ops/shape.h"
#include "core/amp.h"
#include "core/creation.h"
#include "core/error.h"
#include "core/ops/norm.h"
#include "core/ops/view.h"
#include "nn/module.h"
#include "nn/normalization.h"

namespace sl::nn {

StatsSync::~StatsSync() = default;

namespace {

const char* const kOp = "sync_batch_norm";

void check_channel_param(const char* name, const Tensor& p, int64_t C) {
  if (!p.defined()) return;
  SL_CHECK_DTYPE(is_floating(p.dtype()), kOp, ": ", name, " must be floating, got ",
                 dtype_name(p.dtype()));
  SL_CHECK_SHAPE(p.dim() == 1 && p.size(0) == C, kOp, ": ", name, " must have shape [", C,
                 "], got ", shape_str(p.sizes()));
}

/// x * scale[c] + shift[c] over [N, C, *] in one fused pass (batch_norm's evaluation kernel
/// with mean 0, variance 1 and eps 0, whose invstd is exactly 1); scale and shift are [C] in the
/// compute dtype, the result is in x's.
Tensor affine_per_channel(const Tensor& x, const Tensor& scale, const Tensor& shift) {
  const TensorOptions o{.dtype = scale.dtype(), .device = x.device()};
  const int64_t C = scale.numel();
  return ops::batch_norm_forward(x, zeros({C}, o), ones({C}, o), scale, shift, false, 0.0, 0.0).out;
}

/// This rank's count, per-channel sums and sums of squared deviations from its own mean, as one
/// float64 row [n, s_0..s_{C-1}, m2_0..m2_{C-1}] for the all_gather.
Tensor local_stats(const Tensor& x, int64_t N, int64_t C, int64_t S) {
  const TensorOptions f64{.dtype = DType::f64, .device = x.device()};
  const double n = static_cast<double>(N * S);
  Tensor sum = zeros({C}, f64), m2 = zeros({C}, f64);
  if (N * S > 1) {
    // batch_norm's fused training kernel with eps 0 gives the mean and 1 / sqrt(m2 / n) in one
    // pass (its output is not needed); a constant channel has invstd inf and m2 0.
    ops::NormForward f =
        ops::batch_norm_forward(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.0, 0.0);
    const Tensor rstd = f.rstd.to(DType::f64);
    sum = f.mean.to(DType::f64) * n;
    m2 = n / (rstd * rstd);
  } else if (N * S == 1) {
    sum = ops::view(x.to(DType::f64).contiguous(), {C});
  }
  return cat({full({1}, n, f64), sum, m2});
}

/// The global statistics of Note [SyncBatchNorm], combined in float64 on the input's device
/// from the gathered [world, 2C + 1] rows (count, C sums, C sums of squared deviations from the
/// rank's mean); count is 0-d.
struct GlobalStats {
  Tensor count, mean, m2;
};

GlobalStats combine(const Tensor& gathered, int64_t C, int64_t local_count) {
  const int64_t world = gathered.size(0);
  if (local_count <= 1) {
    // Only then can the global count be 1 or 0 (then every rank's is), so only such ranks read
    // it on the host, and all of them throw alike; the others never wait for the device here.
    const Tensor counts = gathered.select(1, 0).cpu().contiguous();
    double total = 0;
    for (double n : counts.to_vector<double>()) total += n;
    SL_CHECK(total > 1, kOp, ": expected more than 1 value per channel over all ", world,
             " ranks when training, got ", total);
  }
  const Tensor counts = gathered.narrow(1, 0, 1);  // [world, 1]
  const Tensor sums = gathered.narrow(1, 1, C), m2s = gathered.narrow(1, 1 + C, C);
  GlobalStats s;
  s.count = counts.sum();
  s.mean = sums.sum({0}) / s.count;
  // each rank's mean (0 for a rank without rows, whose count then zeroes its term below)
  const Tensor d = sums / counts.clamp(1.0, std::nullopt) - s.mean;
  s.m2 = m2s.sum({0}) + (counts * d * d).sum({0});
  return s;
}

}  // namespace

Tensor sync_batch_norm(const Tensor& input_in, const Tensor& running_mean,
                       const Tensor& running_var, const Tensor& weight_in, const Tensor& bias_in,
                       double momentum, double eps, const StatsSyncPtr& sync) {
  // Every check runs before the first collective, so a bad call fails on its own rank at once.
  SL_CHECK(sync != nullptr, kOp, ": no StatsSync given");
  SL_CHECK(input_in.defined(), kOp, ": the input is undefined");
  const Tensor input = autocast(input_in, AmpPolicy::fp32);
  const Tensor weight = autocast(weight_in, AmpPolicy::fp32);
  const Tensor bias = autocast(bias_in, AmpPolicy::fp32);
  SL_CHECK_DTYPE(is_floating(input.dtype()), kOp, ": expected a floating input, got ",
                 dtype_name(input.dtype()));
  SL_CHECK_SHAPE(input.dim() >= 2, kOp, ": expected an input [N, C, *] with at least 2 dims, got ",
                 shape_str(input.sizes()));
  SL_CHECK(eps >= 0, kOp, ": eps must be non-negative, got ", eps);
  SL_CHECK(momentum >= 0 && momentum <= 1, kOp, ": momentum must be in [0, 1], got ", momentum);
  SL_CHECK(running_mean.defined() == running_var.defined(), kOp,
           ": running_mean and running_var must both be given or both be undefined");
  const int64_t N = input.size(0), C = input.size(1);
  const int64_t S = N == 0 || C == 0 ? 0 : input.numel() / (N * C);
  for (auto [name, p] :
       {std::pair{"weight", &weight}, std::pair{"bias", &bias},
        std::pair{"running_mean", &running_mean}, std::pair{"running_var", &running_var}}) {
    check_channel_param(name, *p, C);
    SL_CHECK_DEVICE(!p->defined() || p->device() == input.device(), kOp, ": ", name, " is on ",
                    p->device(), " but the input is on ", input.device());
  }

  // 1. local statistics, combined across ranks in double
  const bool grad = needs_grad(input, weight, bias);
  NoGradGuard no_grad;
  const DType ct = input.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const TensorOptions on_dev{.dtype = ct, .device = input.device()};
  Tensor gathered = sync->all_gather(local_stats(input, N, C, S));
  SL_CHECK_SHAPE(gathered.dim() == 2 && gathered.size(1) == 2 * C + 1, kOp,
                 ": the StatsSync returned shape ", shape_str(gathered.sizes()), ", expected [",
                 sync->world_size(), ", ", 2 * C + 1, "]");
  const GlobalStats g = combine(gathered, C, N * S);

  // 2. the running statistics, as BatchNorm on the concatenated batch updates them
  const Tensor invstd64 = ((g.m2 / g.count) + eps).sqrt().reciprocal();
  if (running_mean.defined()) {
    const Tensor unbiased = g.m2 / (g.count - 1.0);
    const DType rdt = running_mean.dtype();
    Tensor rm = running_mean, rv = running_var;
    rm.mul_(1.0 - momentum).add_(g.mean.to(rdt), momentum);
    rv.mul_(1.0 - momentum).add_(unbiased.to(rdt), momentum);
  }

  // 3. y = x * scale + shift per channel: scale = w * invstd, shift = b - mean * scale
  const Tensor mean_t = g.mean.to(ct);
  const Tensor invstd_t = invstd64.to(ct);
  const Tensor scale = weight.defined() ? weight.to(ct) * invstd_t : invstd_t;
  const Tensor shift = (bias.defined() ? bias.to(ct) : zeros({C}, on_dev)) - mean_t * scale;
  Tensor out = affine_per_channel(input, scale, shift);
  if (!grad) return out;

  // 4. backward: local sums of dy and dy * (x - mean); the input's gradient needs their
  // global sums (one all-reduce of 2C values), the parameters' gradients stay local.
  record(
      "SyncBatchNormBackward", {input, weight, bias}, {&out},
      [sx = SavedTensor(input), sw = SavedTensor(weight), mean_t, invstd_t, sync, ct, eps,
       count = g.count.to(ct), wdt = weight.defined() ? weight.dtype() : input.dtype(),
       bdt = bias.defined() ? bias.dtype() : input.dtype()](const BackwardCtx& c) -> variable_list {
        const char* name = "SyncBatchNormBackward";
        NoGradGuard ng;
        const Tensor in = sx.unpack(name);
        const Tensor w = sw.unpack(name);
        const Tensor dy = c.grad();
        const int64_t C = in.size(1);
        // Local sums in one fused pass: batch_norm's evaluation-mode backward with the global
        // mean and invstd gives sum(dy * (x - mean)) * invstd (weight's slot; ones when the
        // layer has none) and sum(dy) (bias's slot).
        const TensorOptions o{.dtype = ct, .device = in.device()};
        auto local = ops::batch_norm_backward(dy, in, {Tensor(), mean_t, invstd_t}, ones({C}, o),
                                              ct, false, eps, {false, true, true});
        const Tensor sums = cat({local[2].to(ct), local[1].to(ct)});  // [sdy, sdyx * invstd]
        variable_list r(3);
        if (c.needs(1)) r[1] = local[1].to(wdt);
        if (c.needs(2)) r[2] = local[2].to(bdt);
        if (c.needs(0)) {
          sync->all_reduce_sum(sums);
          const Tensor sdy = ops::narrow(sums, 0, 0, C);
          const Tensor sdyx_invstd = ops::narrow(sums, 0, C, C);
          // dx = k (dy - sdy / count - (x - mean) invstd^2 sdyx / count), k = w invstd,
          //    = dy k + x a + (-a mean - k sdy / count),  a = -k invstd sdyx_invstd / count
          const Tensor k = w.defined() ? w.to(ct) * invstd_t : invstd_t;
          const Tensor a = k * invstd_t * sdyx_invstd / (-count);  // count: 0-d, on the device
          const Tensor b = (a * mean_t + k * sdy / count) * -1.0;
          Tensor dx = affine_per_channel(in.to(ct), a, b);  // one rounding for 16-bit inputs
          dx.add_(affine_per_channel(dy.to(ct), k, zeros({C}, o)));
          r[0] = dx.to(in.dtype());
        }
        return r;
      });
  return out;
}

int64_t convert_sync_batchnorm(Module& module, StatsSyncPtr sync) {
  int64_t n = 0;
  module.apply([&](Module& m) {
    if (auto* bn = dynamic_cast<BatchNormBase*>(&m)) {
      bn->stats_sync = sync;
      ++n;
    }
  });
  return n;
}

}  // namespace sl::nn

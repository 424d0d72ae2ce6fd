// CPU kernels of the optim-fused family (Note [Optimizer kernels over flat spans]).
//
// Each kernel walks its spans once: the range is split across threads, and each thread works
// through chunks small enough to stay in L1, running the update's statements chunk by chunk as
// Eigen array expressions. Eigen keeps every operation of an expression (one rounding per
// operation, no reassociation, no FMA contraction without -mfma) and vectorises sqrt, which a
// plain loop with std::sqrt does not under GCC's default -fmath-errno. 16-bit operands are
// converted to float in a per-chunk buffer and written back after the chunk.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/cpu/eigen.h"  // Note [Eigen's fast math]
#include "core/cpu/loops.h"
#include "core/ops/optim.h"

namespace sl::cpu {
namespace {

/// Elements per chunk (per operand buffer: 4 KiB in float, 8 KiB in double).
constexpr int64_t kChunk = 1024;
/// Elements per thread below which a step stays single-threaded.
constexpr int64_t kOptimGrain = 1 << 16;

template <class C>
using Arr = Eigen::Map<Eigen::Array<C, Eigen::Dynamic, 1>>;

/// A chunk of a span of T seen as compute type C: the span itself when T == C, else a local
/// float buffer filled from it (load) and, for outputs, stored back (store).
template <class T, class C>
struct ChunkView {
  T* src;
  int64_t n;
  C local[std::is_same_v<T, C> ? 1 : kChunk];
  ChunkView(T* s, int64_t count, bool load) : src(s), n(count) {
    if constexpr (!std::is_same_v<T, C>) {
      if (load) {
        for (int64_t i = 0; i < n; ++i) local[i] = static_cast<C>(src[i]);
      }
    }
  }
  C* data() {
    if constexpr (std::is_same_v<T, C>)
      return src;
    else
      return local;
  }
  Arr<C> arr() { return Arr<C>(data(), n); }
  void store() {
    if constexpr (!std::is_same_v<T, C>) {
      for (int64_t i = 0; i < n; ++i) src[i] = static_cast<T>(local[i]);
    }
  }
};

/// Runs body(begin, n) over chunks of [0, total), threads over large ranges.
template <class Body>
void for_chunks(int64_t total, const Body& body) {
  parallel_for(0, total, kOptimGrain, [&](int64_t b, int64_t e) {
    for (int64_t s = b; s < e; s += kChunk) body(s, std::min(kChunk, e - s));
  });
}

// ---- SGD ------------------------------------------------------------------------------------

template <class T, class G>
void sgd_typed(const Tensor& param, const Tensor& grad, const Tensor& buf, const SgdHyper& h,
               bool init) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  T* p = param.data_ptr<T>();
  G* g = grad.data_ptr<G>();
  T* mb = h.momentum != 0.0 ? buf.data_ptr<T>() : nullptr;
  const C wd = static_cast<C>(h.weight_decay), mom = static_cast<C>(h.momentum);
  const C one_minus_damp = static_cast<C>(1.0 - h.dampening);
  const C neg_lr = static_cast<C>(-h.lr);
  for_chunks(param.numel(), [&](int64_t s, int64_t n) {
    ChunkView<T, C> P(p + s, n, true);
    // d_p starts as a copy of the gradient in compute precision (never written back)
    C d_local[kChunk];
    Arr<C> D(d_local, n);
    for (int64_t i = 0; i < n; ++i) d_local[i] = static_cast<C>(g[s + i]);
    if (h.maximize) D = -D;
    if (h.weight_decay != 0.0) D = D + P.arr() * wd;  // d_p.add(param, alpha=wd)
    if (mb) {
      ChunkView<T, C> B(mb + s, n, !init);
      if (init) {
        B.arr() = D;  // buf = clone(d_p)
      } else {
        B.arr() = B.arr() * mom + D * one_minus_damp;  // buf.mul_(m).add_(d_p, alpha=1 - damp)
      }
      if (h.nesterov) {
        D = D + B.arr() * mom;  // d_p.add(buf, alpha=momentum)
      } else {
        D = B.arr();
      }
      B.store();
    }
    P.arr() = P.arr() + D * neg_lr;  // param.add_(d_p, alpha=-lr)
    P.store();
  });
}

// ---- Adam / AdamW ---------------------------------------------------------------------------

template <class T, class G>
void adam_typed(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const Tensor& max_sq, int64_t step, const AdamHyper& h) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const AdamStepScalars sc = adam_step_scalars(h, step);
  T* p = param.data_ptr<T>();
  G* g = grad.data_ptr<G>();
  T* m = exp_avg.data_ptr<T>();
  T* v = exp_avg_sq.data_ptr<T>();
  T* vmax = h.amsgrad ? max_sq.data_ptr<T>() : nullptr;
  const C beta1 = static_cast<C>(h.beta1), beta2 = static_cast<C>(h.beta2);
  const C one_minus_beta1 = static_cast<C>(1.0 - h.beta1);
  const C one_minus_beta2 = static_cast<C>(1.0 - h.beta2);
  const C wd = static_cast<C>(h.weight_decay), decay = static_cast<C>(sc.decay);
  const C bc2_sqrt = static_cast<C>(sc.bias_correction2_sqrt), eps = static_cast<C>(h.eps);
  const C neg_step_size = static_cast<C>(-sc.step_size);
  for_chunks(param.numel(), [&](int64_t s, int64_t n) {
    ChunkView<T, C> P(p + s, n, true), M(m + s, n, true), V(v + s, n, true);
    C g_local[kChunk], denom_local[kChunk];
    Arr<C> Gr(g_local, n), Den(denom_local, n);
    for (int64_t i = 0; i < n; ++i) g_local[i] = static_cast<C>(g[s + i]);
    if (h.maximize) Gr = -Gr;
    if (h.decoupled_weight_decay) {
      P.arr() = P.arr() * decay;  // param.mul_(1 - lr * weight_decay)
    } else if (h.weight_decay != 0.0) {
      Gr = Gr + P.arr() * wd;  // grad.add(param, alpha=weight_decay)
    }
    // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1): each product rounds, then the sum
    M.arr() = M.arr() * beta1 + Gr * one_minus_beta1;
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    V.arr() = V.arr() * beta2 + (Gr * one_minus_beta2) * Gr;
    if (vmax) {
      ChunkView<T, C> X(vmax + s, n, true);
      // torch.maximum(max_exp_avg_sq, exp_avg_sq, out=...), which propagates NaN; Eigen's
      // default max does not promise to (here it kept the old maximum at every position).
      X.arr() = X.arr().binaryExpr(V.arr(), [](C a, C b) { return a < b || b != b ? b : a; });
      Den = X.arr().sqrt() / bc2_sqrt + eps;
      X.store();
    } else {
      Den = V.arr().sqrt() / bc2_sqrt + eps;  // (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
    }
    P.arr() = P.arr() + (M.arr() * neg_step_size) / Den;  // addcdiv_(exp_avg, denom, -step_size)
    P.store();
    M.store();
    V.store();
  });
}

// ---- RMSprop ---------------------------------------------------------------------------------

template <class T, class G>
void rmsprop_typed(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                   const Tensor& grad_avg, const Tensor& buf, const RmspropHyper& h) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  T* p = param.data_ptr<T>();
  G* g = grad.data_ptr<G>();
  T* sq = square_avg.data_ptr<T>();
  T* ga = h.centered ? grad_avg.data_ptr<T>() : nullptr;
  T* mb = h.momentum > 0.0 ? buf.data_ptr<T>() : nullptr;
  const C alpha = static_cast<C>(h.alpha), one_minus_alpha = static_cast<C>(1.0 - h.alpha);
  const C wd = static_cast<C>(h.weight_decay), mom = static_cast<C>(h.momentum);
  const C eps = static_cast<C>(h.eps), neg_lr = static_cast<C>(-h.lr);
  for_chunks(param.numel(), [&](int64_t s, int64_t n) {
    ChunkView<T, C> P(p + s, n, true), SQ(sq + s, n, true);
    C g_local[kChunk], avg_local[kChunk];
    Arr<C> Gr(g_local, n), Avg(avg_local, n);
    for (int64_t i = 0; i < n; ++i) g_local[i] = static_cast<C>(g[s + i]);
    if (h.maximize) Gr = -Gr;
    if (h.weight_decay != 0.0) Gr = Gr + P.arr() * wd;  // grad.add(param, alpha=weight_decay)
    // square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
    SQ.arr() = SQ.arr() * alpha + (Gr * one_minus_alpha) * Gr;
    if (ga) {
      ChunkView<T, C> GA(ga + s, n, true);
      GA.arr() = GA.arr() * alpha + Gr * one_minus_alpha;  // grad_avg.mul_(alpha).add_(grad, ..)
      // square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_().add_(eps): (-1 * ga) * ga is
      // -(ga * ga) exactly
      Avg = (SQ.arr() - GA.arr() * GA.arr()).sqrt() + eps;
      GA.store();
    } else {
      Avg = SQ.arr().sqrt() + eps;  // square_avg.sqrt().add_(eps)
    }
    if (mb) {
      ChunkView<T, C> B(mb + s, n, true);
      B.arr() = B.arr() * mom + Gr / Avg;    // buf.mul_(momentum).addcdiv_(grad, avg)
      P.arr() = P.arr() + B.arr() * neg_lr;  // param.add_(buf, alpha=-lr)
      B.store();
    } else {
      P.arr() = P.arr() + (Gr * neg_lr) / Avg;  // param.addcdiv_(grad, avg, value=-lr)
    }
    P.store();
    SQ.store();
  });
}

// ---- Adagrad ---------------------------------------------------------------------------------

template <class T, class G>
void adagrad_typed(const Tensor& param, const Tensor& grad, const Tensor& sum, int64_t step,
                   const AdagradHyper& h) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  T* p = param.data_ptr<T>();
  G* g = grad.data_ptr<G>();
  T* sm = sum.data_ptr<T>();
  const C wd = static_cast<C>(h.weight_decay), eps = static_cast<C>(h.eps);
  const C neg_clr = static_cast<C>(-adagrad_clr(h, step));
  for_chunks(param.numel(), [&](int64_t s, int64_t n) {
    ChunkView<T, C> P(p + s, n, true), S(sm + s, n, true);
    C g_local[kChunk], std_local[kChunk];
    Arr<C> Gr(g_local, n), Std(std_local, n);
    for (int64_t i = 0; i < n; ++i) g_local[i] = static_cast<C>(g[s + i]);
    if (h.maximize) Gr = -Gr;
    if (h.weight_decay != 0.0) Gr = Gr + P.arr() * wd;  // grad.add(param, alpha=weight_decay)
    S.arr() = S.arr() + Gr * Gr;                        // state_sum.addcmul_(grad, grad, value=1)
    Std = S.arr().sqrt() + eps;                         // state_sum.sqrt().add_(eps)
    P.arr() = P.arr() + (Gr * neg_clr) / Std;           // param.addcdiv_(grad, std, value=-clr)
    P.store();
    S.store();
  });
}

// ---- Adamax / NAdam / RAdam -----------------------------------------------------------------

template <class T, class G>
void adamax_typed(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                  const Tensor& exp_inf, int64_t step, const AdamaxHyper& h) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  T* p = param.data_ptr<T>();
  G* g = grad.data_ptr<G>();
  T* m = exp_avg.data_ptr<T>();
  T* u = exp_inf.data_ptr<T>();
  const C beta1 = static_cast<C>(h.beta1), beta2 = static_cast<C>(h.beta2);
  const C one_minus_beta1 = static_cast<C>(1.0 - h.beta1);
  const C wd = static_cast<C>(h.weight_decay), eps = static_cast<C>(h.eps);
  const C neg_clr = static_cast<C>(-adamax_clr(h, step));
  for_chunks(param.numel(), [&](int64_t s, int64_t n) {
    ChunkView<T, C> P(p + s, n, true), M(m + s, n, true), U(u + s, n, true);
    C g_local[kChunk];
    Arr<C> Gr(g_local, n);
    for (int64_t i = 0; i < n; ++i) g_local[i] = static_cast<C>(g[s + i]);
    if (h.maximize) Gr = -Gr;
    if (h.weight_decay != 0.0) Gr = Gr + P.arr() * wd;  // grad.add(param, alpha=weight_decay)
    M.arr() = M.arr() * beta1 + Gr * one_minus_beta1;   // exp_avg.mul_(beta1).add_(grad, 1 - b1)
    // torch.amax(cat([exp_inf.mul_(beta2), grad.abs().add_(eps)]), 0): NaN propagates
    U.arr() = (U.arr() * beta2).binaryExpr(Gr.abs() + eps, [](C a, C b) {
      return a < b || b != b ? b : a;
    });
    P.arr() = P.arr() + (M.arr() * neg_clr) / U.arr();  // param.addcdiv_(exp_avg, exp_inf, -clr)
    P.store();
    M.store();
    U.store();
  });
}

template <class T, class G>
void nadam_typed(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, int64_t step, double mu_product, const NadamHyper& h) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const NadamStepScalars sc = nadam_step_scalars(h, step, mu_product);
  T* p = param.data_ptr<T>();
  G* g = grad.data_ptr<G>();
  T* m = exp_avg.data_ptr<T>();
  T* v = exp_avg_sq.data_ptr<T>();
  const C beta1 = static_cast<C>(h.beta1), beta2 = static_cast<C>(h.beta2);
  const C one_minus_beta1 = static_cast<C>(1.0 - h.beta1);
  const C one_minus_beta2 = static_cast<C>(1.0 - h.beta2);
  const C wd = static_cast<C>(h.weight_decay), eps = static_cast<C>(h.eps);
  const C bc2 = static_cast<C>(sc.bias_correction2);
  const C grad_coef = static_cast<C>(sc.grad_coef), avg_coef = static_cast<C>(sc.exp_avg_coef);
  for_chunks(param.numel(), [&](int64_t s, int64_t n) {
    ChunkView<T, C> P(p + s, n, true), M(m + s, n, true), V(v + s, n, true);
    C g_local[kChunk], denom_local[kChunk];
    Arr<C> Gr(g_local, n), Den(denom_local, n);
    for (int64_t i = 0; i < n; ++i) g_local[i] = static_cast<C>(g[s + i]);
    if (h.weight_decay != 0.0) Gr = Gr + P.arr() * wd;  // grad.add(param, alpha=weight_decay)
    M.arr() = M.arr() * beta1 + Gr * one_minus_beta1;   // exp_avg.mul_(beta1).add_(grad, 1 - b1)
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    V.arr() = V.arr() * beta2 + (Gr * one_minus_beta2) * Gr;
    Den = (V.arr() / bc2).sqrt() + eps;  // exp_avg_sq.div(bias_correction2).sqrt().add_(eps)
    // param.addcdiv_(grad, denom, value=grad_coef), then addcdiv_(exp_avg, denom, exp_avg_coef)
    P.arr() = P.arr() + (Gr * grad_coef) / Den;
    P.arr() = P.arr() + (M.arr() * avg_coef) / Den;
    P.store();
    M.store();
    V.store();
  });
}

template <class T, class G>
void radam_typed(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, int64_t step, const RadamHyper& h) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const RadamStepScalars sc = radam_step_scalars(h, step);
  T* p = param.data_ptr<T>();
  G* g = grad.data_ptr<G>();
  T* m = exp_avg.data_ptr<T>();
  T* v = exp_avg_sq.data_ptr<T>();
  const C beta1 = static_cast<C>(h.beta1), beta2 = static_cast<C>(h.beta2);
  const C one_minus_beta1 = static_cast<C>(1.0 - h.beta1);
  const C one_minus_beta2 = static_cast<C>(1.0 - h.beta2);
  const C wd = static_cast<C>(h.weight_decay), eps = static_cast<C>(h.eps);
  const C bc1 = static_cast<C>(sc.bias_correction1),
          bc2_sqrt = static_cast<C>(sc.bias_correction2_sqrt);
  const C lr = static_cast<C>(h.lr), rect = static_cast<C>(sc.rect);
  for_chunks(param.numel(), [&](int64_t s, int64_t n) {
    ChunkView<T, C> P(p + s, n, true), M(m + s, n, true), V(v + s, n, true);
    C g_local[kChunk], upd_local[kChunk];
    Arr<C> Gr(g_local, n), Upd(upd_local, n);
    for (int64_t i = 0; i < n; ++i) g_local[i] = static_cast<C>(g[s + i]);
    if (h.weight_decay != 0.0) Gr = Gr + P.arr() * wd;  // grad.add(param, alpha=weight_decay)
    M.arr() = M.arr() * beta1 + Gr * one_minus_beta1;   // exp_avg.mul_(beta1).add_(grad, 1 - b1)
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    V.arr() = V.arr() * beta2 + (Gr * one_minus_beta2) * Gr;
    Upd = (M.arr() / bc1) * lr;  // bias_corrected_exp_avg = exp_avg / bc1; (.. * lr)
    if (sc.rectified) {
      // adaptive_lr = sqrt(bc2) / exp_avg_sq.sqrt().add_(eps): Tensor.__rtruediv__ is
      // reciprocal() * sqrt(bc2), two roundings; then (.. * adaptive_lr) * rect
      Upd = (Upd * ((V.arr().sqrt() + eps).inverse() * bc2_sqrt)) * rect;
    }
    P.arr() = P.arr() - Upd;  // param.add_(.., alpha=-1.0)
    P.store();
    M.store();
    V.store();
  });
}

// ---- LAMB (Note [LAMB over flat spans]) -----------------------------------------------------

/// Blocks of this many elements are summed independently, then combined in order.
constexpr int64_t kNormBlock = 16384;

/// Sum of x^2 over d[0, n) in double, in a fixed order (8 accumulators per block, blocks
/// combined in order): the same bits for any thread count.
template <class T>
double sum_sq(const T* d, int64_t n) {
  auto block_sum = [&](int64_t b, int64_t e) {
    double acc[8] = {};
    int64_t i = b;
    for (; i + 8 <= e; i += 8) {
      for (int j = 0; j < 8; ++j) {
        double a = static_cast<double>(d[i + j]);
        acc[j] += a * a;
      }
    }
    for (; i < e; ++i) {
      double a = static_cast<double>(d[i]);
      acc[i & 7] += a * a;
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  };
  return parallel_reduce<double>(0, n, kNormBlock, 0.0, block_sum,
                                 [](double a, double b) { return a + b; });
}

template <class T, class G>
void lamb_moments_typed(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                        const Tensor& exp_avg_sq, const Tensor& update,
                        const std::vector<int64_t>& bounds, const std::vector<int64_t>& rows,
                        const Tensor& sums, int64_t step, const LambHyper& h) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const LambStepScalars sc = lamb_step_scalars(h, step);
  T* p = param.data_ptr<T>();
  G* g = grad.data_ptr<G>();
  T* m = exp_avg.data_ptr<T>();
  T* v = exp_avg_sq.data_ptr<T>();
  T* u = update.data_ptr<T>();
  const C beta1 = static_cast<C>(h.beta1), beta2 = static_cast<C>(h.beta2);
  const C one_minus_beta1 = static_cast<C>(1.0 - h.beta1);
  const C one_minus_beta2 = static_cast<C>(1.0 - h.beta2);
  const C bc1 = static_cast<C>(sc.bias_correction1), bc2 = static_cast<C>(sc.bias_correction2);
  const C wd = static_cast<C>(h.weight_decay), eps = static_cast<C>(h.eps);
  for_chunks(param.numel(), [&](int64_t s, int64_t n) {
    ChunkView<T, C> P(p + s, n, true), M(m + s, n, true), V(v + s, n, true), U(u + s, n, false);
    C g_local[kChunk], den_local[kChunk];
    Arr<C> Gr(g_local, n), Den(den_local, n);
    for (int64_t i = 0; i < n; ++i) g_local[i] = static_cast<C>(g[s + i]);
    M.arr() = M.arr() * beta1 + Gr * one_minus_beta1;         // m = b1 m + (1 - b1) g
    V.arr() = V.arr() * beta2 + (Gr * one_minus_beta2) * Gr;  // v = b2 v + (1 - b2) g g
    // u = (m / bc1) / (sqrt(v / bc2) + eps) [+ wd w], the root correctly rounded in packets and
    // tails alike (Note [Eigen's fast math])
    Den = (V.arr() / bc2).sqrt();
    U.arr() = (M.arr() / bc1) / (Den + eps);
    if (h.weight_decay != 0.0) U.arr() = U.arr() + P.arr() * wd;
    U.store();
    M.store();
    V.store();
  });
  double* out = sums.data_ptr<double>();
  for (size_t j = 0; j < rows.size(); ++j) {
    const int64_t b = bounds[j], n = bounds[j + 1] - bounds[j];
    out[2 * rows[j]] = sum_sq(p + b, n);
    out[2 * rows[j] + 1] = sum_sq(u + b, n);
  }
}

template <class T>
void lamb_apply_typed(const Tensor& param, const Tensor& update, const std::vector<int64_t>& bounds,
                      const std::vector<int64_t>& rows, const Tensor& sums, double lr) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  T* p = param.data_ptr<T>();
  T* u = update.data_ptr<T>();
  const double* in = sums.data_ptr<double>();
  for (size_t j = 0; j < rows.size(); ++j) {
    const int64_t b = bounds[j];
    const double r = lamb_trust_ratio(in[2 * rows[j]], in[2 * rows[j] + 1]);
    const C neg_step = static_cast<C>(-(lr * r));
    parallel_for(0, bounds[j + 1] - b, kOptimGrain, [&](int64_t cb, int64_t ce) {
      for (int64_t s = cb; s < ce; s += kChunk) {
        const int64_t n = std::min(kChunk, ce - s);
        ChunkView<T, C> P(p + b + s, n, true), U(u + b + s, n, true);
        P.arr() = P.arr() + U.arr() * neg_step;  // w -= (lr r) u
        P.store();
      }
    });
  }
}

/// Dispatches (param dtype T, grad dtype G) to f(TypeTag<T>, TypeTag<G>).
template <class F>
void visit_param_grad(DType pt, DType gt, const F& f) {
  if (pt == DType::f32 && gt == DType::f16) return f(TypeTag<float>{}, TypeTag<Half>{});
  if (pt == DType::f32 && gt == DType::bf16) return f(TypeTag<float>{}, TypeTag<BFloat16>{});
  visit_floating(pt, "optimizer step", [&](auto tag) {
    using T = typename decltype(tag)::type;
    f(tag, TypeTag<T>{});
  });
}

void sgd_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& buf, const SgdHyper& h,
                  bool init) {
  visit_param_grad(param.dtype(), grad.dtype(), [&](auto pt, auto gt) {
    sgd_typed<typename decltype(pt)::type, typename decltype(gt)::type>(param, grad, buf, h, init);
  });
}

void adam_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                   const Tensor& exp_avg_sq, const Tensor& max_sq, int64_t step,
                   const AdamHyper& h) {
  visit_param_grad(param.dtype(), grad.dtype(), [&](auto pt, auto gt) {
    adam_typed<typename decltype(pt)::type, typename decltype(gt)::type>(
        param, grad, exp_avg, exp_avg_sq, max_sq, step, h);
  });
}

void rmsprop_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                      const Tensor& grad_avg, const Tensor& buf, const RmspropHyper& h) {
  visit_param_grad(param.dtype(), grad.dtype(), [&](auto pt, auto gt) {
    rmsprop_typed<typename decltype(pt)::type, typename decltype(gt)::type>(param, grad, square_avg,
                                                                            grad_avg, buf, h);
  });
}

void adagrad_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& sum, int64_t step,
                      const AdagradHyper& h) {
  visit_param_grad(param.dtype(), grad.dtype(), [&](auto pt, auto gt) {
    adagrad_typed<typename decltype(pt)::type, typename decltype(gt)::type>(param, grad, sum, step,
                                                                            h);
  });
}

void adamax_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                     const Tensor& exp_inf, int64_t step, const AdamaxHyper& h) {
  visit_param_grad(param.dtype(), grad.dtype(), [&](auto pt, auto gt) {
    adamax_typed<typename decltype(pt)::type, typename decltype(gt)::type>(param, grad, exp_avg,
                                                                           exp_inf, step, h);
  });
}

void nadam_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                    const Tensor& exp_avg_sq, int64_t step, double mu_product,
                    const NadamHyper& h) {
  visit_param_grad(param.dtype(), grad.dtype(), [&](auto pt, auto gt) {
    nadam_typed<typename decltype(pt)::type, typename decltype(gt)::type>(
        param, grad, exp_avg, exp_avg_sq, step, mu_product, h);
  });
}

void radam_step_cpu(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                    const Tensor& exp_avg_sq, int64_t step, const RadamHyper& h) {
  visit_param_grad(param.dtype(), grad.dtype(), [&](auto pt, auto gt) {
    radam_typed<typename decltype(pt)::type, typename decltype(gt)::type>(param, grad, exp_avg,
                                                                          exp_avg_sq, step, h);
  });
}

void lamb_moments_cpu(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                      const Tensor& exp_avg_sq, const Tensor& update,
                      const std::vector<int64_t>& bounds, const std::vector<int64_t>& rows,
                      const Tensor& sums, int64_t step, const LambHyper& h) {
  visit_param_grad(param.dtype(), grad.dtype(), [&](auto pt, auto gt) {
    lamb_moments_typed<typename decltype(pt)::type, typename decltype(gt)::type>(
        param, grad, exp_avg, exp_avg_sq, update, bounds, rows, sums, step, h);
  });
}

void lamb_apply_cpu(const Tensor& param, const Tensor& update, const std::vector<int64_t>& bounds,
                    const std::vector<int64_t>& rows, const Tensor& sums, double lr) {
  visit_floating(param.dtype(), "lamb_apply", [&](auto tag) {
    lamb_apply_typed<typename decltype(tag)::type>(param, update, bounds, rows, sums, lr);
  });
}

// ---- mixed precision and norms ---------------------------------------------------------------

void unscale_check_cpu(const Tensor& grad, const Tensor& found_inf, double inv_scale) {
  visit_floating(grad.dtype(), "unscale_check_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    T* g = grad.data_ptr<T>();
    const C scale = static_cast<C>(inv_scale);
    auto bad = parallel_reduce<int>(
        0, grad.numel(), kOptimGrain, 0,
        [&](int64_t b, int64_t e) {
          int any = 0;
          for (int64_t i = b; i < e; ++i) {
            C x = static_cast<C>(g[i]);
            any |= !std::isfinite(x);
            g[i] = static_cast<T>(x * scale);
          }
          return any;
        },
        [](int a, int b) { return a | b; });
    if (bad) found_inf.data_ptr<float>()[0] = 1.0f;
  });
}

double norm_partial_cpu(const Tensor& x, double p) {
  return visit_floating(x.dtype(), "norm_partial", [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    const T* d = x.data_ptr<T>();
    const int64_t n = x.numel();
    if (std::isinf(p)) {
      return parallel_reduce<double>(
          0, n, kNormBlock, 0.0,
          [&](int64_t b, int64_t e) {
            double mx = 0.0;
            bool nan = false;
            for (int64_t i = b; i < e; ++i) {
              double a = std::abs(static_cast<double>(d[i]));
              nan |= std::isnan(a);
              mx = a > mx ? a : mx;
            }
            return nan ? std::nan("") : mx;
          },
          [](double a, double b) {
            return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b);
          });
    }
    auto block_sum = [&](int64_t b, int64_t e) {
      double acc[8] = {};
      int64_t i = b;
      auto term = [&](T v) {
        double a = std::abs(static_cast<double>(v));
        if (p == 2.0) return a * a;
        if (p == 1.0) return a;
        return std::pow(a, p);
      };
      for (; i + 8 <= e; i += 8) {
        for (int j = 0; j < 8; ++j) acc[j] += term(d[i + j]);
      }
      for (; i < e; ++i) acc[i & 7] += term(d[i]);
      return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    };
    return parallel_reduce<double>(0, n, kNormBlock, 0.0, block_sum,
                                   [](double a, double b) { return a + b; });
  });
}

}  // namespace

SL_REGISTER_KERNEL(sgd_step_kernel, DeviceKind::cpu, &sgd_step_cpu);
SL_REGISTER_KERNEL(adam_step_kernel, DeviceKind::cpu, &adam_step_cpu);
SL_REGISTER_KERNEL(rmsprop_step_kernel, DeviceKind::cpu, &rmsprop_step_cpu);
SL_REGISTER_KERNEL(adagrad_step_kernel, DeviceKind::cpu, &adagrad_step_cpu);
SL_REGISTER_KERNEL(adamax_step_kernel, DeviceKind::cpu, &adamax_step_cpu);
SL_REGISTER_KERNEL(nadam_step_kernel, DeviceKind::cpu, &nadam_step_cpu);
SL_REGISTER_KERNEL(radam_step_kernel, DeviceKind::cpu, &radam_step_cpu);
SL_REGISTER_KERNEL(lamb_moments_kernel, DeviceKind::cpu, &lamb_moments_cpu);
SL_REGISTER_KERNEL(lamb_apply_kernel, DeviceKind::cpu, &lamb_apply_cpu);
SL_REGISTER_KERNEL(unscale_check_kernel, DeviceKind::cpu, &unscale_check_cpu);
SL_REGISTER_KERNEL(norm_partial_kernel, DeviceKind::cpu, &norm_partial_cpu);

}  // namespace sl::cpu

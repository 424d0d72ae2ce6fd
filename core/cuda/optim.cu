// CUDA kernels of the optim-fused family (Note [Optimizer kernels over flat spans]): one thread
// per element, each statement of the CPU kernel (core/cpu/optim.cpp) as one correctly rounded
// operation (the __f*_rn / __d*_rn intrinsics stop nvcc from contracting a multiply and an add
// into an FMA), so CPU and GPU updates agree to the last bit.
#include "core/cuda/float_kernels.cuh"
#include "core/cuda/kernels_optim.h"
#include "core/cuda/loops.cuh"
#include "core/cuda/reduce.cuh"

namespace sl::cuda {
namespace {

__device__ __forceinline__ float mul(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ __forceinline__ double mul(double a, double b) {
  return __dmul_rn(a, b);
}
__device__ __forceinline__ float add(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ double add(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ __forceinline__ float div(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ __forceinline__ double div(double a, double b) {
  return __ddiv_rn(a, b);
}
__device__ __forceinline__ float sqrt_rn(float a) {
  return __fsqrt_rn(a);
}
__device__ __forceinline__ double sqrt_rn(double a) {
  return __dsqrt_rn(a);
}

/// float for f32 / f16 / bf16 parameters, double for f64 (the CPU kernel's compute type).
template <class T>
using opt_c = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T, class G>
__global__ void sgd_kernel(T* p, const G* g, T* mb, int64_t n, SgdArgs a) {
  using C = opt_c<T>;
  const C wd = static_cast<C>(a.weight_decay), mom = static_cast<C>(a.momentum);
  const C one_minus_damp = static_cast<C>(1.0 - a.dampening), neg_lr = static_cast<C>(-a.lr);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    C pv = static_cast<C>(to_comp(p[i]));
    C d = static_cast<C>(to_comp(g[i]));
    if (a.maximize) d = -d;
    if (a.weight_decay != 0.0) d = add(d, mul(pv, wd));
    if (mb) {
      C b;
      if (a.init_momentum) {
        b = d;
      } else {
        b = add(mul(static_cast<C>(to_comp(mb[i])), mom), mul(d, one_minus_damp));
      }
      d = a.nesterov ? add(d, mul(b, mom)) : b;
      mb[i] = convert<T>(b);
    }
    p[i] = convert<T>(add(pv, mul(d, neg_lr)));
  }
}

template <class T, class G>
__global__ void adam_kernel(T* p, const G* g, T* m, T* v, T* vmax, int64_t n, AdamArgs a) {
  using C = opt_c<T>;
  const C beta1 = static_cast<C>(a.beta1), beta2 = static_cast<C>(a.beta2);
  const C omb1 = static_cast<C>(1.0 - a.beta1), omb2 = static_cast<C>(1.0 - a.beta2);
  const C wd = static_cast<C>(a.weight_decay), decay = static_cast<C>(a.decay);
  const C bc2 = static_cast<C>(a.bias_correction2_sqrt), eps = static_cast<C>(a.eps);
  const C neg_step = static_cast<C>(-a.step_size);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    C pv = static_cast<C>(to_comp(p[i]));
    C gv = static_cast<C>(to_comp(g[i]));
    if (a.maximize) gv = -gv;
    if (a.decoupled_weight_decay) {
      pv = mul(pv, decay);
    } else if (a.weight_decay != 0.0) {
      gv = add(gv, mul(pv, wd));
    }
    const C mv = add(mul(static_cast<C>(to_comp(m[i])), beta1), mul(gv, omb1));
    const C vv = add(mul(static_cast<C>(to_comp(v[i])), beta2), mul(mul(gv, omb2), gv));
    C den;
    if (vmax) {
      C x = static_cast<C>(to_comp(vmax[i]));
      x = (x < vv || vv != vv) ? vv : x;  // torch.maximum: NaN in either operand wins
      vmax[i] = convert<T>(x);
      den = add(div(sqrt_rn(x), bc2), eps);
    } else {
      den = add(div(sqrt_rn(vv), bc2), eps);
    }
    p[i] = convert<T>(add(pv, div(mul(mv, neg_step), den)));
    m[i] = convert<T>(mv);
    v[i] = convert<T>(vv);
  }
}

template <class T, class G>
__global__ void rmsprop_kernel(T* p, const G* g, T* sq, T* ga, T* mb, int64_t n, RmspropArgs a) {
  using C = opt_c<T>;
  const C alpha = static_cast<C>(a.alpha), oma = static_cast<C>(1.0 - a.alpha);
  const C wd = static_cast<C>(a.weight_decay), mom = static_cast<C>(a.momentum);
  const C eps = static_cast<C>(a.eps), neg_lr = static_cast<C>(-a.lr);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    C pv = static_cast<C>(to_comp(p[i]));
    C gv = static_cast<C>(to_comp(g[i]));
    if (a.maximize) gv = -gv;
    if (a.weight_decay != 0.0) gv = add(gv, mul(pv, wd));
    const C sv = add(mul(static_cast<C>(to_comp(sq[i])), alpha), mul(mul(gv, oma), gv));
    C avg;
    if (ga) {
      const C gav = add(mul(static_cast<C>(to_comp(ga[i])), alpha), mul(gv, oma));
      ga[i] = convert<T>(gav);
      avg = add(sqrt_rn(add(sv, -mul(gav, gav))), eps);
    } else {
      avg = add(sqrt_rn(sv), eps);
    }
    if (mb) {
      const C bv = add(mul(static_cast<C>(to_comp(mb[i])), mom), div(gv, avg));
      mb[i] = convert<T>(bv);
      pv = add(pv, mul(bv, neg_lr));
    } else {
      pv = add(pv, div(mul(gv, neg_lr), avg));
    }
    p[i] = convert<T>(pv);
    sq[i] = convert<T>(sv);
  }
}

template <class T, class G>
__global__ void adagrad_kernel(T* p, const G* g, T* sm, int64_t n, AdagradArgs a) {
  using C = opt_c<T>;
  const C wd = static_cast<C>(a.weight_decay), eps = static_cast<C>(a.eps);
  const C neg_clr = static_cast<C>(-a.clr);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const C pv = static_cast<C>(to_comp(p[i]));
    C gv = static_cast<C>(to_comp(g[i]));
    if (a.maximize) gv = -gv;
    if (a.weight_decay != 0.0) gv = add(gv, mul(pv, wd));
    const C sv = add(static_cast<C>(to_comp(sm[i])), mul(gv, gv));
    const C den = add(sqrt_rn(sv), eps);
    p[i] = convert<T>(add(pv, div(mul(gv, neg_clr), den)));
    sm[i] = convert<T>(sv);
  }
}

template <class T, class G>
__global__ void adamax_kernel(T* p, const G* g, T* m, T* u, int64_t n, AdamaxArgs a) {
  using C = opt_c<T>;
  const C beta1 = static_cast<C>(a.beta1), beta2 = static_cast<C>(a.beta2);
  const C omb1 = static_cast<C>(1.0 - a.beta1);
  const C wd = static_cast<C>(a.weight_decay), eps = static_cast<C>(a.eps);
  const C neg_clr = static_cast<C>(-a.clr);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const C pv = static_cast<C>(to_comp(p[i]));
    C gv = static_cast<C>(to_comp(g[i]));
    if (a.maximize) gv = -gv;
    if (a.weight_decay != 0.0) gv = add(gv, mul(pv, wd));
    const C mv = add(mul(static_cast<C>(to_comp(m[i])), beta1), mul(gv, omb1));
    const C x = mul(static_cast<C>(to_comp(u[i])), beta2);
    const C y = add(gv < C(0) ? -gv : gv, eps);
    const C uv = (x < y || y != y) ? y : x;  // torch.amax: NaN in either operand wins
    p[i] = convert<T>(add(pv, div(mul(mv, neg_clr), uv)));
    m[i] = convert<T>(mv);
    u[i] = convert<T>(uv);
  }
}

template <class T, class G>
__global__ void nadam_kernel(T* p, const G* g, T* m, T* v, int64_t n, NadamArgs a) {
  using C = opt_c<T>;
  const C beta1 = static_cast<C>(a.beta1), beta2 = static_cast<C>(a.beta2);
  const C omb1 = static_cast<C>(1.0 - a.beta1), omb2 = static_cast<C>(1.0 - a.beta2);
  const C wd = static_cast<C>(a.weight_decay), eps = static_cast<C>(a.eps);
  const C bc2 = static_cast<C>(a.bias_correction2);
  const C grad_coef = static_cast<C>(a.grad_coef), avg_coef = static_cast<C>(a.exp_avg_coef);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    C pv = static_cast<C>(to_comp(p[i]));
    C gv = static_cast<C>(to_comp(g[i]));
    if (a.weight_decay != 0.0) gv = add(gv, mul(pv, wd));
    const C mv = add(mul(static_cast<C>(to_comp(m[i])), beta1), mul(gv, omb1));
    const C vv = add(mul(static_cast<C>(to_comp(v[i])), beta2), mul(mul(gv, omb2), gv));
    const C den = add(sqrt_rn(div(vv, bc2)), eps);
    pv = add(pv, div(mul(gv, grad_coef), den));
    pv = add(pv, div(mul(mv, avg_coef), den));
    p[i] = convert<T>(pv);
    m[i] = convert<T>(mv);
    v[i] = convert<T>(vv);
  }
}

template <class T, class G>
__global__ void radam_kernel(T* p, const G* g, T* m, T* v, int64_t n, RadamArgs a) {
  using C = opt_c<T>;
  const C beta1 = static_cast<C>(a.beta1), beta2 = static_cast<C>(a.beta2);
  const C omb1 = static_cast<C>(1.0 - a.beta1), omb2 = static_cast<C>(1.0 - a.beta2);
  const C wd = static_cast<C>(a.weight_decay), eps = static_cast<C>(a.eps);
  const C lr = static_cast<C>(a.lr), bc1 = static_cast<C>(a.bias_correction1);
  const C bc2_sqrt = static_cast<C>(a.bias_correction2_sqrt), rect = static_cast<C>(a.rect);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const C pv = static_cast<C>(to_comp(p[i]));
    C gv = static_cast<C>(to_comp(g[i]));
    if (a.weight_decay != 0.0) gv = add(gv, mul(pv, wd));
    const C mv = add(mul(static_cast<C>(to_comp(m[i])), beta1), mul(gv, omb1));
    const C vv = add(mul(static_cast<C>(to_comp(v[i])), beta2), mul(mul(gv, omb2), gv));
    C upd = mul(div(mv, bc1), lr);
    if (a.rectified) {
      const C adaptive = mul(div(C(1), add(sqrt_rn(vv), eps)), bc2_sqrt);
      upd = mul(mul(upd, adaptive), rect);
    }
    p[i] = convert<T>(add(pv, -upd));
    m[i] = convert<T>(mv);
    v[i] = convert<T>(vv);
  }
}

template <class T, class G>
__global__ void lamb_moments_kernel(const T* p, const G* g, T* m, T* v, T* u, int64_t n,
                                    LambArgs a) {
  using C = opt_c<T>;
  const C beta1 = static_cast<C>(a.beta1), beta2 = static_cast<C>(a.beta2);
  const C omb1 = static_cast<C>(1.0 - a.beta1), omb2 = static_cast<C>(1.0 - a.beta2);
  const C bc1 = static_cast<C>(a.bias_correction1), bc2 = static_cast<C>(a.bias_correction2);
  const C wd = static_cast<C>(a.weight_decay), eps = static_cast<C>(a.eps);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const C gv = static_cast<C>(to_comp(g[i]));
    const C mv = add(mul(static_cast<C>(to_comp(m[i])), beta1), mul(gv, omb1));
    const C vv = add(mul(static_cast<C>(to_comp(v[i])), beta2), mul(mul(gv, omb2), gv));
    C uv = div(div(mv, bc1), add(sqrt_rn(div(vv, bc2)), eps));
    if (a.weight_decay != 0.0) uv = add(uv, mul(static_cast<C>(to_comp(p[i])), wd));
    u[i] = convert<T>(uv);
    m[i] = convert<T>(mv);
    v[i] = convert<T>(vv);
  }
}

template <class T>
__global__ void lamb_apply_kernel(T* p, const T* u, int64_t n, const double* sums, double lr) {
  using C = opt_c<T>;
  const double ws = sums[0], us = sums[1];
  const double r = ws > 0.0 && us > 0.0 ? __ddiv_rn(__dsqrt_rn(ws), __dsqrt_rn(us)) : 1.0;
  const C neg_step = static_cast<C>(-__dmul_rn(lr, r));
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    p[i] = convert<T>(add(static_cast<C>(to_comp(p[i])), mul(static_cast<C>(to_comp(u[i])), neg_step)));
  }
}

template <class T>
__global__ void unscale_kernel(T* g, float* found_inf, int64_t n, comp_t<T> scale) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  bool bad = false;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const comp_t<T> x = to_comp(g[i]);
    bad = bad || !isfinite(x);
    g[i] = convert<T>(x * scale);
  }
  if (bad) *found_inf = 1.0f;
}

template <class T>
struct AbsPowPolicy {
  using Acc = double;
  double p;
  bool inf;
  __device__ Acc identity() const { return 0.0; }
  __device__ Acc map(T v, int64_t, int64_t) const {
    const double x = ::fabs(static_cast<double>(to_comp(v)));
    if (inf || p == 1.0) return x;
    if (p == 2.0) return x * x;
    return ::pow(x, p);
  }
  __device__ Acc combine(Acc a, Acc b) const {
    if (!inf) return a + b;
    if (a != a) return a;
    if (b != b) return b;
    return b > a ? b : a;
  }
};

struct ScalarStore {
  double* out;
  __device__ void operator()(int64_t, double v) const { *out = v; }
};

/// Calls f(DevTag<T>{}, DevTag<G>{}) for the supported (param, grad) dtype pairs.
template <class F>
void visit_param_grad(DType pt, DType gt, F&& f) {
  if (pt == DType::f32 && gt == DType::f16) return f(DevTag<float>{}, DevTag<__half>{});
  if (pt == DType::f32 && gt == DType::bf16) return f(DevTag<float>{}, DevTag<__nv_bfloat16>{});
  SL_CHECK_DTYPE(pt == gt, "optimizer step: grad dtype ", dtype_name(gt),
                 " does not match param dtype ", dtype_name(pt));
  switch (pt) {
    case DType::f32:
      return f(DevTag<float>{}, DevTag<float>{});
    case DType::f64:
      return f(DevTag<double>{}, DevTag<double>{});
    case DType::f16:
      return f(DevTag<__half>{}, DevTag<__half>{});
    case DType::bf16:
      return f(DevTag<__nv_bfloat16>{}, DevTag<__nv_bfloat16>{});
    default:
      break;
  }
  ::sl::detail::throw_error<DTypeError>("optimizer step: expected a floating param, got ",
                                        dtype_name(pt));
}

}  // namespace

void launch_sgd_step(DType pt, DType gt, void* param, const void* grad, void* momentum, int64_t n,
                     const SgdArgs& a, cudaStream_t s) {
  if (n <= 0) return;
  visit_param_grad(pt, gt, [&](auto ptag, auto gtag) {
    using T = typename decltype(ptag)::type;
    using G = typename decltype(gtag)::type;
    sgd_kernel<T, G><<<grid_for(n), kBlockThreads, 0, s>>>(
        static_cast<T*>(param), static_cast<const G*>(grad), static_cast<T*>(momentum), n, a);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_adam_step(DType pt, DType gt, void* param, const void* grad, void* exp_avg,
                      void* exp_avg_sq, void* max_exp_avg_sq, int64_t n, const AdamArgs& a,
                      cudaStream_t s) {
  if (n <= 0) return;
  visit_param_grad(pt, gt, [&](auto ptag, auto gtag) {
    using T = typename decltype(ptag)::type;
    using G = typename decltype(gtag)::type;
    adam_kernel<T, G><<<grid_for(n), kBlockThreads, 0, s>>>(
        static_cast<T*>(param), static_cast<const G*>(grad), static_cast<T*>(exp_avg),
        static_cast<T*>(exp_avg_sq), static_cast<T*>(max_exp_avg_sq), n, a);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_rmsprop_step(DType pt, DType gt, void* param, const void* grad, void* square_avg,
                         void* grad_avg, void* momentum, int64_t n, const RmspropArgs& a,
                         cudaStream_t s) {
  if (n <= 0) return;
  visit_param_grad(pt, gt, [&](auto ptag, auto gtag) {
    using T = typename decltype(ptag)::type;
    using G = typename decltype(gtag)::type;
    rmsprop_kernel<T, G><<<grid_for(n), kBlockThreads, 0, s>>>(
        static_cast<T*>(param), static_cast<const G*>(grad), static_cast<T*>(square_avg),
        static_cast<T*>(grad_avg), static_cast<T*>(momentum), n, a);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_adagrad_step(DType pt, DType gt, void* param, const void* grad, void* sum, int64_t n,
                         const AdagradArgs& a, cudaStream_t s) {
  if (n <= 0) return;
  visit_param_grad(pt, gt, [&](auto ptag, auto gtag) {
    using T = typename decltype(ptag)::type;
    using G = typename decltype(gtag)::type;
    adagrad_kernel<T, G><<<grid_for(n), kBlockThreads, 0, s>>>(
        static_cast<T*>(param), static_cast<const G*>(grad), static_cast<T*>(sum), n, a);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_adamax_step(DType pt, DType gt, void* param, const void* grad, void* exp_avg,
                        void* exp_inf, int64_t n, const AdamaxArgs& a, cudaStream_t s) {
  if (n <= 0) return;
  visit_param_grad(pt, gt, [&](auto ptag, auto gtag) {
    using T = typename decltype(ptag)::type;
    using G = typename decltype(gtag)::type;
    adamax_kernel<T, G><<<grid_for(n), kBlockThreads, 0, s>>>(
        static_cast<T*>(param), static_cast<const G*>(grad), static_cast<T*>(exp_avg),
        static_cast<T*>(exp_inf), n, a);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_nadam_step(DType pt, DType gt, void* param, const void* grad, void* exp_avg,
                       void* exp_avg_sq, int64_t n, const NadamArgs& a, cudaStream_t s) {
  if (n <= 0) return;
  visit_param_grad(pt, gt, [&](auto ptag, auto gtag) {
    using T = typename decltype(ptag)::type;
    using G = typename decltype(gtag)::type;
    nadam_kernel<T, G><<<grid_for(n), kBlockThreads, 0, s>>>(
        static_cast<T*>(param), static_cast<const G*>(grad), static_cast<T*>(exp_avg),
        static_cast<T*>(exp_avg_sq), n, a);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_radam_step(DType pt, DType gt, void* param, const void* grad, void* exp_avg,
                       void* exp_avg_sq, int64_t n, const RadamArgs& a, cudaStream_t s) {
  if (n <= 0) return;
  visit_param_grad(pt, gt, [&](auto ptag, auto gtag) {
    using T = typename decltype(ptag)::type;
    using G = typename decltype(gtag)::type;
    radam_kernel<T, G><<<grid_for(n), kBlockThreads, 0, s>>>(
        static_cast<T*>(param), static_cast<const G*>(grad), static_cast<T*>(exp_avg),
        static_cast<T*>(exp_avg_sq), n, a);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_lamb_moments(DType pt, DType gt, const void* param, const void* grad, void* exp_avg,
                         void* exp_avg_sq, void* update, int64_t n, const LambArgs& a,
                         cudaStream_t s) {
  if (n <= 0) return;
  visit_param_grad(pt, gt, [&](auto ptag, auto gtag) {
    using T = typename decltype(ptag)::type;
    using G = typename decltype(gtag)::type;
    lamb_moments_kernel<T, G><<<grid_for(n), kBlockThreads, 0, s>>>(
        static_cast<const T*>(param), static_cast<const G*>(grad), static_cast<T*>(exp_avg),
        static_cast<T*>(exp_avg_sq), static_cast<T*>(update), n, a);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_lamb_apply(DType pt, void* param, const void* update, int64_t n, const double* sums,
                       double lr, cudaStream_t s) {
  if (n <= 0) return;
  visit_param_grad(pt, pt, [&](auto ptag, auto) {
    using T = typename decltype(ptag)::type;
    lamb_apply_kernel<T><<<grid_for(n), kBlockThreads, 0, s>>>(
        static_cast<T*>(param), static_cast<const T*>(update), n, sums, lr);
    CUDA_CHECK_LAUNCH();
  });
}

void launch_unscale_check(DType dt, void* grad, float* found_inf, int64_t n, double inv_scale,
                          cudaStream_t s) {
  if (n <= 0) return;
  visit_float(dt, "unscale_check_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    unscale_kernel<T><<<grid_for(n), kBlockThreads, 0, s>>>(static_cast<T*>(grad), found_inf, n,
                                                            static_cast<comp_t<T>>(inv_scale));
    CUDA_CHECK_LAUNCH();
  });
}

void launch_norm_partial(DType dt, const void* x, int64_t n, double p, double* out,
                         cudaStream_t s) {
  visit_float(dt, "norm_partial", [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_reduction(AbsPowPolicy<T>{p, ::isinf(p) != 0}, static_cast<const T*>(x), 1, n, 1,
                  ScalarStore{out}, s);
  });
}

}  // namespace sl::cuda

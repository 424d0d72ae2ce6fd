// CUDA glue of the conv family through cuDNN's convolution API (NCHW, float32 / float64; the ops
// layer computes 16-bit inputs in float32).
//
// Each pass's algorithm is chosen once per geometry and cached (Note [Convolution algorithm
// cache] in core/cuda/conv_algo_cache.h): by cuDNN's heuristics (cudnnGet*Algorithm_v7) or, with
// sl::cuda::set_cudnn_benchmark(true), by timing every algorithm (cudnnFind*AlgorithmEx).
// Either way only deterministic algorithms that fit the workspace limit qualify, so results do
// not vary from run to run (unless cuDNN has no deterministic one for a geometry: pick() then
// warns and takes the best one; or sl::cuda::set_cudnn_deterministic(false) lifts the
// restriction). float32 runs with CUDNN_FMA_MATH (no TF32) unless sl::cuda::set_allow_tf32(true).
// cuDNN pads symmetrically; asymmetric padding (Note [Conv layout]) goes through an explicitly
// zero-padded input.
#include "core/ops/conv.h"

#include <atomic>
#include <cstdio>
#include <sstream>
#include <utility>

#include "core/cuda/conv_algo_cache.h"
#include "core/cuda/cuda_api.h"
#include "core/cuda/cudnn_handle.h"
#include "core/cuda/runtime.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"
#include "core/ops/view.h"
#include "core/shape.h"

namespace sl::cuda {

namespace {

/// Workspace limit for an algorithm (cuDNN's heuristics rank fast ones first).
constexpr size_t kMaxWorkspace = size_t{1} << 30;

int to_int(int64_t v, const char* what) {
  SL_CHECK(v >= 0 && v <= INT32_MAX, "conv2d: ", what, " = ", v, " exceeds cuDNN's int range");
  return static_cast<int>(v);
}

cudnnDataType_t cudnn_dtype(DType dt) {
  if (dt == DType::f32) return CUDNN_DATA_FLOAT;
  if (dt == DType::f64) return CUDNN_DATA_DOUBLE;
  ::sl::detail::throw_error<DTypeError>("conv2d: cuDNN path expects float32 or float64, got ",
                                        dtype_name(dt));
}

/// Descriptors of one convolution: x [N, C, H, W] (already padded when asymmetric), w, y.
struct ConvDescs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnDataType_t dt;
  bool fp32_no_tf32 = false;

  ConvDescs(const Shape& xs, const Shape& ws, const Shape& ys, DType dtype, const Conv2dGeometry& g,
            int64_t pad_h, int64_t pad_w) {
    try {
      init(xs, ws, ys, dtype, g, pad_h, pad_w);
    } catch (...) {
      release();  // a failed call leaves no descriptor behind
      throw;
    }
  }
  ~ConvDescs() { release(); }
  ConvDescs(const ConvDescs&) = delete;
  ConvDescs& operator=(const ConvDescs&) = delete;

  void init(const Shape& xs, const Shape& ws, const Shape& ys, DType dtype, const Conv2dGeometry& g,
            int64_t pad_h, int64_t pad_w) {
    dt = cudnn_dtype(dtype);
    fp32_no_tf32 = dtype == DType::f32 && !allow_tf32();
    // cuDNN's 4-d descriptors index with 32 bits: a larger tensor is rejected by cuDNN with a
    // bare status. PyTorch splits the batch in that case; here it is a typed error naming sizes.
    for (const auto& [shape, name] : {std::pair{&xs, "input"}, std::pair{&ys, "output"}}) {
      int64_t n = 1;
      for (int64_t v : *shape) n *= v;
      SL_CHECK(n <= INT32_MAX, "conv2d: the ", name, " ", shape_str(*shape), " has ", n,
               " elements; cuDNN takes fewer than 2^31 per tensor: use a smaller batch");
    }
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, dt, to_int(xs[0], "N"),
                                           to_int(xs[1], "C"), to_int(xs[2], "H"),
                                           to_int(xs[3], "W")));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, dt, to_int(ys[0], "N"),
                                           to_int(ys[1], "O"), to_int(ys[2], "Ho"),
                                           to_int(ys[3], "Wo")));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, dt, CUDNN_TENSOR_NCHW, to_int(ws[0], "O"),
                                           to_int(ws[1], "C/groups"), to_int(ws[2], "kh"),
                                           to_int(ws[3], "kw")));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        conv, to_int(pad_h, "pad_h"), to_int(pad_w, "pad_w"), to_int(g.stride_h, "stride_h"),
        to_int(g.stride_w, "stride_w"), to_int(g.dilation_h, "dilation_h"),
        to_int(g.dilation_w, "dilation_w"), CUDNN_CROSS_CORRELATION, dt));
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, to_int(g.groups, "groups")));
    set_math(CUDNN_DEFAULT_MATH);
  }
  /// Destroys the descriptors (their destroy calls cannot fail for valid descriptors; a status
  /// is not checked here because this also runs while an exception propagates).
  void release() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    x = y = nullptr;
    w = nullptr;
    conv = nullptr;
  }

  /// The math type for a chosen algorithm: FMA only for float32 without TF32.
  void set_math(cudnnMathType_t algo_math) {
    CUDNN_CHECK(cudnnSetConvolutionMathType(conv, fp32_no_tf32 ? CUDNN_FMA_MATH : algo_math));
  }
};

/// The first usable deterministic algorithm of cuDNN's list (ranked by the heuristics, or by
/// measured time in benchmark mode); usable: success, workspace within `ws_limit`, and no tensor
/// cores for float32 without TF32 (Note [Convolution algorithm cache]). When the geometry has no
/// deterministic one (cuDNN 9 may offer only atomics-based weight gradients for some f64 grouped
/// or dilated convolutions), the first usable one, with a warning on stderr once per kind of
/// pass, rather than failing the op: results of that pass may then vary in the last bits from
/// run to run.
template <class Perf>
const Perf& pick(const Perf* perfs, int n, const char* what, size_t ws_limit, bool fp32_no_tf32) {
  auto usable = [&](int i) {
    const bool tensor_cores = perfs[i].mathType == CUDNN_TENSOR_OP_MATH ||
                              perfs[i].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    return perfs[i].status == CUDNN_STATUS_SUCCESS && perfs[i].memory <= ws_limit &&
           !(fp32_no_tf32 && tensor_cores);
  };
  const bool deterministic = cudnn_deterministic();
  for (int i = 0; deterministic && i < n; ++i) {
    if (usable(i) && perfs[i].determinism == CUDNN_DETERMINISTIC) return perfs[i];
  }
  for (int i = 0; i < n; ++i) {
    if (!usable(i)) continue;
    if (!deterministic) return perfs[i];     // asked for: no warning
    static std::atomic<bool> warned{false};  // one per Perf type: forward, data, filter
    if (!warned.exchange(true)) {
      std::fprintf(stderr,
                   "shardlight: conv2d: cuDNN offers no deterministic %s algorithm for a "
                   "geometry; using a non-deterministic one (results may differ in the last "
                   "bits between runs)\n",
                   what);
    }
    return perfs[i];
  }
  ::sl::detail::throw_error<CudaError>("conv2d: cuDNN offers no ", what,
                                       " algorithm for this geometry within ", ws_limit,
                                       " bytes of workspace");
}

Tensor workspace(size_t bytes, Device d) {
  return ops::empty({static_cast<int64_t>(bytes == 0 ? 1 : bytes)}, DType::b8, d);
}

bool symmetric(const Conv2dGeometry& g) {
  return g.pad_h_begin == g.pad_h_end && g.pad_w_begin == g.pad_w_end;
}

/// input zero-padded by the asymmetric amounts (then convolved with padding 0).
Tensor pad_input(const Tensor& input, const Conv2dGeometry& g) {
  Tensor xp = ops::empty({input.size(0), input.size(1), input.size(2) + g.pad_h_begin + g.pad_h_end,
                          input.size(3) + g.pad_w_begin + g.pad_w_end},
                         input.dtype(), input.device());
  ops::fill_(xp, 0);
  ops::copy_(ops::narrow(ops::narrow(xp, 2, g.pad_h_begin, input.size(2)), 3, g.pad_w_begin,
                         input.size(3)),
             input);
  return xp;
}

const double kOne = 1.0, kZero = 0.0;
const float kOneF = 1.0f, kZeroF = 0.0f;

/// cuDNN's name of an algorithm of `pass` (the enum's suffix), for cudnn_conv_choices().
const char* algo_name(ConvPass pass, int algo) {
  static const char* const fwd[] = {
      "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING",
      "WINOGRAD",      "WINOGRAD_NONFUSED"};
  static const char* const data[] = {"ALGO_0",     "ALGO_1",   "FFT",
                                     "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  static const char* const filter[] = {
      "ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  auto at = [algo](const auto& names) -> const char* {
    return algo >= 0 && algo < static_cast<int>(std::size(names)) ? names[algo] : "?";
  };
  switch (pass) {
    case ConvPass::forward:
      return at(fwd);
    case ConvPass::backward_data:
      return at(data);
    case ConvPass::backward_filter:
      return at(filter);
  }
  return "?";
}

const char* math_name(int math) {
  static const char* const names[] = {"DEFAULT_MATH", "TENSOR_OP_MATH",
                                      "TENSOR_OP_MATH_ALLOW_CONVERSION", "FMA_MATH"};
  return math >= 0 && math < 4 ? names[math] : "?";
}

/// The cache key of one pass of the convolution of x (already padded when asymmetric) with w
/// into an output of sizes ys, cuDNN padding pad_h x pad_w.
ConvAlgoKey conv_key(ConvPass pass, int device, const Tensor& x, const Tensor& w, const Shape& ys,
                     const Conv2dGeometry& g, int64_t pad_h, int64_t pad_w) {
  ConvAlgoKey k;
  k.device = device;
  k.pass = pass;
  k.dtype = static_cast<int>(x.dtype());
  for (int i = 0; i < 4; ++i) {
    k.x[i] = x.size(i);
    k.w[i] = w.size(i);
    k.y[i] = ys[i];
  }
  k.pad = {pad_h, pad_w};
  k.stride = {g.stride_h, g.stride_w};
  k.dilation = {g.dilation_h, g.dilation_w};
  k.groups = g.groups;
  k.tf32 = allow_tf32();
  k.deterministic = cudnn_deterministic();
  k.benchmark = cudnn_benchmark();
  return k;
}

/// A choice from cuDNN's pick `p` with `workspace` bytes, described for cudnn_conv_choices().
template <class Perf>
ConvAlgoChoice make_choice(const ConvAlgoKey& k, const Perf& p, cudnnMathType_t math,
                           size_t workspace) {
  static const char* const passes[] = {"forward", "backward-data", "backward-filter"};
  ConvAlgoChoice c;
  c.algo = static_cast<int>(p.algo);
  c.math = static_cast<int>(math);
  c.workspace = workspace;
  std::ostringstream os;
  os << "conv2d " << passes[static_cast<int>(k.pass)] << " x " << sizes4_str(k.x) << " w "
     << sizes4_str(k.w) << " y " << sizes4_str(k.y) << ' '
     << dtype_name(static_cast<DType>(k.dtype)) << " pad " << k.pad[0] << 'x' << k.pad[1]
     << " stride " << k.stride[0] << 'x' << k.stride[1] << " dilation " << k.dilation[0] << 'x'
     << k.dilation[1] << " groups " << k.groups << " (tf32 " << (k.tf32 ? "on" : "off") << ", "
     << (k.deterministic ? "deterministic" : "any algorithm") << ", "
     << (k.benchmark ? "benchmark" : "heuristics") << "): " << algo_name(k.pass, c.algo) << ", "
     << math_name(c.math) << ", " << workspace << " B workspace";
  if (k.benchmark) os << ", " << p.time << " ms measured";
  c.description = os.str();
  return c;
}

/// The workspace for cuDNN's benchmark: the largest block the allocator gives, up to
/// kMaxWorkspace, halving after each OutOfMemoryError down to 1 MiB (then none). `bytes` gets
/// its size.
Tensor benchmark_workspace(Device dev, size_t& bytes) {
  for (size_t b = kMaxWorkspace; b >= (size_t{1} << 20); b /= 2) {
    try {
      Tensor t = workspace(b, dev);
      bytes = b;
      return t;
    } catch (const OutOfMemoryError&) {
      // try half as much
    }
  }
  bytes = 0;
  return workspace(0, dev);
}

/// The cached choice for one pass: `heuristic(perfs, &n)` or `find(perfs, &n, ws, ws_bytes)`
/// fills cuDNN's list (benchmark mode takes the latter), `ws_size(algo, &bytes)` answers the
/// chosen algorithm's workspace with the descriptor's math type set.
template <class Perf, int kCount, class Heuristic, class Find, class WsSize>
ConvAlgoChoice cached_choice(const ConvAlgoKey& key, ConvDescs& d, Device dev, const char* what,
                             Heuristic heuristic, Find find, WsSize ws_size) {
  return conv_algo_cache().get(key, [&] {
    Perf perfs[kCount];
    int n = 0;
    size_t limit = kMaxWorkspace;
    if (key.benchmark) {
      Tensor ws = benchmark_workspace(dev, limit);
      find(perfs, &n, ws.data_ptr(), limit);
    } else {
      heuristic(perfs, &n);
    }
    const Perf& p = pick(perfs, n, what, limit, d.fp32_no_tf32);
    d.set_math(p.mathType);
    size_t bytes = 0;
    ws_size(p.algo, &bytes);
    return make_choice(key, p, d.fp32_no_tf32 ? CUDNN_FMA_MATH : p.mathType, bytes);
  });
}

void conv2d_forward_cuda(const Tensor& out, const Tensor& input, const Tensor& weight,
                         const Tensor& bias, const Conv2dGeometry& g) {
  const int device = input.device().index;
  DeviceGuard dg(device);
  const bool sym = symmetric(g);
  Tensor x = sym ? input : pad_input(input, g);
  const int64_t ph = sym ? g.pad_h_begin : 0, pw = sym ? g.pad_w_begin : 0;
  ConvDescs d(x.sizes(), weight.sizes(), out.sizes(), input.dtype(), g, ph, pw);
  cudnnHandle_t h = cudnn_handle(device);
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  const ConvAlgoChoice c = cached_choice<Perf, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
      conv_key(ConvPass::forward, device, x, weight, out.sizes(), g, ph, pw), d, input.device(),
      "forward",
      [&](Perf* perfs, int* n) {
        CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
            h, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, n, perfs));
      },
      [&](Perf* perfs, int* n, void* ws, size_t ws_bytes) {
        CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
            h, d.x, x.data_ptr(), d.w, weight.data_ptr(), d.conv, d.y, out.data_ptr(),
            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, n, perfs, ws, ws_bytes));
      },
      [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
        CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, algo, bytes));
      });
  d.set_math(static_cast<cudnnMathType_t>(c.math));
  Tensor ws = workspace(c.workspace, input.device());
  const bool f64 = input.dtype() == DType::f64;
  CUDNN_CHECK(cudnnConvolutionForward(
      h, f64 ? static_cast<const void*>(&kOne) : &kOneF, d.x, x.data_ptr(), d.w, weight.data_ptr(),
      d.conv, static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws.data_ptr(), c.workspace,
      f64 ? static_cast<const void*>(&kZero) : &kZeroF, d.y, out.data_ptr()));
  if (bias.defined()) ops::binary_(BinaryOp::add, out, ops::view(bias, {1, bias.size(0), 1, 1}));
}

void conv2d_backward_cuda(const Tensor& grad_input, const Tensor& grad_weight,
                          const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                          const Tensor& weight, const Conv2dGeometry& g) {
  const int device = input.device().index;
  DeviceGuard dg(device);
  const bool sym = symmetric(g);
  Tensor x = sym ? input : pad_input(input, g);
  const int64_t ph = sym ? g.pad_h_begin : 0, pw = sym ? g.pad_w_begin : 0;
  ConvDescs d(x.sizes(), weight.sizes(), grad_out.sizes(), input.dtype(), g, ph, pw);
  cudnnHandle_t h = cudnn_handle(device);
  const bool f64 = input.dtype() == DType::f64;
  const void* one = f64 ? static_cast<const void*>(&kOne) : &kOneF;
  const void* zero = f64 ? static_cast<const void*>(&kZero) : &kZeroF;
  if (grad_input.defined()) {
    Tensor gx = sym ? grad_input : ops::empty(x.sizes(), x.dtype(), x.device());
    using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
    const ConvAlgoChoice c = cached_choice<Perf, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
        conv_key(ConvPass::backward_data, device, x, weight, grad_out.sizes(), g, ph, pw), d,
        input.device(), "backward-data",
        [&](Perf* perfs, int* n) {
          CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
              h, d.w, d.y, d.conv, d.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, n, perfs));
        },
        [&](Perf* perfs, int* n, void* ws, size_t ws_bytes) {
          CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
              h, d.w, weight.data_ptr(), d.y, grad_out.data_ptr(), d.conv, d.x, gx.data_ptr(),
              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, n, perfs, ws, ws_bytes));
        },
        [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
          CUDNN_CHECK(
              cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, algo, bytes));
        });
    d.set_math(static_cast<cudnnMathType_t>(c.math));
    Tensor ws = workspace(c.workspace, input.device());
    CUDNN_CHECK(cudnnConvolutionBackwardData(h, one, d.w, weight.data_ptr(), d.y,
                                             grad_out.data_ptr(), d.conv,
                                             static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo),
                                             ws.data_ptr(), c.workspace, zero, d.x, gx.data_ptr()));
    if (!sym) {
      ops::copy_(grad_input, ops::narrow(ops::narrow(gx, 2, g.pad_h_begin, input.size(2)), 3,
                                         g.pad_w_begin, input.size(3)));
    }
  }
  if (grad_weight.defined()) {
    using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
    const ConvAlgoChoice c = cached_choice<Perf, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
        conv_key(ConvPass::backward_filter, device, x, weight, grad_out.sizes(), g, ph, pw), d,
        input.device(), "backward-filter",
        [&](Perf* perfs, int* n) {
          CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
              h, d.x, d.y, d.conv, d.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, n, perfs));
        },
        [&](Perf* perfs, int* n, void* ws, size_t ws_bytes) {
          CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
              h, d.x, x.data_ptr(), d.y, grad_out.data_ptr(), d.conv, d.w, grad_weight.data_ptr(),
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, n, perfs, ws, ws_bytes));
        },
        [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
          CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, algo,
                                                                     bytes));
        });
    d.set_math(static_cast<cudnnMathType_t>(c.math));
    Tensor ws = workspace(c.workspace, input.device());
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        h, one, d.x, x.data_ptr(), d.y, grad_out.data_ptr(), d.conv,
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws.data_ptr(), c.workspace, zero, d.w,
        grad_weight.data_ptr()));
  }
  if (grad_bias.defined()) {
    ops::copy_(grad_bias, ops::reduce(ReduceOp::sum, grad_out, {0, 2, 3}, false));
  }
}

SL_REGISTER_KERNEL(conv2d_forward_kernel, DeviceKind::cuda, &conv2d_forward_cuda);
SL_REGISTER_KERNEL(conv2d_backward_kernel, DeviceKind::cuda, &conv2d_backward_cuda);

}  // namespace
}  // namespace sl::cuda

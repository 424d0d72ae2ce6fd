// CUDA glue of the conv family through cuDNN's convolution API (NCHW, float32 / float64; the ops
// layer computes 16-bit inputs in float32).
//
// Algorithms come from cuDNN's heuristics (cudnnGet*Algorithm_v7), restricted to deterministic
// ones that fit the workspace limit, so results do not vary from run to run (unless cuDNN has no
// deterministic one for a geometry: pick() then warns and takes the best one; or
// sl::cuda::set_cudnn_deterministic(false) lifts the restriction). float32 runs with
// CUDNN_FMA_MATH (no TF32) unless sl::cuda::set_allow_tf32(true). cuDNN pads symmetrically;
// asymmetric padding (Note [Conv layout]) goes through an explicitly zero-padded input.
#include "core/ops/conv.h"

#include <atomic>
#include <cstdio>
#include <utility>

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

/// The first usable deterministic algorithm of cuDNN's ranked list; when the geometry has none
/// (cuDNN 9 may offer only atomics-based weight gradients for some f64 grouped or dilated
/// convolutions), the first usable one, with a warning on stderr once per kind of pass, rather
/// than failing the op: results of that pass may then vary in the last bits from run to run.
template <class Perf>
const Perf& pick(const Perf* perfs, int n, const char* what) {
  auto usable = [&](int i) {
    return perfs[i].status == CUDNN_STATUS_SUCCESS && perfs[i].memory <= kMaxWorkspace;
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
                                       " algorithm for this geometry within ", kMaxWorkspace,
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

void conv2d_forward_cuda(const Tensor& out, const Tensor& input, const Tensor& weight,
                         const Tensor& bias, const Conv2dGeometry& g) {
  const int device = input.device().index;
  DeviceGuard dg(device);
  const bool sym = symmetric(g);
  Tensor x = sym ? input : pad_input(input, g);
  ConvDescs d(x.sizes(), weight.sizes(), out.sizes(), input.dtype(), g, sym ? g.pad_h_begin : 0,
              sym ? g.pad_w_begin : 0);
  cudnnHandle_t h = cudnn_handle(device);
  cudnnConvolutionFwdAlgoPerf_t perfs[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int n = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y,
                                                     CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perfs));
  const auto& p = pick(perfs, n, "forward");
  d.set_math(p.mathType);
  size_t ws_bytes = 0;
  CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, p.algo, &ws_bytes));
  Tensor ws = workspace(ws_bytes, input.device());
  const bool f64 = input.dtype() == DType::f64;
  CUDNN_CHECK(cudnnConvolutionForward(
      h, f64 ? static_cast<const void*>(&kOne) : &kOneF, d.x, x.data_ptr(), d.w, weight.data_ptr(),
      d.conv, p.algo, ws.data_ptr(), ws_bytes, f64 ? static_cast<const void*>(&kZero) : &kZeroF,
      d.y, out.data_ptr()));
  if (bias.defined()) ops::binary_(BinaryOp::add, out, ops::view(bias, {1, bias.size(0), 1, 1}));
}

void conv2d_backward_cuda(const Tensor& grad_input, const Tensor& grad_weight,
                          const Tensor& grad_bias, const Tensor& grad_out, const Tensor& input,
                          const Tensor& weight, const Conv2dGeometry& g) {
  const int device = input.device().index;
  DeviceGuard dg(device);
  const bool sym = symmetric(g);
  Tensor x = sym ? input : pad_input(input, g);
  ConvDescs d(x.sizes(), weight.sizes(), grad_out.sizes(), input.dtype(), g,
              sym ? g.pad_h_begin : 0, sym ? g.pad_w_begin : 0);
  cudnnHandle_t h = cudnn_handle(device);
  const bool f64 = input.dtype() == DType::f64;
  const void* one = f64 ? static_cast<const void*>(&kOne) : &kOneF;
  const void* zero = f64 ? static_cast<const void*>(&kZero) : &kZeroF;
  if (grad_input.defined()) {
    Tensor gx = sym ? grad_input : ops::empty(x.sizes(), x.dtype(), x.device());
    cudnnConvolutionBwdDataAlgoPerf_t perfs[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int n = 0;
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        h, d.w, d.y, d.conv, d.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perfs));
    const auto& p = pick(perfs, n, "backward-data");
    d.set_math(p.mathType);
    size_t ws_bytes = 0;
    CUDNN_CHECK(
        cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, p.algo, &ws_bytes));
    Tensor ws = workspace(ws_bytes, input.device());
    CUDNN_CHECK(cudnnConvolutionBackwardData(h, one, d.w, weight.data_ptr(), d.y,
                                             grad_out.data_ptr(), d.conv, p.algo, ws.data_ptr(),
                                             ws_bytes, zero, d.x, gx.data_ptr()));
    if (!sym) {
      ops::copy_(grad_input, ops::narrow(ops::narrow(gx, 2, g.pad_h_begin, input.size(2)), 3,
                                         g.pad_w_begin, input.size(3)));
    }
  }
  if (grad_weight.defined()) {
    cudnnConvolutionBwdFilterAlgoPerf_t perfs[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int n = 0;
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        h, d.x, d.y, d.conv, d.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perfs));
    const auto& p = pick(perfs, n, "backward-filter");
    d.set_math(p.mathType);
    size_t ws_bytes = 0;
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, p.algo,
                                                               &ws_bytes));
    Tensor ws = workspace(ws_bytes, input.device());
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, one, d.x, x.data_ptr(), d.y, grad_out.data_ptr(),
                                               d.conv, p.algo, ws.data_ptr(), ws_bytes, zero, d.w,
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

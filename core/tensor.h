// Tensor: a cheap, reference-counted handle to a strided view of a Storage.
//
// Copying a Tensor copies the handle (like torch::Tensor); views (view, permute, narrow, expand,
// ...) share the storage. Methods named like PyTorch's forward to the free functions in
// autograd/ops/*.h, which record the autograd graph when a gradient is needed.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/scalar.h"
#include "core/shape.h"
#include "core/storage.h"

namespace sl {

class Tensor;
class Node;
class Generator;
using TensorList = std::vector<Tensor>;

/// dtype/device/requires_grad for factory functions, used with designated initialisers:
///   sl::zeros({2, 3}, {.dtype = sl::DType::f64, .device = "cuda:0"})
struct TensorOptions {
  DType dtype = kDefaultFloat;
  Device device = kCPU;
  bool requires_grad = false;
};

/// A hook on a gradient in flight: receives the gradient and returns the one to use instead
/// (return the argument unchanged to only observe it). On a leaf, a hook that returns an
/// undefined Tensor consumes the gradient: nothing is accumulated into .grad(). The gradient
/// returned must keep the size, dtype and device of the one received: backward throws
/// ShapeError, DTypeError or DeviceError otherwise (PyTorch's "hook has changed the size of
/// value").
using GradHook = std::function<Tensor(const Tensor&)>;
/// A hook that runs after a gradient was accumulated into a leaf's .grad(); receives the leaf.
using PostAccumulateHook = std::function<void(const Tensor&)>;

/// Autograd state of a tensor; absent (null) for tensors that never took part in autograd.
struct AutogradMeta;

/// Implementation object behind a Tensor handle. Users do not touch it.
struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape sizes;
  Shape strides;  ///< in elements
  int64_t offset = 0;  ///< in elements from storage->data()
  DType dtype = kDefaultFloat;
  std::unique_ptr<AutogradMeta> autograd;

  TensorImpl(std::shared_ptr<Storage> s, Shape sz, Shape st, int64_t off, DType dt);
  ~TensorImpl();
  AutogradMeta& autograd_meta();  ///< creates it on first use
};

class Tensor {
 public:
  /// An undefined tensor (like torch::Tensor()); most methods throw ValueError on it.
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata -------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  int64_t dim() const { return static_cast<int64_t>(checked().sizes.size()); }
  const Shape& sizes() const { return checked().sizes; }
  const Shape& shape() const { return sizes(); }
  /// Size of dim d (negative d counts from the end). Throws IndexError out of range.
  int64_t size(int64_t d) const;
  const Shape& strides() const { return checked().strides; }
  int64_t stride(int64_t d) const;
  int64_t storage_offset() const { return checked().offset; }
  int64_t numel() const { return shape_numel(checked().sizes); }
  DType dtype() const { return checked().dtype; }
  Device device() const { return checked().storage->device(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_floating_point() const { return is_floating(dtype()); }
  size_t element_size() const { return dtype_size(dtype()); }
  /// numel() * element_size().
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  /// True when the two tensors are views of the same storage.
  bool is_same_storage(const Tensor& other) const;
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  const std::shared_ptr<Storage>& storage() const { return checked().storage; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  /// Pointer to the first element (storage data + offset). CPU: host pointer; CUDA: device one.
  void* data_ptr() const;
  /// Typed pointer; throws DTypeError when T does not match dtype().
  template <class T>
  T* data_ptr() const;
  /// Version counter of the storage (bumped by in-place writes).
  uint32_t version() const { return storage()->version(); }
  void bump_version() const { storage()->bump_version(); }

  // ---- conversion and copies ---------------------------------------------------------------
  /// Converts; returns *this (no copy) when nothing changes unless copy=true. Differentiable.
  Tensor to(DType dtype, bool copy = false) const;
  Tensor to(Device device, bool copy = false) const;
  Tensor to(Device device, DType dtype, bool copy = false) const;
  Tensor cpu() const { return to(kCPU); }
  Tensor cuda(int index = 0) const { return to(Device(DeviceKind::cuda, index)); }
  Tensor to_float() const { return to(DType::f32); }
  Tensor to_double() const { return to(DType::f64); }
  /// A contiguous copy of this CPU tensor in page-locked (pinned) host memory, or *this when it
  /// is already pinned (PyTorch's pin_memory). Copies between a pinned tensor and a GPU skip the
  /// staging buffers, and host-to-device ones are asynchronous: see Note [Pinned host memory]
  /// (core/allocator.h) for when the source may be modified again. Not differentiable (the
  /// result has no autograd history). Throws DeviceError for a non-CPU tensor, or when no GPU
  /// backend is built in or no GPU is visible.
  Tensor pin_memory() const;
  /// True when this tensor's storage is pinned host memory (from pin_memory()).
  bool is_pinned() const { return storage()->is_pinned(); }
  /// A new tensor with its own contiguous storage and the same values. Differentiable.
  Tensor clone() const;
  /// *this if already contiguous, else a contiguous copy. Differentiable.
  Tensor contiguous() const;
  /// Copies src into *this (broadcasting src, converting dtype, across devices); in place.
  Tensor& copy_(const Tensor& src);
  /// The value of a one-element tensor. Throws ValueError when numel() != 1.
  Scalar item() const;
  template <class T>
  T item() const {
    return item().to<T>();
  }
  /// All elements in row-major order, converted to T (copies from the device if needed).
  template <class T>
  std::vector<T> to_vector() const;
  /// PyTorch-like repr: "tensor([[1., 2.],\n        [3., 4.]])" with dtype/device/grad_fn
  /// suffixes as PyTorch prints them.
  std::string str() const;

  // ---- views (share storage; differentiable) ----------------------------------------------
  /// Same data with a new shape; one dim may be -1. Throws ShapeError when the strides do not
  /// allow a view (use reshape) or the element count differs.
  Tensor view(const Shape& shape) const;
  /// view() when possible, otherwise a contiguous copy.
  Tensor reshape(const Shape& shape) const;
  Tensor view_as(const Tensor& other) const { return view(other.sizes()); }
  Tensor reshape_as(const Tensor& other) const { return reshape(other.sizes()); }
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  /// Transpose of a matrix (<= 2 dims), as torch.Tensor.t().
  Tensor t() const;
  /// Length `length` starting at `start` along dim.
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// Python-style slice [start:end:step] along dim; start/end are clamped like Python's.
  Tensor slice(int64_t dim, int64_t start = 0, int64_t end = INT64_MAX, int64_t step = 1) const;
  /// Removes dim by taking index `index` (negative counts from the end).
  Tensor select(int64_t dim, int64_t index) const;
  /// select(0, i).
  Tensor operator[](int64_t i) const { return select(0, i); }
  /// Broadcasts size-1 dims to `shape` (-1 keeps a size); adds leading dims. No copy.
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;
  Tensor movedim(int64_t src, int64_t dst) const;
  /// A raw strided view of the same storage (no checks beyond bounds).
  Tensor as_strided(const Shape& sizes, const Shape& strides, int64_t offset) const;

  // ---- autograd ----------------------------------------------------------------------------
  bool requires_grad() const;
  /// Marks a leaf as needing gradients. Throws AutogradError on a non-leaf or a non-floating
  /// dtype.
  Tensor& requires_grad_(bool on = true);
  /// The accumulated gradient of a leaf (undefined until backward reaches it).
  const Tensor& grad() const;
  /// Replaces (or with an undefined tensor, clears) the stored gradient. A defined g must have
  /// this tensor's shape (ShapeError), dtype (DTypeError) and device (DeviceError), as PyTorch's
  /// "assigned grad has data of a different size / type / device".
  void set_grad(const Tensor& g) const;
  /// The node that produced this tensor, or null for leaves.
  const std::shared_ptr<Node>& grad_fn() const;
  /// Index of this tensor among grad_fn's outputs.
  uint32_t output_nr() const;
  /// True for tensors not produced by a recorded op (requires_grad ones and all others).
  bool is_leaf() const;
  /// Backpropagates from this tensor. `gradient` may be omitted only for one-element tensors.
  /// retain_graph=false frees the graph's saved tensors, so a second backward throws.
  /// create_graph records the gradients' own graph (and keeps this one) so that they can be
  /// differentiated again (Note [Double backward], autograd/engine.cpp).
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false,
                bool create_graph = false) const;
  /// Same data, cut from the graph (shares storage and version counter).
  Tensor detach() const;
  /// Detaches in place: drops grad_fn and requires_grad. Throws AutogradError on a view (made by
  /// a view method; use detach()), as PyTorch does.
  Tensor& detach_();
  /// Keeps .grad() on a non-leaf after backward.
  void retain_grad() const;
  bool retains_grad() const;
  /// Registers a hook on the gradient of this tensor (see GradHook). Returns an id for
  /// remove_hook.
  size_t register_hook(GradHook hook) const;
  /// Removes a hook registered on this tensor (again: no-op); IndexError for an id that
  /// register_hook did not return for this tensor.
  void remove_hook(size_t id) const;
  /// On a leaf that requires grad: runs after each gradient accumulation into .grad().
  size_t register_post_accumulate_grad_hook(PostAccumulateHook hook) const;
  void remove_post_accumulate_grad_hook(size_t id) const;

  // ---- in-place fills and random (not differentiable; bump the version) --------------------
  Tensor& fill_(Scalar value);
  Tensor& zero_();
  Tensor& uniform_(double from = 0.0, double to = 1.0, Generator* gen = nullptr);
  Tensor& normal_(double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
  Tensor& bernoulli_(double p, Generator* gen = nullptr);

  // ---- elementwise (autograd/ops/elementwise.h) --------------------------------------------
  Tensor add(const Tensor& o, Scalar alpha = 1) const;
  Tensor add(Scalar o) const;
  Tensor sub(const Tensor& o, Scalar alpha = 1) const;
  Tensor sub(Scalar o) const;
  Tensor mul(const Tensor& o) const;
  Tensor mul(Scalar o) const;
  Tensor div(const Tensor& o) const;
  Tensor div(Scalar o) const;
  Tensor pow(const Tensor& e) const;
  Tensor pow(Scalar e) const;
  Tensor neg() const;
  Tensor abs() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor log1p() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor square() const;
  Tensor reciprocal() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor gelu(const std::string& approximate = "none") const;
  Tensor silu() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor sign() const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor maximum(const Tensor& o) const;
  Tensor minimum(const Tensor& o) const;
  Tensor eq(const Tensor& o) const;
  Tensor eq(Scalar o) const;
  Tensor ne(const Tensor& o) const;
  Tensor ne(Scalar o) const;
  Tensor lt(const Tensor& o) const;
  Tensor lt(Scalar o) const;
  Tensor le(const Tensor& o) const;
  Tensor le(Scalar o) const;
  Tensor gt(const Tensor& o) const;
  Tensor gt(Scalar o) const;
  Tensor ge(const Tensor& o) const;
  Tensor ge(Scalar o) const;
  Tensor logical_not() const;
  Tensor logical_and(const Tensor& o) const;
  Tensor logical_or(const Tensor& o) const;
  Tensor logical_xor(const Tensor& o) const;
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor isfinite() const;
  Tensor& add_(const Tensor& o, Scalar alpha = 1);
  Tensor& add_(Scalar o);
  Tensor& sub_(const Tensor& o, Scalar alpha = 1);
  Tensor& sub_(Scalar o);
  Tensor& mul_(const Tensor& o);
  Tensor& mul_(Scalar o);
  Tensor& div_(const Tensor& o);
  Tensor& div_(Scalar o);
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  Tensor& relu_();
  Tensor& masked_fill_(const Tensor& mask, Scalar value);
  /// In-place forms of the unary maps and pow: self = f(self), recorded for autograd like the
  /// out-of-place op. Ops with a floating result throw DTypeError on an integer or bool self.
  /// floor_/ceil_/round_/sign_ pass no gradient to self's history (like PyTorch's zeros).
  Tensor& neg_();
  Tensor& abs_();
  Tensor& exp_();
  Tensor& log_();
  Tensor& log1p_();
  Tensor& expm1_();
  Tensor& sqrt_();
  Tensor& rsqrt_();
  Tensor& square_();
  Tensor& reciprocal_();
  Tensor& tanh_();
  Tensor& sigmoid_();
  Tensor& sin_();
  Tensor& cos_();
  Tensor& floor_();
  Tensor& ceil_();
  Tensor& round_();
  Tensor& sign_();
  Tensor& pow_(const Tensor& e);
  Tensor& pow_(Scalar e);

  // ---- reductions (autograd/ops/reduce.h); dims may be negative; {} means all dims ----------
  Tensor sum() const;
  Tensor sum(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor prod() const;
  Tensor prod(int64_t dim, bool keepdim = false) const;
  /// Max over all elements.
  Tensor max() const;
  /// Max along one dim: (values, indices).
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor amax(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor amin(const std::vector<int64_t>& dims, bool keepdim = false) const;
  /// Index of the max of the flattened tensor (0-d i64).
  Tensor argmax() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmin() const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  /// Variance with Bessel's correction by default (correction=1), as torch.var (divisor
  /// max(0, N - correction)).
  Tensor var(const std::vector<int64_t>& dims = {}, int64_t correction = 1,
             bool keepdim = false) const;
  Tensor std(const std::vector<int64_t>& dims = {}, int64_t correction = 1,
             bool keepdim = false) const;
  Tensor logsumexp(const std::vector<int64_t>& dims, bool keepdim = false) const;
  /// p-norm (p = 2 by default; 1, inf and other positive p supported).
  Tensor norm(double p = 2.0, const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor all() const;
  Tensor any() const;
  Tensor cumsum(int64_t dim) const;

  // ---- matmul, softmax, indexing, shape ops ------------------------------------------------
  Tensor matmul(const Tensor& o) const;
  Tensor mm(const Tensor& o) const;
  Tensor bmm(const Tensor& o) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor masked_select(const Tensor& mask) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;

 private:
  const TensorImpl& checked() const {
    if (!impl_) [[unlikely]] throw_undefined();
    return *impl_;
  }
  [[noreturn]] static void throw_undefined();

  std::shared_ptr<TensorImpl> impl_;
};

/// How a tracked view was made; decides whether an in-place op on it may rewrite its base's
/// history (Note [In-place on views], autograd/engine.cpp).
enum class ViewCreation : uint8_t {
  normal,        ///< by a view method with grad mode on
  no_grad,       ///< under NoGradGuard: never joins the graph; in-place ops that would record fail
  multi_output,  ///< one of several views from one op (split, chunk, attention heads)
};

/// Autograd's record of a view made by a Tensor view method (view, slice, select, ...): its root
/// base and what it knew of the base's history when its grad_fn was last made. Maintained by
/// autograd/view_tracking.cpp.
struct ViewMeta {
  /// The root base (itself never a tracked view); shares this view's storage.
  std::shared_ptr<TensorImpl> base;
  ViewCreation creation = ViewCreation::normal;
  /// For multi_output views: the op that made them (named in errors).
  const char* creator = nullptr;
  /// The storage version when grad_fn was last checked against the base's history.
  uint32_t attr_version = 0;
  /// The base's grad_fn and output_nr at that check (null: the base had no history).
  std::shared_ptr<Node> base_grad_fn;
  uint32_t base_output_nr = 0;
};

struct AutogradMeta {
  bool requires_grad = false;
  bool retains_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;
  uint32_t output_nr = 0;
  /// The AccumulateGrad node of a leaf (weak: the graph owns it).
  std::weak_ptr<Node> grad_accumulator;
  /// Hooks on gradients arriving at a leaf (before accumulation); null entries were removed.
  std::vector<GradHook> hooks;
  std::vector<PostAccumulateHook> post_accumulate_hooks;
  /// Set on views made by Tensor view methods (see ViewMeta and Note [In-place on views]).
  std::unique_ptr<ViewMeta> view;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

template <class T>
T* Tensor::data_ptr() const {
  if (dtype_v<T> != dtype()) [[unlikely]] {
    detail::throw_error<DTypeError>("data_ptr: requested ", dtype_name(dtype_v<T>),
                                    " but the tensor is ", dtype_name(dtype()));
  }
  return static_cast<T*>(data_ptr());
}

// ---- operators (differentiable, broadcasting) ---------------------------------------------
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, Scalar b);
Tensor& operator-=(Tensor& a, Scalar b);
Tensor& operator*=(Tensor& a, Scalar b);
Tensor& operator/=(Tensor& a, Scalar b);

}  // namespace sl

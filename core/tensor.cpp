#include "core/tensor.h"

#include <ostream>

#include "core/allocator.h"
#include "core/ops/copy.h"

namespace sl {

// Out of line so that AutogradMeta (which holds a Node pointer) is complete here.
TensorImpl::TensorImpl(std::shared_ptr<Storage> s, Shape sz, Shape st, int64_t off, DType dt)
    : storage(std::move(s)), sizes(std::move(sz)), strides(std::move(st)), offset(off), dtype(dt) {}
TensorImpl::~TensorImpl() = default;

AutogradMeta& TensorImpl::autograd_meta() {
  if (!autograd) autograd = std::make_unique<AutogradMeta>();
  return *autograd;
}

void Tensor::throw_undefined() {
  throw ValueError("Tensor: operation on an undefined tensor");
}

int64_t Tensor::size(int64_t d) const {
  const auto& s = checked().sizes;
  return s[static_cast<size_t>(wrap_dim(d, static_cast<int64_t>(s.size()), "size"))];
}

int64_t Tensor::stride(int64_t d) const {
  const auto& s = checked().strides;
  return s[static_cast<size_t>(wrap_dim(d, static_cast<int64_t>(s.size()), "stride"))];
}

bool Tensor::is_contiguous() const {
  const auto& i = checked();
  return is_contiguous_layout(i.sizes, i.strides);
}

bool Tensor::is_same_storage(const Tensor& other) const {
  return defined() && other.defined() && impl_->storage == other.impl_->storage;
}

void* Tensor::data_ptr() const {
  const auto& i = checked();
  return static_cast<char*>(i.storage->data()) + i.offset * static_cast<int64_t>(dtype_size(i.dtype));
}

Tensor Tensor::pin_memory() const {
  SL_CHECK_DEVICE(is_cpu(), "pin_memory: expected a CPU tensor, got one on ", device());
  if (is_pinned()) return *this;
  Allocator& pinned = pinned_host_allocator("pin_memory");
  SL_CHECK(numel() <= static_cast<int64_t>(INT64_MAX / static_cast<int64_t>(element_size())),
           "pin_memory: shape ", shape_str(sizes()), " needs more than 2^63 bytes");
  auto storage = std::make_shared<Storage>(nbytes(), pinned);
  Tensor out(std::make_shared<TensorImpl>(std::move(storage), sizes(), contiguous_strides(sizes()),
                                          0, dtype()));
  ops::copy_(out, *this);
  return out;
}

// copy_, fill_ and zero_ are defined with the other in-place methods in
// autograd/ops/elementwise_methods.cpp: they take part in autograd's in-place rules.

Scalar Tensor::item() const {
  SL_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ",
           shape_str(sizes()), " (", numel(), " elements)");
  Tensor host = ops::to_device(*this, kCPU);
  return visit_dtype(dtype(), [&](auto tag) -> Scalar {
    using T = typename decltype(tag)::type;
    return Scalar(*static_cast<const T*>(host.data_ptr()));
  });
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = ops::contiguous(ops::cast(ops::to_device(*this, kCPU), dtype_v<T>));
  const T* p = static_cast<const T*>(host.data_ptr());
  return std::vector<T>(p, p + host.numel());
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.is_floating()) return os << s.to_double();
  if (s.is_bool()) return os << (s.to_bool() ? "True" : "False");
  return os << s.to_int();
}

}  // namespace sl

#include "dist/flat_buffers.h"

#include "autograd/grad_mode.h"
#include "core/ops/copy.h"
#include "core/ops/view.h"
#include "nn/module.h"

namespace sl::dist {

namespace {

std::vector<ParamSpec> specs_of(const TensorList& params) {
  std::vector<ParamSpec> specs;
  for (size_t i = 0; i < params.size(); ++i) {
    SL_CHECK(params[i].defined(), "FlatBuffers: parameter ", i, " is undefined");
    for (size_t j = 0; j < i; ++j) {
      SL_CHECK(!params[j].is_same(params[i]), "FlatBuffers: parameter ", i,
               " is the same tensor as parameter ", j, " (list tied parameters once)");
    }
    specs.push_back({params[i].numel(), params[i].dtype()});
  }
  return specs;
}

Tensor zeros_1d(int64_t n, DType dt, Device dev) {
  Tensor t = ops::empty({n}, dt, dev);
  ops::fill_(t, 0);
  return t;
}

}  // namespace

int64_t tensor_bytes(const std::vector<Tensor>& ts) {
  int64_t b = 0;
  for (const auto& t : ts) {
    if (t.defined()) b += static_cast<int64_t>(t.nbytes());
  }
  return b;
}

FlatBuffers::FlatBuffers(TensorList params, int world_size, int64_t bucket_cap_bytes,
                         std::optional<int64_t> first_bucket_cap_bytes)
    : params_(std::move(params)),
      device_(params_.empty() ? kCPU : params_.front().device()),
      layout_(specs_of(params_), world_size, bucket_cap_bytes, first_bucket_cap_bytes) {
  for (size_t i = 0; i < params_.size(); ++i) {
    SL_CHECK_DEVICE(params_[i].device() == device_, "FlatBuffers: parameter ", i, " is on ",
                    params_[i].device(), " but parameter 0 is on ", device_);
  }
  NoGradGuard no_grad;
  for (const FlatGroup& g : layout_.groups()) {
    param_bufs_.push_back(zeros_1d(g.numel, g.dtype, device_));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamSlot& s = layout_.slots()[i];
    const Tensor& p = params_[i];
    Tensor view = ops::view(
        ops::narrow(param_bufs_[static_cast<size_t>(s.group)], 0, s.offset, s.numel), p.sizes());
    ops::copy_(view, p);
    Tensor grad = p.grad();
    nn::set_data(p, view);  // keeps identity, hooks and requires_grad
    if (grad.defined()) p.set_grad(grad);
  }
}

Tensor FlatBuffers::bucket_view(const Tensor& group_buffer, int bucket) const {
  const Bucket& b = layout_.buckets().at(static_cast<size_t>(bucket));
  return ops::narrow(group_buffer, 0, b.offset, b.padded_numel);
}

Tensor FlatBuffers::slice_view(const Tensor& group_buffer, int bucket, int rank) const {
  const Bucket& b = layout_.buckets().at(static_cast<size_t>(bucket));
  return ops::narrow(group_buffer, 0, layout_.slice_offset(bucket, rank), b.shard_numel);
}

Tensor FlatBuffers::shard_slice_view(const Tensor& shard_buffer, int bucket) const {
  const Bucket& b = layout_.buckets().at(static_cast<size_t>(bucket));
  return ops::narrow(shard_buffer, 0, b.shard_offset, b.shard_numel);
}

Tensor FlatBuffers::piece_in_flat(const Tensor& group_buffer, const Piece& pc) const {
  return ops::narrow(group_buffer, 0, pc.flat_offset, pc.numel());
}

Tensor FlatBuffers::piece_in_shard(const Tensor& shard_buffer, const Piece& pc) const {
  return ops::narrow(shard_buffer, 0, pc.shard_offset, pc.numel());
}

void FlatBuffers::make_grad_buffers() {
  if (has_grad_buffers()) return;
  for (const FlatGroup& g : layout_.groups()) {
    grad_bufs_.push_back(zeros_1d(g.numel, g.dtype, device_));
  }
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor v = grad_view(static_cast<int>(i));
    if (params_[i].grad().defined()) ops::copy_(v, params_[i].grad());
    params_[i].set_grad(v);
  }
}

Tensor FlatBuffers::grad_view(int param) const {
  SL_CHECK(has_grad_buffers(), "FlatBuffers::grad_view: no gradient buffers");
  const ParamSlot& s = layout_.slots().at(static_cast<size_t>(param));
  return ops::view(ops::narrow(grad_bufs_[static_cast<size_t>(s.group)], 0, s.offset, s.numel),
                   params_[static_cast<size_t>(param)].sizes());
}

void FlatBuffers::zero_grads() {
  for (auto& g : grad_bufs_) ops::fill_(g, 0);
  for (size_t i = 0; i < params_.size() && has_grad_buffers(); ++i) {
    const Tensor& g = params_[i].grad();
    Tensor v = grad_view(static_cast<int>(i));
    if (!g.defined() || !g.is_same_storage(v) || g.storage_offset() != v.storage_offset()) {
      params_[i].set_grad(v);
    }
  }
}

std::vector<Tensor> FlatBuffers::make_shard_buffers(std::optional<DType> dtype) const {
  std::vector<Tensor> out;
  for (const FlatGroup& g : layout_.groups()) {
    out.push_back(zeros_1d(g.shard_numel, dtype.value_or(g.dtype), device_));
  }
  return out;
}

int64_t FlatBuffers::param_bytes() const {
  return tensor_bytes(param_bufs_);
}
int64_t FlatBuffers::grad_bytes() const {
  return tensor_bytes(grad_bufs_);
}

}  // namespace sl::dist

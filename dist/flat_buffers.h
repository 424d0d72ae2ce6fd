// FlatBuffers: the tensors behind a FlatLayout. Parameters are moved into one flat buffer per
// dtype group and become views of it (see Note [Flat buffer layout] in dist/flat_layout.h);
// optional flat gradient buffers of the same layout back every parameter's .grad(); shard
// buffers hold one rank's 1/N of a group (gradient shards, optimizer state, master weights).
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"
#include "dist/flat_layout.h"

namespace sl::dist {

class FlatBuffers {
 public:
  /// Lays `params` out for `world_size` ranks and re-points every parameter, in place, at its
  /// view of a new zero-padded flat buffer (values and Tensor identity kept, via nn::set_data).
  /// Throws ValueError for an undefined or duplicated parameter, DeviceError when the
  /// parameters are not all on one device.
  /// The caps are FlatLayout's.
  FlatBuffers(TensorList params, int world_size, int64_t bucket_cap_bytes = kDefaultBucketCapBytes,
              std::optional<int64_t> first_bucket_cap_bytes = std::nullopt);

  const FlatLayout& layout() const { return layout_; }
  const TensorList& params() const { return params_; }
  Device device() const { return device_; }
  int num_groups() const { return static_cast<int>(layout_.groups().size()); }

  /// The flat parameter buffer of a group (1-d, padded).
  const Tensor& param_buffer(int group) const { return param_bufs_.at(static_cast<size_t>(group)); }
  /// The padded region of `bucket` in a group-layout buffer (params or grads), 1-d view.
  Tensor bucket_view(const Tensor& group_buffer, int bucket) const;
  /// Rank `rank`'s slice of `bucket` in a group-layout buffer, 1-d view.
  Tensor slice_view(const Tensor& group_buffer, int bucket, int rank) const;
  /// This bucket's slice in a shard-layout buffer of its group, 1-d view.
  Tensor shard_slice_view(const Tensor& shard_buffer, int bucket) const;
  /// The elements of piece `pc` in a group-layout buffer / in a shard-layout buffer (1-d).
  Tensor piece_in_flat(const Tensor& group_buffer, const Piece& pc) const;
  Tensor piece_in_shard(const Tensor& shard_buffer, const Piece& pc) const;

  /// Allocates zeroed flat gradient buffers and points every parameter's .grad() at its view.
  void make_grad_buffers();
  bool has_grad_buffers() const { return !grad_bufs_.empty(); }
  const Tensor& grad_buffer(int group) const { return grad_bufs_.at(static_cast<size_t>(group)); }
  /// Parameter i's gradient view (parameter-shaped) in the gradient buffer.
  Tensor grad_view(int param) const;
  /// Zeroes the gradient buffers and re-points any .grad() that was replaced (e.g. set to none
  /// by an optimizer's zero_grad) at its view again.
  void zero_grads();

  /// One zeroed 1-d buffer of shard_numel elements per group, in the group's dtype or `dtype`.
  std::vector<Tensor> make_shard_buffers(std::optional<DType> dtype = std::nullopt) const;
  /// Bytes of the flat parameter buffers / gradient buffers (padding included).
  int64_t param_bytes() const;
  int64_t grad_bytes() const;

 private:
  TensorList params_;
  Device device_;
  FlatLayout layout_;
  std::vector<Tensor> param_bufs_;
  std::vector<Tensor> grad_bufs_;
};

/// Bytes of a list of tensors (undefined ones count 0).
int64_t tensor_bytes(const std::vector<Tensor>& ts);

}  // namespace sl::dist

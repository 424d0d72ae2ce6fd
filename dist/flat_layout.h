// FlatLayout: where every parameter lives in the flat buffers, how the buffers are cut into
// buckets, and which rank owns which part of which parameter. Pure arithmetic over (numel,
// dtype) lists: no tensors, no communication, so every rule is unit-tested on its own.
//
// Note [Flat buffer layout]
// 1. Parameters are grouped by dtype (groups in order of each dtype's first parameter); each
//    group has one flat parameter buffer and one flat gradient buffer of the same layout, and
//    the model's parameters become views into the parameter buffer (nn::set_data keeps the
//    Tensor handles model code holds).
// 2. Inside a group the parameters are laid out in REVERSE registration order: backward
//    produces the gradients of the last layers first, so bucket 0 fills (and starts
//    communicating) first.
// 3. Buckets are runs of consecutive parameters: a bucket closes as soon as its payload reaches
//    bucket_cap_bytes (the parameter that crosses the cap stays in it, so a parameter is never
//    split across buckets and one larger than the cap gets a bucket of its own). The first bucket
//    of each group closes at first_bucket_cap_bytes instead, when smaller (strategies: 1 MiB, as
//    PyTorch DDP): it holds the gradients backward produces first, so a small one starts the
//    communication early instead of waiting for a whole bucket's worth of layers.
// 4. Each bucket is padded with zeros to a multiple of the world size N, so it splits into N
//    equal slices: rank r owns slice r of every bucket. A reduce-scatter of a bucket hands each
//    rank exactly its slice; an allgather of the slices rebuilds the bucket.
// 5. Rank r's shard of a group is the concatenation of its slices of the group's buckets, in
//    bucket order: exactly 1/N of the (padded) group buffer. ZeRO keeps gradient shards,
//    optimizer state and fp32 master weights in buffers of this shard layout.
// 6. Ownership is reported per parameter element range (Piece): "rank r owns elements [b, e) of
//    parameter p, stored at offset s of its shard". Checkpoints record these ranges, which do
//    not depend on N, so a checkpoint written with N ranks loads with M.
// A parameter smaller than N (or one straddling slice boundaries) is simply split between
// ranks, possibly with padding owned by the last ranks; padding is zero in the parameter,
// gradient and state buffers and never reaches a parameter.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace sl::dist {

/// Default bucket size: 25 MB, as PyTorch DDP.
inline constexpr int64_t kDefaultBucketCapBytes = 25 * 1024 * 1024;

/// What the layout needs to know about a parameter.
struct ParamSpec {
  int64_t numel = 0;
  DType dtype = DType::f32;
};

/// Where a parameter lives.
struct ParamSlot {
  int group = 0;       ///< dtype group
  int bucket = 0;      ///< global bucket index
  int64_t offset = 0;  ///< element offset in the group's flat buffer
  int64_t numel = 0;
};

struct Bucket {
  int group = 0;
  int64_t offset = 0;        ///< element offset of the bucket in its group's flat buffer
  int64_t numel = 0;         ///< payload (sum of its parameters' numel)
  int64_t padded_numel = 0;  ///< numel rounded up to a multiple of the world size
  int64_t shard_numel = 0;   ///< padded_numel / world size: one rank's slice
  int64_t shard_offset = 0;  ///< offset of this bucket's slice in a rank's group shard
  std::vector<int> params;   ///< parameter indices in flat order (reverse registration order)
};

struct FlatGroup {
  DType dtype = DType::f32;
  int64_t numel = 0;         ///< padded size of the flat buffer (sum of padded buckets)
  int64_t shard_numel = 0;   ///< numel / world size
  std::vector<int> buckets;  ///< global bucket indices, in flat order
  std::vector<int> params;   ///< parameter indices, in flat order
};

/// A contiguous part of one parameter owned by one rank.
struct Piece {
  int param = 0;
  int rank = 0;
  int group = 0;
  int bucket = 0;
  int64_t param_begin = 0;  ///< element range [param_begin, param_end) of the parameter
  int64_t param_end = 0;
  int64_t flat_offset = 0;   ///< where param_begin sits in the group's flat buffer
  int64_t shard_offset = 0;  ///< where param_begin sits in `rank`'s group shard
  int64_t numel() const { return param_end - param_begin; }
  bool operator==(const Piece&) const = default;
};

class FlatLayout {
 public:
  FlatLayout() = default;
  /// Builds the layout of Note [Flat buffer layout]; each group's first bucket closes at
  /// min(first_bucket_cap_bytes, bucket_cap_bytes) (no first cap: bucket_cap_bytes). Throws
  /// ValueError for world_size < 1, a cap < 1 or a negative numel.
  FlatLayout(const std::vector<ParamSpec>& params, int world_size,
             int64_t bucket_cap_bytes = kDefaultBucketCapBytes,
             std::optional<int64_t> first_bucket_cap_bytes = std::nullopt);

  int world_size() const { return world_size_; }
  int64_t bucket_cap_bytes() const { return bucket_cap_bytes_; }
  /// The cap each group's first bucket closed at.
  int64_t first_bucket_cap_bytes() const { return first_bucket_cap_bytes_; }
  const std::vector<ParamSpec>& params() const { return params_; }
  const std::vector<ParamSlot>& slots() const { return slots_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  const std::vector<FlatGroup>& groups() const { return groups_; }

  /// Element offset, in its group's flat buffer, of rank's slice of `bucket`.
  int64_t slice_offset(int bucket, int rank) const;
  /// The parts of every parameter that `rank` owns, in shard order (group by group).
  std::vector<Piece> pieces_of_rank(int rank) const;
  /// Which ranks own which parts of parameter `param`, in element order (covers it exactly).
  std::vector<Piece> pieces_of_param(int param) const;
  /// Every piece of every rank (pieces_of_rank for r = 0..N-1, concatenated).
  std::vector<Piece> all_pieces() const;
  /// The rank owning element `flat_offset` of `group`'s buffer and its offset in that rank's
  /// shard. Throws IndexError outside [0, groups()[group].numel).
  std::pair<int, int64_t> owner_of(int group, int64_t flat_offset) const;
  /// Multi-line description for debugging ("group 0 float32: 3 buckets ...").
  std::string str() const;

 private:
  std::vector<Piece> pieces_in_bucket(int bucket, int rank) const;

  int world_size_ = 1;
  int64_t bucket_cap_bytes_ = kDefaultBucketCapBytes;
  int64_t first_bucket_cap_bytes_ = kDefaultBucketCapBytes;
  std::vector<ParamSpec> params_;
  std::vector<ParamSlot> slots_;
  std::vector<Bucket> buckets_;
  std::vector<FlatGroup> groups_;
};

/// Pads n up to a multiple of m (m >= 1).
inline int64_t round_up(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

}  // namespace sl::dist

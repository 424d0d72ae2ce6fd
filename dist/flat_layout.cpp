#include "dist/flat_layout.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace sl::dist {

FlatLayout::FlatLayout(const std::vector<ParamSpec>& params, int world_size,
                       int64_t bucket_cap_bytes, std::optional<int64_t> first_bucket_cap_bytes)
    : world_size_(world_size),
      bucket_cap_bytes_(bucket_cap_bytes),
      first_bucket_cap_bytes_(
          std::min(first_bucket_cap_bytes.value_or(bucket_cap_bytes), bucket_cap_bytes)),
      params_(params) {
  SL_CHECK(world_size >= 1, "FlatLayout: world size must be >= 1, got ", world_size);
  SL_CHECK(bucket_cap_bytes >= 1, "FlatLayout: bucket_cap_bytes must be >= 1, got ",
           bucket_cap_bytes);
  SL_CHECK(first_bucket_cap_bytes.value_or(1) >= 1,
           "FlatLayout: first_bucket_cap_bytes must be >= 1, got ", *first_bucket_cap_bytes);
  const int64_t n = world_size;
  slots_.resize(params.size());
  // 1. dtype groups in order of first appearance
  for (size_t i = 0; i < params.size(); ++i) {
    SL_CHECK(params[i].numel >= 0, "FlatLayout: parameter ", i, " has negative numel ",
             params[i].numel);
    auto it = std::find_if(groups_.begin(), groups_.end(),
                           [&](const FlatGroup& g) { return g.dtype == params[i].dtype; });
    if (it == groups_.end()) {
      groups_.push_back(FlatGroup{params[i].dtype, 0, 0, {}, {}});
      it = groups_.end() - 1;
    }
    it->params.push_back(static_cast<int>(i));
  }
  // 2-5. reverse order inside each group, buckets closing at the cap, padded to N
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    FlatGroup& g = groups_[gi];
    std::reverse(g.params.begin(), g.params.end());
    const int64_t esize = static_cast<int64_t>(dtype_size(g.dtype));
    int64_t offset = 0;
    int64_t shard_offset = 0;
    Bucket cur;
    auto close = [&] {
      cur.group = static_cast<int>(gi);
      cur.offset = offset;
      cur.padded_numel = round_up(cur.numel, n);
      cur.shard_numel = cur.padded_numel / n;
      cur.shard_offset = shard_offset;
      offset += cur.padded_numel;
      shard_offset += cur.shard_numel;
      g.buckets.push_back(static_cast<int>(buckets_.size()));
      buckets_.push_back(std::move(cur));
      cur = Bucket{};
    };
    for (int p : g.params) {
      ParamSlot& s = slots_[static_cast<size_t>(p)];
      s.group = static_cast<int>(gi);
      s.bucket = static_cast<int>(buckets_.size());
      s.offset = offset + cur.numel;
      s.numel = params[static_cast<size_t>(p)].numel;
      cur.params.push_back(p);
      cur.numel += s.numel;
      const int64_t cap = g.buckets.empty() ? first_bucket_cap_bytes_ : bucket_cap_bytes;
      if (cur.numel * esize >= cap) close();
    }
    if (!cur.params.empty()) close();
    g.numel = offset;
    g.shard_numel = offset / n;
  }
}

int64_t FlatLayout::slice_offset(int bucket, int rank) const {
  const Bucket& b = buckets_.at(static_cast<size_t>(bucket));
  return b.offset + static_cast<int64_t>(rank) * b.shard_numel;
}

std::vector<Piece> FlatLayout::pieces_in_bucket(int bucket, int rank) const {
  std::vector<Piece> out;
  const Bucket& b = buckets_[static_cast<size_t>(bucket)];
  int64_t lo = slice_offset(bucket, rank), hi = lo + b.shard_numel;
  for (int p : b.params) {
    const ParamSlot& s = slots_[static_cast<size_t>(p)];
    int64_t begin = std::max(lo, s.offset), end = std::min(hi, s.offset + s.numel);
    if (begin >= end) continue;
    out.push_back(Piece{p, rank, b.group, bucket, begin - s.offset, end - s.offset, begin,
                        b.shard_offset + (begin - lo)});
  }
  return out;
}

std::vector<Piece> FlatLayout::pieces_of_rank(int rank) const {
  SL_CHECK_INDEX(rank >= 0 && rank < world_size_, "pieces_of_rank: rank ", rank, " is not in [0, ",
                 world_size_, ")");
  std::vector<Piece> out;
  for (const FlatGroup& g : groups_) {
    for (int b : g.buckets) {
      auto ps = pieces_in_bucket(b, rank);
      out.insert(out.end(), ps.begin(), ps.end());
    }
  }
  return out;
}

std::vector<Piece> FlatLayout::pieces_of_param(int param) const {
  SL_CHECK_INDEX(param >= 0 && static_cast<size_t>(param) < slots_.size(),
                 "pieces_of_param: ", "parameter ", param, " is not in [0, ", slots_.size(), ")");
  std::vector<Piece> out;
  const ParamSlot& s = slots_[static_cast<size_t>(param)];
  for (int r = 0; r < world_size_; ++r) {
    for (const Piece& pc : pieces_in_bucket(s.bucket, r)) {
      if (pc.param == param) out.push_back(pc);
    }
  }
  return out;  // ranks own consecutive slices, so rank order is element order
}

std::vector<Piece> FlatLayout::all_pieces() const {
  std::vector<Piece> out;
  for (int r = 0; r < world_size_; ++r) {
    auto ps = pieces_of_rank(r);
    out.insert(out.end(), ps.begin(), ps.end());
  }
  return out;
}

std::pair<int, int64_t> FlatLayout::owner_of(int group, int64_t flat_offset) const {
  SL_CHECK_INDEX(group >= 0 && static_cast<size_t>(group) < groups_.size(), "owner_of: group ",
                 group, " is not in [0, ", groups_.size(), ")");
  const FlatGroup& g = groups_[static_cast<size_t>(group)];
  SL_CHECK_INDEX(flat_offset >= 0 && flat_offset < g.numel, "owner_of: offset ", flat_offset,
                 " is outside group ", group, "'s ", g.numel, " elements");
  for (int bi : g.buckets) {
    const Bucket& b = buckets_[static_cast<size_t>(bi)];
    if (flat_offset < b.offset + b.padded_numel) {
      int64_t within = flat_offset - b.offset;
      int rank = static_cast<int>(within / b.shard_numel);
      return {rank, b.shard_offset + within % b.shard_numel};
    }
  }
  SL_ASSERT(false);
  return {-1, -1};
}

std::string FlatLayout::str() const {
  std::ostringstream os;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const FlatGroup& g = groups_[gi];
    os << "group " << gi << " " << dtype_name(g.dtype) << ": " << g.numel << " elements, "
       << g.buckets.size() << " buckets, shard " << g.shard_numel << " per rank\n";
    for (int bi : g.buckets) {
      const Bucket& b = buckets_[static_cast<size_t>(bi)];
      os << "  bucket " << bi << ": offset " << b.offset << ", " << b.numel << " (+"
         << b.padded_numel - b.numel << " pad), params";
      for (int p : b.params) os << " " << p;
      os << "\n";
    }
  }
  return os.str();
}

}  // namespace sl::dist

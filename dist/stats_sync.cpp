#include "dist/stats_sync.h"

#include "core/creation.h"
#include "core/error.h"
#include "core/ops/view.h"
#include "dist/work.h"

namespace sl::dist {

namespace {

// SyncBatchNorm's kernels read the results on the compute stream, so the collectives only order
// that stream (Work::wait_stream): on NCCL the host does not wait for the GPU in a SyncBatchNorm
// layer; on MPI (host collectives) it is a plain wait.
class GroupStatsSync final : public nn::StatsSync {
 public:
  explicit GroupStatsSync(ProcessGroupPtr group) : group_(std::move(group)) {}

  int world_size() const override { return group_->size(); }

  Tensor all_gather(const Tensor& local) override {
    const Tensor in = local.contiguous();
    const int64_t n = in.numel();
    Tensor out = empty({group_->size(), n}, {.dtype = in.dtype(), .device = in.device()});
    group_->allgather(ops::view(out, {group_->size() * n}), in)->wait_stream();
    return out;
  }

  void all_reduce_sum(const Tensor& t) override {
    group_->allreduce(t, ReduceOp::sum)->wait_stream();
  }

 private:
  ProcessGroupPtr group_;
};

}  // namespace

nn::StatsSyncPtr make_stats_sync(ProcessGroupPtr group) {
  SL_CHECK(group != nullptr, "make_stats_sync: the process group is null");
  return std::make_shared<GroupStatsSync>(std::move(group));
}

}  // namespace sl::dist

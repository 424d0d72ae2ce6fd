// The process-group side of SyncBatchNorm (Note [SyncBatchNorm] in nn/sync_batch_norm.h).
#pragma once

#include "dist/process_group.h"
#include "nn/sync_batch_norm.h"

namespace sl::dist {

/// An nn::StatsSync whose calls are blocking collectives on `group` (an allgather, an
/// allreduce), issued in the caller's order after anything already issued on the group, so they
/// interleave with a strategy's bucketed gradient collectives identically on every rank. The
/// tensors must be on the group's device kind (ProcessGroup's checks). Throws ValueError for a
/// null group.
nn::StatsSyncPtr make_stats_sync(ProcessGroupPtr group);

}  // namespace sl::dist

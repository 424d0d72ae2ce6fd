#include "dist/process_group.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "core/ops/copy.h"
#include "core/ops/view.h"
#include "core/profiler.h"
#include "dist/debug.h"
#include "sl_config.h"

#if SL_HAVE_MPI
#include "dist/mpi/process_group_mpi.h"
#endif

namespace sl::dist {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::max:
      return "max";
  }
  return "?";
}

const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::allreduce:
      return "allreduce";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
    case CollectiveKind::allgather:
      return "allgather";
    case CollectiveKind::broadcast:
      return "broadcast";
    case CollectiveKind::barrier:
      return "barrier";
  }
  return "?";
}

std::string Collective::str() const {
  std::ostringstream os;
  os << collective_name(kind) << " #" << seq;
  if (kind == CollectiveKind::barrier) return os.str();
  os << " (";
  if (kind == CollectiveKind::allreduce || kind == CollectiveKind::reduce_scatter) {
    os << reduce_op_name(op) << ", ";
  }
  if (kind == CollectiveKind::broadcast) os << "root " << root << ", ";
  os << dtype_name(dtype) << " x " << count << ")";
  return os.str();
}

CommCounter CommStats::total() const {
  CommCounter t;
  for (const auto& c : by_kind) {
    t.calls += c.calls;
    t.payload_bytes += c.payload_bytes;
    t.sent_bytes += c.sent_bytes;
  }
  return t;
}

std::string CommStats::str() const {
  std::ostringstream os;
  for (int k = 0; k < kNumCollectiveKinds; ++k) {
    const CommCounter& c = by_kind[static_cast<size_t>(k)];
    if (c.calls == 0) continue;
    os << collective_name(static_cast<CollectiveKind>(k)) << ": " << c.calls << " calls, "
       << c.payload_bytes << " B payload, " << c.sent_bytes << " B sent\n";
  }
  return os.str();
}

ProcessGroupOptions ProcessGroupOptions::from_env() {
  ProcessGroupOptions o;
  if (const char* t = std::getenv("SL_DIST_TIMEOUT")) {
    char* end = nullptr;
    double secs = std::strtod(t, &end);
    SL_CHECK(end != t && *end == '\0' && secs > 0,
             "SL_DIST_TIMEOUT: expected a positive number of seconds, got '", t, "'");
    o.timeout = std::chrono::milliseconds(static_cast<int64_t>(secs * 1000.0));
  }
  o.debug = debug_enabled_from_env();
  return o;
}

ProcessGroup::ProcessGroup(int rank, int size, ProcessGroupOptions opts)
    : rank_(rank), size_(size), opts_(opts) {
  SL_CHECK_DIST(size >= 1 && rank >= 0 && rank < size, "ProcessGroup: rank ", rank,
                " is not in [0, ", size, ")");
}

ProcessGroup::~ProcessGroup() = default;

std::string ProcessGroup::who() const {
  return detail::str_cat("rank ", rank_, "/", size_);
}

void ProcessGroup::check_tensor(const char* op, const Tensor& t, const char* arg) const {
  ops::check_defined(op, t, arg);
  SL_CHECK_DEVICE(t.device().kind == device_kind(), op, ": ", arg, " is on ", t.device(),
                  " but the ", backend(), " process group works on ",
                  device_kind_name(device_kind()), " tensors");
  SL_CHECK(t.is_contiguous(), op, ": ", arg,
           " must be contiguous (collectives work on flat "
           "buffers), got shape ",
           shape_str(t.sizes()), " with strides ", shape_str(t.strides()));
}

WorkPtr ProcessGroup::allreduce(const Tensor& t, ReduceOp op) {
  check_tensor("allreduce", t, "tensor");
  SL_CHECK_DTYPE(op != ReduceOp::avg || is_floating(t.dtype()),
                 "allreduce: avg needs a floating dtype, got ", dtype_name(t.dtype()));
  return issue(Collective{CollectiveKind::allreduce, op, t.dtype(), t.numel(), 0, 0}, t, t);
}

WorkPtr ProcessGroup::reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op) {
  check_tensor("reduce_scatter", output, "output");
  check_tensor("reduce_scatter", input, "input");
  SL_CHECK_DTYPE(output.dtype() == input.dtype(), "reduce_scatter: output is ",
                 dtype_name(output.dtype()), " but input is ", dtype_name(input.dtype()));
  SL_CHECK_DTYPE(op != ReduceOp::avg || is_floating(input.dtype()),
                 "reduce_scatter: avg needs a floating dtype, got ", dtype_name(input.dtype()));
  SL_CHECK_SHAPE(input.numel() == output.numel() * size_, "reduce_scatter: input has ",
                 input.numel(), " elements, expected output's ", output.numel(), " x ", size_,
                 " ranks = ", output.numel() * size_);
  SL_CHECK(!output.is_same_storage(input) || size_ == 1,
           "reduce_scatter: output must not share storage with input");
  return issue(Collective{CollectiveKind::reduce_scatter, op, input.dtype(), output.numel(), 0, 0},
               output, input);
}

WorkPtr ProcessGroup::allgather(const Tensor& output, const Tensor& input) {
  check_tensor("allgather", output, "output");
  check_tensor("allgather", input, "input");
  SL_CHECK_DTYPE(output.dtype() == input.dtype(), "allgather: output is ",
                 dtype_name(output.dtype()), " but input is ", dtype_name(input.dtype()));
  SL_CHECK_SHAPE(output.numel() == input.numel() * size_, "allgather: output has ", output.numel(),
                 " elements, expected input's ", input.numel(), " x ", size_,
                 " ranks = ", input.numel() * size_);
  if (output.is_same_storage(input)) {
    SL_CHECK(input.storage_offset() == output.storage_offset() + rank_ * input.numel(),
             "allgather: input shares storage with output but is not this rank's shard of it "
             "(offset ",
             input.storage_offset() - output.storage_offset(), ", expected ", rank_ * input.numel(),
             ")");
  }
  return issue(
      Collective{CollectiveKind::allgather, ReduceOp::sum, input.dtype(), input.numel(), 0, 0},
      output, input);
}

WorkPtr ProcessGroup::broadcast(const Tensor& t, int root) {
  check_tensor("broadcast", t, "tensor");
  SL_CHECK_INDEX(root >= 0 && root < size_, "broadcast: root ", root, " is not a rank in [0, ",
                 size_, ")");
  return issue(Collective{CollectiveKind::broadcast, ReduceOp::sum, t.dtype(), t.numel(), root, 0},
               t, t);
}

WorkPtr ProcessGroup::barrier() {
  return issue(Collective{CollectiveKind::barrier, ReduceOp::sum, DType::f32, 0, 0, 0}, Tensor(),
               Tensor());
}

namespace {

// "wait allreduce", ...: what Work::wait records under (static, as the profiler needs).
const char* wait_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::allreduce:
      return "wait allreduce";
    case CollectiveKind::reduce_scatter:
      return "wait reduce_scatter";
    case CollectiveKind::allgather:
      return "wait allgather";
    case CollectiveKind::broadcast:
      return "wait broadcast";
    case CollectiveKind::barrier:
      return "wait barrier";
  }
  return "wait";
}

}  // namespace

WorkPtr ProcessGroup::issue(Collective c, const Tensor& out, const Tensor& in) {
  const int64_t esz = static_cast<int64_t>(dtype_size(c.dtype));
  const int64_t n = size_;
  int64_t payload = 0;  // CommCounter's payload_bytes of this call
  int64_t sent = 0;
  switch (c.kind) {
    case CollectiveKind::allreduce:
      payload = c.count * esz;
      sent = 2 * (n - 1) * c.count * esz / n;
      break;
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::allgather:
      payload = n * c.count * esz;
      sent = (n - 1) * c.count * esz;
      break;
    case CollectiveKind::broadcast:
      payload = c.count * esz;
      if (rank_ == c.root && n > 1) sent = c.count * esz;
      break;
    case CollectiveKind::barrier:
      break;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    c.seq = seq_++;
    CommCounter& k = stats_.by_kind[static_cast<size_t>(c.kind)];
    k.calls += 1;
    k.payload_bytes += payload;
    k.sent_bytes += sent;
  }
  if (opts_.debug) log_collective(rank_, size_, backend(), c);
  if (out.defined()) out.bump_version();
  const bool profiling = profiler::is_recording();
  const int64_t issued = profiling ? profiler::now_ns() : 0;
  WorkPtr work = start(c, out, in);
  work->set_wait_name(wait_name(c.kind));
  if (profiling) {
    // The time in flight, recorded by whichever thread completes the work (Note [Profiler]).
    work->on_complete([gen = profiler::generation(), name = collective_name(c.kind), issued,
                       payload, id = profiler::next_async_id()] {
      profiler::record(gen, name, profiler::Category::comm, issued, profiler::now_ns(), payload,
                       /*async=*/true, id);
    });
  }
  return work;
}

CommStats ProcessGroup::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void ProcessGroup::reset_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = CommStats{};
}

uint64_t ProcessGroup::next_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seq_;
}

// ---- single rank ------------------------------------------------------------------------------

namespace {

class ProcessGroupSingle final : public ProcessGroup {
 public:
  explicit ProcessGroupSingle(ProcessGroupOptions opts) : ProcessGroup(0, 1, opts) {}
  const char* backend() const override { return "single"; }
  DeviceKind device_kind() const override { return DeviceKind::cpu; }

 protected:
  WorkPtr start(const Collective& c, const Tensor& out, const Tensor& in) override {
    // One rank: sum, avg and max of one value are the value; reduce_scatter and allgather of one
    // shard are copies.
    if ((c.kind == CollectiveKind::reduce_scatter || c.kind == CollectiveKind::allgather) &&
        !out.is_same(in) &&
        !(out.is_same_storage(in) && out.storage_offset() == in.storage_offset())) {
      ops::copy_(ops::view(out, {out.numel()}), ops::view(in, {in.numel()}));
    }
    return Work::completed(c.str());
  }
};

std::mutex g_world_mu;
ProcessGroupPtr g_world;
bool g_finalized = false;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return (end && *end == '\0') ? static_cast<int>(x) : fallback;
}

}  // namespace

ProcessGroupPtr make_single_group(ProcessGroupOptions opts) {
  return std::make_shared<ProcessGroupSingle>(opts);
}

LaunchInfo detect_launch() {
  LaunchInfo li;
  if (std::getenv("OMPI_COMM_WORLD_SIZE")) {
    li = {true, "mpirun", env_int("OMPI_COMM_WORLD_RANK", 0), env_int("OMPI_COMM_WORLD_SIZE", 1)};
  } else if (std::getenv("PMIX_RANK") && std::getenv("SLURM_STEP_ID")) {
    li = {true, "srun", env_int("SLURM_PROCID", 0), env_int("SLURM_NTASKS", 1)};
  } else if (std::getenv("PMIX_RANK")) {
    li = {true, "pmi", env_int("PMIX_RANK", 0), env_int("PMIX_SIZE", 1)};
  } else if (std::getenv("PMI_RANK") || std::getenv("PMI_SIZE")) {
    li = {true, "pmi", env_int("PMI_RANK", 0), env_int("PMI_SIZE", 1)};
  } else if (std::getenv("SLURM_STEP_ID") && std::getenv("SLURM_PROCID")) {
    li = {true, "srun", env_int("SLURM_PROCID", 0), env_int("SLURM_STEP_NUM_TASKS", 1)};
  }
  return li;
}

namespace {
std::atomic<NcclGroupFactory> g_nccl_stand_in{nullptr};
}  // namespace

void set_nccl_stand_in(NcclGroupFactory f) {
  g_nccl_stand_in.store(f);
}

#if !SL_HAVE_NCCL
ProcessGroupPtr make_nccl_group(const ProcessGroupPtr& bootstrap, Device device) {
  if (NcclGroupFactory f = g_nccl_stand_in.load()) return f(bootstrap, device);
  detail::throw_error<DeviceError>(
      "make_nccl_group: this build of Shardlight has no NCCL backend "
      "(it needs CUDA and NCCL at build time)");
}
bool nccl_available() {
  return false;
}
#endif

ProcessGroupPtr world() {
  std::lock_guard<std::mutex> lock(g_world_mu);
  if (g_world) return g_world;
  SL_CHECK_DIST(!g_finalized, "world: the distributed runtime was already finalized");
  ProcessGroupOptions opts = ProcessGroupOptions::from_env();
  LaunchInfo li = detect_launch();
  if (!li.launched) {
    std::fprintf(stderr,
                 "shardlight: started without a launcher (mpirun/srun): running as a single "
                 "rank\n");
    g_world = make_single_group(opts);
    return g_world;
  }
#if SL_HAVE_MPI
  g_world = make_mpi_world(opts);
#else
  SL_CHECK_DIST(li.size <= 1, "world: started by ", li.launcher, " with ", li.size,
                " ranks, but this build of Shardlight has no MPI backend (rebuild with "
                "-Dmpi=enabled and an MPI installation)");
  g_world = make_single_group(opts);
#endif
  return g_world;
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(g_world_mu);
  return g_world != nullptr;
}

void finalize() {
  std::lock_guard<std::mutex> lock(g_world_mu);
  g_world.reset();
  g_finalized = true;
#if SL_HAVE_MPI
  mpi_finalize();
#endif
}

}  // namespace sl::dist

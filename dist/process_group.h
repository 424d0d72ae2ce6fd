// ProcessGroup: the ranks of a distributed job and the collectives between them.
//
// Every collective works on flat (contiguous) tensors, is asynchronous and returns a Work to
// wait on. Collectives of one group run in the order they were issued, on every rank, so the
// ranks must issue the same collectives in the same order (SL_DIST_DEBUG=1 checks this and
// turns a disagreement into a DistError naming each rank's collective instead of a hang).
//
// The tensors of a collective belong to it from the call until its Work's wait() returns (or
// is_completed() returns true): the caller must not read or write them in between (dropping
// its references is fine: the backend keeps them alive until the collective finished). With
// CUDA tensors (nccl) that holds for kernels too: the collective sees every kernel queued on the
// device's compute stream before the call; kernels queued after the call run concurrently with
// it, and are ordered after it only once wait() has returned (wait() blocks the host until the
// collective finished and makes the device's compute stream wait for it; wait_stream() only
// makes the stream wait, for consumers that are kernels; Note [NCCL stream ordering] in
// dist/nccl/process_group_nccl.cpp). A Work dropped without either orders nothing.
// After a collective failed (a timeout, a lost peer) an mpi or nccl group is broken: the
// collectives already queued and every later one fail with a DistError "...: because an earlier
// collective failed: <first error>" (from wait(); nccl throws from the call itself for a collective
// issued after the failure).
//
// Backends: "single" (one rank, no communication), "mpi" (CPU tensors, launched with mpirun or
// srun; one communication thread per process drives MPI so communication overlaps
// computation), "nccl" (CUDA tensors, on a stream of its own that overlaps the compute stream;
// its unique id is exchanged over the MPI group).
//
// Environment: SL_DIST_TIMEOUT (seconds, default 300) bounds every wait; SL_DIST_DEBUG=1 logs
// each collective per rank (op, dtype, element count, sequence number) and checks, before
// running it, that every rank issued the same one.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "core/tensor.h"
#include "dist/work.h"

namespace sl::dist {

enum class ReduceOp : uint8_t { sum = 0, avg, max };
enum class CollectiveKind : uint8_t {
  allreduce = 0,
  reduce_scatter,
  allgather,
  broadcast,
  barrier
};
inline constexpr int kNumCollectiveKinds = 5;

const char* reduce_op_name(ReduceOp op);
const char* collective_name(CollectiveKind k);

/// One issued collective: what SL_DIST_DEBUG logs and compares across ranks.
struct Collective {
  CollectiveKind kind = CollectiveKind::barrier;
  ReduceOp op = ReduceOp::sum;
  DType dtype = DType::f32;
  /// Elements each rank contributes: the tensor's numel for allreduce and broadcast, the
  /// per-rank shard for reduce_scatter (output numel) and allgather (input numel); 0 for barrier.
  int64_t count = 0;
  int root = 0;      ///< broadcast only
  uint64_t seq = 0;  ///< 0, 1, 2, ... per group, in issue order
  /// "allreduce #3 (sum, float32 x 1024)"
  std::string str() const;
  bool same_call(const Collective& o) const {
    return kind == o.kind && op == o.op && dtype == o.dtype && count == o.count && root == o.root &&
           seq == o.seq;
  }
};

/// Calls and bytes per collective kind. payload_bytes: bytes of the tensor each rank hands in
/// (the whole buffer for allreduce/broadcast, the full N-shard buffer for reduce_scatter and
/// allgather). sent_bytes: bytes a rank sends with a bandwidth-optimal (ring) algorithm:
/// allreduce 2(N-1)/N B, reduce_scatter and allgather (N-1)/N B, broadcast B on the root,
/// which is the ZeRO paper's accounting (allreduce = reduce-scatter + allgather = 2 Psi).
struct CommCounter {
  int64_t calls = 0;
  int64_t payload_bytes = 0;
  int64_t sent_bytes = 0;
};
struct CommStats {
  std::array<CommCounter, kNumCollectiveKinds> by_kind{};
  const CommCounter& operator[](CollectiveKind k) const { return by_kind[static_cast<size_t>(k)]; }
  CommCounter total() const;
  /// One line per kind with calls > 0: "allreduce: 3 calls, 1.2 MB payload, 1.2 MB sent".
  std::string str() const;
};

struct ProcessGroupOptions {
  std::chrono::milliseconds timeout{300000};
  bool debug = false;
  /// SL_DIST_TIMEOUT and SL_DIST_DEBUG applied over the defaults.
  static ProcessGroupOptions from_env();
};

class ProcessGroup {
 public:
  ProcessGroup(int rank, int size, ProcessGroupOptions opts);
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// "single", "mpi" or "nccl".
  virtual const char* backend() const = 0;
  /// Device kind the group's tensors must live on (cpu, or cuda for NCCL).
  virtual DeviceKind device_kind() const = 0;
  const ProcessGroupOptions& options() const { return opts_; }

  /// In place: t becomes op over every rank's t (avg: floating dtypes only).
  WorkPtr allreduce(const Tensor& t, ReduceOp op = ReduceOp::sum);
  /// input holds size() equal shards; output (input.numel()/size() elements) becomes op over
  /// every rank's shard number rank(). Throws ShapeError when the sizes do not fit.
  WorkPtr reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::sum);
  /// output (size() * input.numel() elements) becomes every rank's input, in rank order. input
  /// may be output's own shard (in place).
  WorkPtr allgather(const Tensor& output, const Tensor& input);
  /// In place: t becomes root's t.
  WorkPtr broadcast(const Tensor& t, int root = 0);
  WorkPtr barrier();

  /// Counters since construction or the last reset_stats().
  CommStats stats() const;
  void reset_stats();
  /// Sequence number the next collective will get.
  uint64_t next_seq() const;

 protected:
  /// Backend entry point: starts `c` (already validated, counted and logged) on out/in and
  /// returns its Work. For allreduce and broadcast `in` is `out`; for barrier both are undefined.
  virtual WorkPtr start(const Collective& c, const Tensor& out, const Tensor& in) = 0;
  /// "rank 1/3" prefix for messages.
  std::string who() const;

 private:
  WorkPtr issue(Collective c, const Tensor& out, const Tensor& in);
  void check_tensor(const char* op, const Tensor& t, const char* arg) const;

  int rank_;
  int size_;
  ProcessGroupOptions opts_;
  mutable std::mutex mu_;
  uint64_t seq_ = 0;
  CommStats stats_;
};

using ProcessGroupPtr = std::shared_ptr<ProcessGroup>;

/// A group of one rank: collectives complete at once (allgather/reduce_scatter copy).
ProcessGroupPtr make_single_group(ProcessGroupOptions opts = ProcessGroupOptions::from_env());

/// A NCCL group over the same ranks as `bootstrap` (an MPI group, or a single rank), for CUDA
/// tensors on `device` (one GPU per rank). Rank 0 creates the NCCL unique id and broadcasts it
/// over `bootstrap`; collective, so every rank must call it. Throws DeviceError when Shardlight
/// was built without NCCL or `device` is not a visible GPU. Its collectives run on a NCCL
/// stream after the work already queued on `device`'s compute stream; the compute stream waits
/// for one only in its Work's wait() (see the top of this header). A collective that times out
/// or that NCCL reports an error for aborts the communicator; the group then throws DistError
/// "...: not run because an earlier collective failed: <first error>" for every later one.
ProcessGroupPtr make_nccl_group(const ProcessGroupPtr& bootstrap, Device device);
/// True when the NCCL backend was compiled in.
bool nccl_available();
/// Makes a group for CUDA tensors over `bootstrap`'s ranks (the signature of make_nccl_group).
using NcclGroupFactory = ProcessGroupPtr (*)(const ProcessGroupPtr& bootstrap, Device device);
/// For tests only: in a build without NCCL, make_nccl_group returns f's group instead of
/// throwing (the fake GPU's stand-in, Note [Fake GPU] in tests/support/fake_gpu.h); null
/// restores the error. Ignored when the NCCL backend is built in; nccl_available() is unchanged.
void set_nccl_stand_in(NcclGroupFactory f);

/// How this process was started.
struct LaunchInfo {
  bool launched = false;  ///< started by mpirun / srun
  std::string launcher;   ///< "mpirun", "srun", "pmi" or "" when not launched
  int rank = 0;
  int size = 1;
};
/// Reads the launcher's environment (OMPI_COMM_WORLD_*, PMIX_*, PMI_*, SLURM_* of a job step).
LaunchInfo detect_launch();

/// The group of all processes of this job, created on first use: MPI when started by a
/// launcher, otherwise a single rank (printing once to stderr that it runs as one rank).
/// Throws DistError when launched with several ranks but built without MPI.
ProcessGroupPtr world();
/// True once world() has been created (does not create it).
bool is_initialized();
/// Shuts the communication runtime down (MPI_Finalize). Runs automatically at exit; a later
/// world() throws DistError.
void finalize();

}  // namespace sl::dist

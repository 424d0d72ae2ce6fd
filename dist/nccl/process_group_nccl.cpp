// NCCL backend of ProcessGroup: collectives on CUDA tensors (compiled only with CUDA + NCCL).
//
// Rank 0 of the bootstrap group (MPI) creates the NCCL unique id and broadcasts it; every rank
// then joins the NCCL communicator for its device. Collectives run on a dedicated stream that
// first waits for the device's compute stream (Note [CUDA streams and synchronisation] in
// core/cuda/cuda_api.h), so a collective sees every value computed before it was issued; the
// compute stream waits for the collective only in Work::wait(), so the kernels queued in between
// overlap with it (Note [NCCL stream ordering]). A watcher thread polls each collective's
// completion event and completes its Work; one that does not finish before the deadline, or that
// NCCL reports an error for, aborts the communicator (ncclCommAbort) and fails with a DistError,
// so a lost peer cannot hang the job; the group is then broken, and every later collective fails
// naming that first error.
//
// Note [NCCL stream ordering]
// A collective issued by start() is ordered as
//   compute stream --(ready event)--> NCCL stream: the collective --(done event)--> the
//   compute stream of whoever calls Work::wait()
// start() records `ready` on the compute stream and makes the group's NCCL stream (non-blocking,
// so it does not order with the legacy default stream otherwise) wait for it, so the collective
// reads what every kernel issued before it wrote. It records `done` on the NCCL stream after the
// collective and does not make the compute stream wait: the kernels issued after start() (the
// rest of backward, while a gradient bucket is reduced) run concurrently with the collective, so
// they must not touch its tensors. Work::wait() blocks the host until the watcher saw `done`
// complete and then makes the compute stream wait for `done` (cudaStreamWaitEvent), as PyTorch's
// ProcessGroupNCCL Work::wait() does; every kernel queued after wait() returns sees the result.
// The host wait alone already orders them (the watcher completes the Work only after `done`
// completed); the stream wait states the dependency on the GPU and keeps it if wait() ever
// stops blocking the host. A Work that is never waited for orders nothing: its tensors may be
// used again only after is_completed() returned true. The caching allocator assumes a block is
// used on the compute stream only (Note [Caching allocator]), so the watcher holds the
// collective's tensors until `done` completed: a tensor the caller drops meanwhile is not reused
// while NCCL still reads or writes it. A collective that failed (the communicator was aborted)
// never releases its tensors while the group lives: an aborted kernel may still touch them.
// Every use of the communicator (the collective calls in start(), ncclCommGetAsyncError and
// ncclCommAbort on the watcher) holds NcclState::mu, since NCCL forbids using one communicator
// from two threads at once; the broken check sits under the same lock, so no collective is
// issued on a communicator that is being or has been aborted. The one exception is the
// watcher's last resort: an enqueue that still holds the lock past a collective's deadline is
// blocked inside NCCL, and only ncclCommAbort from another thread releases it (PyTorch's
// watchdog does the same), so the watcher then aborts without the lock rather than hang.
// A failure seen only by stream-ordered waits (Work::wait_stream, SyncBatchNorm) surfaces at
// the group's next collective, and is printed when a broken group is destroyed.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/creation.h"
#include "core/cuda/runtime.h"
#include "dist/comm_thread.h"
#include "dist/debug.h"
#include "dist/process_group.h"

namespace sl::dist {

namespace {

using Clock = std::chrono::steady_clock;

#define SL_CUDA_CHECK(call)                                                                        \
  do {                                                                                             \
    cudaError_t sl_cuda_rc_ = (call);                                                              \
    if (sl_cuda_rc_ != cudaSuccess) [[unlikely]] {                                                 \
      ::sl::detail::throw_error<::sl::DistError>("nccl: ", #call, " failed at ", __FILE__, ":",    \
                                                 __LINE__, ": ", cudaGetErrorString(sl_cuda_rc_)); \
    }                                                                                              \
  } while (0)

#define SL_NCCL_CHECK(call, what)                                                                  \
  do {                                                                                             \
    ncclResult_t sl_nccl_rc_ = (call);                                                             \
    if (sl_nccl_rc_ != ncclSuccess) [[unlikely]] {                                                 \
      ::sl::detail::throw_error<::sl::DistError>(what, ": ", #call, " failed at ", __FILE__, ":",  \
                                                 __LINE__, ": ", ncclGetErrorString(sl_nccl_rc_)); \
    }                                                                                              \
  } while (0)

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::f16:
      return ncclFloat16;
    case DType::bf16:
      return ncclBfloat16;
    case DType::i64:
      return ncclInt64;
    case DType::i32:
      return ncclInt32;
    case DType::b8:
      return ncclUint8;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(DType dt, ReduceOp op) {
  if (dt == DType::b8) return ncclMax;  // sum and max of bools: logical or
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::avg:
      return ncclAvg;
    case ReduceOp::max:
      return ncclMax;
  }
  return ncclSum;
}

/// A CUDA event of `device` (the current one), destroyed with its last owner (the Work's
/// after-wait step and the watcher share `done`), on any thread, with `device` current as it
/// is destroyed (as PyTorch's CUDAEvent), without throwing. Destroying an event whose work is
/// still queued is allowed: CUDA releases it later.
using EventPtr = std::shared_ptr<CUevent_st>;
EventPtr make_event(int device) {
  cudaEvent_t e = nullptr;
  SL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return EventPtr(e, [device](cudaEvent_t ev) {
    int prev = device;
    (void)cudaGetDevice(&prev);
    if (prev != device) (void)cudaSetDevice(device);
    (void)cudaEventDestroy(ev);
    if (prev != device) (void)cudaSetDevice(prev);
  });
}

/// State shared by the group and its queued completions. `mu` guards every use of `comm` (Note
/// [NCCL stream ordering]; the one exception is break_group's last resort) and the fields below
/// it.
struct NcclState {
  cudaStream_t stream = nullptr;
  int device = 0;
  std::timed_mutex mu;
  ncclComm_t comm = nullptr;        ///< null once aborted
  std::atomic<bool> broken{false};  ///< set when the communicator was aborted, after the reason
  std::string broken_reason;        ///< the error that broke the group (written once)
  /// Tensors of collectives that failed: kept from the caching allocator while the group lives.
  std::vector<Tensor> held_after_abort;

  /// Requires `mu`. Throws DistError naming the first failure when the group is broken.
  void check_not_broken(const std::string& what) const {
    if (broken.load()) {
      detail::throw_error<DistError>(
          what, ": not run because an earlier collective failed: ", broken_reason);
    }
  }
  /// Records `reason`, marks the group broken, aborts the communicator (which also releases an
  /// NCCL call blocked on it) and keeps `out` / `in` from reuse. Requires `mu`, except on the
  /// watcher's last resort (an enqueue blocked past a deadline holds it): then only the watcher
  /// and that blocked call touch the state, and the call only through its own copy of `comm`.
  void break_group(const std::string& reason, const Tensor& out, const Tensor& in) {
    if (!broken.load()) {
      broken_reason = reason;
      broken.store(true);
      if (comm != nullptr) ncclCommAbort(comm);
      comm = nullptr;
    }
    if (out.defined()) held_after_abort.push_back(out);
    if (in.defined() && !in.is_same(out)) held_after_abort.push_back(in);
  }
};

class ProcessGroupNCCL final : public ProcessGroup {
 public:
  ProcessGroupNCCL(ProcessGroupPtr bootstrap, Device device)
      : ProcessGroup(bootstrap->rank(), bootstrap->size(), bootstrap->options()),
        bootstrap_(std::move(bootstrap)),
        state_(std::make_shared<NcclState>()) {
    SL_CHECK_DEVICE(device.is_cuda(), "make_nccl_group: expected a cuda device, got ", device);
    int count = 0;
    SL_CUDA_CHECK(cudaGetDeviceCount(&count));
    SL_CHECK_DEVICE(device.index < count, "make_nccl_group: ", device, " but only ", count,
                    " GPUs are visible");
    state_->device = device.index;
    // The unique id (128 bytes) travels as 16 int64 words over the bootstrap group.
    ncclUniqueId id{};
    static_assert(sizeof(ncclUniqueId) % 8 == 0);
    Tensor words = zeros({static_cast<int64_t>(sizeof(ncclUniqueId) / 8)}, {.dtype = DType::i64});
    if (rank() == 0) {
      SL_NCCL_CHECK(ncclGetUniqueId(&id), "make_nccl_group");
      std::memcpy(words.data_ptr(), &id, sizeof(id));
    }
    bootstrap_->broadcast(words, 0)->wait();
    std::memcpy(&id, words.data_ptr(), sizeof(id));
    // The communicator and the stream belong to `device`; the caller's current device is
    // restored afterwards (an entry point of the library leaves it as it found it).
    sl::cuda::DeviceGuard guard(device.index);
    // ncclCommInitRank has no timeout: a peer that died after the broadcast above, or ranks that
    // NCCL cannot connect (a wrong network interface), would block it forever. It runs on a
    // thread of its own under the group's timeout; on expiry this rank fails with a DistError
    // (the blocked call stays behind, detached, and the process is expected to exit).
    auto comm = std::make_shared<ncclComm_t>(nullptr);
    const int n = size(), r = rank(), dev = device.index;
    run_with_timeout(
        detail::str_cat(who(), " make_nccl_group: ncclCommInitRank on cuda:", dev),
        options().timeout,
        "a peer rank may have died or not reached make_nccl_group, or NCCL cannot connect the "
        "ranks (NCCL_DEBUG=INFO shows where it stopped, NCCL_SOCKET_IFNAME picks the network "
        "interface; SL_DIST_TIMEOUT sets the timeout)",
        [comm, id, n, r, dev] {
          SL_CUDA_CHECK(cudaSetDevice(dev));  // the current device is per thread
          SL_NCCL_CHECK(ncclCommInitRank(comm.get(), n, id, r), "make_nccl_group");
        });
    state_->comm = *comm;
    SL_CUDA_CHECK(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
  }

  ~ProcessGroupNCCL() override {
    watcher_.stop();
    std::lock_guard<std::timed_mutex> lock(state_->mu);
    if (state_->broken.load()) {  // aborted already
      // Said once more: a failure only SyncBatchNorm's stream-ordered waits saw (Work::
      // wait_stream) reaches no caller when no collective follows it.
      std::fprintf(stderr, "shardlight: %s nccl: the group was aborted: %s\n", who().c_str(),
                   state_->broken_reason.c_str());
      // An aborted kernel may still touch the failed collectives' tensors: they are never
      // handed back to the caching allocator (the process is ending its use of this GPU's
      // group anyway).
      (void)new std::vector<Tensor>(std::move(state_->held_after_abort));
      return;
    }
    cudaStreamSynchronize(state_->stream);
    ncclCommDestroy(state_->comm);
    cudaStreamDestroy(state_->stream);
  }

  const char* backend() const override { return "nccl"; }
  DeviceKind device_kind() const override { return DeviceKind::cuda; }

 protected:
  WorkPtr start(const Collective& c, const Tensor& out, const Tensor& in) override {
    std::string what = detail::str_cat(who(), " nccl: ", c.str());
    {  // before the debug check's bootstrap round trip; checked again below, under the lock
      std::lock_guard<std::timed_mutex> lock(state_->mu);
      state_->check_not_broken(what);
    }
    if (options().debug) check_agreement(c, what);
    if (out.defined()) {
      SL_CHECK_DEVICE(out.device().index == state_->device, what, ": tensor on ", out.device(),
                      " but the group uses cuda:", state_->device);
    }
    sl::cuda::DeviceGuard guard(state_->device);  // restored when start() returns
    if (c.kind == CollectiveKind::barrier && !barrier_buf_.defined()) {
      // Allocated (and zeroed on the compute stream) before `ready` is recorded below, so the
      // NCCL stream's first barrier runs after the fill, not concurrently with it.
      barrier_buf_ = zeros({1}, {.device = Device(DeviceKind::cuda, state_->device)});
    }
    EventPtr ready = make_event(state_->device), done = make_event(state_->device);
    cudaStream_t compute = sl::cuda::compute_stream(state_->device);
    size_t n = static_cast<size_t>(c.count);
    cudaStream_t st = state_->stream;
    {
      // From the broken check through the last NCCL call: the watcher cannot abort the
      // communicator in between (Note [NCCL stream ordering]).
      std::lock_guard<std::timed_mutex> lock(state_->mu);
      state_->check_not_broken(what);
      ncclComm_t comm = state_->comm;
      SL_CUDA_CHECK(cudaEventRecord(ready.get(), compute));
      SL_CUDA_CHECK(cudaStreamWaitEvent(st, ready.get(), 0));
      switch (c.kind) {
        case CollectiveKind::allreduce:
          SL_NCCL_CHECK(ncclAllReduce(out.data_ptr(), out.data_ptr(), n, nccl_type(c.dtype),
                                      nccl_op(c.dtype, c.op), comm, st),
                        what);
          break;
        case CollectiveKind::reduce_scatter:
          SL_NCCL_CHECK(ncclReduceScatter(in.data_ptr(), out.data_ptr(), n, nccl_type(c.dtype),
                                          nccl_op(c.dtype, c.op), comm, st),
                        what);
          break;
        case CollectiveKind::allgather:
          SL_NCCL_CHECK(
              ncclAllGather(in.data_ptr(), out.data_ptr(), n, nccl_type(c.dtype), comm, st), what);
          break;
        case CollectiveKind::broadcast:
          SL_NCCL_CHECK(ncclBroadcast(out.data_ptr(), out.data_ptr(), n, nccl_type(c.dtype), c.root,
                                      comm, st),
                        what);
          break;
        case CollectiveKind::barrier: {
          // NCCL has no barrier: a one-element allreduce on the group's stream.
          SL_NCCL_CHECK(ncclAllReduce(barrier_buf_.data_ptr(), barrier_buf_.data_ptr(), 1,
                                      ncclFloat32, ncclSum, comm, st),
                        what);
          break;
        }
      }
      const cudaError_t recorded = cudaEventRecord(done.get(), st);
      if (recorded != cudaSuccess) {
        // The collective is queued but cannot be watched: nothing may reuse its tensors, and
        // the group cannot be trusted any more.
        const std::string err = detail::str_cat(
            what, ": CUDA error recording its completion event: ", cudaGetErrorString(recorded),
            " (aborting the NCCL communicator)");
        state_->break_group(err, out, in);
        detail::throw_error<DistError>(err);
      }
    }
    // `ready` is released here: the NCCL stream's wait on it is already queued.
    auto work = std::make_shared<Work>(what, options().timeout);
    // The consumer's side of the ordering: after the host wait, the compute stream waits for the
    // collective (Note [NCCL stream ordering]). The legacy default stream is the current
    // device's, hence the guard.
    work->set_after_wait([done, device = state_->device] {
      sl::cuda::DeviceGuard g(device);
      SL_CUDA_CHECK(cudaStreamWaitEvent(sl::cuda::compute_stream(device), done.get(), 0));
    });
    auto deadline = Clock::now() + options().timeout;
    const bool watched = watcher_.post([state = state_, work, done, deadline, what, out, in,
                                        timeout = options().timeout] {
      cudaSetDevice(state->device);
      auto nap = std::chrono::microseconds(10);
      for (;;) {
        std::string err;
        bool finished = false;
        {
          std::unique_lock<std::timed_mutex> lock(state->mu, std::defer_lock);
          if (!lock.try_lock_for(std::chrono::milliseconds(100))) {
            // start() holds the communicator: an enqueue, normally microseconds. One still
            // holding it past this collective's deadline is blocked inside NCCL (connecting to a
            // dead peer, a queue full behind a hung collective), and only ncclCommAbort releases
            // it: abort without the lock, as PyTorch's watchdog does. This last resort is the
            // one use of the communicator from two threads at once, and it ends the group.
            if (Clock::now() <= deadline) continue;
            err = detail::str_cat(
                what, ": did not complete within ", static_cast<double>(timeout.count()) / 1000.0,
                " s, with an NCCL call on this communicator blocked; a peer rank may have died "
                "(aborting the NCCL communicator)");
            state->break_group(err, out, in);
            work->complete(std::make_exception_ptr(DistError(err)));
            break;
          }
          if (state->broken.load()) {
            // Aborted by an earlier collective: this one's kernel exits early (its `done` may
            // even complete), so its result is garbage, and the communicator is gone.
            err = detail::str_cat(what, ": not completed because an earlier collective failed: ",
                                  state->broken_reason);
          } else {
            cudaError_t q = cudaEventQuery(done.get());
            if (q == cudaSuccess) {
              finished = true;
            } else if (q != cudaErrorNotReady) {
              err = detail::str_cat(what, ": CUDA error ", cudaGetErrorString(q));
            } else if (Clock::now() > deadline) {
              err = detail::str_cat(
                  what, ": did not complete within ", static_cast<double>(timeout.count()) / 1000.0,
                  " s; a peer rank may have died, stalled, or issued a different collective "
                  "(aborting the NCCL communicator)");
            } else {
              ncclResult_t async_err = ncclSuccess;
              ncclCommGetAsyncError(state->comm, &async_err);
              if (async_err != ncclSuccess && async_err != ncclInProgress) {
                err = detail::str_cat(what, ": NCCL error ", ncclGetErrorString(async_err));
              }
            }
          }
          if (!err.empty()) state->break_group(err, out, in);  // this or an earlier collective
        }
        // Completed outside the lock: a callback may issue the next collective.
        if (finished) {
          work->complete();
          break;
        }
        if (!err.empty()) {
          work->complete(std::make_exception_ptr(DistError(err)));
          break;
        }
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, std::chrono::microseconds(200));
      }
    });
    if (!watched) {  // the group is being destroyed: the queued collective cannot be watched
      std::lock_guard<std::timed_mutex> lock(state_->mu);
      const std::string err =
          detail::str_cat(what, ": issued while the NCCL group is being destroyed");
      state_->break_group(err, out, in);
      detail::throw_error<DistError>(err);
    }
    return work;
  }

 private:
  // SL_DIST_DEBUG: compare fingerprints over the bootstrap (MPI) group before enqueueing.
  void check_agreement(const Collective& c, const std::string& what) {
    Fingerprint fp = fingerprint(c);
    Tensor mine = zeros({kFingerprintWords}, {.dtype = DType::i64});
    std::memcpy(mine.data_ptr(), fp.data(), sizeof(fp));
    Tensor all = zeros({kFingerprintWords * size()}, {.dtype = DType::i64});
    bootstrap_->allgather(all, mine)->wait();
    std::vector<Fingerprint> table(static_cast<size_t>(size()));
    std::memcpy(table.data(), all.data_ptr(), sizeof(Fingerprint) * table.size());
    std::string mismatch = describe_mismatch(table, rank());
    SL_CHECK_DIST(mismatch.empty(), what, ": ", mismatch);
  }

  ProcessGroupPtr bootstrap_;
  std::shared_ptr<NcclState> state_;
  Tensor barrier_buf_;
  CommThread watcher_;
};

}  // namespace

ProcessGroupPtr make_nccl_group(const ProcessGroupPtr& bootstrap, Device device) {
  SL_CHECK(bootstrap != nullptr, "make_nccl_group: bootstrap group is null");
  return std::make_shared<ProcessGroupNCCL>(bootstrap, device);
}

bool nccl_available() {
  return true;
}

}  // namespace sl::dist

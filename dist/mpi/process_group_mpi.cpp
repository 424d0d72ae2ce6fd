// MPI backend: see Note [MPI communication thread] in process_group_mpi.h.
#include "dist/mpi/process_group_mpi.h"

#define OMPI_SKIP_MPICXX 1  // the C API only (the C++ bindings warn under -Wextra)
#include <mpi.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "core/half.h"
#include "core/profiler.h"
#include "dist/comm_thread.h"
#include "dist/debug.h"

namespace sl::dist {

namespace {

using Clock = std::chrono::steady_clock;

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return detail::str_cat("code ", code);
  return std::string(buf, static_cast<size_t>(len));
}

#define SL_MPI_CHECK(call, what)                                                                  \
  do {                                                                                            \
    int sl_mpi_rc_ = (call);                                                                      \
    if (sl_mpi_rc_ != MPI_SUCCESS) [[unlikely]] {                                                 \
      ::sl::detail::throw_error<::sl::DistError>(what, ": ", #call, " failed at ", __FILE__, ":", \
                                                 __LINE__, ": ", mpi_error_string(sl_mpi_rc_));   \
    }                                                                                             \
  } while (0)

// ---- reductions MPI has no type for (16-bit floats) -----------------------------------------

template <class T, bool kMax>
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    // max propagates NaN, as torch.maximum and NCCL do
    b[i] = T(kMax ? ((x != x || x > y) ? x : y) : x + y);
  }
}

// ---- SIGTERM from the launcher ----------------------------------------------------------
// When one rank dies, mpirun (and srun --kill-on-bad-exit) stops the others with SIGTERM. Each
// rank then says why it stops before dying of the signal as it would have, so its output ends
// in a clear line instead of just vanishing. The message is prepared before the handler runs;
// the handler only calls async-signal-safe functions.

char g_sigterm_msg[256];
size_t g_sigterm_len = 0;
struct sigaction g_prev_sigterm;

extern "C" void on_sigterm(int sig) {
  [[maybe_unused]] ssize_t rc = write(2, g_sigterm_msg, g_sigterm_len);
  sigaction(SIGTERM, &g_prev_sigterm, nullptr);  // the previous handler (or the default)
  raise(sig);
}

void install_sigterm_message(int rank, int size) {
  std::string msg = detail::str_cat(
      "shardlight: rank ", rank, "/", size,
      ": stopped by the launcher (SIGTERM); another rank has probably failed, see the "
      "launcher's message\n");
  g_sigterm_len = std::min(msg.size(), sizeof(g_sigterm_msg));
  std::memcpy(g_sigterm_msg, msg.data(), g_sigterm_len);
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, &g_prev_sigterm);
}

// ---- the runtime: MPI state shared by every MPI group of this process ---------------------

class MpiRuntime {
 public:
  /// Starts MPI on first use. The runtime is leaked on purpose: it lives until mpi_finalize
  /// (at exit), after every static destructor that might still hold a group.
  static MpiRuntime& get() {
    static MpiRuntime* rt = [] {
      auto* r = new MpiRuntime();
      g_started.store(r);
      return r;
    }();
    return *rt;
  }
  /// The runtime if it was started, else null.
  static MpiRuntime* started() { return g_started.load(); }

  CommThread& thread() { return thread_; }
  bool finalized() const { return finalized_.load(); }
  bool broken() const { return broken_.load(); }
  std::string broken_reason() {
    std::lock_guard<std::mutex> lock(mu_);
    return broken_reason_;
  }
  void mark_broken(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.exchange(true)) broken_reason_ = reason;
  }
  MPI_Op half_op(DType dt, ReduceOp op) const {
    bool mx = op == ReduceOp::max;
    return dt == DType::f16 ? (mx ? f16_max_ : f16_sum_) : (mx ? bf16_max_ : bf16_sum_);
  }

  void finalize() {
    if (finalized_.exchange(true)) return;
    bool abort_job = false;
    try {
      thread_.run_sync([&] {
        if (broken_.load()) {
          abort_job = true;
          return;
        }
        MPI_Op_free(&f16_sum_);
        MPI_Op_free(&f16_max_);
        MPI_Op_free(&bf16_sum_);
        MPI_Op_free(&bf16_max_);
        if (owns_mpi_) MPI_Finalize();
      });
    } catch (...) {
      abort_job = true;
    }
    if (abort_job) {
      std::string msg = detail::str_cat(
          "shardlight: rank ", world_rank_,
          ": aborting the job after a communication failure: ", broken_reason(), "\n");
      std::fwrite(msg.data(), 1, msg.size(), stderr);
      std::fflush(stderr);
      // MPI_Abort may be called from any thread; MPI_Finalize could block on the lost peer.
      MPI_Abort(MPI_COMM_WORLD, 1);
      std::_Exit(1);
    }
    thread_.stop();
  }

  int world_rank() const { return world_rank_; }

 private:
  MpiRuntime() {
    thread_.run_sync([this] {
      int initialized = 0;
      MPI_Initialized(&initialized);
      if (!initialized) {
        int provided = 0;
        SL_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided),
                     "MPI runtime");
        owns_mpi_ = true;
      } else {
        int provided = 0;
        MPI_Query_thread(&provided);
        SL_CHECK_DIST(provided == MPI_THREAD_MULTIPLE,
                      "MPI runtime: MPI was initialised by the program with a thread level below "
                      "MPI_THREAD_MULTIPLE; Shardlight drives MPI from its communication thread, "
                      "so let Shardlight initialise MPI or request MPI_THREAD_MULTIPLE");
      }
      MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
      MPI_Op_create(&half_reduce<Half, false>, 1, &f16_sum_);
      MPI_Op_create(&half_reduce<Half, true>, 1, &f16_max_);
      MPI_Op_create(&half_reduce<BFloat16, false>, 1, &bf16_sum_);
      MPI_Op_create(&half_reduce<BFloat16, true>, 1, &bf16_max_);
    });
    std::atexit([] { mpi_finalize(); });
    if (world_size_ > 1) install_sigterm_message(world_rank_, world_size_);
  }

  static inline std::atomic<MpiRuntime*> g_started{nullptr};

  CommThread thread_;
  std::mutex mu_;
  std::atomic<bool> broken_{false};
  std::atomic<bool> finalized_{false};
  std::string broken_reason_;
  bool owns_mpi_ = false;
  int world_rank_ = 0;
  int world_size_ = 1;
  MPI_Op f16_sum_ = MPI_OP_NULL, f16_max_ = MPI_OP_NULL, bf16_sum_ = MPI_OP_NULL,
         bf16_max_ = MPI_OP_NULL;
};

MPI_Datatype mpi_type(DType dt) {
  switch (dt) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::f16:
    case DType::bf16:
      return MPI_UINT16_T;
    case DType::i64:
      return MPI_INT64_T;
    case DType::i32:
      return MPI_INT32_T;
    case DType::b8:
      return MPI_C_BOOL;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(MpiRuntime& rt, DType dt, ReduceOp op) {
  if (dt == DType::f16 || dt == DType::bf16) return rt.half_op(dt, op);
  if (dt == DType::b8) return MPI_LOR;  // sum and max of bools: logical or
  return op == ReduceOp::max ? MPI_MAX : MPI_SUM;
}

/// Polls `req` until it completes; throws DistError on an MPI error or when `deadline` passes.
void progress(MPI_Request& req, Clock::time_point deadline, const std::string& what,
              std::chrono::milliseconds timeout) {
  int spins = 0;
  auto nap = std::chrono::microseconds(10);
  for (;;) {
    int flag = 0;
    int rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      detail::throw_error<DistError>(what, ": MPI reported an error (", mpi_error_string(rc),
                                     "); a peer rank has probably died");
    }
    if (flag) return;
    if (Clock::now() > deadline) {
      detail::throw_error<DistError>(
          what, ": did not complete within ", static_cast<double>(timeout.count()) / 1000.0,
          " s; a peer rank may have died, stalled, or issued a different collective (run with "
          "SL_DIST_DEBUG=1 to compare the ranks' collectives; SL_DIST_TIMEOUT sets the timeout)");
    }
    if (++spins < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(500));
    }
  }
}

template <class T>
void divide_in_place(void* data, int64_t n, int64_t by) {
  T* p = static_cast<T*>(data);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = T(static_cast<compute_t<T>>(p[i]) / static_cast<compute_t<T>>(by));
  }
}

/// A disagreement found by the SL_DIST_DEBUG check: the collective was not started, so the
/// group stays usable (unlike after a timeout).
class MismatchError : public DistError {
  using DistError::DistError;
};

/// What a queued collective needs of its group (copied into the task, so a group destroyed
/// with collectives still queued leaves no dangling pointer).
struct MpiComm {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm debug_comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  ProcessGroupOptions opts;
};

void execute(const MpiComm& g, const Collective& c, const Tensor& out, const Tensor& in,
             const std::string& what);

class ProcessGroupMPI final : public ProcessGroup {
 public:
  explicit ProcessGroupMPI(MpiComm g) : ProcessGroup(g.rank, g.size, g.opts), g_(g) {}

  const char* backend() const override { return "mpi"; }
  DeviceKind device_kind() const override { return DeviceKind::cpu; }

 protected:
  WorkPtr start(const Collective& c, const Tensor& out, const Tensor& in) override {
    MpiRuntime& rt = MpiRuntime::get();
    std::string what = detail::str_cat(who(), ": ", c.str());
    SL_CHECK_DIST(!rt.finalized(), what, ": the MPI runtime was already finalized");
    int64_t elems = c.kind == CollectiveKind::allgather ? c.count * size() : c.count;
    SL_CHECK(elems <= INT_MAX, what, ": ", elems, " elements exceed MPI's int count limit ",
             INT_MAX, "; split the buffer into buckets");
    auto work = std::make_shared<Work>(what, options().timeout);
    bool queued = rt.thread().post([g = g_, c, out, in, work, what] {
      MpiRuntime& r = MpiRuntime::get();
      if (r.broken()) {
        work->complete(std::make_exception_ptr(DistError(detail::str_cat(
            what, ": not run because an earlier collective failed: ", r.broken_reason()))));
        return;
      }
      try {
        {  // recorded before complete() wakes the waiters
          profiler::Scope scope(collective_name(c.kind), profiler::Category::comm);
          execute(g, c, out, in, what);
        }
        work->complete();
      } catch (const MismatchError&) {
        work->complete(std::current_exception());
      } catch (const std::exception& e) {
        r.mark_broken(e.what());
        work->complete(std::current_exception());
      }
    });
    SL_CHECK_DIST(queued, what, ": the MPI runtime was already finalized");
    return work;
  }

 private:
  MpiComm g_;
};

// SL_DIST_DEBUG: every rank hands in its fingerprint; all compare the full table.
void check_agreement(const MpiComm& g, const Collective& c, Clock::time_point deadline,
                     const std::string& what, std::chrono::milliseconds timeout) {
  Fingerprint mine = fingerprint(c);
  std::vector<Fingerprint> all(static_cast<size_t>(g.size));
  MPI_Request req = MPI_REQUEST_NULL;
  SL_MPI_CHECK(MPI_Iallgather(mine.data(), kFingerprintWords, MPI_INT64_T, all.data(),
                              kFingerprintWords, MPI_INT64_T, g.debug_comm, &req),
               what);
  try {
    progress(req, deadline, what + " [SL_DIST_DEBUG agreement check]", timeout);
  } catch (const DistError& e) {
    detail::throw_error<DistError>(e.what(),
                                   " (not every rank reached this collective: one "
                                   "died, is stalled, or issued fewer collectives)");
  }
  std::string mismatch = describe_mismatch(all, g.rank);
  if (!mismatch.empty()) throw MismatchError(mismatch);
}

// Runs on the communication thread.
void execute(const MpiComm& g, const Collective& c, const Tensor& out, const Tensor& in,
             const std::string& what) {
  auto timeout = g.opts.timeout;
  auto deadline = Clock::now() + timeout;
  if (g.opts.debug) check_agreement(g, c, deadline, what, timeout);
  MpiRuntime& rt = MpiRuntime::get();
  MPI_Request req = MPI_REQUEST_NULL;
  int n = static_cast<int>(c.count);
  switch (c.kind) {
    case CollectiveKind::allreduce:
      SL_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, out.data_ptr(), n, mpi_type(c.dtype),
                                  mpi_op(rt, c.dtype, c.op), g.comm, &req),
                   what);
      break;
    case CollectiveKind::reduce_scatter:
      SL_MPI_CHECK(MPI_Ireduce_scatter_block(in.data_ptr(), out.data_ptr(), n, mpi_type(c.dtype),
                                             mpi_op(rt, c.dtype, c.op), g.comm, &req),
                   what);
      break;
    case CollectiveKind::allgather: {
      const void* send = out.is_same_storage(in) ? MPI_IN_PLACE : in.data_ptr();
      SL_MPI_CHECK(MPI_Iallgather(send, n, mpi_type(c.dtype), out.data_ptr(), n, mpi_type(c.dtype),
                                  g.comm, &req),
                   what);
      break;
    }
    case CollectiveKind::broadcast:
      SL_MPI_CHECK(MPI_Ibcast(out.data_ptr(), n, mpi_type(c.dtype), c.root, g.comm, &req), what);
      break;
    case CollectiveKind::barrier:
      SL_MPI_CHECK(MPI_Ibarrier(g.comm, &req), what);
      break;
  }
  progress(req, deadline, what, timeout);
  if (c.op == ReduceOp::avg &&
      (c.kind == CollectiveKind::allreduce || c.kind == CollectiveKind::reduce_scatter)) {
    visit_floating(c.dtype, "avg", [&](auto tag) {
      using T = typename decltype(tag)::type;
      divide_in_place<T>(out.data_ptr(), out.numel(), g.size);
    });
  }
}

}  // namespace

ProcessGroupPtr make_mpi_world(ProcessGroupOptions opts) {
  MpiRuntime& rt = MpiRuntime::get();
  MPI_Comm comm = MPI_COMM_NULL, debug_comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  rt.thread().run_sync([&] {
    SL_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "world");
    SL_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &debug_comm), "world");
    // Errors come back as codes (turned into DistError) instead of aborting inside MPI.
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(debug_comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
  });
  return std::make_shared<ProcessGroupMPI>(MpiComm{comm, debug_comm, rank, size, opts});
}

void mpi_finalize() {
  if (MpiRuntime* rt = MpiRuntime::started()) rt->finalize();
}

}  // namespace sl::dist

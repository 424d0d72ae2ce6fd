// MPI backend of ProcessGroup (internal; use sl::dist::world()).
//
// Note [MPI communication thread]
// MPI's non-blocking collectives only make progress inside MPI calls, so a collective started
// with MPI_Iallreduce and then left alone while backward computes would not move. One
// communication thread per process therefore makes every MPI call (it also calls
// MPI_Init_thread, so MPI_THREAD_FUNNELED suffices): the issuing thread validates, counts and
// queues a collective and returns its Work at once; the communication thread runs the queue in
// issue order, polling MPI_Test (with a short back-off) until the collective completes or its
// deadline passes, then completes the Work. A timeout or an MPI error marks the runtime broken:
// queued and later collectives fail with the same DistError, and exit calls MPI_Abort instead of
// MPI_Finalize (which could block on the lost peer), so the launcher stops every rank.
#pragma once

#include "dist/process_group.h"

namespace sl::dist {

/// The MPI_COMM_WORLD group (a duplicate of it). Starts the MPI runtime on first use.
ProcessGroupPtr make_mpi_world(ProcessGroupOptions opts);
/// Drains queued collectives and finalizes MPI (or aborts the job when the runtime is broken).
/// Idempotent; registered with atexit when the runtime starts.
void mpi_finalize();

}  // namespace sl::dist

// Runs a test program under mpirun with a watchdog, collecting every rank's output.
//
// Multi-rank tests are doctest cases inside a "ranks" binary (every rank runs the same cases, in
// the same order, and talks through sl::dist::world()). A single-process test case launches it
// with run_ranks(), checks the exit code and prints every rank's stdout/stderr when it fails.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace sl::testing {

struct RankRun {
  int exit_code = -1;      ///< mpirun's exit status (-1 when killed by the watchdog)
  bool timed_out = false;  ///< the watchdog had to kill the job
  double seconds = 0;      ///< wall time of the whole job
  std::string command;
  std::string launcher_output;           ///< what mpirun itself printed
  std::vector<std::string> rank_stdout;  ///< per rank (empty string when a rank wrote nothing)
  std::vector<std::string> rank_stderr;
  /// Everything above, rank by rank, for failure messages.
  std::string report() const;
  /// Concatenation of every rank's stdout and stderr plus the launcher's output.
  std::string all_output() const;
};

/// True when this build has MPI and an mpirun is on PATH.
bool mpi_available();
/// Path of the ranks test binary (SL_DIST_RANKS_BIN, set by tests/meson.build).
std::string ranks_binary();
/// Runs `mpirun -np np --oversubscribe <program> <args...>` with SL_NUM_THREADS=1 (and `env`
/// on top) for every rank; kills the whole job after `watchdog_s` seconds.
RankRun run_ranks(int np, const std::string& program, const std::vector<std::string>& args,
                  double watchdog_s, const std::map<std::string, std::string>& env = {});

}  // namespace sl::testing

// The trainer's --profile: a window of training steps recorded with the profiler
// (core/profiler.h, Note [Profiler]), written as one Chrome trace per rank.
//
//   sl_train --model cnn --profile trace.json [--profile-from 1] [--profile-steps 5]
//
// records steps F .. F+N-1 of this run (counted from 0 in this process, so after a resume too;
// the default skips step 0, whose first allocations and cache misses are not typical) and writes
// the trace when the window closes, or at the run's end if it closes first. One rank writes PATH;
// several ranks write PATH with ".rankR" before its extension (trace.rank0.json, trace.rank1.json
// ...), each its own process in the viewer. Rank 0 prints the summary: self time per kernel,
// backward node and phase, and each collective's time in flight and waited for.
#pragma once

#include <cstdint>
#include <string>

#include "registry.h"

namespace sl::train {

/// --profile, --profile-from and --profile-steps as --help lists them.
const FlagDocs& profile_flags();

/// The rank's trace file: `path` itself for one rank, else "<stem>.rank<R><ext>" beside it.
std::string rank_trace_path(const std::string& path, int rank, int world);

class StepProfile {
 public:
  /// Reads the flags (records them as read for check_all_read) and checks them: --profile-steps
  /// >= 1, --profile-from >= 0, and PATH's folder exists (ValueError / IOError naming the job and
  /// the flag). Records nothing when --profile is not given.
  StepProfile(const Options& opt, std::string job, int rank, int world);
  ~StepProfile();
  StepProfile(const StepProfile&) = delete;
  StepProfile& operator=(const StepProfile&) = delete;

  /// Throws ValueError when the window starts at or after `steps_left`, the steps this run has
  /// left to take (a window that would record nothing).
  void check_window(int64_t steps_left) const;
  /// Call before step `step` of this run (0, 1, 2, ...): starts the recording at --profile-from.
  void before_step(int64_t step);
  /// Call after step `step`: after the window's last step, stops, writes the trace and prints the
  /// summary (rank 0).
  void after_step(int64_t step);
  /// Call once the run's steps are done: writes what an unfinished window recorded.
  void finish();

 private:
  void write(int64_t last_step);

  std::string job_, path_;
  int rank_ = 0, world_ = 1;
  int64_t from_ = 1, steps_ = 5;
  bool recording_ = false;
};

}  // namespace sl::train

#include "step_profile.h"

#include <cstdio>
#include <filesystem>
#include <utility>

#include "core/error.h"
#include "core/profiler.h"

namespace sl::train {

const FlagDocs& profile_flags() {
  static const FlagDocs flags = {
      {"profile", "", "record steps with the profiler; write a Chrome trace here (per rank)"},
      {"profile-from", "1", "the first recorded step of this run (0-based)"},
      {"profile-steps", "5", "how many steps to record"},
  };
  return flags;
}

std::string rank_trace_path(const std::string& path, int rank, int world) {
  if (world <= 1) return path;
  const std::filesystem::path p(path);
  std::filesystem::path out = p.parent_path() / p.stem();
  out += ".rank" + std::to_string(rank);
  out += p.extension();
  return out.string();
}

StepProfile::StepProfile(const Options& opt, std::string job, int rank, int world)
    : job_(std::move(job)), rank_(rank), world_(world) {
  path_ = opt.get_string("profile", "");
  from_ = opt.get_int("profile-from", 1);
  steps_ = opt.get_int("profile-steps", 5);
  SL_CHECK(from_ >= 0, job_, ": --profile-from must be >= 0, got ", from_);
  SL_CHECK(steps_ >= 1, job_, ": --profile-steps must be >= 1, got ", steps_);
  if (path_.empty()) return;
  const std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  SL_CHECK_IO(dir.empty() || std::filesystem::is_directory(dir), job_, ": --profile '", path_,
              "': the folder '", dir.string(), "' does not exist");
  SL_CHECK_IO(!std::filesystem::is_directory(path_), job_, ": --profile '", path_,
              "' is a folder; name the trace file to write");
}

StepProfile::~StepProfile() {
  // A run that failed inside the window leaves no recording behind.
  if (recording_ && profiler::is_recording()) (void)profiler::stop();
}

void StepProfile::check_window(int64_t steps_left) const {
  if (path_.empty()) return;
  SL_CHECK(from_ < steps_left, job_, ": --profile-from ", from_, " is past this run's last step (",
           steps_left, " step(s) left to take, counted from 0)");
}

void StepProfile::before_step(int64_t step) {
  if (path_.empty() || recording_ || step != from_) return;
  SL_CHECK(!profiler::is_recording(), job_,
           ": --profile: the profiler is already recording in this process");
  profiler::start();
  recording_ = true;
}

void StepProfile::after_step(int64_t step) {
  if (recording_ && step == from_ + steps_ - 1) write(step);
}

void StepProfile::finish() {
  if (recording_) write(-1);
}

void StepProfile::write(int64_t last_step) {
  recording_ = false;
  const profiler::Profile p = profiler::stop();
  const std::string file = rank_trace_path(path_, rank_, world_);
  p.write_chrome_trace(file, rank_, world_ > 1 ? "rank " + std::to_string(rank_) : job_);
  if (rank_ != 0) return;
  std::string steps = last_step < 0
                          ? "steps from " + std::to_string(from_) + " to the run's end"
                          : "steps " + std::to_string(from_) + ".." + std::to_string(last_step);
  std::string where = world_ > 1 ? rank_trace_path(path_, 0, world_) + " .. " +
                                       rank_trace_path(path_, world_ - 1, world_)
                                 : file;
  std::printf("%s: profile of %s (rank 0's below), traces in %s\n%s", job_.c_str(), steps.c_str(),
              where.c_str(), p.summary().c_str());
  std::fflush(stdout);
}

}  // namespace sl::train

// The trainer's job registry: each job (mlp, cnn, resnet, bert, ...) registers itself under a
// name, and main() runs the one that --model names. Adding a model touches only its
// own file (plus one line in tools/meson.build), never main.cpp.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace sl::train {

/// Options parsed from the command line. Flags main() knows are fields; any other
/// `--key=value` or `--key value` lands in `extra` for the job to read (get_* below).
struct Options {
  std::string model = "mlp";
  /// How the job is distributed: single, dp, ddp, zero1, zero2 (dist::make_strategy; the mlp
  /// job takes single only).
  std::string strategy = "single";
  int epochs = 2;
  int64_t batch_size = 0;  ///< 0: the job's default
  double lr = 0;           ///< 0: the job's default
  uint64_t seed = 0;
  int threads = 0;       ///< 0: SL_NUM_THREADS or the core count
  std::string data_dir;  ///< empty: the job's default location
  /// "cpu", "cuda" or "cuda:N" (each job says which it supports).
  std::string device = "cpu";
  std::map<std::string, std::string> extra;
  /// The keys the get_* calls below have asked for, present or not (for check_all_read).
  mutable std::set<std::string> read;

  /// extra[key] converted, or `fallback` when absent; records `key` as read. Throws ValueError
  /// on a malformed value.
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_double(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  /// Throws ValueError "<job>: unknown flag --k ..." for the first key of `extra` that no get_*
  /// call has read, with the closest flag the job reads as a suggestion and the list of them: a
  /// misspelt or foreign flag must fail, not be silently ignored. A job calls it once it has
  /// read all its flags, before any long work.
  void check_all_read(const std::string& job) const;
};

/// Runs one training job; returns the process exit code (0 on success).
using JobFn = int (*)(const Options&);

struct Job {
  std::string name;
  std::string help;  ///< one line for --list
  JobFn run = nullptr;
};

/// Adds a job (called from static registrars, see SL_REGISTER_TRAIN_JOB).
void register_job(Job job);
/// The job named `name`, or nullptr.
const Job* find_job(const std::string& name);
/// All jobs, sorted by name.
std::vector<Job> all_jobs();

}  // namespace sl::train

#define SL_TRAIN_CONCAT_INNER(a, b) a##b
#define SL_TRAIN_CONCAT(a, b) SL_TRAIN_CONCAT_INNER(a, b)
/// Registers `fn` as the job `name` at program start: SL_REGISTER_TRAIN_JOB("mlp", "...", &run);
#define SL_REGISTER_TRAIN_JOB(name, help, fn)                                      \
  [[maybe_unused]] static const bool SL_TRAIN_CONCAT(sl_train_job_, __COUNTER__) = \
      (::sl::train::register_job({(name), (help), (fn)}), true)

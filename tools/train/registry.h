// The trainer's job registry: each job (mlp, cnn, resnet, bert, ...) registers itself under a
// name, and main() runs the one that --model names. Adding a model touches only its
// own file (plus one line in tools/meson.build), never main.cpp.
#pragma once

#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace sl::train {

/// One job flag as --help shows it: the name (without --), the default as the job's code has it
/// ("" when there is none; in parentheses when the code computes it from other flags, e.g.
/// "(--seq-len)"), and what it does. check_all_read holds the code to this table: a flag the job
/// reads must be listed, and a literal default must be the code's (so the help cannot drift; the
/// tests run every job).
struct FlagDoc {
  std::string name;
  std::string default_value;
  std::string help;
};
using FlagDocs = std::vector<FlagDoc>;

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
  /// Each read key's fallback as text (integers in decimal, numbers as %g).
  mutable std::map<std::string, std::string> fallbacks;
  /// The running job's flag table (main sets it; null: not checked).
  const FlagDocs* documented = nullptr;

  /// extra[key] converted, or `fallback` when absent; records `key` as read. Throws ValueError
  /// naming the flag on a malformed value, one out of int64's range or a non-finite number, and
  /// on a given value outside [min, max] (the fallback is the code's and is not checked).
  int64_t get_int(const std::string& key, int64_t fallback,
                  int64_t min = std::numeric_limits<int64_t>::min(),
                  int64_t max = std::numeric_limits<int64_t>::max()) const;
  double get_double(const std::string& key, double fallback,
                    double min = -std::numeric_limits<double>::max(),
                    double max = std::numeric_limits<double>::max()) const;
  /// A switch: 0 or 1 (its fallback as "0" / "1"); anything else throws ValueError.
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  /// Throws ValueError "<job>: unknown flag --k ..." for the first key of `extra` that no get_*
  /// call has read, with the closest flag the job reads as a suggestion and the list of them: a
  /// misspelt or foreign flag must fail, not be silently ignored. A job calls it once it has
  /// read all its flags, before any long work. Then, when `documented` is set, throws
  /// std::logic_error (a defect of the job, not of the command line) for a read flag missing from
  /// the table or a literal default that differs from the code's fallback.
  void check_all_read(const std::string& job) const;
};

/// `text` as the value of `flag` ("--epochs"): a whole decimal integer within [min, max] (an
/// optional '-' and digits only: " 1" and "+2" are refused), or a finite number within [min, max]
/// (as strtod reads it, but with no leading blank or '+'). Throw ValueError naming the flag, the
/// text and what was expected (also for a value past int64's or double's range).
int64_t parse_int_flag(const std::string& flag, const std::string& text,
                       int64_t min = std::numeric_limits<int64_t>::min(),
                       int64_t max = std::numeric_limits<int64_t>::max());
double parse_number_flag(const std::string& flag, const std::string& text,
                         double min = -std::numeric_limits<double>::max(),
                         double max = std::numeric_limits<double>::max());

/// `text` as comma-separated integers >= 1 ("30,60,80" -> {30, 60, 80}), each larger than the one
/// before when `increasing`; nullopt for anything else (an empty text or item, a trailing comma, a
/// value past int64's range, any character but digits in an item: " 1", "+2", "1 "). It throws
/// nothing: each caller words its own flag's error (--lr-schedule step:..., the resnet job's
/// --blocks).
std::optional<std::vector<int64_t>> parse_positive_ints(const std::string& text, bool increasing);

/// Runs one training job; returns the process exit code (0 on success).
using JobFn = int (*)(const Options&);

struct Job {
  std::string name;
  std::string help;  ///< one line for --list
  JobFn run = nullptr;
  /// The job's own flags for --help (called when needed; null: the job reads none, and
  /// check_all_read holds it to that).
  FlagDocs (*flags)() = nullptr;
};

/// `a` followed by `b` (a job's own flags, then a shared table).
inline FlagDocs join_flags(FlagDocs a, const FlagDocs& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// The flags main() parses for every job, as --help lists them.
const FlagDocs& common_flags();

/// Prints `sl_train --model <job> --help`: the job's line, the common flags and the job's own.
void print_job_help(const Job& job, FILE* out);

/// Adds a job (called from static registrars, see SL_REGISTER_TRAIN_JOB).
void register_job(Job job);
/// The job named `name`, or nullptr.
const Job* find_job(const std::string& name);
/// All jobs, sorted by name.
std::vector<Job> all_jobs();

}  // namespace sl::train

#define SL_TRAIN_CONCAT_INNER(a, b) a##b
#define SL_TRAIN_CONCAT(a, b) SL_TRAIN_CONCAT_INNER(a, b)
/// Registers `fn` as the job `name` at program start, with its flag table:
/// SL_REGISTER_TRAIN_JOB("mlp", "...", &run, &mlp_flags);
#define SL_REGISTER_TRAIN_JOB(name, help, fn, flags)                               \
  [[maybe_unused]] static const bool SL_TRAIN_CONCAT(sl_train_job_, __COUNTER__) = \
      (::sl::train::register_job({(name), (help), (fn), (flags)}), true)

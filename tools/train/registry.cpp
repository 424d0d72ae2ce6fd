#include "registry.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <shardlight/shardlight.h>

namespace sl::train {

namespace {
std::vector<Job>& jobs() {
  static std::vector<Job> all;  // function-local: safe from any static initialiser
  return all;
}
/// "in [min, max]", ">= min" or "<= max", leaving out the type's own limits.
template <typename T>
std::string range_text(T min, T max) {
  const bool lo = min > std::numeric_limits<T>::lowest(), hi = max < std::numeric_limits<T>::max();
  auto str = [](T v) {
    std::ostringstream o;
    o << v;
    return o.str();
  };
  if (lo && hi) return "in [" + str(min) + ", " + str(max) + "]";
  if (lo) return ">= " + str(min);
  if (hi) return "<= " + str(max);
  return "";
}
/// Whether `text` is a whole decimal integer as written on a command line: an optional '-' and
/// one or more digits, nothing else (strtoll and stoll would also take leading blanks and '+').
bool is_decimal_integer(const std::string& text) {
  const size_t digits = !text.empty() && text[0] == '-' ? 1 : 0;
  return text.size() > digits &&
         std::all_of(text.begin() + static_cast<std::ptrdiff_t>(digits), text.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}
}  // namespace

void register_job(Job job) {
  jobs().push_back(std::move(job));
}

const Job* find_job(const std::string& name) {
  for (const Job& j : jobs()) {
    if (j.name == name) return &j;
  }
  return nullptr;
}

std::vector<Job> all_jobs() {
  std::vector<Job> v = jobs();
  std::sort(v.begin(), v.end(), [](const Job& a, const Job& b) { return a.name < b.name; });
  return v;
}

int64_t parse_int_flag(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  SL_CHECK(is_decimal_integer(text), flag, ": expected an integer, got '", text, "'");
  errno = 0;
  const long long v = std::strtoll(text.c_str(), nullptr, 10);
  SL_CHECK(errno != ERANGE, flag, ": ", text, " is out of range (a 64-bit integer)");
  SL_CHECK(v >= min && v <= max, flag, ": expected an integer ", range_text(min, max), ", got ", v);
  return v;
}

double parse_number_flag(const std::string& flag, const std::string& text, double min, double max) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text.c_str(), &end);
  // strtod skips leading blanks and takes a '+': refused as the integers' parser refuses them
  const bool plain_start =
      !text.empty() && text[0] != '+' && !std::isspace(static_cast<unsigned char>(text[0]));
  SL_CHECK(plain_start && *end == '\0', flag, ": expected a number, got '", text, "'");
  SL_CHECK(std::isfinite(v) && errno != ERANGE, flag, ": expected a finite number, got '", text,
           "'");
  SL_CHECK(v >= min && v <= max, flag, ": expected a number ", range_text(min, max), ", got ",
           text);
  return v;
}

std::optional<std::vector<int64_t>> parse_positive_ints(const std::string& text, bool increasing) {
  if (text.empty() || text.back() == ',') return std::nullopt;  // getline drops a last empty item
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    // digits only, as parse_int_flag takes them (no blank, no sign: stoll would take " 1", "+2")
    if (!is_decimal_integer(item) || item[0] == '-') return std::nullopt;
    errno = 0;
    const int64_t v = std::strtoll(item.c_str(), nullptr, 10);
    if (errno == ERANGE || v < 1 || (increasing && !out.empty() && v <= out.back()))
      return std::nullopt;
    out.push_back(v);
  }
  return out;
}

int64_t Options::get_int(const std::string& key, int64_t fallback, int64_t min, int64_t max) const {
  read.insert(key);
  fallbacks[key] = std::to_string(fallback);
  auto it = extra.find(key);
  if (it == extra.end()) return fallback;
  return parse_int_flag("--" + key, it->second, min, max);
}

double Options::get_double(const std::string& key, double fallback, double min, double max) const {
  read.insert(key);
  char text[32];
  std::snprintf(text, sizeof text, "%g", fallback);
  fallbacks[key] = text;
  auto it = extra.find(key);
  if (it == extra.end()) return fallback;
  return parse_number_flag("--" + key, it->second, min, max);
}

bool Options::get_bool(const std::string& key, bool fallback) const {
  return get_int(key, fallback ? 1 : 0, 0, 1) != 0;
}

std::string Options::get_string(const std::string& key, const std::string& fallback) const {
  read.insert(key);
  fallbacks[key] = fallback;
  auto it = extra.find(key);
  return it == extra.end() ? fallback : it->second;
}

namespace {

/// Levenshtein distance between two flag names.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

void Options::check_all_read(const std::string& job) const {
  // The flags main() parses into fields, valid for every job.
  std::set<std::string> known = {"model", "strategy", "epochs",   "batch-size", "lr",
                                 "seed",  "threads",  "data-dir", "device"};
  known.insert(read.begin(), read.end());
  for (const auto& [key, value] : extra) {
    if (read.count(key)) continue;
    std::string best;
    size_t best_d = 3;  // suggest only names within 2 edits
    for (const std::string& k : known) {
      const size_t d = edit_distance(key, k);
      if (d < best_d) best_d = d, best = k;
    }
    std::string list;
    for (const std::string& k : known) {
      list += list.empty() ? "--" : ", --";
      list += k;
    }
    SL_CHECK(false, job, ": unknown flag --", key,
             best.empty() ? std::string() : " (did you mean --" + best + "?)", "; this job reads ",
             list);
  }
  if (!documented) return;
  for (const std::string& key : read) {
    auto doc = std::find_if(documented->begin(), documented->end(),
                            [&](const FlagDoc& d) { return d.name == key; });
    if (doc == documented->end()) {
      throw std::logic_error("job " + job + " reads --" + key +
                             " but its flag table (--help) does not list it");
    }
    const std::string& want = doc->default_value;
    if (!want.empty() && want.front() != '(' && want != fallbacks.at(key)) {
      throw std::logic_error("job " + job + ": --" + key + "'s default is '" + fallbacks.at(key) +
                             "' in the code but '" + want + "' in its flag table (--help)");
    }
  }
}

const FlagDocs& common_flags() {
  static const FlagDocs flags = {
      {"model", "mlp", "the job (sl_train --list)"},
      {"epochs", "2", "passes over the training data"},
      {"batch-size", "(the job's)", "examples per step over all ranks"},
      {"lr", "(the job's)", "peak learning rate"},
      {"seed", "0", "initialisation, shuffling and dropout seed"},
      {"threads", "0", "CPU threads per rank (0: SL_NUM_THREADS, else the cores / ranks)"},
      {"data-dir", "(the job's)", "where the job's built-in data is found or made"},
      {"strategy", "single", "single, dp, ddp, zero1 or zero2 (ddp/zero: under mpirun)"},
      {"device", "cpu", "cpu, cuda or cuda:N"},
  };
  return flags;
}

namespace {

void print_flags(const FlagDocs& flags, FILE* out) {
  size_t w = 0;
  for (const FlagDoc& f : flags) w = std::max(w, f.name.size() + f.default_value.size());
  for (const FlagDoc& f : flags) {
    const std::string head = "--" + f.name + (f.default_value.empty() ? "" : " ") + f.default_value;
    std::fprintf(out, "  %-*s  %s\n", static_cast<int>(w + 3), head.c_str(), f.help.c_str());
  }
}

}  // namespace

void print_job_help(const Job& job, FILE* out) {
  std::fprintf(out, "sl_train --model %s: %s\n\nCommon flags (with their defaults):\n",
               job.name.c_str(), job.help.c_str());
  print_flags(common_flags(), out);
  if (job.flags) {
    std::fprintf(out, "\nFlags of %s (with their defaults; --KEY VALUE or --KEY=VALUE):\n",
                 job.name.c_str());
    print_flags(job.flags(), out);
  }
}

}  // namespace sl::train

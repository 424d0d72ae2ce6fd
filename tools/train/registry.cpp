#include "registry.h"

#include <algorithm>
#include <cstdlib>

#include <shardlight/shardlight.h>

namespace sl::train {

namespace {
std::vector<Job>& jobs() {
  static std::vector<Job> all;  // function-local: safe from any static initialiser
  return all;
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

int64_t Options::get_int(const std::string& key, int64_t fallback) const {
  auto it = extra.find(key);
  if (it == extra.end()) return fallback;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  SL_CHECK(!it->second.empty() && *end == '\0', "--", key, ": expected an integer, got '",
           it->second, "'");
  return v;
}

double Options::get_double(const std::string& key, double fallback) const {
  auto it = extra.find(key);
  if (it == extra.end()) return fallback;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  SL_CHECK(!it->second.empty() && *end == '\0', "--", key, ": expected a number, got '", it->second,
           "'");
  return v;
}

std::string Options::get_string(const std::string& key, const std::string& fallback) const {
  auto it = extra.find(key);
  return it == extra.end() ? fallback : it->second;
}

}  // namespace sl::train

#include "dist/debug.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace sl::dist {

bool debug_enabled_from_env() {
  const char* v = std::getenv("SL_DIST_DEBUG");
  return v && *v && std::strcmp(v, "0") != 0;
}

void log_collective(int rank, int size, const char* backend, const Collective& c) {
  std::string line =
      detail::str_cat("[sl.dist rank ", rank, "/", size, " ", backend, "] ", c.str(), "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

Fingerprint fingerprint(const Collective& c) {
  return {static_cast<int64_t>(c.kind),
          static_cast<int64_t>(c.op),
          static_cast<int64_t>(c.dtype),
          c.count,
          c.root,
          static_cast<int64_t>(c.seq)};
}

Collective from_fingerprint(const Fingerprint& f) {
  Collective c;
  bool ok = f[0] >= 0 && f[0] < kNumCollectiveKinds && f[1] >= 0 && f[1] <= 2 && f[2] >= 0 &&
            f[2] < kNumDTypes && f[5] >= 0;
  if (!ok) {
    c.count = -1;
    return c;
  }
  c.kind = static_cast<CollectiveKind>(f[0]);
  c.op = static_cast<ReduceOp>(f[1]);
  c.dtype = static_cast<DType>(f[2]);
  c.count = f[3];
  c.root = static_cast<int>(f[4]);
  c.seq = static_cast<uint64_t>(f[5]);
  return c;
}

std::string describe_mismatch(const std::vector<Fingerprint>& per_rank, int rank) {
  bool same = true;
  for (const auto& f : per_rank) same = same && f == per_rank.front();
  if (same) return {};
  std::ostringstream os;
  os << "rank " << rank << "/" << per_rank.size() << ": the ranks issued different collectives";
  const Fingerprint& mine = per_rank[static_cast<size_t>(rank)];
  os << " at #" << mine[5] << ":";
  for (size_t r = 0; r < per_rank.size(); ++r) {
    Collective c = from_fingerprint(per_rank[r]);
    os << (r ? ";" : "") << " rank " << r << ": "
       << (c.count < 0 ? std::string("<unreadable>") : c.str());
  }
  os << " (every rank must issue the same collectives, with the same sizes, in the same order)";
  return os.str();
}

}  // namespace sl::dist

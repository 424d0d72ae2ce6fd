// SL_DIST_DEBUG: per-rank logging of collectives and the cross-rank agreement check.
//
// With SL_DIST_DEBUG=1 every collective is logged to stderr when issued, one line per rank:
//   [sl.dist rank 1/3 mpi] allreduce #12 (sum, float32 x 1024)
// and, before it runs, each rank's description is exchanged (a fixed-size fingerprint) and
// compared. If any rank issued something else, every rank throws the same DistError listing
// what each rank issued, instead of hanging in (or corrupting) the mismatched collective.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "dist/process_group.h"

namespace sl::dist {

/// True when SL_DIST_DEBUG is set to something other than "" or "0".
bool debug_enabled_from_env();
/// Writes the debug line for `c` to stderr (one write, so lines of ranks do not interleave).
void log_collective(int rank, int size, const char* backend, const Collective& c);

/// Fixed-size wire form of a Collective (exchanged between ranks as int64 words).
inline constexpr int kFingerprintWords = 6;
using Fingerprint = std::array<int64_t, kFingerprintWords>;
Fingerprint fingerprint(const Collective& c);
/// Inverse of fingerprint; words that cannot be a Collective give kind barrier with count -1.
Collective from_fingerprint(const Fingerprint& f);
/// Empty when every rank's fingerprint equals every other's; otherwise the DistError message:
///   "rank 0/3: collective mismatch at #5: rank 0: allreduce #5 (sum, float32 x 10); rank 1:
///    allgather #5 (float32 x 4); ..."
std::string describe_mismatch(const std::vector<Fingerprint>& per_rank, int rank);

}  // namespace sl::dist

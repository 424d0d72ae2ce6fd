// Sharded checkpoints: every rank writes the parts of the parameters and of the optimizer state
// it owns, with their global element ranges, into one directory; a manifest written last
// commits it. A checkpoint written by N ranks in any mode loads into M ranks in any mode.
//
// Note [Sharded checkpoint layout]
//   <dir>/manifest.json      written last by rank 0, after every rank's files are durable:
//                            {"format": "shardlight.sharded", "version": 1, "world_size": N,
//                             "strategy": "zero2", "counters": {...}, "extra": {...},
//                             "params": [{"name", "shape", "dtype"}...],
//                             "ranks": [{"dir": "rank-00000", "manifest_crc32", "manifest_size"}]}
//   <dir>/rank-00000/ ...    one checkpoint directory per rank (Note [Checkpoint directory] in
//                            nn/serialize/checkpoint.h: sections + its own manifest with CRCs):
//     params.safetensors     "<param name>@<begin>": elements [begin, begin + numel) of the
//                            flattened parameter, for each piece the rank owns
//     optimizer.safetensors  "<state>/<param name>@<begin>" likewise for each state tensor
//                            (momentum_buffer, exp_avg, exp_avg_sq, max_exp_avg_sq, master);
//                            meta: the optimizer's name, param_groups and per-parameter steps
//     buffers.safetensors    (rank 0) module buffers and frozen parameters, whole
// Ownership is the flat layout's (Note [Flat buffer layout]) for the saving world size, so
// each element is saved exactly once. Ranges are in parameter elements, independent of any
// layout, so a loader of another world size or mode copies, for every range it needs, the
// overlapping bytes of the saved pieces (read directly from the files, nothing else): values
// and optimizer state arrive bit for bit.
// Saving is atomic: the ranks write into a temporary sibling directory ".<name>.tmp-<nonce>";
// after a barrier rank 0 writes manifest.json, fsyncs, and swaps the directory into place
// (rename, or an atomic exchange with an existing checkpoint), so a crash leaves the previous
// checkpoint whole. Every failure is agreed on by all ranks, so none is left waiting.
#pragma once

#include <string>

#include "dist/strategy.h"
#include "nn/serialize/json.h"
#include "nn/serialize/state_dict.h"

namespace sl::dist {

/// Collective over the strategy's ranks: writes a sharded checkpoint of `s` (parameters,
/// buffers, optimizer state and hyperparameters, strategy counters) and `extra` (any JSON:
/// scheduler state, data position, ...) to `dir`, replacing an existing checkpoint there.
/// Throws IOError on every rank when any rank fails.
void save_sharded_checkpoint(const std::string& dir, Strategy& s,
                             const serialize::Json& extra = serialize::Json::object());

/// Loads a sharded checkpoint written with any world size and mode into `s` (each rank reads
/// what it needs); returns the saved `extra`. Throws IOError for a missing, corrupt or
/// incomplete checkpoint, ValueError when it does not fit the model (missing parameter, other
/// shape or dtype) or the optimizer (another type or number of parameter groups).
serialize::Json load_sharded_checkpoint(const std::string& dir, Strategy& s);

/// The full parameters and buffers of a sharded checkpoint, under the model's dotted names (what
/// a consolidated safetensors file for inference or PyTorch holds). Any single process.
serialize::StateDict consolidate_sharded_checkpoint(const std::string& dir);

/// Collective: the full optimizer state, "<state>/<param name>" -> parameter-shaped tensor
/// (all-gathering the shards in zero modes), plus "step/<param name>" as 0-d int64 and, for NAdam
/// after a parameter's first step, "mu_product/<param name>" as 0-d float64.
serialize::StateDict full_optimizer_state(Strategy& s);

/// The manifest of a sharded checkpoint (resolving an interrupted swap). Throws IOError.
serialize::Json read_sharded_manifest(const std::string& dir);

/// The optimizer section's meta of a sharded checkpoint, as loading restores it: {"optimizer":
/// name, "param_groups": [...], "state": {}, "steps": {...}}, from rank 0's safetensors header
/// alone (no tensor is read, no CRC checked: load_sharded_checkpoint does that). For checks that
/// must come before a long load. Throws IOError when it is missing or malformed.
serialize::Json read_sharded_optimizer_meta(const std::string& dir);

}  // namespace sl::dist

// Training checkpoints: a directory of named sections, written atomically and verified on load.
//
// Note [Checkpoint directory]
// A checkpoint is a directory holding one safetensors file per section (<name>.safetensors:
// the section's tensors, with its JSON metadata under the "__metadata__" key
// "shardlight.meta") and a manifest.json listing every section file with its size and CRC-32
// (zlib's), plus the format name and version. Saving:
//   1. write every file into a fresh sibling directory ".<name>.tmp-<pid>-<n>" and fsync it;
//   2. write manifest.json last, fsync it and the directory;
//   3. swap it into place: rename() when no checkpoint exists yet, else an atomic exchange
//      (renameat2 RENAME_EXCHANGE) with the old directory, which is then deleted. Where the
//      exchange is unsupported, the old directory is first renamed to ".<name>.old-<pid>-<n>";
//      a loader that finds no <name> but such a directory with a valid manifest uses it.
//   4. fsync the parent directory.
// A crash at any point leaves either the previous checkpoint or the new one whole under <name>
// (or recoverable as above); stale temporary directories are removed by the next save. Loading
// reads the manifest, refuses file names that are not plain names (no '/', no "..") and
// symlinks, checks every size before reading and every CRC after, and parses each file with
// the hostile-input checks of the safetensors reader.
//
// Sections are opaque to this code: the model's state dict, optimizer and scheduler state, the
// RNG state, the step and the data position are all just sections (see the k*Section names), so
// any layer can store its state without the checkpoint knowing its types.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/random.h"
#include "nn/serialize/json.h"
#include "nn/serialize/state_dict.h"

namespace sl::serialize {

inline constexpr const char* kModelSection = "model";
inline constexpr const char* kOptimizerSection = "optimizer";
inline constexpr const char* kSchedulerSection = "scheduler";
/// Trainer counters: meta {"step": n, "data_position": {...}, "rng": {"seed", "offset"}}.
inline constexpr const char* kTrainerSection = "trainer";

/// An in-memory checkpoint: sections by name (a name is [A-Za-z0-9_.-]+, not starting with '.').
class Checkpoint {
 public:
  /// The section named `name`, created empty when absent. Throws ValueError for a bad name.
  Section& section(const std::string& name);
  /// Throws ValueError "checkpoint: no section 'x'" when absent.
  const Section& at(const std::string& name) const;
  bool contains(const std::string& name) const { return sections_.count(name) != 0; }
  /// Names in sorted order.
  std::vector<std::string> names() const;
  void set(const std::string& name, Section s);

  // Conveniences for the trainer section.
  void set_step(int64_t step);
  /// Throws ValueError when absent.
  int64_t step() const;
  void set_rng(const GeneratorState& s);
  GeneratorState rng() const;
  /// Any JSON describing where the data loader stands (epoch, index, shuffle seed, ...).
  void set_data_position(Json pos);
  const Json& data_position() const;

 private:
  std::map<std::string, Section> sections_;
};

/// Points of save_checkpoint where a fault hook runs (to simulate a crash in tests).
enum class SaveStage {
  temp_dir_created,  ///< the temporary directory exists, empty
  section_header,    ///< a section file's header is written, its tensor bytes are not
  section_written,   ///< a section file is complete but not yet fsynced
  section_synced,    ///< a section file is fsynced
  manifest_written,  ///< manifest.json written and fsynced
  temp_dir_synced,   ///< the temporary directory is fsynced, ready to swap
  old_moved_aside,   ///< fallback path only: the old checkpoint renamed to .<name>.old-*
  swapped,           ///< the new checkpoint is in place; the old one not yet deleted
  done,              ///< old checkpoint deleted, parent fsynced
};
const char* save_stage_name(SaveStage s);

struct SaveOptions {
  /// Called at each stage with a detail (the section name, or the path); an exception thrown
  /// here propagates without cleanup, as a crash would leave things.
  std::function<void(SaveStage, const std::string&)> fault_hook;
  /// Use renameat2(RENAME_EXCHANGE) when replacing a checkpoint (false forces the fallback).
  bool use_rename_exchange = true;
};

/// The absolute, normalised path a checkpoint `dir` names (a trailing '/' allowed); touches
/// nothing. Throws IOError when `dir` is empty or names no directory ("." or "..").
std::filesystem::path checkpoint_target_path(const std::string& dir);
/// Where a save will write a checkpoint directory; see prepare_checkpoint_target.
struct CheckpointTarget {
  std::filesystem::path parent;  ///< absolute and existing
  std::string name;              ///< the directory's own name
  std::filesystem::path path;    ///< parent / name
  bool exists = false;           ///< a checkpoint (or an empty directory) is there already
};
/// Checks and tidies the place a save of `dir` will write to, before anything is written:
/// resolves `dir` (made absolute; a trailing '/' allowed), creates its parent, and throws
/// IOError when something other than a Shardlight checkpoint (a directory with manifest.json) or
/// an empty directory is there, since a save replaces the whole directory and a folder named by
/// mistake would be lost. Then removes what crashed saves left beside it: temporaries
/// ".<name>.tmp-*" always, copies moved aside by an interrupted swap (".<name>.old-*") only when
/// a checkpoint is in place again. Used by save_checkpoint and dist::save_sharded_checkpoint
/// (Note [Checkpoint directory]).
CheckpointTarget prepare_checkpoint_target(const std::string& dir);
/// Puts the finished, fsynced temporary checkpoint directory `tmp` at `target` and fsyncs the
/// parent: a rename when nothing is at `target`; otherwise an atomic exchange (renameat2's
/// RENAME_EXCHANGE, when use_rename_exchange and the file system has it) and the old copy
/// removed, or where it cannot, the old checkpoint first renamed aside to
/// ".<name>.old-<unique>" (which loading and the next save's tidy-up recognise). `hook` runs at
/// SaveStage::old_moved_aside and SaveStage::swapped. Throws IOError naming the paths when a
/// rename fails; the previous checkpoint is then at `target` or aside. Used by save_checkpoint and
/// dist::save_sharded_checkpoint after prepare_checkpoint_target.
void swap_checkpoint_into_place(
    const std::filesystem::path& tmp, const std::filesystem::path& target,
    const std::string& unique, bool use_rename_exchange,
    const std::function<void(SaveStage, const std::string&)>& hook = {});
/// Writes `ckpt` to directory `dir` atomically (Note [Checkpoint directory]), replacing an
/// existing checkpoint there. Throws IOError (the temporary directory is removed) or whatever
/// the fault hook throws.
void save_checkpoint(const std::string& dir, const Checkpoint& ckpt, const SaveOptions& opts = {});
/// Reads and verifies a checkpoint; tensors land on `device`. Throws IOError naming the file and
/// the problem (missing manifest, size or CRC mismatch, bad names, malformed safetensors).
Checkpoint load_checkpoint(const std::string& dir, Device device = kCPU);
/// Verifies sizes and CRCs without keeping the tensors. Throws IOError like load_checkpoint.
void verify_checkpoint(const std::string& dir);
/// True when `name` is a valid section name.
bool is_valid_section_name(const std::string& name);

}  // namespace sl::serialize

// Atomic checkpoint directories (Note [Checkpoint directory]).
#include "nn/serialize/checkpoint.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "nn/serialize/crc32.h"
#include "nn/serialize/file_io.h"
#include "nn/serialize/safetensors.h"

namespace sl::serialize {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifest = "manifest.json";
constexpr const char* kFormat = "shardlight.checkpoint";
constexpr int64_t kVersion = 1;
/// Metadata key of a section file that holds the section's JSON.
constexpr const char* kMetaKey = "shardlight.meta";
constexpr uint64_t kMaxManifestBytes = 16u << 20;

std::atomic<uint64_t> g_save_counter{0};

/// RAII directory descriptor (for openat).
struct DirFd {
  int fd = -1;
  explicit DirFd(const std::string& path) {
    fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw_errno(path, "open directory", errno);
  }
  ~DirFd() {
    if (fd >= 0) ::close(fd);
  }
  DirFd(const DirFd&) = delete;
  DirFd& operator=(const DirFd&) = delete;
};

/// (parent, name) of a checkpoint path, ignoring trailing slashes.
std::pair<fs::path, std::string> split_target(const std::string& dir) {
  fs::path p = checkpoint_target_path(dir);
  return {p.parent_path(), p.filename().string()};
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

/// Atomically exchanges two paths; false (errno set) when the kernel/filesystem cannot.
bool rename_exchange(const fs::path& a, const fs::path& b) {
#if defined(SYS_renameat2)
  constexpr unsigned kRenameExchange = 1u << 1;  // RENAME_EXCHANGE
  return ::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), kRenameExchange) == 0;
#else
  errno = ENOSYS;
  return false;
#endif
}

void rename_or_throw(const fs::path& from, const fs::path& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    throw_errno(to.string(), ("rename from " + from.string()).c_str(), errno);
  }
}

void remove_tree_quietly(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

Json read_manifest(int dir_fd, const std::string& where) {
  FileReader r(kManifest, dir_fd);
  SL_CHECK_IO(r.size() <= kMaxManifestBytes, where, "/", kManifest, ": ", r.size(),
              " bytes exceeds the ", kMaxManifestBytes, "-byte limit");
  std::string text(r.size(), '\0');
  r.read_at(0, text.data(), text.size());
  std::string what = where + "/" + kManifest;
  Json m = Json::parse(text, what.c_str(), 8, 1'000'000);
  try {
    SL_CHECK_IO(m.is_object() && m.contains("format") && m.at("format").is_string() &&
                    m.at("format").as_string() == kFormat,
                what, ": not a Shardlight checkpoint manifest (format must be '", kFormat, "')");
    SL_CHECK_IO(m.at("version").as_int() == kVersion, what, ": unsupported version ",
                m.at("version").dump(), " (this build reads version ", kVersion, ")");
    SL_CHECK_IO(m.at("sections").is_array(), what, ": 'sections' must be an array");
  } catch (const ValueError& e) {
    detail::throw_error<IOError>(what, ": malformed manifest: ", e.what());
  }
  return m;
}

struct ManifestEntry {
  std::string name, file;
  uint64_t size;
  uint32_t crc;
};

std::vector<ManifestEntry> manifest_entries(const Json& m, const std::string& what) {
  std::vector<ManifestEntry> out;
  for (const Json& s : m.at("sections").items()) {
    try {
      ManifestEntry e;
      e.name = s.at("name").as_string();
      e.file = s.at("file").as_string();
      int64_t size = s.at("size").as_int();
      int64_t crc = s.at("crc32").as_int();
      SL_CHECK_IO(is_valid_section_name(e.name), what, ": invalid section name '", e.name,
                  "' (expected [A-Za-z0-9_.-]+ not starting with '.')");
      SL_CHECK_IO(e.file == e.name + ".safetensors", what, ": section '", e.name,
                  "' points at file '", e.file, "' (expected '", e.name,
                  ".safetensors'; paths outside the checkpoint are refused)");
      SL_CHECK_IO(size >= 0 && crc >= 0 && crc <= 0xFFFFFFFFll, what, ": section '", e.name,
                  "' has an invalid size or crc32");
      for (const auto& o : out) {
        SL_CHECK_IO(o.name != e.name, what, ": duplicate section '", e.name, "'");
      }
      e.size = static_cast<uint64_t>(size);
      e.crc = static_cast<uint32_t>(crc);
      out.push_back(std::move(e));
    } catch (const ValueError& err) {
      detail::throw_error<IOError>(what, ": malformed section entry: ", err.what());
    }
  }
  return out;
}

/// The directory to load: `target`, or a checkpoint moved aside by an interrupted fallback save.
fs::path resolve_existing(const std::string& dir) {
  auto [parent, name] = split_target(dir);
  fs::path target = parent / name;
  std::error_code ec;
  if (fs::exists(target, ec)) return target;
  std::string prefix = "." + name + ".old-";
  if (fs::is_directory(parent, ec)) {
    for (const auto& entry : fs::directory_iterator(parent, ec)) {
      std::string fname = entry.path().filename().string();
      if (starts_with(fname, prefix) && fs::exists(entry.path() / kManifest, ec)) {
        return entry.path();
      }
    }
  }
  detail::throw_error<IOError>(dir, ": no checkpoint found (missing directory)");
}

}  // namespace

bool is_valid_section_name(const std::string& name) {
  if (name.empty() || name.size() > 200 || name[0] == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return name != kManifest;
}

const char* save_stage_name(SaveStage s) {
  switch (s) {
    case SaveStage::temp_dir_created:
      return "temp_dir_created";
    case SaveStage::section_header:
      return "section_header";
    case SaveStage::section_written:
      return "section_written";
    case SaveStage::section_synced:
      return "section_synced";
    case SaveStage::manifest_written:
      return "manifest_written";
    case SaveStage::temp_dir_synced:
      return "temp_dir_synced";
    case SaveStage::old_moved_aside:
      return "old_moved_aside";
    case SaveStage::swapped:
      return "swapped";
    case SaveStage::done:
      return "done";
  }
  return "?";
}

// ---- Checkpoint ------------------------------------------------------------------------------

Section& Checkpoint::section(const std::string& name) {
  SL_CHECK(is_valid_section_name(name), "checkpoint: invalid section name '", name,
           "' (expected [A-Za-z0-9_.-]+ not starting with '.')");
  return sections_[name];
}

const Section& Checkpoint::at(const std::string& name) const {
  auto it = sections_.find(name);
  SL_CHECK(it != sections_.end(), "checkpoint: no section '", name, "'");
  return it->second;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : sections_) out.push_back(k);
  return out;
}

void Checkpoint::set(const std::string& name, Section s) {
  section(name) = std::move(s);
}

void Checkpoint::set_step(int64_t step) {
  section(kTrainerSection).meta.set("step", step);
}

int64_t Checkpoint::step() const {
  return at(kTrainerSection).meta.at("step").as_int();
}

void Checkpoint::set_rng(const GeneratorState& s) {
  section(kTrainerSection).meta.set("rng", rng_state_to_json(s));
}

GeneratorState Checkpoint::rng() const {
  return rng_state_from_json(at(kTrainerSection).meta.at("rng"));
}

void Checkpoint::set_data_position(Json pos) {
  section(kTrainerSection).meta.set("data_position", std::move(pos));
}

const Json& Checkpoint::data_position() const {
  return at(kTrainerSection).meta.at("data_position");
}

// ---- save ------------------------------------------------------------------------------------

fs::path checkpoint_target_path(const std::string& dir) {
  SL_CHECK_IO(!dir.empty(), "checkpoint: empty directory path");
  fs::path p = fs::absolute(fs::path(dir)).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  std::string name = p.filename().string();
  SL_CHECK_IO(!name.empty() && name != "." && name != "..", "checkpoint: '", dir,
              "' does not name a directory");
  return p;
}

CheckpointTarget prepare_checkpoint_target(const std::string& dir) {
  auto [parent, name] = split_target(dir);
  CheckpointTarget t{parent, name, parent / name, false};
  std::error_code ec;
  fs::create_directories(parent, ec);
  SL_CHECK_IO(!ec, parent.string(), ": cannot create directory: ", ec.message());
  t.exists = fs::exists(t.path, ec);
  if (t.exists) {
    bool is_ckpt = fs::is_directory(t.path, ec) &&
                   (fs::exists(t.path / kManifest, ec) || fs::is_empty(t.path, ec));
    SL_CHECK_IO(is_ckpt, t.path.string(),
                ": exists and is not a Shardlight checkpoint (no manifest.json); refusing to "
                "replace it");
  }
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    std::string fname = entry.path().filename().string();
    if (starts_with(fname, "." + name + ".tmp-") ||
        (t.exists && starts_with(fname, "." + name + ".old-"))) {
      remove_tree_quietly(entry.path());
    }
  }
  return t;
}

void swap_checkpoint_into_place(const fs::path& tmp, const fs::path& target,
                                const std::string& unique, bool use_rename_exchange,
                                const std::function<void(SaveStage, const std::string&)>& hook) {
  auto stage = [&](SaveStage s, const fs::path& p) {
    if (hook) hook(s, p.string());
  };
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::error_code ec;
  if (!fs::exists(target, ec)) {
    rename_or_throw(tmp, target);
    stage(SaveStage::swapped, target);
  } else if (use_rename_exchange && rename_exchange(tmp, target)) {
    stage(SaveStage::swapped, target);  // tmp now holds the old checkpoint
    remove_tree_quietly(tmp);
  } else {
    // built by appends: GCC 12 reports a false -Wrestrict for "." + std::string(...)
    std::string old_name = ".";
    old_name.append(target.filename().string()).append(".old-").append(unique);
    fs::path old = parent / old_name;
    rename_or_throw(target, old);
    stage(SaveStage::old_moved_aside, old);
    rename_or_throw(tmp, target);
    stage(SaveStage::swapped, target);
    remove_tree_quietly(old);
  }
  fsync_dir(parent.string());
}

void save_checkpoint(const std::string& dir, const Checkpoint& ckpt, const SaveOptions& opts) {
  auto hook = [&](SaveStage s, const std::string& detail) {
    if (opts.fault_hook) opts.fault_hook(s, detail);
  };
  CheckpointTarget where = prepare_checkpoint_target(dir);
  const fs::path& parent = where.parent;
  const std::string& name = where.name;
  const fs::path& target = where.path;
  std::error_code ec;
  std::string unique = std::to_string(::getpid()) + "-" + std::to_string(g_save_counter++);
  fs::path tmp = parent / ("." + name + ".tmp-" + unique);
  bool swapped = false;
  try {
    fs::create_directory(tmp, ec);
    SL_CHECK_IO(!ec, tmp.string(), ": cannot create directory: ", ec.message());
    hook(SaveStage::temp_dir_created, tmp.string());
    Json sections = Json::array();
    {
      DirFd dfd(tmp.string());
      for (const auto& sname : ckpt.names()) {
        const Section& sec = ckpt.at(sname);
        std::string file = sname + ".safetensors";
        FileWriter w(file, dfd.fd);
        write_safetensors(w, sec.tensors, {{kMetaKey, sec.meta.dump()}},
                          [&] { hook(SaveStage::section_header, sname); });
        hook(SaveStage::section_written, sname);
        w.sync();
        hook(SaveStage::section_synced, sname);
        w.close();
        sections.push_back(Json::object({{"name", sname},
                                         {"file", file},
                                         {"size", static_cast<int64_t>(w.size())},
                                         {"crc32", static_cast<int64_t>(w.crc32())}}));
      }
      Json manifest = Json::object(
          {{"format", kFormat}, {"version", kVersion}, {"sections", std::move(sections)}});
      std::string text = manifest.dump() + "\n";
      FileWriter mw(kManifest, dfd.fd);
      mw.write(text.data(), text.size());
      mw.sync();
      mw.close();
      hook(SaveStage::manifest_written, kManifest);
    }
    fsync_dir(tmp.string());
    hook(SaveStage::temp_dir_synced, tmp.string());
    swap_checkpoint_into_place(tmp, target, unique, opts.use_rename_exchange,
                               [&](SaveStage s, const std::string& detail) {
                                 if (s == SaveStage::swapped) swapped = true;
                                 hook(s, detail);
                               });
    // copies moved aside by an interrupted fallback save are obsolete now
    for (const auto& entry : fs::directory_iterator(parent, ec)) {
      if (starts_with(entry.path().filename().string(), "." + name + ".old-")) {
        remove_tree_quietly(entry.path());
      }
    }
    hook(SaveStage::done, target.string());
  } catch (const Error&) {
    // a real failure (disk full, permissions, bad tensor): leave no temporary behind
    if (!swapped) remove_tree_quietly(tmp);
    throw;
  } catch (const fs::filesystem_error& e) {
    if (!swapped) remove_tree_quietly(tmp);
    detail::throw_error<IOError>(dir, ": saving the checkpoint failed: ", e.what());
  }
}

// ---- load ------------------------------------------------------------------------------------

Checkpoint load_checkpoint(const std::string& dir, Device device) {
  fs::path root = resolve_existing(dir);
  DirFd dfd(root.string());
  Json manifest = read_manifest(dfd.fd, root.string());
  Checkpoint ckpt;
  for (const auto& e : manifest_entries(manifest, root.string() + "/" + kManifest)) {
    std::string where = root.string() + "/" + e.file;
    {
      FileReader probe(e.file, dfd.fd);
      SL_CHECK_IO(probe.size() == e.size, where, ": size ", probe.size(),
                  " differs from the manifest's ", e.size, " (truncated or replaced file)");
    }
    SafetensorsFile f(e.file, dfd.fd);
    uint32_t crc = 0;
    Section sec;
    sec.tensors = f.read_all(device, &crc);
    SL_CHECK_IO(crc == e.crc, where, ": CRC-32 ", crc, " differs from the manifest's ", e.crc,
                " (corrupted file)");
    for (const auto& [k, v] : f.header().metadata) {
      if (k == kMetaKey) sec.meta = Json::parse(v, where.c_str());
    }
    ckpt.set(e.name, std::move(sec));
  }
  return ckpt;
}

void verify_checkpoint(const std::string& dir) {
  fs::path root = resolve_existing(dir);
  DirFd dfd(root.string());
  Json manifest = read_manifest(dfd.fd, root.string());
  std::vector<char> buf(1 << 20);
  for (const auto& e : manifest_entries(manifest, root.string() + "/" + kManifest)) {
    std::string where = root.string() + "/" + e.file;
    FileReader r(e.file, dfd.fd);
    SL_CHECK_IO(r.size() == e.size, where, ": size ", r.size(), " differs from the manifest's ",
                e.size, " (truncated or replaced file)");
    uint32_t crc = 0;
    for (uint64_t off = 0; off < r.size(); off += buf.size()) {
      uint64_t n = std::min<uint64_t>(buf.size(), r.size() - off);
      r.read_at(off, buf.data(), n);
      crc = crc32(crc, buf.data(), n);
    }
    SL_CHECK_IO(crc == e.crc, where, ": CRC-32 ", crc, " differs from the manifest's ", e.crc,
                " (corrupted file)");
    SafetensorsFile f(e.file, dfd.fd);  // header checks
  }
}

}  // namespace sl::serialize

// Sharded checkpoints: see Note [Sharded checkpoint layout] in checkpoint.h.
#include "dist/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string_view>

#include "autograd/grad_mode.h"
#include "core/creation.h"
#include "core/ops/copy.h"
#include "core/ops/view.h"
#include "dist/flat_strategy.h"
#include "dist/strategy_impl.h"
#include "nn/serialize/checkpoint.h"
#include "nn/serialize/crc32.h"
#include "nn/serialize/file_io.h"
#include "nn/serialize/safetensors.h"

namespace sl::dist {

namespace fs = std::filesystem;
using serialize::Json;

namespace {

constexpr const char* kFormat = "shardlight.sharded";
constexpr int64_t kVersion = 1;
constexpr const char* kManifest = "manifest.json";
/// The optimizer state's keys, in ParamState::tensor / ShardState::tensor order.
constexpr const auto& kStateNames = optim::ParamState::kKeys;

std::string rank_dir_name(int r) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "rank-%05d", r);
  return buf;
}

std::string piece_key(const std::string& name, int64_t begin) {
  return name + "@" + std::to_string(begin);
}

/// What the strategy owns for saving: the ownership layout and, per piece, the tensors.
struct Source {
  const FlatLayout* layout = nullptr;
  FlatLayout local_layout;  // single/dp: everything on one rank
  const FlatStrategy* flat = nullptr;
  ShardedOptimizer* sharded = nullptr;
  std::vector<std::pair<size_t, size_t>> opt_index;
};

Source source_of(Strategy& s) {
  Source src;
  src.flat = dynamic_cast<const FlatStrategy*>(&s);
  if (src.flat) {
    src.layout = &src.flat->flat().layout();
    src.sharded = src.flat->sharded_optimizer();
  } else {
    std::vector<ParamSpec> specs;
    for (const auto& [n, p] : s.named_params()) specs.push_back({p.numel(), p.dtype()});
    src.local_layout = FlatLayout(specs, 1);
    src.layout = &src.local_layout;
  }
  src.opt_index = optimizer_index(s.optimizer(), s.named_params());
  return src;
}

/// Whether zero's state tensor `name` belongs to parameter `param` in PyTorch's terms, as
/// single mode's optimizer would hold it: zero keeps one buffer per dtype group for every state
/// tensor any optimizer group keeps (and a master for the whole group, Note [Flat buffer layout]
/// 5), but a parameter has state only from its first step, only its own group's keys (no
/// momentum_buffer where momentum is 0), and a momentum buffer from its first step with momentum.
bool param_keeps(const Source& src, const optim::Optimizer& opt, int param, std::string_view name) {
  const ShardedOptimizer& so = *src.sharded;
  if (so.step_count(param) == 0) return false;
  if (name == "master") return true;
  if (name == "momentum_buffer" && !so.has_momentum(param)) return false;
  const size_t group = src.opt_index[static_cast<size_t>(param)].first;
  return (opt.state_keys(group) & optim::state_keys_of({name})).any();
}

Tensor flat_view(const Tensor& t) {
  return ops::view(ops::contiguous(t), {t.numel()});
}

/// Where `s`'s group takes its tensors: the CPU for CPU groups, the parameters' GPU for NCCL.
Device comm_device(Strategy& s) {
  if (s.group()->device_kind() == DeviceKind::cpu) return kCPU;
  for (const auto& [name, p] : s.named_params()) return p.device();
  return kCPU;
}

/// Every rank hands in (ok, a, b); returns everyone's, in rank order. The failure of any rank is
/// known to all, so none waits for a rank that gave up. `dev`: comm_device of the strategy.
std::vector<std::array<int64_t, 3>> agree(ProcessGroup& pg, Device dev, bool ok, int64_t a = 0,
                                          int64_t b = 0) {
  Tensor mine = from_vector<int64_t>({ok ? 1 : 0, a, b}).to(dev);
  Tensor all = zeros({3 * pg.size()}, {.dtype = DType::i64, .device = dev});
  pg.allgather(all, mine)->wait();
  all = all.cpu();
  std::vector<int64_t> v = all.to_vector<int64_t>();
  std::vector<std::array<int64_t, 3>> out;
  for (int r = 0; r < pg.size(); ++r) {
    out.push_back({v[static_cast<size_t>(3 * r)], v[static_cast<size_t>(3 * r + 1)],
                   v[static_cast<size_t>(3 * r + 2)]});
  }
  return out;
}

void throw_if_any_failed(const std::vector<std::array<int64_t, 3>>& st, const std::string& what,
                         const std::string& my_error) {
  std::string failed;
  for (size_t r = 0; r < st.size(); ++r) {
    if (!st[r][0]) failed += (failed.empty() ? "" : ", ") + std::to_string(r);
  }
  if (failed.empty()) return;
  detail::throw_error<IOError>(what, ": failed on rank(s) ", failed, my_error.empty() ? "" : ": ",
                               my_error);
}

std::string read_text(const std::string& path) {
  serialize::FileReader f(path);
  std::string s(f.size(), '\0');
  f.read_at(0, s.data(), f.size());
  return s;
}

fs::path resolve_dir(const std::string& dir) {
  fs::path target(dir);
  std::error_code ec;
  if (fs::exists(target / kManifest, ec)) return target;
  // An interrupted fallback swap leaves the previous checkpoint as ".<name>.old-*".
  fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::string prefix = "." + target.filename().string() + ".old-";
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) == 0 && fs::exists(e.path() / kManifest, ec)) return e.path();
  }
  detail::throw_error<IOError>(dir, ": no sharded checkpoint here (", kManifest, " is missing)");
}

// ---- reading pieces back ----------------------------------------------------------------------

struct SavedPiece {
  int64_t begin = 0, end = 0;
  const serialize::SafetensorsFile* file = nullptr;
  const serialize::TensorEntry* entry = nullptr;
};

/// Every saved piece of every rank, by "<param name>" (params) or "<state>/<param name>".
struct SavedIndex {
  std::vector<std::unique_ptr<serialize::SafetensorsFile>> files;
  std::map<std::string, std::vector<SavedPiece>> pieces;
  std::unique_ptr<serialize::SafetensorsFile> buffers;
  Json optimizer_meta;  // rank 0's optimizer section meta

  void add_file(const fs::path& path) {
    files.push_back(std::make_unique<serialize::SafetensorsFile>(path.string()));
    const serialize::SafetensorsFile* f = files.back().get();
    for (const auto& e : f->header().tensors) {
      size_t at = e.name.rfind('@');
      SL_CHECK_IO(at != std::string::npos && e.shape.size() == 1, path.string(), ": tensor '",
                  e.name, "' is not a '<name>@<begin>' piece");
      int64_t begin = -1;
      try {
        begin = std::stoll(e.name.substr(at + 1));
      } catch (const std::exception&) {
      }
      SL_CHECK_IO(begin >= 0, path.string(), ": tensor '", e.name, "' has no valid begin offset");
      pieces[e.name.substr(0, at)].push_back(SavedPiece{begin, begin + e.shape[0], f, &e});
    }
  }
};

/// Copies elements [a, b) of the saved tensor `key` into dst (1-d contiguous, b - a elements, on
/// any device: the file is read into host memory, then copied to a GPU dst).
void fill_range(const Tensor& dst, const SavedIndex& idx, const std::string& key, int64_t a,
                int64_t b) {
  if (!dst.is_cpu()) {
    // pread into device memory fails with EFAULT (the fake GPU's memory is host memory, so only
    // a real GPU showed it: "read failed: Bad address")
    Tensor host = ops::empty({b - a}, dst.dtype(), kCPU);
    fill_range(host, idx, key, a, b);
    ops::copy_(dst, host);
    return;
  }
  auto it = idx.pieces.find(key);
  SL_CHECK_IO(it != idx.pieces.end(), "sharded checkpoint: no saved '", key, "'");
  int64_t covered = 0;
  const size_t esz = dst.element_size();
  for (const SavedPiece& p : it->second) {
    int64_t lo = std::max(a, p.begin), hi = std::min(b, p.end);
    if (lo >= hi) continue;
    Tensor out = ops::narrow(dst, 0, lo - a, hi - lo);
    if (p.entry->dtype == dst.dtype()) {
      p.file->read_bytes(*p.entry, static_cast<uint64_t>(lo - p.begin) * esz,
                         static_cast<uint64_t>(hi - lo) * esz, out.data_ptr());
    } else {
      Tensor tmp = ops::empty({hi - lo}, p.entry->dtype, kCPU);
      size_t tsz = dtype_size(p.entry->dtype);
      p.file->read_bytes(*p.entry, static_cast<uint64_t>(lo - p.begin) * tsz,
                         static_cast<uint64_t>(hi - lo) * tsz, tmp.data_ptr());
      ops::copy_(out, tmp);
    }
    covered += hi - lo;
  }
  SL_CHECK_IO(covered == b - a, "sharded checkpoint: elements [", a, ", ", b, ") of '", key,
              "' are not all present (", covered, " found)");
}

/// dst (any tensor, on any device) from the saved pieces of `key`.
void fill_tensor(const Tensor& dst, const SavedIndex& idx, const std::string& key) {
  if (dst.is_cpu() && dst.is_contiguous()) {
    fill_range(ops::view(dst, {dst.numel()}), idx, key, 0, dst.numel());
  } else {
    Tensor tmp = ops::empty({dst.numel()}, dst.dtype(), kCPU);
    fill_range(tmp, idx, key, 0, dst.numel());
    ops::copy_(dst, ops::view(tmp, dst.sizes()));
  }
}

DType saved_dtype(const SavedIndex& idx, const std::string& key) {
  return idx.pieces.at(key).front().entry->dtype;
}

SavedIndex open_checkpoint(const fs::path& root, const Json& manifest) {
  SavedIndex idx;
  const Json& ranks = manifest.at("ranks");
  for (size_t r = 0; r < ranks.size(); ++r) {
    fs::path sub = root / ranks[r].at("dir").as_string();
    // The per-rank manifest must be the one the top manifest committed, and its files intact.
    std::string text = read_text((sub / kManifest).string());
    SL_CHECK_IO(static_cast<int64_t>(text.size()) == ranks[r].at("manifest_size").as_int() &&
                    static_cast<int64_t>(serialize::crc32(0, text.data(), text.size())) ==
                        ranks[r].at("manifest_crc32").as_int(),
                sub.string(), ": manifest does not match the one the checkpoint committed");
    serialize::verify_checkpoint(sub.string());
    idx.add_file(sub / "params.safetensors");
    idx.add_file(sub / "optimizer.safetensors");
    if (r == 0) {
      idx.buffers =
          std::make_unique<serialize::SafetensorsFile>((sub / "buffers.safetensors").string());
      for (const auto& [k, v] : idx.files.back()->header().metadata) {
        if (k == "shardlight.meta") idx.optimizer_meta = Json::parse(v, "optimizer meta");
      }
    }
  }
  for (auto& [k, v] : idx.pieces) {
    std::sort(v.begin(), v.end(),
              [](const SavedPiece& x, const SavedPiece& y) { return x.begin < y.begin; });
    for (size_t i = 1; i < v.size(); ++i) {
      SL_CHECK_IO(v[i].begin >= v[i - 1].end, root.string(), ": pieces of '", k, "' overlap");
    }
  }
  return idx;
}

serialize::StateDict sorted_state_dict(const std::map<std::string, Tensor>& m) {
  serialize::StateDict out;
  for (const auto& [k, t] : m) out.insert(k, t);
  return out;
}

}  // namespace

// ---- save ---------------------------------------------------------------------------------------

void save_sharded_checkpoint(const std::string& dir, Strategy& s, const Json& extra) {
  ProcessGroup& pg = *s.group();
  const int rank = pg.rank(), n = pg.size();
  const Device dev = comm_device(s);
  NoGradGuard no_grad;
  Source src = source_of(s);
  SL_CHECK(src.layout->world_size() == n, "save_sharded_checkpoint: layout for ",
           src.layout->world_size(), " ranks in a group of ", n);
  // 1. rank 0 checks the target (never replacing what is not a checkpoint, removing what crashed
  // saves left), makes the temporary directory and tells everyone its name
  static std::atomic<int64_t> counter{0};
  int64_t nonce = 0;
  std::string err;
  fs::path target, tmp;
  if (rank == 0) {
    nonce = static_cast<int64_t>(::getpid()) * 1000000 + counter.fetch_add(1) % 1000000;
    try {
      serialize::CheckpointTarget where = serialize::prepare_checkpoint_target(dir);
      target = where.path;
      tmp = where.parent / ("." + where.name + ".tmp-" + std::to_string(nonce));
      std::error_code ec;
      fs::create_directory(tmp, ec);
      if (ec) err = detail::str_cat(dir, ": cannot create the temporary directory: ", ec.message());
    } catch (const std::exception& e) {
      err = e.what();
    }
  }
  auto st = agree(pg, dev, err.empty(), nonce);
  throw_if_any_failed(st, "save_sharded_checkpoint: " + dir, err);
  nonce = st[0][1];
  std::string nonce_s = std::to_string(nonce);
  if (rank != 0) {
    // The path rank 0 made, without touching the file system: rank 0's check is the one.
    target = serialize::checkpoint_target_path(dir);
    tmp = target.parent_path() / ("." + target.filename().string() + ".tmp-" + nonce_s);
  }

  // 2. every rank writes the pieces it owns
  int64_t mcrc = 0, msize = 0;
  try {
    serialize::Checkpoint ck;
    serialize::Section& params = ck.section("params");
    serialize::Section& optim = ck.section("optimizer");
    const auto& named = s.named_params();
    Json steps = Json::object();
    for (const Piece& pc : src.layout->pieces_of_rank(rank)) {
      const auto& [name, p] = named[static_cast<size_t>(pc.param)];
      params.tensors.insert(piece_key(name, pc.param_begin),
                            ops::narrow(flat_view(p), 0, pc.param_begin, pc.numel()));
      if (src.sharded) {
        const ShardState& ss = src.sharded->state()[static_cast<size_t>(pc.group)];
        for (const auto& [sname, t] : ss.named()) {
          if (!param_keeps(src, s.optimizer(), pc.param, sname)) continue;
          optim.tensors.insert(sname + "/" + piece_key(name, pc.param_begin),
                               ops::narrow(t, 0, pc.shard_offset, pc.numel()));
        }
      } else {
        auto [g, i] = src.opt_index[static_cast<size_t>(pc.param)];
        const optim::ParamState& ps = s.optimizer().state(g, i);
        for (size_t k = 0; k < std::size(kStateNames); ++k) {
          if (!ps.tensor(k).defined()) continue;
          optim.tensors.insert(std::string(kStateNames[k]) + "/" + piece_key(name, pc.param_begin),
                               ops::narrow(flat_view(ps.tensor(k)), 0, pc.param_begin, pc.numel()));
        }
      }
    }
    Json mu_products = Json::object();  // NAdam's (Note [NAdam's mu_product])
    for (size_t i = 0; i < named.size(); ++i) {
      int64_t step = 0;
      std::optional<double> mu_product;
      if (src.sharded) {
        step = src.sharded->step_count(static_cast<int>(i));
        if (src.sharded->rule() == UpdateRule::nadam && step > 0) {
          mu_product = src.sharded->mu_product(static_cast<int>(i));
        }
      } else {
        auto [g, j] = src.opt_index[i];
        step = s.optimizer().state(g, j).step;
        mu_product = s.optimizer().state(g, j).mu_product;
      }
      steps.set(named[i].first, step);
      if (mu_product) mu_products.set(named[i].first, *mu_product);
    }
    Json meta = s.optimizer().state_dict().meta;
    meta.set("state", Json::object());
    meta.set("steps", std::move(steps));
    if (!mu_products.members().empty()) meta.set("mu_products", std::move(mu_products));
    optim.meta = std::move(meta);
    if (rank == 0) {
      serialize::Section& buffers = ck.section("buffers");
      for (const auto& [name, b] : s.module().named_buffers()) buffers.tensors.insert(name, b);
      for (const auto& [name, p] : s.module().named_parameters()) {
        if (!p.requires_grad()) buffers.tensors.insert(name, p);
      }
    }
    fs::path sub = tmp / rank_dir_name(rank);
    serialize::save_checkpoint(sub.string(), ck);
    std::string text = read_text((sub / kManifest).string());
    msize = static_cast<int64_t>(text.size());
    mcrc = static_cast<int64_t>(serialize::crc32(0, text.data(), text.size()));
  } catch (const std::exception& e) {
    err = e.what();
  }
  st = agree(pg, dev, err.empty(), mcrc, msize);
  if (rank == 0 && !err.empty()) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
  }
  try {
    throw_if_any_failed(st, "save_sharded_checkpoint: " + dir, err);
  } catch (...) {
    if (rank == 0) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
    }
    throw;
  }

  // 3. rank 0 writes the manifest last and swaps the directory into place
  if (rank == 0) {
    try {
      Json params = Json::array();
      for (const auto& [name, p] : s.named_params()) {
        Json shape = Json::array();
        for (int64_t d : p.sizes()) shape.push_back(d);
        params.push_back(Json::object(
            {{"name", name}, {"shape", std::move(shape)}, {"dtype", dtype_name(p.dtype())}}));
      }
      Json ranks = Json::array();
      for (int r = 0; r < n; ++r) {
        ranks.push_back(Json::object({{"dir", rank_dir_name(r)},
                                      {"manifest_crc32", st[static_cast<size_t>(r)][1]},
                                      {"manifest_size", st[static_cast<size_t>(r)][2]}}));
      }
      Strategy::Counters c = s.counters();
      Json manifest =
          Json::object({{"format", kFormat},
                        {"version", kVersion},
                        {"world_size", n},
                        {"strategy", s.name()},
                        {"counters", Json::object({{"steps_taken", c.steps_taken},
                                                   {"loss_scale", c.loss_scale},
                                                   {"growth_tracker", c.growth_tracker}})},
                        {"extra", extra},
                        {"params", std::move(params)},
                        {"ranks", std::move(ranks)}});
      std::string text = manifest.dump() + "\n";
      {
        serialize::FileWriter w((tmp / kManifest).string());
        w.write(text.data(), text.size());
        w.sync();
        w.close();
      }
      serialize::fsync_dir(tmp.string());
      serialize::swap_checkpoint_into_place(tmp, target, nonce_s, /*use_rename_exchange=*/true);
    } catch (const std::exception& e) {
      err = e.what();
      std::error_code ec;
      fs::remove_all(tmp, ec);
    }
  }
  st = agree(pg, dev, err.empty());
  throw_if_any_failed(st, "save_sharded_checkpoint: " + dir, err);
}

// ---- load ---------------------------------------------------------------------------------------

Json read_sharded_manifest(const std::string& dir) {
  fs::path root = resolve_dir(dir);
  Json m = Json::parse(read_text((root / kManifest).string()), "sharded checkpoint manifest");
  SL_CHECK_IO(m.is_object() && m.contains("format") && m.at("format").as_string() == kFormat, dir,
              ": not a sharded checkpoint (format is not '", kFormat, "')");
  SL_CHECK_IO(m.at("version").as_int() == kVersion, dir, ": sharded checkpoint version ",
              m.at("version").as_int(), " is not supported (expected ", kVersion, ")");
  return m;
}

Json read_sharded_optimizer_meta(const std::string& dir) {
  fs::path root = resolve_dir(dir);
  Json m = read_sharded_manifest(dir);
  const Json& ranks = m.at("ranks");
  SL_CHECK_IO(ranks.size() >= 1, dir, ": the sharded checkpoint lists no rank");
  // rank 0's optimizer file, as open_checkpoint reads it: its header only, no tensor
  const fs::path path = root / ranks[0].at("dir").as_string() / "optimizer.safetensors";
  serialize::SafetensorsFile f(path.string());
  for (const auto& [k, v] : f.header().metadata) {
    if (k == "shardlight.meta") return Json::parse(v, "optimizer meta");
  }
  detail::throw_error<IOError>(path.string(), ": no optimizer meta ('shardlight.meta')");
}

Json load_sharded_checkpoint(const std::string& dir, Strategy& s) {
  NoGradGuard no_grad;
  fs::path root = resolve_dir(dir);
  Json m = read_sharded_manifest(dir);
  SavedIndex idx = open_checkpoint(root, m);
  // Parameters: every mode holds them whole.
  std::map<std::string, const Json*> saved_params;
  for (const Json& p : m.at("params").items()) saved_params[p.at("name").as_string()] = &p;
  for (const auto& [name, p] : s.named_params()) {
    auto it = saved_params.find(name);
    SL_CHECK(it != saved_params.end(), "load_sharded_checkpoint: parameter '", name,
             "' is not in the checkpoint");
    Shape shape;
    for (const Json& d : it->second->at("shape").items()) shape.push_back(d.as_int());
    SL_CHECK(shape == p.sizes() && it->second->at("dtype").as_string() == dtype_name(p.dtype()),
             "load_sharded_checkpoint: parameter '", name, "' is ", shape_str(shape), " ",
             it->second->at("dtype").as_string(), " in the checkpoint but ", shape_str(p.sizes()),
             " ", dtype_name(p.dtype()), " in the model");
    fill_tensor(p, idx, name);
  }
  SL_CHECK(saved_params.size() == s.named_params().size(),
           "load_sharded_checkpoint: the "
           "checkpoint has ",
           saved_params.size(), " parameters, the model ", s.named_params().size());
  // Buffers and frozen parameters, whole, from rank 0's file.
  std::vector<std::pair<std::string, Tensor>> extras;
  for (const auto& [name, b] : s.module().named_buffers()) extras.emplace_back(name, b);
  for (const auto& [name, p] : s.module().named_parameters()) {
    if (!p.requires_grad()) extras.emplace_back(name, p);
  }
  for (const auto& [name, t] : extras) {
    Tensor v = idx.buffers->read(name);
    SL_CHECK(v.sizes() == t.sizes(), "load_sharded_checkpoint: buffer '", name, "' is ",
             shape_str(v.sizes()), " in the checkpoint but ", shape_str(t.sizes()),
             " in the model");
    Tensor dst = t;
    ops::copy_(dst, v);
  }
  // Optimizer: hyperparameters through the optimizer itself, state into the new layout.
  Source src = source_of(s);
  optim::Optimizer& opt = s.optimizer();
  const Json& steps = idx.optimizer_meta.at("steps");
  const Json* mu_products = idx.optimizer_meta.find("mu_products");
  auto saved_mu_product = [&](const std::string& pname) -> std::optional<double> {
    const Json* v = mu_products ? mu_products->find(pname) : nullptr;
    if (!v) return std::nullopt;
    SL_CHECK(v->is_number(), "load_sharded_checkpoint: mu_product of '", pname,
             "' is not a number");
    return v->as_double();
  };
  auto has_state = [&](const std::string& sname, const std::string& pname) {
    return idx.pieces.count(sname + "/" + pname) != 0;
  };
  if (src.sharded) {
    Json meta = idx.optimizer_meta;
    meta.set("state", Json::object());
    opt.load_state_dict(serialize::Section{{}, meta});
    ShardedOptimizer& so = *src.sharded;
    const auto& named = s.named_params();
    for (size_t i = 0; i < named.size(); ++i) {
      const Json* st = steps.find(named[i].first);
      so.set_step_count(static_cast<int>(i), st ? st->as_int() : 0);
      so.set_mu_product(static_cast<int>(i), saved_mu_product(named[i].first).value_or(1.0));
    }
    for (size_t i = 0; i < named.size(); ++i) {
      so.set_has_momentum(static_cast<int>(i), has_state("momentum_buffer", named[i].first));
    }
    for (const Piece& pc : src.layout->pieces_of_rank(s.rank())) {
      const std::string& pname = named[static_cast<size_t>(pc.param)].first;
      ShardState& ss = so.state()[static_cast<size_t>(pc.group)];
      for (size_t k = 0; k < std::size(kStateNames); ++k) {
        std::string key = std::string(kStateNames[k]) + "/" + pname;
        if (!has_state(kStateNames[k], pname)) {
          // no state of this kind yet (no step taken, or not its group's): the initial value
          if (ss.tensor(k).defined()) {
            ops::fill_(ops::narrow(ss.tensor(k), 0, pc.shard_offset, pc.numel()),
                       so.initial_state(k, src.opt_index[static_cast<size_t>(pc.param)].first));
          }
          continue;
        }
        if (!ss.tensor(k).defined()) {
          ss.tensor(k) = zeros({src.layout->groups()[static_cast<size_t>(pc.group)].shard_numel},
                               {.dtype = saved_dtype(idx, key), .device = so.state_device()});
        }
        fill_range(ops::narrow(ss.tensor(k), 0, pc.shard_offset, pc.numel()), idx, key,
                   pc.param_begin, pc.param_end);
      }
    }
    // the masters the checkpoint did not hold (all, or those of parameters whose optimizer group
    // kept none where it was saved) from the loaded parameters; the offloaded parameter copy in
    // any case
    std::vector<bool> master_loaded;
    for (const auto& [name, p] : named) master_loaded.push_back(has_state("master", name));
    so.refresh_master(master_loaded);
  } else {
    serialize::Section sec;
    Json meta = idx.optimizer_meta;
    Json state = Json::object();
    size_t base = 0;
    std::vector<size_t> group_base;
    for (size_t g = 0; g < opt.num_param_groups(); ++g) {
      group_base.push_back(base);
      base += opt.params(g).size();
    }
    const auto& named = s.named_params();
    for (size_t i = 0; i < named.size(); ++i) {
      const auto& [pname, p] = named[i];
      auto [g, j] = src.opt_index[i];
      std::string gi = std::to_string(group_base[g] + j);
      bool any = false;
      for (const char* sname : kStateNames) {
        if (!has_state(sname, pname)) continue;
        std::string key = std::string(sname) + "/" + pname;
        Tensor t = zeros(p.sizes(), {.dtype = saved_dtype(idx, key)});
        fill_tensor(t, idx, key);
        sec.tensors.insert("state." + gi + "." + sname, t);
        any = true;
      }
      const Json* st = steps.find(pname);
      int64_t step = st ? st->as_int() : 0;
      if (any || step > 0) {
        Json sj = Json::object({{"step", step}});
        if (auto mp = saved_mu_product(pname)) sj.set("mu_product", *mp);
        state.set(gi, std::move(sj));
      }
    }
    meta.set("state", std::move(state));
    sec.meta = std::move(meta);
    opt.load_state_dict(sec);
  }
  const Json& c = m.at("counters");
  s.set_counters({c.at("steps_taken").as_int(), c.at("loss_scale").as_double(),
                  c.at("growth_tracker").as_int()});
  return m.at("extra");
}

// ---- consolidation and inspection ---------------------------------------------------------------

serialize::StateDict consolidate_sharded_checkpoint(const std::string& dir) {
  fs::path root = resolve_dir(dir);
  Json m = read_sharded_manifest(dir);
  SavedIndex idx = open_checkpoint(root, m);
  serialize::StateDict out;
  for (const Json& p : m.at("params").items()) {
    Shape shape;
    for (const Json& d : p.at("shape").items()) shape.push_back(d.as_int());
    Tensor t = zeros(shape, {.dtype = parse_dtype(p.at("dtype").as_string())});
    fill_tensor(t, idx, p.at("name").as_string());
    out.insert(p.at("name").as_string(), t);
  }
  for (const auto& e : idx.buffers->header().tensors) out.insert(e.name, idx.buffers->read(e.name));
  return out;
}

serialize::StateDict full_optimizer_state(Strategy& s) {
  NoGradGuard no_grad;
  std::map<std::string, Tensor> out;  // sorted keys: the same order in every mode
  Source src = source_of(s);
  const auto& named = s.named_params();
  if (!src.sharded) {
    for (size_t i = 0; i < named.size(); ++i) {
      auto [g, j] = src.opt_index[i];
      const optim::ParamState& ps = s.optimizer().state(g, j);
      for (size_t k = 0; k < std::size(kStateNames); ++k) {
        if (ps.tensor(k).defined())
          out[std::string(kStateNames[k]) + "/" + named[i].first] = ps.tensor(k).clone();
      }
      out["step/" + named[i].first] = scalar_tensor(ps.step, {.dtype = DType::i64});
      if (ps.mu_product) {
        out["mu_product/" + named[i].first] = scalar_tensor(*ps.mu_product, {.dtype = DType::f64});
      }
    }
    return sorted_state_dict(out);
  }
  ProcessGroup& pg = *s.group();
  const FlatLayout& L = *src.layout;
  const int n = pg.size();
  for (size_t k = 0; k < std::size(kStateNames); ++k) {
    for (size_t g = 0; g < L.groups().size(); ++g) {
      ShardState& ss = src.sharded->state()[g];
      if (!ss.tensor(k).defined()) continue;
      // offloaded state lives on the host; the group's collectives take tensors of its device
      Tensor shard = ss.tensor(k).device().kind == pg.device_kind()
                         ? ss.tensor(k)
                         : ops::to_device(ss.tensor(k), named[0].second.device());
      Tensor all = ops::empty({shard.numel() * n}, shard.dtype(), shard.device());
      pg.allgather(all, shard)->wait();
      for (int p : L.groups()[g].params) {
        if (!param_keeps(src, s.optimizer(), p, kStateNames[k])) continue;
        const Tensor& param = named[static_cast<size_t>(p)].second;
        Tensor full_t = zeros(param.sizes(), {.dtype = shard.dtype(), .device = shard.device()});
        Tensor flat = ops::view(full_t, {full_t.numel()});
        for (const Piece& pc : L.pieces_of_param(p)) {
          ops::copy_(ops::narrow(flat, 0, pc.param_begin, pc.numel()),
                     ops::narrow(all, 0, pc.rank * shard.numel() + pc.shard_offset, pc.numel()));
        }
        out[std::string(kStateNames[k]) + "/" + named[static_cast<size_t>(p)].first] = full_t;
      }
    }
  }
  for (size_t i = 0; i < named.size(); ++i) {
    out["step/" + named[i].first] =
        scalar_tensor(src.sharded->step_count(static_cast<int>(i)), {.dtype = DType::i64});
    if (src.sharded->rule() == UpdateRule::nadam &&
        src.sharded->step_count(static_cast<int>(i)) > 0) {
      out["mu_product/" + named[i].first] =
          scalar_tensor(src.sharded->mu_product(static_cast<int>(i)), {.dtype = DType::f64});
    }
  }
  return sorted_state_dict(out);
}

}  // namespace sl::dist

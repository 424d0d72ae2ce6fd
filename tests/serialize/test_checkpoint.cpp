// Atomic checkpoint directories: round trip, crash at every stage of a save, corrupted and
// hostile checkpoints, and a bit-exact resume of a small training run.
#include <unistd.h>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "support/testing.h"

using namespace sl;
using sl::testing::bits_equal;
using namespace sl::serialize;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() /
           ("sl_test_ckpt_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string sub(const std::string& n) const { return (path / n).string(); }
};

struct SimulatedCrash {};

/// A checkpoint whose every value depends on `v`.
Checkpoint make_checkpoint(float v) {
  Checkpoint c;
  Section& model = c.section(kModelSection);
  model.tensors.insert("encoder.layer.0.weight", full({3, 4}, v));
  model.tensors.insert("encoder.layer.0.bias", full({4}, v + 1, {.dtype = DType::f64}));
  model.tensors.insert("steps_seen", full({1}, static_cast<int64_t>(v), {.dtype = DType::i64}));
  c.section(kOptimizerSection).tensors.insert("state.0.exp_avg", full({3, 4}, v * 2));
  c.section(kOptimizerSection).meta = Json::object({{"optimizer", "AdamW"}, {"v", v}});
  c.section(kSchedulerSection).meta = Json::object({{"last_epoch", static_cast<int64_t>(v)}});
  c.set_step(static_cast<int64_t>(v) * 100);
  c.set_rng({static_cast<uint64_t>(v), 42});
  c.set_data_position(Json::object({{"epoch", 1}, {"index", static_cast<int64_t>(v)}}));
  return c;
}

/// Checks that `c` is exactly make_checkpoint(v).
void check_checkpoint(const Checkpoint& c, float v) {
  Checkpoint e = make_checkpoint(v);
  REQUIRE(c.names() == e.names());
  for (const auto& name : e.names()) {
    CAPTURE(name);
    const Section& a = c.at(name);
    const Section& b = e.at(name);
    CHECK(a.meta == b.meta);
    // files keep tensors in the safetensors writer's order (dtype, then name), not insertion order
    auto ka = a.tensors.keys(), kb = b.tensors.keys();
    std::sort(ka.begin(), ka.end());
    std::sort(kb.begin(), kb.end());
    REQUIRE(ka == kb);
    for (const auto& [k, t] : b.tensors) CHECK(bits_equal(a.tensors.at(k), t));
  }
  CHECK(c.step() == static_cast<int64_t>(v) * 100);
  CHECK(c.rng() == GeneratorState{static_cast<uint64_t>(v), 42});
}

std::vector<std::string> dir_entries(const fs::path& p) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(p)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

}  // namespace

TEST_CASE("checkpoint: save and load round trip every section") {
  TempDir tmp;
  std::string dir = tmp.sub("ckpt");
  save_checkpoint(dir, make_checkpoint(3));
  check_checkpoint(load_checkpoint(dir), 3);
  verify_checkpoint(dir);
  CHECK(dir_entries(dir) ==
        std::vector<std::string>{"manifest.json", "model.safetensors", "optimizer.safetensors",
                                 "scheduler.safetensors", "trainer.safetensors"});
  CHECK(dir_entries(tmp.path) == std::vector<std::string>{"ckpt"});  // no temporaries left
  // each section is a plain safetensors file, readable without the checkpoint code
  Metadata md;
  StateDict model = load_safetensors(dir + "/model.safetensors", &md);
  CHECK(model.size() == 3);
  REQUIRE(md.size() == 1);
  CHECK(md[0].first == "shardlight.meta");
  // overwrite in place, and with a trailing slash
  save_checkpoint(dir + "/", make_checkpoint(4));
  check_checkpoint(load_checkpoint(dir), 4);
  CHECK(dir_entries(tmp.path) == std::vector<std::string>{"ckpt"});
  Checkpoint onto1 = load_checkpoint(dir, Device(DeviceKind::cpu, 1));
  CHECK(onto1.at(kModelSection).tensors.at("encoder.layer.0.weight").device() ==
        Device(DeviceKind::cpu, 1));
}

TEST_CASE("checkpoint: a crash at any stage of a save leaves the previous checkpoint whole") {
  const SaveStage stages[] = {
      SaveStage::temp_dir_created, SaveStage::section_header,   SaveStage::section_written,
      SaveStage::section_synced,   SaveStage::manifest_written, SaveStage::temp_dir_synced,
      SaveStage::old_moved_aside,  SaveStage::swapped,          SaveStage::done};
  for (bool exchange : {true, false}) {
    for (SaveStage stage : stages) {
      // crash at the first and at the last section for the per-section stages
      bool per_section = stage == SaveStage::section_header ||
                         stage == SaveStage::section_written || stage == SaveStage::section_synced;
      for (int occurrence : {1, 4}) {
        if (occurrence > 1 && !per_section) continue;
        CAPTURE(exchange);
        std::string stage_name = save_stage_name(stage);
        CAPTURE(stage_name);
        CAPTURE(occurrence);
        TempDir tmp;
        std::string dir = tmp.sub("run");
        save_checkpoint(dir, make_checkpoint(1));
        int seen = 0;
        bool crashed = false;
        SaveOptions opts;
        opts.use_rename_exchange = exchange;
        opts.fault_hook = [&](SaveStage s, const std::string&) {
          if (s == stage && ++seen == occurrence) {
            crashed = true;
            throw SimulatedCrash{};
          }
        };
        try {
          save_checkpoint(dir, make_checkpoint(2), opts);
        } catch (const SimulatedCrash&) {
        }
        if (!crashed) continue;  // this stage does not occur that often on this path
        // the checkpoint loads whole: the old one before the swap, the new one after
        bool new_in_place = stage == SaveStage::swapped || stage == SaveStage::done;
        check_checkpoint(load_checkpoint(dir), new_in_place ? 2 : 1);
        // the next save cleans up and succeeds
        save_checkpoint(dir, make_checkpoint(3));
        check_checkpoint(load_checkpoint(dir), 3);
        CHECK(dir_entries(tmp.path) == std::vector<std::string>{"run"});
      }
    }
  }
}

TEST_CASE("checkpoint: an I/O error during a save removes the temporary directory") {
  TempDir tmp;
  std::string dir = tmp.sub("c");
  save_checkpoint(dir, make_checkpoint(1));
  SaveOptions opts;
  opts.fault_hook = [](SaveStage s, const std::string& d) {
    if (s == SaveStage::section_written) throw IOError(d + ": write failed: No space left");
  };
  SL_CHECK_THROWS(save_checkpoint(dir, make_checkpoint(2), opts), IOError, "No space left");
  CHECK(dir_entries(tmp.path) == std::vector<std::string>{"c"});
  check_checkpoint(load_checkpoint(dir), 1);
  // a directory that is not a checkpoint is never replaced
  fs::create_directories(tmp.path / "photos");
  write_text(tmp.path / "photos" / "cat.jpg", "meow");
  SL_CHECK_THROWS(save_checkpoint(tmp.sub("photos"), make_checkpoint(1)), IOError,
                  "exists and is not a Shardlight checkpoint");
  CHECK(fs::exists(tmp.path / "photos" / "cat.jpg"));
  SL_CHECK_THROWS(make_checkpoint(1).section("../evil"), ValueError, "invalid section name");
  SL_CHECK_THROWS(make_checkpoint(1).section(".hidden"), ValueError, "invalid section name");
  SL_CHECK_THROWS(make_checkpoint(1).at("nope"), ValueError, "checkpoint: no section 'nope'");
}

TEST_CASE("checkpoint: corrupted, truncated and hostile checkpoints are refused on load") {
  TempDir tmp;
  std::string dir = tmp.sub("c");
  auto fresh = [&] {
    fs::remove_all(dir);
    save_checkpoint(dir, make_checkpoint(5));
  };
  auto manifest = [&] {
    std::ifstream in(dir + "/manifest.json");
    return std::string(std::istreambuf_iterator<char>(in), {});
  };

  SL_CHECK_THROWS(load_checkpoint(tmp.sub("missing")), IOError, "no checkpoint found");

  fresh();  // one flipped bit in the data
  {
    std::fstream f(dir + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  SL_CHECK_THROWS(load_checkpoint(dir), IOError, "model.safetensors: CRC-32");
  SL_CHECK_THROWS(verify_checkpoint(dir), IOError, "(corrupted file)");

  fresh();  // truncated file
  fs::resize_file(dir + "/optimizer.safetensors", 40);
  SL_CHECK_THROWS(load_checkpoint(dir), IOError, "optimizer.safetensors: size 40 differs");

  fresh();  // missing file
  fs::remove(dir + "/trainer.safetensors");
  SL_CHECK_THROWS(load_checkpoint(dir), IOError, "trainer.safetensors: open failed");

  fresh();  // a section file that is a symlink to a file outside the checkpoint
  write_text(tmp.path / "outside.safetensors", "x");
  fs::remove(dir + "/model.safetensors");
  fs::create_symlink(tmp.path / "outside.safetensors", dir + "/model.safetensors");
  SL_CHECK_THROWS(load_checkpoint(dir), IOError, "is a symbolic link");

  const std::pair<std::string, std::string> bad_manifests[] = {
      {"not json", "manifest.json: invalid JSON"},
      {R"({"format":"other","version":1,"sections":[]})", "not a Shardlight checkpoint manifest"},
      {R"({"format":"shardlight.checkpoint","version":2,"sections":[]})", "unsupported version 2"},
      {R"({"format":"shardlight.checkpoint","version":1,"sections":{}})",
       "'sections' must be an array"},
      {R"({"format":"shardlight.checkpoint","version":1,"sections":[{"name":"model",)"
       R"("file":"../outside.safetensors","size":1,"crc32":0}]})",
       "paths outside the checkpoint are refused"},
      {R"({"format":"shardlight.checkpoint","version":1,"sections":[{"name":"../x",)"
       R"("file":"../x.safetensors","size":1,"crc32":0}]})",
       "invalid section name '../x'"},
      {R"({"format":"shardlight.checkpoint","version":1,"sections":[{"name":"/etc/passwd",)"
       R"("file":"/etc/passwd.safetensors","size":1,"crc32":0}]})",
       "invalid section name '/etc/passwd'"},
      {R"({"format":"shardlight.checkpoint","version":1,"sections":[{"name":"model",)"
       R"("file":"model.safetensors","size":-1,"crc32":0}]})",
       "invalid size or crc32"},
      {R"({"format":"shardlight.checkpoint","version":1,"sections":[{"name":"model"}]})",
       "malformed section entry: json: missing key 'file'"},
  };
  for (const auto& [text, msg] : bad_manifests) {
    CAPTURE(text);
    fresh();
    write_text(fs::path(dir) / "manifest.json", text);
    SL_CHECK_THROWS(load_checkpoint(dir), IOError, msg.c_str());
  }
  fresh();
  std::string m = manifest();
  CHECK(m.find("\"crc32\"") != std::string::npos);
  fs::remove(dir + "/manifest.json");
  SL_CHECK_THROWS(load_checkpoint(dir), IOError, "manifest.json: open failed");
}

TEST_CASE("checkpoint: resuming gives the uninterrupted run's continuation, bit for bit") {
  // y = x w + noise, fitted with AdamW (decay on w, none on b), clipping and a cosine schedule;
  // batches are drawn from a seeded generator whose state is saved with the rest.
  auto make = [](TensorList& params) {
    Generator init(1);
    params = {randn({4, 1}, {}, &init).requires_grad_(true), zeros({1}).requires_grad_(true)};
  };
  auto train = [](TensorList& params, optim::AdamW& opt, optim::LRScheduler& sched, Generator& data,
                  int steps) {
    for (int s = 0; s < steps; ++s) {
      Tensor x = randn({8, 4}, {}, &data);
      Tensor y = x.sum({1}, true).mul(0.5).add(randn({8, 1}, {}, &data).mul(0.1));
      Tensor loss = matmul(x, params[0]).add(params[1]).sub(y).square().mean();
      opt.zero_grad();
      loss.backward();
      optim::clip_grad_norm_(params, 1.0);
      opt.step();
      sched.step();
    }
  };
  auto build = [](TensorList& params) {
    return std::make_unique<optim::AdamW>(std::vector<optim::ParamGroup<optim::AdamWOptions>>{
        {{params[0]}, {.lr = 0.05, .weight_decay = 0.1}},
        {{params[1]}, {.lr = 0.05, .weight_decay = 0.0}}});
  };

  TensorList ref;
  make(ref);
  auto ref_opt = build(ref);
  optim::CosineAnnealingLR ref_sched(*ref_opt, 10, 0.001);
  Generator ref_data(77);
  train(ref, *ref_opt, ref_sched, ref_data, 10);

  TempDir tmp;
  {
    TensorList p;
    make(p);
    auto opt = build(p);
    optim::CosineAnnealingLR sched(*opt, 10, 0.001);
    Generator data(77);
    train(p, *opt, sched, data, 4);
    Checkpoint c;
    c.section(kModelSection).tensors = StateDict{{"w", p[0]}, {"b", p[1]}};
    c.set(kOptimizerSection, opt->state_dict());
    c.set(kSchedulerSection, sched.state_dict());
    c.set_rng(data.state());
    c.set_step(4);
    save_checkpoint(tmp.sub("ckpt"), c);
  }
  TensorList p;
  make(p);  // fresh objects, as a new process would build them
  auto opt = build(p);
  optim::CosineAnnealingLR sched(*opt, 10, 0.001);
  Checkpoint c = load_checkpoint(tmp.sub("ckpt"));
  load_into({{"w", p[0]}, {"b", p[1]}}, c.at(kModelSection).tensors);
  opt->load_state_dict(c.at(kOptimizerSection));
  sched.load_state_dict(c.at(kSchedulerSection));
  Generator data;
  data.set_state(c.rng());
  CHECK(c.step() == 4);
  train(p, *opt, sched, data, 6);
  CHECK(bits_equal(p[0].detach(), ref[0].detach()));
  CHECK(bits_equal(p[1].detach(), ref[1].detach()));
  CHECK(opt->lr(0) == ref_opt->lr(0));
  CHECK(bits_equal(opt->state(0, 0).exp_avg_sq, ref_opt->state(0, 0).exp_avg_sq));
}

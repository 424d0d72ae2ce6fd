// Sharded checkpoints in one process (a one-rank group): every mode saves and every mode loads,
// the optimizer state comes back bit for bit and training continues exactly; consolidation;
// corrupt and mismatched checkpoints are clear errors. The N -> M resharding runs under mpirun
// (tests/dist/ranks/test_checkpoint_ranks.cpp, launched from test_dist_launch.cpp).
#include <filesystem>
#include <fstream>

#include "../support/testing.h"
#include "dist/checkpoint.h"
#include "dist/flat_strategy.h"
#include "optim/adam.h"
#include "support/tiny_training.h"

using namespace sl;
using namespace sl::dist;
using sl::testing::OptKind;
using sl::testing::TinyTrainer;
using sl::testing::TrainConfig;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/sl_ckpt_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void check_state_dicts_equal(const serialize::StateDict& a, const serialize::StateDict& b) {
  CHECK(a.keys() == b.keys());
  for (const auto& [k, t] : a) {
    CAPTURE(k);
    const Tensor* u = b.find(k);
    REQUIRE(u);
    CHECK(u->dtype() == t.dtype());
    SL_CHECK_CLOSE(*u, t, 0, 0);  // bit for bit (NaN-free values)
  }
}

}  // namespace

TEST_CASE("checkpoint: every mode saves, every mode loads, bit for bit on one rank") {
  auto pg = make_single_group();
  for (OptKind ok : {OptKind::sgd, OptKind::adamw, OptKind::rmsprop, OptKind::adagrad,
                     OptKind::adamax, OptKind::nadam, OptKind::radam}) {
    // RMSprop without clipping: with it, single's continuation differs from the flat modes' in
    // the last bit of the float64 `scale` (the clip factor's norm summed in another order, it
    // seems), which RMSprop's update carries through where SGD's and AdamW's happen not to
    TrainConfig c{.opt = ok, .clip = ok == OptKind::rmsprop ? 0.0 : 0.5};
    for (const char* save_mode : {"single", "ddp", "zero2"}) {
      TempDir dir;
      TinyTrainer a(save_mode, c, pg);
      a.run(0, 4);
      save_sharded_checkpoint((dir.path / "ck").string(), *a.strategy, a.extra());
      serialize::StateDict state = full_optimizer_state(*a.strategy);
      std::vector<double> want = a.run(4, 7);
      std::vector<Tensor> want_params = a.params();
      for (const char* load_mode : {"single", "ddp", "zero1", "zero2"}) {
        std::string what = std::string(opt_name(ok)) + " " + save_mode + " -> " + load_mode;
        CAPTURE(what);
        TinyTrainer b(load_mode, c, pg);
        b.restore(load_sharded_checkpoint((dir.path / "ck").string(), *b.strategy));
        CHECK(b.strategy->steps_taken() == 4);
        check_state_dicts_equal(full_optimizer_state(*b.strategy), state);
        std::vector<double> got = b.run(4, 7);
        // The same element-wise kernels run in every mode on one rank: exact continuation.
        CHECK(got == want);
        std::vector<Tensor> got_params = b.params();
        for (size_t i = 0; i < got_params.size(); ++i)
          SL_CHECK_CLOSE(got_params[i], want_params[i], 0, 0);
      }
    }
  }
}

TEST_CASE("checkpoint: a parameter has its own group's optimizer state in every mode") {
  // zero keeps one buffer per dtype group for every state tensor any optimizer group keeps; the
  // state it reports and saves must still be each parameter's own, as single mode's and
  // PyTorch's (no momentum_buffer where a group has no momentum), so that modes compare equal
  // (and a step count of its own: fc2, used on every other step, has fewer steps and no
  // state before its first, Note [Unused parameters])
  auto pg = make_single_group();
  const TrainConfig configs[] = {{.opt = OptKind::sgd_mixed},
                                 {.opt = OptKind::adam_mixed},
                                 {.opt = OptKind::rmsprop_mixed},
                                 {.opt = OptKind::adamw, .fc2_every = 2},
                                 {.opt = OptKind::adagrad, .fc2_every = 2},
                                 {.opt = OptKind::adagrad, .fc2_from = 100},
                                 {.opt = OptKind::sgd_dampened, .fc2_from = 2},
                                 {.opt = OptKind::adamax, .fc2_every = 2},
                                 {.opt = OptKind::nadam, .fc2_every = 2},
                                 {.opt = OptKind::radam, .fc2_from = 1}};
  for (const TrainConfig& c : configs) {
    CAPTURE(c.str());
    TinyTrainer single("single", c, pg);
    single.run(0, 3);
    serialize::StateDict want = full_optimizer_state(*single.strategy);
    // the expected keys from the optimizer's own groups, independently of any strategy: a step
    // count for every parameter, its group's state tensors for each that has taken a step
    const optim::Optimizer& opt = *single.opt;
    const bool fc2_stepped = c.uses_fc2(0, 0) || c.uses_fc2(1, 0) || c.uses_fc2(2, 0);
    size_t own_keys = 0;
    for (size_t g = 0; g < opt.num_param_groups(); ++g) {
      for (const Tensor& p : opt.params(g)) {
        const bool fc2 = p.is_same(single.net->fc2->weight) || p.is_same(single.net->fc2->bias);
        // NAdam: and its scalar mu_product once stepped
        const size_t stepped_keys =
            static_cast<size_t>(opt.state_tensors(g)) + (c.opt == OptKind::nadam ? 1 : 0);
        own_keys += 1 + (fc2 && !fc2_stepped ? 0 : stepped_keys);
      }
    }
    CHECK(want.keys().size() == own_keys);
    {  // and single's checkpoint gives zero each parameter's own state and step back
      TempDir dir;
      save_sharded_checkpoint((dir.path / "ck").string(), *single.strategy, single.extra());
      TinyTrainer z("zero2", c, pg);
      z.restore(load_sharded_checkpoint((dir.path / "ck").string(), *z.strategy));
      check_state_dicts_equal(full_optimizer_state(*z.strategy), want);
    }
    for (const char* mode : {"ddp", "zero1", "zero2"}) {
      CAPTURE(mode);
      TinyTrainer t(mode, c, pg);
      t.run(0, 3);
      check_state_dicts_equal(full_optimizer_state(*t.strategy), want);
      TempDir dir;
      save_sharded_checkpoint((dir.path / "ck").string(), *t.strategy, t.extra());
      TinyTrainer back("single", c, pg);
      back.restore(load_sharded_checkpoint((dir.path / "ck").string(), *back.strategy));
      check_state_dicts_equal(full_optimizer_state(*back.strategy), want);
      // and training goes on as the uninterrupted zero run (the same kernels on one rank)
      std::vector<double> cont = back.run(3, 5);
      CHECK(cont == t.run(3, 5));
    }
  }
}

TEST_CASE("checkpoint: zero refreshes the masters a single-mode checkpoint did not hold") {
  // bf16 parameters whose weight group keeps fp32 masters and whose bias group does not: single
  // saves masters for the weights only, while zero keeps one master for the whole bf16 group,
  // so on loading, the biases' masters must come from the loaded biases.
  auto make = [] {
    auto net = sl::testing::make_tiny_net();
    net->fc1->to(DType::bf16);
    net->fc2->to(DType::bf16);
    auto [decay, no_decay] = optim::split_no_decay(net->named_parameters(), {"bias", "scale"});
    auto opt = std::make_unique<optim::AdamW>(std::vector<optim::ParamGroup<optim::AdamWOptions>>{
        {decay, {.lr = 0.05, .master_weights = true}},
        {no_decay, {.lr = 0.05, .master_weights = false}}});
    return std::pair{net, std::move(opt)};
  };
  auto pg = make_single_group();
  TempDir dir;
  auto [net_a, opt_a] = make();
  auto a = make_strategy("single", net_a, *opt_a, {.group = pg});
  for (int step = 0; step < 3; ++step) {
    auto [x, y] = sl::testing::global_batch(step, 12);
    a->zero_grad();
    a->backward((a->forward(x.to(DType::bf16)) - y).to(DType::f32).square().mean());
    REQUIRE(a->step().taken);
  }
  save_sharded_checkpoint((dir.path / "ck").string(), *a, serialize::Json::object());
  for (const char* kind : {"zero1", "zero2"}) {
    CAPTURE(kind);
    auto [net_b, opt_b] = make();  // the initial values, which the loaded ones replace
    auto b = make_strategy(kind, net_b, *opt_b, {.group = pg});
    load_sharded_checkpoint((dir.path / "ck").string(), *b);
    auto& fs = dynamic_cast<FlatStrategy&>(*b);
    const FlatLayout& L = fs.flat().layout();
    const auto named = b->module().named_parameters();
    int biases = 0, weights = 0;
    for (size_t i = 0; i < L.params().size(); ++i) {
      const ParamSlot& slot = L.slots()[i];
      const Tensor& master =
          fs.sharded_optimizer()->state()[static_cast<size_t>(slot.group)].master;
      if (!master.defined()) continue;  // the float64 scale
      CAPTURE(named[i].first);
      // one rank: the shard is the whole group buffer, the piece at the parameter's offset
      const Tensor m = master.narrow(0, slot.offset, slot.numel);
      const Tensor p = named[i].second.reshape({slot.numel});
      if (named[i].first.find("bias") != std::string::npos) {
        SL_CHECK_CLOSE(m, p.to(DType::f32), 0, 0);  // no master saved: the loaded parameter
        ++biases;
      } else {
        SL_CHECK_CLOSE(m.to(DType::bf16), p, 0, 0);  // the saved master, which p rounds
        ++weights;
      }
    }
    CHECK(biases == 2);
    CHECK(weights == 2);
  }
}

TEST_CASE("checkpoint: consolidation gives the full parameters under PyTorch names") {
  auto pg = make_single_group();
  TempDir dir;
  TinyTrainer a("zero2", {.opt = OptKind::adam}, pg);
  a.run(0, 2);
  save_sharded_checkpoint((dir.path / "ck").string(), *a.strategy);
  serialize::StateDict sd = consolidate_sharded_checkpoint((dir.path / "ck").string());
  auto named = a.net->named_parameters();
  REQUIRE(sd.size() == named.size());
  for (const auto& [name, p] : named) {
    CAPTURE(name);
    SL_CHECK_CLOSE(sd.at(name), p, 0, 0);
  }
  serialize::Json m = read_sharded_manifest((dir.path / "ck").string());
  CHECK(m.at("world_size").as_int() == 1);
  CHECK(m.at("strategy").as_string() == "zero2");
}

TEST_CASE("checkpoint: saving again replaces the old one; stale temporaries are ignored") {
  auto pg = make_single_group();
  TempDir dir;
  std::string ck = (dir.path / "ck").string();
  TinyTrainer a("ddp", {.opt = OptKind::sgd}, pg);
  a.run(0, 1);
  save_sharded_checkpoint(ck, *a.strategy);
  a.run(1, 3);
  save_sharded_checkpoint(ck, *a.strategy);
  fs::create_directory(dir.path / ".ck.tmp-123");  // as a crash mid-save would leave it
  TinyTrainer b("ddp", {.opt = OptKind::sgd}, pg);
  load_sharded_checkpoint(ck, *b.strategy);
  CHECK(b.strategy->steps_taken() == 3);
  // only ck, the stale temporary, nothing else
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++entries;
  CHECK(entries == 2);
}

TEST_CASE("checkpoint: a save never replaces what is not a checkpoint; it tidies crashed saves") {
  auto pg = make_single_group();
  TempDir dir;
  TinyTrainer a("zero2", {.opt = OptKind::adamw}, pg);
  a.run(0, 1);
  // A user's folder and a plain file named by mistake stay as they are (a save replaces the whole
  // directory), with an error naming the path.
  fs::create_directories(dir.path / "notes" / "sub");
  { std::ofstream(dir.path / "notes" / "todo.txt") << "keep me"; }
  { std::ofstream(dir.path / "file") << "keep me too"; }
  for (const char* name : {"notes", "file"}) {
    CAPTURE(name);
    std::string target = (dir.path / name).string();
    const std::string want = target + ": exists and is not a Shardlight checkpoint";
    SL_CHECK_THROWS(save_sharded_checkpoint(target, *a.strategy), IOError, want.c_str());
  }
  CHECK(fs::exists(dir.path / "notes" / "todo.txt"));
  CHECK(fs::is_directory(dir.path / "notes" / "sub"));
  CHECK(fs::is_regular_file(dir.path / "file"));
  // An empty directory is fine (made ahead for the run), and so is a trailing '/'.
  fs::create_directory(dir.path / "empty");
  save_sharded_checkpoint((dir.path / "empty").string() + "/", *a.strategy);
  CHECK(fs::exists(dir.path / "empty" / "manifest.json"));
  // What a killed save leaves beside the target (its temporary directory holding a whole
  // checkpoint's files) is removed by the next save, and only what belongs to this target.
  fs::create_directories(dir.path / ".empty.tmp-123" / "rank-00000");
  fs::create_directories(dir.path / ".other.tmp-123");
  a.run(1, 2);
  save_sharded_checkpoint((dir.path / "empty").string(), *a.strategy);
  CHECK_FALSE(fs::exists(dir.path / ".empty.tmp-123"));
  CHECK(fs::exists(dir.path / ".other.tmp-123"));
  int tmp_left = 0;
  for (const auto& e : fs::directory_iterator(dir.path))
    tmp_left += e.path().filename().string().rfind(".empty.", 0) == 0;
  CHECK(tmp_left == 0);
  TinyTrainer b("single", {.opt = OptKind::adamw}, pg);
  load_sharded_checkpoint((dir.path / "empty").string(), *b.strategy);
  CHECK(b.strategy->steps_taken() == 2);
}

TEST_CASE("checkpoint: corrupt, missing and mismatched checkpoints are clear errors") {
  auto pg = make_single_group();
  TempDir dir;
  std::string ck = (dir.path / "ck").string();
  TinyTrainer a("zero1", {.opt = OptKind::adam}, pg);
  a.run(0, 1);
  SL_CHECK_THROWS(load_sharded_checkpoint(ck, *a.strategy), IOError, "no sharded checkpoint here");
  save_sharded_checkpoint(ck, *a.strategy);

  // a model with another shape
  struct Other : nn::Module {
    Other() : Module("Other") {
      w = register_parameter("scale", zeros({2}, {.dtype = DType::f64}));
    }
    Tensor w;
  };
  auto other = std::make_shared<Other>();
  optim::Adam oopt(other->parameters());
  auto os = make_strategy("ddp", other, oopt, {.group = pg});
  SL_CHECK_THROWS(load_sharded_checkpoint(ck, *os), ValueError,
                  "load_sharded_checkpoint: parameter 'scale' is [1] float64 in the checkpoint but "
                  "[2] float64 in the model");

  // an optimizer of another type
  auto net = sl::testing::make_tiny_net();
  auto sgd = sl::testing::make_optimizer(OptKind::sgd, *net);
  auto ss = make_strategy("zero2", net, *sgd, {.group = pg});
  SL_CHECK_THROWS(load_sharded_checkpoint(ck, *ss), ValueError, "saved state is for Adam, not SGD");

  // one flipped byte in a rank's file
  fs::path f = dir.path / "ck" / "rank-00000" / "optimizer.safetensors";
  {
    std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(-3, std::ios::end);
    char ch = 0;
    io.get(ch);
    io.seekp(-3, std::ios::end);
    io.put(static_cast<char>(ch ^ 0x5a));
  }
  SL_CHECK_THROWS(load_sharded_checkpoint(ck, *a.strategy), IOError, "optimizer.safetensors");
}

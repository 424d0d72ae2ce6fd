// What a resumed run may change (tools/train/resume_check.h, Note [Resume configuration]), on
// the tiny cnn job: every flag that changes the optimization trajectory is refused with its name,
// the checkpoint's value and the run's (the optimizer's hyperparameters too, which loading would
// otherwise restore over the flags); the flags that may change say so in the run's log, --epochs
// under a schedule that ignores the run's length continues bit-identical to the longer run, and
// a checkpoint of an older trainer (without max_grad_norm and run_settings) still resumes.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dist/checkpoint.h"
#include "job_testing.h"
#include "support/testing.h"

using sl::testing::JobResult;
using sl::testing::plus;
using sl::testing::run_job;
using sl::testing::state_digest_of;

namespace fs = std::filesystem;

namespace {

struct Env {
  std::string root, data;
  Env() {
    root = (fs::temp_directory_path() / ("sl_test_resume_check_" + std::to_string(::getpid())))
               .string();
    fs::remove_all(root);
    data = root + "/data";
    fs::create_directories(data);
    sl::testing::write_fashion_split(data, "train", 96, 1);
    sl::testing::write_fashion_split(data, "t10k", 40, 2);
  }
  ~Env() { fs::remove_all(root); }
  /// The tiny cnn job (3 epochs of 3 steps, --lr 0.01) checkpointing into root/ckpt.
  std::vector<std::string> args(const std::string& ckpt) const {
    return plus(plus({"--model", "cnn", "--data-dir", data}, sl::testing::tiny_cnn_flags()),
                {"--checkpoint-dir", root + "/" + ckpt, "--log-every", "0"});
  }
  /// A copy of checkpoint `from` as `to` (a resume overwrites the checkpoint it continues).
  void copy(const std::string& from, const std::string& to) const {
    fs::remove_all(root + "/" + to);
    fs::copy(root + "/" + from, root + "/" + to, fs::copy_options::recursive);
  }
};

}  // namespace

TEST_CASE("resume: a changed flag of the run's trajectory is refused, naming both values") {
  Env env;
  REQUIRE(run_job(plus(env.args("c"), {"--stop-after-epochs", "1"})).code == 0);
  const std::string head =
      "cnn: the checkpoint at '" + env.root + "/c' was written with another configuration: ";
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      // restored from the optimizer's param groups, so once silently the checkpoint's
      {{"--lr", "0.05"}, "--lr 0.01 there, 0.05 in this run"},
      {{"--weight-decay", "0.5"}, "--weight-decay 0.01 there, 0.5 in this run"},
      // once silently applied
      {{"--max-grad-norm", "1"}, "--max-grad-norm 0 there, 1 in this run"},
      {{"--warmup-steps", "2"}, "--warmup-steps 0 there, 2 in this run"},
      {{"--lr-schedule", "constant"}, "--lr-schedule auto there, constant in this run"},
      {{"--epochs", "4"},
       "--epochs 3 there, 4 in this run (the lr schedule spans the run's steps; --epochs may "
       "change on resume under --lr-schedule constant, exp or step:... only)"},
      {{"--seed", "3"}, "--seed 0 there, 3 in this run"},
      {{"--batch-size", "16"}, "--batch-size 32 there, 16 in this run"},
      {{"--optimizer", "lamb"}, "--optimizer AdamW there, Lamb in this run"},
      {{"--precision", "bf16-true"}, "--precision's parameter dtype float32"},
      {{"--hidden", "9"}, "--hidden 8 there, 9 in this run"},
      // every difference at once
      {{"--seed", "3", "--hidden", "9"},
       "--hidden 8 there, 9 in this run; --seed 0 there, 3 in this run"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    JobResult r = run_job(plus(plus(env.args("c"), {"--resume", "1"}), c.flags));
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.out.find(head) != std::string::npos, r.out);
    CHECK_MESSAGE(r.out.find(c.message) != std::string::npos, r.out);
    CHECK(r.out.find("state digest") == std::string::npos);
  }
  // The refusals left the checkpoint as it was: it still resumes, without a change to announce.
  JobResult r = run_job(plus(env.args("c"), {"--resume", "1"}));
  CHECK_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find("resume: ") == std::string::npos, r.out);
}

TEST_CASE("resume: the flags that may change continue the run and say so") {
  Env env;
  JobResult full = run_job(env.args("full"));
  REQUIRE_MESSAGE(full.code == 0, full.out);
  REQUIRE(run_job(plus(env.args("c"), {"--stop-after-epochs", "1"})).code == 0);
  struct Case {
    std::vector<std::string> flags;
    std::string line;
    bool same_state;  // whether the run ends in the uninterrupted run's exact state
  };
  const std::vector<Case> cases = {
      {{"--log-every", "1"}, "--log-every 0 -> 1", true},
      {{"--checkpoint-every", "1"}, "--checkpoint-every 0 -> 1", true},
      {{"--strategy", "dp"}, "--strategy single on 1 rank(s) -> dp on 1 rank(s)", false},
      {{"--accumulate", "2"}, "--accumulate 1 -> 2", false},
      {{"--precision", "bf16-mixed"}, "--precision 32 -> bf16-mixed", false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.line);
    env.copy("c", "moved");
    JobResult r = run_job(plus(plus(env.args("moved"), {"--resume", "1"}), c.flags));
    REQUIRE_MESSAGE(r.code == 0, r.out);
    CHECK_MESSAGE(
        r.out.find("resume: changed since the checkpoint: " + c.line + "\n") != std::string::npos,
        r.out);
    CHECK(r.out.find("epoch 3/3") != std::string::npos);
    if (c.same_state) CHECK(state_digest_of(r.out) == state_digest_of(full.out));
  }
}

TEST_CASE("resume: --epochs under a step schedule trains longer, as the longer run") {
  Env env;
  const std::vector<std::string> step = {"--lr-schedule", "step:1", "--lr-gamma", "0.5"};
  JobResult longer = run_job(plus(plus(env.args("long"), step), {"--epochs", "4"}));
  REQUIRE_MESSAGE(longer.code == 0, longer.out);
  REQUIRE(run_job(plus(env.args("c"), step)).code == 0);  // 3 epochs, then one more
  JobResult r = run_job(plus(plus(env.args("c"), step), {"--epochs", "4", "--resume", "1"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find("resume: changed since the checkpoint: --epochs 3 -> 4 (the lr schedule "
                           "does not depend on it)") != std::string::npos,
                r.out);
  CHECK(r.out.find("epoch 4/4") != std::string::npos);
  CHECK_MESSAGE(state_digest_of(r.out) == state_digest_of(longer.out), longer.out, "\n---\n",
                r.out);
}

TEST_CASE("resume: an older trainer's checkpoint still resumes, bit-identical") {
  Env env;
  JobResult full = run_job(env.args("full"));
  REQUIRE_MESSAGE(full.code == 0, full.out);
  REQUIRE(run_job(plus(env.args("c"), {"--stop-after-epochs", "1"})).code == 0);
  // What the trainer wrote before it recorded max_grad_norm and the run's settings.
  const std::string path = env.root + "/c/manifest.json";
  sl::serialize::Json m = sl::dist::read_sharded_manifest(env.root + "/c");
  auto member = [](sl::serialize::Json& j, const std::string& key) -> sl::serialize::Json& {
    for (auto& [k, v] : j.members()) {
      if (k == key) return v;
    }
    FAIL("no member " << key);
    return j;
  };
  sl::serialize::Json& extra = member(m, "extra");
  std::erase_if(extra.members(), [](const auto& kv) { return kv.first == "run_settings"; });
  std::erase_if(member(extra, "config").members(),
                [](const auto& kv) { return kv.first == "max_grad_norm"; });
  std::ofstream(path) << m.dump();
  env.copy("c", "old");
  JobResult r = run_job(plus(env.args("c"), {"--resume", "1"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find("resume: --max-grad-norm 0 is not checked: the checkpoint (an older "
                           "trainer's) does not record it") != std::string::npos,
                r.out);
  CHECK(state_digest_of(r.out) == state_digest_of(full.out));
  // Its optimizer's param groups still hold its lr, so a changed --lr is refused all the same.
  r = run_job(plus(env.args("old"), {"--resume", "1", "--lr", "0.02"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("--lr 0.01 there, 0.02 in this run") != std::string::npos, r.out);
}

TEST_CASE("resume: a changed --lr or --weight-decay is refused before any tensor is read") {
  // Before: the optimizer's param groups were compared after the whole checkpoint was loaded (a
  // long load on a large model before the error).
  Env env;
  REQUIRE(run_job(plus(env.args("c"), {"--stop-after-epochs", "1"})).code == 0);
  // The last byte of each rank's parameter file is tensor data: a load that reads the tensors
  // fails on its CRC, one that reads the headers only does not see it.
  int damaged = 0;
  for (const auto& e : fs::recursive_directory_iterator(env.root + "/c")) {
    if (e.path().filename() != "params.safetensors") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    const char c = static_cast<char>(f.get());
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
    ++damaged;
  }
  REQUIRE(damaged == 1);
  JobResult r = run_job(plus(env.args("c"), {"--resume", "1"}));  // the damage is real
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("params.safetensors: CRC-32 ") != std::string::npos, r.out);
  const std::string head =
      "cnn: the checkpoint at '" + env.root + "/c' was written with another configuration: ";
  for (const auto& [flag, message] :
       {std::pair<std::string, std::string>{"--lr", "--lr 0.01 there, 0.05 in this run"},
        {"--weight-decay", "--weight-decay 0.01 there, 0.05 in this run"}}) {
    CAPTURE(flag);
    r = run_job(plus(env.args("c"), {"--resume", "1", flag, "0.05"}));
    CHECK(r.code == 1);
    CHECK_MESSAGE(r.out.find(head + message) != std::string::npos, r.out);
  }
}

TEST_CASE("resume: at the run's end there is nothing to do; past it is refused") {
  Env env;
  JobResult full = run_job(env.args("c"));
  REQUIRE_MESSAGE(full.code == 0, full.out);
  const std::string manifest = env.root + "/c/manifest.json";
  auto text = [](const std::string& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string before = text(manifest);
  // Before: the same command with --resume 1 printed the banner and a digest, and trained
  // nothing, without a word.
  JobResult r = run_job(plus(env.args("c"), {"--resume", "1"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK_MESSAGE(r.out.find("resume: nothing to do: all --epochs 3 are done in the checkpoint at '" +
                           env.root + "/c' (left as it is)\n") != std::string::npos,
                r.out);
  CHECK(r.out.find("epoch 3/3") == std::string::npos);  // no epoch trained
  CHECK(state_digest_of(r.out) == state_digest_of(full.out));
  // the last epoch's accuracy, from the checkpoint, as the full run printed it
  auto final_line = [](const std::string& out) {
    const size_t at = out.find("final test accuracy");
    return at == std::string::npos ? std::string() : out.substr(at, out.find(',', at) - at);
  };
  CHECK(!final_line(full.out).empty());
  CHECK_MESSAGE(final_line(r.out) == final_line(full.out), full.out, "\n---\n", r.out);
  CHECK(text(manifest) == before);  // not rewritten
  // Under a schedule that lets --epochs change, a smaller one than the checkpoint has done would
  // end at once too: refused, naming both.
  const std::vector<std::string> step = {"--lr-schedule", "step:1", "--lr-gamma", "0.5"};
  REQUIRE(run_job(plus(env.args("s"), step)).code == 0);
  r = run_job(plus(plus(env.args("s"), step), {"--resume", "1", "--epochs", "2"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("cnn: --epochs 2 but the checkpoint at '" + env.root +
                           "/s' has 3 epoch(s) done already (a resumed run cannot take steps "
                           "back: resume with --epochs 3 or more, or start a new run in another "
                           "--checkpoint-dir)") != std::string::npos,
                r.out);
  // inside an epoch: 1 epoch and 1 step of the second done, so --epochs 1 is past it
  REQUIRE(run_job(plus(plus(env.args("m"), step),
                       {"--checkpoint-every", "1", "--stop-after-steps", "4"}))
              .code == 0);
  r = run_job(plus(plus(env.args("m"), step),
                   {"--checkpoint-every", "1", "--resume", "1", "--epochs", "1"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(
      r.out.find("cnn: --epochs 1 but the checkpoint at '" + env.root +
                 "/m' has 1 epoch(s) and 1 step(s) of the next done already (a resumed "
                 "run cannot take steps back: resume with --epochs 2 or more") != std::string::npos,
      r.out);
  // and --epochs 2 continues it
  r = run_job(plus(plus(env.args("m"), step),
                   {"--checkpoint-every", "1", "--resume", "1", "--epochs", "2"}));
  CHECK_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("epoch 2/2") != std::string::npos);
}

TEST_CASE("resume: with nothing to do no tensor is read; the digest comes from the manifest") {
  // Before: the whole checkpoint (parameters and optimizer state) was loaded to print the state
  // digest of a run that trains nothing.
  Env env;
  JobResult full = run_job(env.args("c"));
  REQUIRE_MESSAGE(full.code == 0, full.out);
  // the saved digest is the one the run printed at its end, from its model
  const std::string manifest = env.root + "/c/manifest.json";
  sl::serialize::Json m = sl::dist::read_sharded_manifest(env.root + "/c");
  CHECK(m.at("extra").at("state_digest").as_string() == state_digest_of(full.out));
  // inside an epoch too: the run stopped after step 4 printed the state it saved at step 4
  JobResult part =
      run_job(plus(env.args("m"), {"--checkpoint-every", "1", "--stop-after-steps", "4"}));
  REQUIRE_MESSAGE(part.code == 0, part.out);
  CHECK(
      sl::dist::read_sharded_manifest(env.root + "/m").at("extra").at("state_digest").as_string() ==
      state_digest_of(part.out));
  // The last byte of the parameter file is tensor data (see the --lr case above): damaged, a
  // load fails on its CRC.
  auto flip_last_byte = [&] {
    std::fstream f(env.root + "/c/rank-00000/params.safetensors",
                   std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f.good());
    f.seekg(-1, std::ios::end);
    const char c = static_cast<char>(f.get());
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  };
  flip_last_byte();
  JobResult r = run_job(plus(env.args("c"), {"--resume", "1"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("resume: nothing to do: all --epochs 3 are done") != std::string::npos);
  CHECK(state_digest_of(r.out) == state_digest_of(full.out));
  CHECK_MESSAGE(r.out.find("resumed from " + env.root +
                           "/c: 3 epoch(s) and 0 step(s) of the next done, 9 steps taken") !=
                    std::string::npos,
                r.out);
  // An older trainer's checkpoint has no digest: it is loaded (and the damage is seen), and,
  // undamaged, gives the same digest.
  for (auto& [k, v] : m.members()) {
    if (k != "extra") continue;
    auto& members = v.members();
    std::erase_if(members, [](const auto& kv) { return kv.first == "state_digest"; });
  }
  std::ofstream(manifest) << m.dump();
  r = run_job(plus(env.args("c"), {"--resume", "1"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("params.safetensors: CRC-32 ") != std::string::npos, r.out);
  flip_last_byte();
  r = run_job(plus(env.args("c"), {"--resume", "1"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("resume: nothing to do: all --epochs 3 are done") != std::string::npos);
  CHECK(state_digest_of(r.out) == state_digest_of(full.out));
}

TEST_CASE("resume: at or past a --stop-after-* point there is nothing to do, and it says so") {
  // Before: --stop-after-epochs at or below the checkpoint's epochs printed the banner and a
  // digest without a word, and --stop-after-steps at or below its steps took one step more (and
  // with --checkpoint-every 1 overwrote the checkpoint with it).
  Env env;
  auto text = [](const std::string& path) {
    std::ifstream f(path);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  auto final_line = [](const std::string& out) {
    const size_t at = out.find("final test accuracy");
    return at == std::string::npos ? std::string() : out.substr(at, out.find(',', at) - at);
  };
  JobResult two = run_job(plus(env.args("c"), {"--stop-after-epochs", "2"}));
  REQUIRE_MESSAGE(two.code == 0, two.out);
  const std::string before = text(env.root + "/c/manifest.json");
  for (const char* stop : {"2", "1"}) {  // (0 is refused: test_train_refusals.cpp)
    CAPTURE(stop);
    JobResult r = run_job(plus(env.args("c"), {"--resume", "1", "--stop-after-epochs", stop}));
    REQUIRE_MESSAGE(r.code == 0, r.out);
    CHECK_MESSAGE(
        r.out.find(std::string("resume: nothing to do: --stop-after-epochs ") + stop +
                   " is reached in the checkpoint at '" + env.root +
                   "/c', which has 2 epoch(s) done (left as it is)\n") != std::string::npos,
        r.out);
    CHECK(r.out.find("epoch 3/3") == std::string::npos);  // no epoch trained
    CHECK(state_digest_of(r.out) == state_digest_of(two.out));
    CHECK(!final_line(two.out).empty());
    CHECK_MESSAGE(final_line(r.out) == final_line(two.out), two.out, "\n---\n", r.out);
    CHECK(text(env.root + "/c/manifest.json") == before);  // not rewritten
  }
  // a stop point ahead of the checkpoint still trains up to it
  env.copy("c", "ahead");
  JobResult r = run_job(plus(env.args("ahead"), {"--resume", "1", "--stop-after-epochs", "3"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("nothing to do") == std::string::npos);
  CHECK(r.out.find("epoch 3/3") != std::string::npos);
  // Past the run's end is refused as without the stop: the run's --epochs come first.
  const std::vector<std::string> step = {"--lr-schedule", "step:1", "--lr-gamma", "0.5"};
  REQUIRE(run_job(plus(env.args("s"), step)).code == 0);
  r = run_job(plus(plus(env.args("s"), step),
                   {"--resume", "1", "--epochs", "2", "--stop-after-epochs", "1"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("cnn: --epochs 2 but the checkpoint at '" + env.root +
                           "/s' has 3 epoch(s) done already") != std::string::npos,
                r.out);
  // Inside an epoch: 1 epoch and 1 step of the second done (4 steps of 3 per epoch).
  const std::vector<std::string> every = {"--checkpoint-every", "1"};
  REQUIRE(
      run_job(plus(env.args("m"), {"--checkpoint-every", "1", "--stop-after-steps", "4"})).code ==
      0);
  const std::string mid = text(env.root + "/m/manifest.json");
  const std::string has =
      " is reached in the checkpoint at '" + env.root +
      "/m', which has 4 step(s) of the run (1 epoch(s) and 1 step(s) of the next) done (left as "
      "it is)\n";
  for (const auto& [flag, value] : {std::pair<std::string, std::string>{"--stop-after-steps", "4"},
                                    {"--stop-after-steps", "3"},
                                    {"--stop-after-epochs", "1"}}) {
    CAPTURE(flag);
    CAPTURE(value);
    r = run_job(plus(plus(env.args("m"), every), {"--resume", "1", flag, value}));
    REQUIRE_MESSAGE(r.code == 0, r.out);
    CHECK_MESSAGE(
        r.out.find("resume: nothing to do: " + flag + " " + value + has) != std::string::npos,
        r.out);
    CHECK(r.out.find("stopped after step") == std::string::npos);  // no step taken
    CHECK(text(env.root + "/m/manifest.json") == mid);
  }
  // one step further is a step to take
  r = run_job(plus(plus(env.args("m"), every), {"--resume", "1", "--stop-after-steps", "5"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("stopped after step 5 of the run") != std::string::npos);
  CHECK(r.out.find("nothing to do") == std::string::npos);
}

TEST_CASE("resume: the bucket sizes, the offload and cuDNN's benchmark are run settings") {
  // Before: none of them was recorded, so a change went unannounced.
  Env env;
  const std::vector<std::string> zero2 = {"--strategy",        "zero2", "--bucket-mb", "0.5",
                                          "--first-bucket-mb", "0.25"};
  JobResult full = run_job(plus(env.args("full"), zero2));
  REQUIRE_MESSAGE(full.code == 0, full.out);
  REQUIRE(run_job(plus(plus(env.args("c"), zero2), {"--stop-after-epochs", "1"})).code == 0);
  sl::serialize::Json m = sl::dist::read_sharded_manifest(env.root + "/c");
  const sl::serialize::Json& settings = m.at("extra").at("run_settings");
  CHECK(settings.at("bucket-mb").as_string() == "0.5");
  CHECK(settings.at("first-bucket-mb").as_string() == "0.25");
  CHECK(settings.at("offload-optimizer").as_string() == "0");
  CHECK(settings.at("cudnn-benchmark").as_string() == "0");
  env.copy("c", "moved");
  JobResult r = run_job(plus(env.args("moved"), {"--strategy", "zero2", "--resume", "1"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  for (const char* line : {"resume: changed since the checkpoint: --bucket-mb 0.5 -> 25\n",
                           "resume: changed since the checkpoint: --first-bucket-mb 0.25 -> 1\n"}) {
    CHECK_MESSAGE(r.out.find(line) != std::string::npos, r.out);
  }
  // one rank: no padding, one slice per bucket, so no sum regroups (Note [Resume configuration])
  CHECK(state_digest_of(r.out) == state_digest_of(full.out));
  // --offload-optimizer and --cudnn-benchmark need a GPU: a checkpoint written on one with them,
  // resumed here without
  for (auto& [k, v] : m.members()) {
    if (k != "extra") continue;
    for (auto& [ek, ev] : v.members()) {
      if (ek != "run_settings") continue;
      ev.set("offload-optimizer", "1");
      ev.set("cudnn-benchmark", "1");
    }
  }
  std::ofstream(env.root + "/c/manifest.json") << m.dump();
  r = run_job(plus(plus(env.args("c"), zero2), {"--resume", "1"}));
  REQUIRE_MESSAGE(r.code == 0, r.out);
  for (const char* line : {"resume: changed since the checkpoint: --offload-optimizer 1 -> 0\n",
                           "resume: changed since the checkpoint: --cudnn-benchmark 1 -> 0\n"}) {
    CHECK_MESSAGE(r.out.find(line) != std::string::npos, r.out);
  }
  CHECK(r.out.find("--bucket-mb") == std::string::npos);  // unchanged: not announced
}

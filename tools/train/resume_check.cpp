#include "resume_check.h"

#include <algorithm>

#include "core/error.h"

namespace sl::train {
namespace {

using serialize::Json;

/// A configuration key of the loop's (supervised.cpp's run_config), the flag that sets it and
/// what the key's absence means.
struct LoopKey {
  const char* key;
  const char* flag;
  const char* absent;
};

constexpr LoopKey kLoopKeys[] = {
    {"batch_size", "--batch-size", "(none)"},
    {"seed", "--seed", "(none)"},
    {"epochs", "--epochs", "(none)"},
    {"max_grad_norm", "--max-grad-norm", "(not recorded)"},
    {"optimizer", "--optimizer", "AdamW"},
    {"momentum", "--momentum", "(none: not sgd or rmsprop)"},
    {"rmsprop_alpha", "--rmsprop-alpha", "0.99"},
    {"rmsprop_centered", "--rmsprop-centered", "0"},
    {"adagrad_lr_decay", "--adagrad-lr-decay", "0"},
    {"lr_schedule", "--lr-schedule", "auto"},
    {"lr_gamma", "--lr-gamma", "(unused: --lr-schedule auto)"},
    {"warmup_steps", "--warmup-steps", "0"},
    {"param_dtype", "--precision's parameter dtype", "float32 (32, bf16-mixed or f16-mixed)"},
};

const LoopKey* loop_key(const std::string& key) {
  for (const LoopKey& k : kLoopKeys) {
    if (key == k.key) return &k;
  }
  return nullptr;
}

/// The flag behind a job's key: "--seq-len" for seq_len when the job documents it, else the key.
std::string job_flag(const std::string& key, const FlagDocs* documented) {
  std::string flag = key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  if (documented) {
    for (const FlagDoc& d : *documented) {
      if (d.name == flag) return "--" + flag;
    }
  }
  return "'" + key + "'";
}

std::string text(const Json* v, const char* absent) {
  if (!v) return absent;
  if (v->is_string()) return v->as_string();
  std::string s = v->dump();  // a number as written: "0.0" reads better as "0"
  if (v->type() == Json::Type::number && s.size() > 2 && s.ends_with(".0")) s.resize(s.size() - 2);
  return s;
}

[[noreturn]] void refuse(const std::string& job, const std::string& dir,
                         const std::vector<std::string>& differences) {
  std::string all;
  for (const std::string& d : differences) all += (all.empty() ? "" : "; ") + d;
  detail::throw_error<ValueError>(
      job, ": the checkpoint at '", dir, "' was written with another configuration: ", all,
      " (a resumed run continues the same run: resume with the checkpoint's values, or start a "
      "new run in another --checkpoint-dir)");
}

}  // namespace

std::vector<std::string> check_resume_config(const std::string& job, const std::string& dir,
                                             const Json& saved, const Json& run,
                                             const FlagDocs* documented, bool epochs_may_change) {
  SL_CHECK(saved.is_object() && run.is_object(), job, ": the checkpoint at '", dir,
           "' holds no configuration object (", saved.dump(), ")");
  std::vector<std::string> keys;
  for (const auto& [key, value] : run.members()) keys.push_back(key);
  for (const auto& [key, value] : saved.members()) {
    if (!run.contains(key)) keys.push_back(key);
  }
  std::vector<std::string> differences, accepted;
  for (const std::string& key : keys) {
    const Json* was = saved.find(key);
    const Json* is = run.find(key);
    if (was && is && *was == *is) continue;
    const LoopKey* lk = loop_key(key);
    const std::string flag = lk ? lk->flag : job_flag(key, documented);
    const char* absent = lk ? lk->absent : "(none)";
    if (key == "max_grad_norm" && !was) {  // an older trainer's checkpoint: nothing to compare
      accepted.push_back(flag + " " + text(is, absent) +
                         " is not checked: the checkpoint (an older trainer's) does not record it");
      continue;
    }
    if (key == "epochs" && was && is && epochs_may_change) {
      accepted.push_back("changed since the checkpoint: " + flag + " " + text(was, absent) +
                         " -> " + text(is, absent) + " (the lr schedule does not depend on it)");
      continue;
    }
    std::string d = flag + " " + text(was, absent) + " there, " + text(is, absent) + " in this run";
    if (key == "epochs") {
      d += " (the lr schedule spans the run's steps; --epochs may change on resume under "
           "--lr-schedule constant, exp or step:... only)";
    }
    differences.push_back(d);
  }
  if (!differences.empty()) refuse(job, dir, differences);
  return accepted;
}

void check_resume_hyperparameters(const std::string& job, const std::string& dir,
                                  const Json& loaded, const Json& built) {
  std::vector<std::string> differences, named;
  for (size_t g = 0; g < std::min(loaded.size(), built.size()); ++g) {
    for (const auto& [key, value] : built[g].members()) {
      if (key == "params" || key == "lr") continue;  // the schedule sets the current lr
      const Json* was = loaded[g].find(key);
      if (was && *was == value) continue;
      const std::string flag = key == "initial_lr"     ? "--lr"
                               : key == "weight_decay" ? "--weight-decay"
                               : key == "momentum"     ? "--momentum"
                               : key == "alpha"        ? "--rmsprop-alpha"
                               : key == "centered"     ? "--rmsprop-centered"
                               : key == "lr_decay"     ? "--adagrad-lr-decay"
                                                       : "the optimizer's " + key;
      if (std::find(named.begin(), named.end(), flag) != named.end()) continue;
      named.push_back(flag);
      differences.push_back(flag + " " + text(was, "(none)") + " there, " + text(&value, "") +
                            " in this run");
    }
  }
  if (!differences.empty()) refuse(job, dir, differences);
}

std::vector<std::string> changed_settings(const Json* saved, const Json& run) {
  std::vector<std::string> out;
  if (!saved || !saved->is_object()) return out;
  for (const auto& [key, value] : run.members()) {
    const Json* was = saved->find(key);
    if (was && !(*was == value)) {
      out.push_back("changed since the checkpoint: --" + key + " " + text(was, "") + " -> " +
                    text(&value, ""));
    }
  }
  return out;
}

}  // namespace sl::train

// sl_train: Shardlight's command-line trainer. Parses the common flags and runs the job that
// --model names (see registry.h; each model registers itself in its own file).
//
//   sl_train [--model mlp] [--epochs N] [--batch-size B] [--lr LR] [--seed S] [--threads T]
//            [--data-dir DIR] [--strategy single] [--device cpu|cuda|cuda:N] [--key value ...]
//   sl_train --list
//   sl_train --model NAME --help
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <string>

#include <shardlight/shardlight.h>

#include "registry.h"
#ifdef SL_TRAIN_FAKE_GPU
// tests/meson.build's sl_train_fake: this trainer with the test suite's stand-in cuda:0, so the
// --device cuda paths run end to end in builds without CUDA (Note [Fake GPU]).
#include "support/fake_gpu.h"
#endif

namespace {

using sl::train::parse_int_flag;
using sl::train::parse_number_flag;
constexpr int64_t kIntMax = std::numeric_limits<int>::max();

void usage(FILE* out) {
  std::fprintf(out,
               "usage: sl_train [--model NAME] [--epochs N] [--batch-size B] [--lr LR]\n"
               "                [--seed S] [--threads T] [--data-dir DIR] [--strategy single]\n"
               "                [--device cpu|cuda|cuda:N] [--KEY VALUE ...]   (job-specific)\n"
               "       sl_train --list\n"
               "       sl_train --model NAME --help   (NAME's flags and their defaults)\n"
               "Defaults: --model mlp --epochs 2 (the Fashion-MNIST demo).\n");
}

/// Whether argv names a model (--model X or --model=X).
bool model_given(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--model" || a.rfind("--model=", 0) == 0) return true;
  }
  return false;
}

/// Fills `opt` from argv; returns false when the program should stop (list printed). `help`:
/// whether -h / --help was given.
bool parse(int argc, char** argv, sl::train::Options& opt, bool& help) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help = true;
      continue;
    }
    if (arg == "--list") {
      for (const auto& job : sl::train::all_jobs()) {
        std::printf("%-12s %s\n", job.name.c_str(), job.help.c_str());
      }
      return false;
    }
    SL_CHECK(arg.rfind("--", 0) == 0 && arg.size() > 2, "sl_train: unexpected argument '", arg,
             "' (flags start with --; see --help)");
    std::string key = arg.substr(2), value;
    if (auto eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else {
      SL_CHECK(i + 1 < argc, "sl_train: --", key, " needs a value");
      value = argv[++i];
    }
    const std::string flag = "--" + key;
    if (key == "model") {
      opt.model = value;
    } else if (key == "strategy") {
      opt.strategy = value;
    } else if (key == "epochs") {
      opt.epochs = static_cast<int>(parse_int_flag(flag, value, 1, kIntMax));
    } else if (key == "batch-size") {
      opt.batch_size = parse_int_flag(flag, value, 1);
    } else if (key == "lr") {
      opt.lr = parse_number_flag(flag, value);
      // a zero or negative learning rate is a mistake, not a request for the job's default
      SL_CHECK(opt.lr > 0, flag, ": expected a number > 0, got ", value);
    } else if (key == "seed") {
      opt.seed = static_cast<uint64_t>(parse_int_flag(flag, value, 0));
    } else if (key == "threads") {
      opt.threads = static_cast<int>(parse_int_flag(flag, value, 0, 4096));
    } else if (key == "data-dir") {
      opt.data_dir = value;
    } else if (key == "device") {
      opt.device = value;
    } else {
      opt.extra[key] = value;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef SL_TRAIN_FAKE_GPU
  sl::testing::install_fake_gpu();
#endif
  sl::profiler::set_thread_name("main");
  try {
    sl::train::Options opt;
    bool help = false;
    if (!parse(argc, argv, opt, help)) return 0;
    const sl::train::Job* job = sl::train::find_job(opt.model);
    if (help && (!job || !model_given(argc, argv))) {
      usage(stdout);
      return 0;
    }
    if (!job) {
      std::fprintf(stderr, "sl_train: unknown model '%s'; available:\n", opt.model.c_str());
      for (const auto& j : sl::train::all_jobs()) std::fprintf(stderr, "  %s\n", j.name.c_str());
      return 2;
    }
    if (help) {
      sl::train::print_job_help(*job, stdout);
      return 0;
    }
    if (opt.threads > 0) sl::set_num_threads(opt.threads);
    const sl::train::FlagDocs flags = job->flags ? job->flags() : sl::train::FlagDocs{};
    opt.documented = &flags;
    return job->run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sl_train: %s\n", e.what());
    return 1;
  }
}

// The supervised training loop shared by the trainer's jobs (see supervised.h).
#include "supervised.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <shardlight/shardlight.h>

#include "dist/checkpoint.h"
#include "dist/sampler.h"
#include "dist/strategy.h"
#include "lr_schedule.h"
#include "memory_estimate.h"
#include "models/classifier.h"
#include "nn/conv.h"
#include "nn/loss.h"
#include "optimizer_flags.h"
#include "resume.h"
#include "step_profile.h"

namespace sl::train {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// A number flag's value as a run setting: "%g", as --help prints the defaults ("25", "0.01").
std::string number_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

/// What must agree between a checkpoint and the run resuming from it: the model's settings, then
/// the run's (Note [Resume configuration] in resume_check.h).
serialize::Json run_config(serialize::Json model, int64_t batch, uint64_t seed, int64_t epochs,
                           double max_grad_norm) {
  model.set("batch_size", static_cast<long long>(batch));
  model.set("seed", std::to_string(seed));
  model.set("epochs", static_cast<long long>(epochs));
  // always written: a checkpoint without it is an older trainer's, which did not record it
  model.set("max_grad_norm", max_grad_norm);
  return model;
}

/// Sum of a double over the ranks of `group` (the MPI world; null with one rank). The job's own
/// host-side exchanges go over it whatever the strategy's gradients use (NCCL on GPUs).
double sum_over_ranks(const dist::ProcessGroupPtr& group, double v) {
  if (!group || group->size() == 1) return v;
  Tensor t = tensor({v});
  group->allreduce(t, dist::ReduceOp::sum)->wait();
  return t.item<double>();
}

/// Every rank evaluates with rank 0's BatchNorm statistics (each rank's last forward updated
/// its own copy from its own share of the batch, as in PyTorch's DDP); through host copies over
/// `group`, so device buffers work with any backend.
void broadcast_buffers(const dist::ProcessGroupPtr& group, nn::Module& model) {
  if (!group || group->size() == 1) return;
  NoGradGuard ng;
  for (const auto& [name, b] : model.named_buffers()) {
    Tensor c = b.to(kCPU, /*force_copy=*/true).contiguous();
    group->broadcast(c, 0)->wait();
    Tensor(b).copy_(c);
  }
}

/// The job's device from --device: "cpu", "cuda:N", or "cuda" = GPU (rank mod the visible GPUs).
/// Throws DeviceError when that GPU is not visible (or the build has no CUDA).
Device job_device(const std::string& job, const std::string& spec, int rank) {
  Device d(spec);
  SL_CHECK(!d.is_cpu() || d.index == 0, job, ": --device ", spec,
           " is a logical CPU device; use cpu, cuda or cuda:N");
  if (d.is_cuda() && spec == "cuda") {
    const int n = cuda::device_count();
    SL_CHECK_DEVICE(n > 0, job, ": --device cuda but no GPU is visible",
                    cuda::is_compiled() ? "" : " (this build has no CUDA)");
    d.index = rank % n;
  }
  if (d.is_cuda()) {
    SL_CHECK_DEVICE(d.index < cuda::device_count(), job, ": --device ", d.str(),
                    " is not available (", cuda::device_count(), " GPU(s) visible",
                    cuda::is_compiled() ? "" : "; this build has no CUDA", ")");
  }
  return d;
}

/// The training's numeric format, from --precision (see supervised.h).
struct Precision {
  std::string name = "32";
  bool autocast = false;      ///< forward and loss under an autocast scope of `dtype`
  bool params_16 = false;     ///< parameters (and buffers, inputs) stored in `dtype`
  bool loss_scaling = false;  ///< dynamic loss scaling (float16's narrow exponent)
  DType dtype = DType::f32;
};

Precision parse_precision(const std::string& job, const std::string& s) {
  if (s == "32") return {};
  if (s == "bf16-mixed") return {s, true, false, false, DType::bf16};
  if (s == "f16-mixed") return {s, true, false, true, DType::f16};
  if (s == "bf16-true") return {s, false, true, false, DType::bf16};
  SL_CHECK(false, job, ": --precision must be 32, bf16-mixed, f16-mixed or bf16-true, got '", s,
           "'");
  return {};
}

/// `base` with its floating tensors converted to `dtype` (the inputs of a bf16-true model).
class CastFloating : public nn::Dataset {
 public:
  CastFloating(std::shared_ptr<nn::Dataset> base, DType dtype)
      : base_(std::move(base)), dtype_(dtype) {}
  int64_t size() const override { return base_->size(); }
  nn::Batch get_batch(const std::vector<int64_t>& indices) const override {
    nn::Batch b = base_->get_batch(indices);
    for (Tensor& t : b) {
      if (is_floating(t.dtype())) t = t.to(dtype_);
    }
    return b;
  }

 private:
  std::shared_ptr<nn::Dataset> base_;
  DType dtype_;
};

/// Rows [m * R / k, (m + 1) * R / k) of every tensor of `batch` (R rows each): micro-batch m of k.
TensorList micro_batch(const TensorList& batch, int64_t m, int64_t k) {
  if (k == 1) return batch;
  TensorList out;
  for (const Tensor& t : batch) {
    const int64_t rows = t.size(0);
    out.push_back(t.narrow(0, m * rows / k, rows / k));
  }
  return out;
}

/// Whether `model` holds a convolution module (nn/conv.h: Conv1d, Conv2d, ConvTranspose1d,
/// ConvTranspose2d), the only users of cuDNN's algorithm choice.
bool has_convolution(const nn::Module& model) {
  for (const auto& [path, m] : model.named_modules()) {
    if (dynamic_cast<const nn::ConvNd<1>*>(m) || dynamic_cast<const nn::ConvNd<2>*>(m) ||
        dynamic_cast<const nn::ConvTransposeNd<1>*>(m) ||
        dynamic_cast<const nn::ConvTransposeNd<2>*>(m)) {
      return true;
    }
  }
  return false;
}

}  // namespace

void for_each_batch(const nn::Dataset& data, int64_t begin, int64_t end, int64_t size,
                    const std::function<void(const TensorList& batch)>& fn) {
  SL_CHECK(size >= 1, "for_each_batch: size must be >= 1, got ", size);
  for (int64_t at = begin; at < end; at += size) {
    std::vector<int64_t> idx;
    for (int64_t i = at; i < std::min(end, at + size); ++i) idx.push_back(i);
    fn(data.get_batch(idx));
  }
}

int run_supervised(const Options& opt, const SupervisedJob& job) {
  const std::string& name = job.name;
  auto t_start = std::chrono::steady_clock::now();
  const dist::StrategyKind kind = dist::parse_strategy(opt.strategy);
  const bool multi_rank = kind == dist::StrategyKind::ddp || kind == dist::StrategyKind::zero1 ||
                          kind == dist::StrategyKind::zero2;
  dist::ProcessGroupPtr group = multi_rank ? dist::world() : nullptr;
  const int rank = group ? group->rank() : 0, world = group ? group->size() : 1;
  // Ranks share the machine's cores unless told otherwise (--threads or SL_NUM_THREADS).
  if (opt.threads == 0 && world > 1 && std::getenv("SL_NUM_THREADS") == nullptr) {
    int cores = static_cast<int>(std::thread::hardware_concurrency());
    set_num_threads(std::max(1, cores / world));
  }
  const Device device = job_device(name, opt.device, rank);
  auto say = [rank](const char* fmt, auto... args) {
    if (rank != 0) return;
    std::printf(fmt, args...);
    std::fflush(stdout);
  };

  const int64_t batch = opt.batch_size > 0 ? opt.batch_size : job.default_batch_size;
  const double lr = opt.lr > 0 ? opt.lr : job.default_lr;
  const double weight_decay = opt.get_double("weight-decay", 0.01, 0.0);
  const OptimizerFlags optim_flags = read_optimizer_flags(opt);
  const std::string ckpt_dir = opt.get_string("checkpoint-dir", "checkpoints/" + name);
  const bool resume = opt.get_bool("resume", false);
  const int64_t stop_after = opt.get_int("stop-after-epochs", -1, -1);
  const int64_t checkpoint_every = opt.get_int("checkpoint-every", 0);
  const int64_t stop_after_steps = opt.get_int("stop-after-steps", -1, -1);
  const int64_t log_every = opt.get_int("log-every", 100, 0);
  const int64_t accumulate = opt.get_int("accumulate", 1);
  const Precision precision = parse_precision(name, opt.get_string("precision", "32"));
  const int dp_replicas = static_cast<int>(opt.get_int("dp-replicas", 2, 1, 1024));
  const double max_grad_norm = opt.get_double("max-grad-norm", 0.0);  // > 0: clip the 2-norm
  const int64_t sync_batchnorm = opt.get_int("sync-batchnorm", 0);
  const double bucket_mb = opt.get_double("bucket-mb", 25.0);
  const double first_bucket_mb = opt.get_double("first-bucket-mb", 1.0);
  const std::string reduce_dtype_flag = opt.get_string("reduce-dtype", "same");
  const int64_t offload_optimizer = opt.get_int("offload-optimizer", 0);
  const int64_t estimate_ranks = opt.get_int("estimate-memory", 0);
  const int64_t cudnn_benchmark = opt.get_int("cudnn-benchmark", 0);
  const int64_t tf32 = opt.get_int("tf32", 0);
  const bool warmup_given = opt.extra.count("warmup-steps") > 0;      // else the job's default
  const int64_t warmup_flag = opt.get_int("warmup-steps", 0);
  const std::string lr_schedule = opt.get_string("lr-schedule", "auto");
  const double lr_gamma = opt.get_double("lr-gamma", 0.1);
  // flags given on the command line (not left at their defaults), for the settings that ignore them
  auto given = [&opt](const char* flag) { return opt.extra.count(flag) > 0; };
  StepProfile profile(opt, name, rank, world);
  opt.check_all_read(name);  // every flag is read by now: a misspelt one fails before any work
  check_optimizer_flags(name, opt, optim_flags);
  // A flag given but ignored under the other settings would do nothing, silently: refused.
  if (given("lr-gamma")) {
    const bool ignored = lr_schedule == "auto" || lr_schedule == "linear" ||
                         lr_schedule == "cosine" || lr_schedule == "constant";
    SL_CHECK(!ignored, name, ": --lr-gamma ", opt.extra.at("lr-gamma"),
             " has no effect under --lr-schedule ", lr_schedule,
             " (it is the factor of --lr-schedule exp and step:E1,E2,... only)");
  }
  SL_CHECK(!given("dp-replicas") || kind == dist::StrategyKind::dp, name, ": --dp-replicas ",
           given("dp-replicas") ? opt.extra.at("dp-replicas") : "",
           " has no effect under --strategy ", opt.strategy,
           " (it is the number of --strategy dp's model replicas)");
  for (const char* flag : {"bucket-mb", "first-bucket-mb"}) {
    // --estimate-memory's ddp/zero1/zero2 rows pad their buckets whatever --strategy says
    SL_CHECK(!given(flag) || multi_rank || estimate_ranks > 0, name, ": --", flag, " ",
             given(flag) ? opt.extra.at(flag) : "", " has no effect under --strategy ",
             opt.strategy,
             " (it sizes the gradient buckets that --strategy ddp, zero1 and zero2 communicate, "
             "and --estimate-memory's rows)");
  }
  SL_CHECK(opt.epochs >= 1, name, ": --epochs must be >= 1, got ", opt.epochs);
  SL_CHECK(batch % world == 0, name, ": --batch-size ", batch, " must be divisible by the ", world,
           " ranks (each rank takes an equal share of every global batch)");
  SL_CHECK(!resume || !ckpt_dir.empty(), name, ": --resume 1 needs a --checkpoint-dir");
  for (auto [flag, mb] :
       {std::pair{"bucket-mb", bucket_mb}, {"first-bucket-mb", first_bucket_mb}}) {
    SL_CHECK(mb * 1024 * 1024 >= 1 && mb <= 1024 * 1024, name, ": --", flag,
             " must lie in (0, 1048576] MiB, got ", mb);
  }
  SL_CHECK(sync_batchnorm == 0 || sync_batchnorm == 1, name,
           ": --sync-batchnorm must be 0 or 1, got ", sync_batchnorm);
  // single has no other rank to share statistics with: it would change nothing
  SL_CHECK(sync_batchnorm == 0 || multi_rank, name,
           ": --sync-batchnorm 1 needs one process per rank (--strategy ddp, zero1 or zero2), not ",
           opt.strategy);
  std::optional<DType> reduce_dtype;
  if (reduce_dtype_flag != "same") {
    const char* expected = "same, bf16, f16, f32 or f64";
    try {
      reduce_dtype = parse_dtype(reduce_dtype_flag);
    } catch (const ValueError&) {
      detail::throw_error<ValueError>(name, ": --reduce-dtype must be ", expected, ", got '",
                                      reduce_dtype_flag, "'");
    }
    SL_CHECK(is_floating(*reduce_dtype), name, ": --reduce-dtype must be ", expected, ", got '",
             reduce_dtype_flag, "'");
    SL_CHECK(multi_rank, name,
             ": --reduce-dtype applies to gradients sent between processes (--strategy ddp, "
             "zero1 or zero2), not ",
             opt.strategy);
  }
  SL_CHECK(offload_optimizer == 0 || offload_optimizer == 1, name,
           ": --offload-optimizer must be 0 or 1, got ", offload_optimizer);
  SL_CHECK(offload_optimizer == 0 || estimate_ranks > 0 ||
               (kind == dist::StrategyKind::zero1 || kind == dist::StrategyKind::zero2),
           name,
           ": --offload-optimizer 1 needs --strategy zero1 or zero2 (it moves the rank's "
           "optimizer shard to the host)");
  SL_CHECK(estimate_ranks >= 0 && estimate_ranks <= 1 << 20, name,
           ": --estimate-memory must be a number of ranks in [1, 1048576] (0: train), got ",
           estimate_ranks);
  if (estimate_ranks > 0) {
    // The estimate exits before the first step: the flags of the run's course (its checkpoints,
    // its stops, its log, its trace) would be dropped unread.
    for (const char* flag : {"resume", "checkpoint-every", "stop-after-epochs", "stop-after-steps",
                             "log-every", "profile", "profile-from", "profile-steps"}) {
      SL_CHECK(!given(flag), name, ": --", flag, " ", given(flag) ? opt.extra.at(flag) : "",
               " has no effect with --estimate-memory ", estimate_ranks,
               " (it prints the estimate and exits before training)");
    }
  }
  // an estimate plans for GPUs wherever it runs
  SL_CHECK(offload_optimizer == 0 || device.is_cuda() || estimate_ranks > 0, name,
           ": --offload-optimizer 1 moves the optimizer state from the GPU to the host; with "
           "--device ",
           device.str(), " it is in host memory already");
  for (auto [flag, v] : {std::pair{"cudnn-benchmark", cudnn_benchmark}, {"tf32", tf32}}) {
    SL_CHECK(v == 0 || v == 1, name, ": --", flag, " must be 0 or 1, got ", v);
  }
  // bf16-true stores the parameters, activations and inputs in bfloat16: no float32 product is
  // left for TF32 to round. bf16-mixed and f16-mixed take it, as PyTorch's allow_tf32 under
  // autocast (orthogonal switches): autocast lowers matmul, linear, conv1d/2d, attention and
  // LSTM/GRU to 16 bits, and TF32 rounds the float32 products it leaves (ops off its lower list,
  // which a registered model may hold); the run says so on its precision line.
  SL_CHECK(tf32 == 0 || !precision.params_16, name, ": --tf32 1 has no effect with --precision ",
           precision.name,
           " (its matmuls and convolutions run in bfloat16; TF32 rounds float32 ones only)");
  for (auto [flag, v] : {std::pair{"cudnn-benchmark", cudnn_benchmark}, {"tf32", tf32}}) {
    SL_CHECK(v == 0 || device.is_cuda(), name, ": --", flag,
             " 1 changes how GPU kernels compute (cuDNN convolutions, float32 products): it "
             "needs --device cuda, got --device ",
             device.str());
  }
  // process-wide switches (sl::cuda): this process trains one job
  cuda::set_cudnn_benchmark(cudnn_benchmark == 1);
  cuda::set_allow_tf32(tf32 == 1);
  SL_CHECK(checkpoint_every >= 0, name,
           ": --checkpoint-every must be >= 0 (0: at epoch ends "
           "only), got ",
           checkpoint_every);
  SL_CHECK(checkpoint_every == 0 || !ckpt_dir.empty(), name,
           ": --checkpoint-every needs a --checkpoint-dir");
  // A stop point ends the run after the step that reaches it: 0 would train nothing (epochs) or
  // still take a step (steps), neither what it says.
  SL_CHECK(stop_after != 0, name,
           ": --stop-after-epochs must be >= 1 (-1: never), got 0 (the run would stop before its "
           "first step and train nothing)");
  SL_CHECK(stop_after_steps != 0, name,
           ": --stop-after-steps must be >= 1 (-1: never), got 0 (the run stops after the step "
           "that reaches the stop point, so it would still take one)");
  // On a fresh run, a stop point at or past the run's end would stop nothing (on resume it may
  // be reached already: nothing to do, resume.h). The steps are checked once the data is loaded.
  SL_CHECK(resume || stop_after < opt.epochs, name, ": --stop-after-epochs ", stop_after,
           " stops nothing: the run ends after its --epochs ", opt.epochs,
           " anyway (a stop point must lie before the run's end)");
  SL_CHECK(accumulate >= 1 && (batch / world) % accumulate == 0, name, ": --accumulate ",
           accumulate, " must be >= 1 and divide each rank's ", batch / world,
           " examples of a batch (--batch-size ", batch, " over ", world,
           " rank(s)) into equal micro-batches");

  JobData data = job.load_data();
  std::shared_ptr<nn::Dataset> train_set = data.train, test_set = data.test;
  SL_CHECK(train_set && test_set && train_set->size() > 0 && test_set->size() > 0, name,
           ": the job's data has an empty split (", train_set ? train_set->size() : 0, " train / ",
           test_set ? test_set->size() : 0, " test examples)");
  if (precision.params_16) {  // the model's inputs in its parameters' dtype
    train_set = std::make_shared<CastFloating>(train_set, precision.dtype);
    test_set = std::make_shared<CastFloating>(test_set, precision.dtype);
  }
  say("%s (%.2f s)\n", data.summary.c_str(), seconds_since(t_start));
  say("blas: %s kernels, %d thread(s) per rank (%s)\n", blas_info().core.c_str(), get_num_threads(),
      blas_info().note.c_str());

  // The same initial model on every rank (ddp/zero also broadcast rank 0's parameters).
  manual_seed(opt.seed);
  std::shared_ptr<nn::Module> model = job.make_model();
  model->to(device);  // before the optimizer takes the parameters
  // cuDNN's benchmark picks convolution algorithms (core/cuda/conv.cpp): a model without a
  // convolution module would run exactly as without it
  SL_CHECK(cudnn_benchmark == 0 || has_convolution(*model), name,
           ": --cudnn-benchmark 1 has no effect on the model ", job.description,
           ": it has no convolution (the benchmark picks cuDNN's convolution algorithms only)");
  if (precision.params_16) model->to(precision.dtype);
  auto [decay, no_decay] = optim::split_no_decay(model->named_parameters(), job.no_decay);
  // 16-bit parameters: the optimizer updates float32 master copies (and keeps float32 moments).
  const bool master = precision.params_16;
  // The same two groups for every optimizer: weight decay on the weights, none on the rest.
  std::unique_ptr<optim::Optimizer> optimizer =
      make_optimizer(optim_flags, lr, weight_decay, decay, no_decay, master);
  // CUDA parameters: the strategy makes its NCCL group over the world itself.
  dist::StrategyOptions so{.group = device.is_cuda() ? nullptr : group};
  so.dp_replicas = dp_replicas;
  so.max_grad_norm = max_grad_norm;
  so.sync_batchnorm = sync_batchnorm != 0;
  so.reduce_dtype = reduce_dtype;
  so.offload_optimizer = offload_optimizer != 0;
  so.bucket_cap_bytes = static_cast<int64_t>(bucket_mb * 1024 * 1024);
  so.first_bucket_cap_bytes = static_cast<int64_t>(first_bucket_mb * 1024 * 1024);
  SL_CHECK(so.max_grad_norm >= 0, name, ": --max-grad-norm must be >= 0 (0: no clipping), got ",
           so.max_grad_norm);
  if (kind == dist::StrategyKind::dp && device.is_cuda()) {
    SL_CHECK_DEVICE(device.index + so.dp_replicas <= cuda::device_count(), name, ": --strategy dp ",
                    "with --dp-replicas ", so.dp_replicas, " from ", device.str(), " needs GPUs ",
                    device.index, "..", device.index + so.dp_replicas - 1, ", but ",
                    cuda::device_count(), " are visible");
  }
  if (precision.loss_scaling) so.loss_scaling = optim::GradScalerOptions{};
  so.replica_factory = job.make_model;
  if (precision.params_16) {
    so.replica_factory = [make = job.make_model, dtype = precision.dtype] {
      std::shared_ptr<nn::Module> m = make();
      m->to(dtype);
      return m;
    };
  }
  // Forward and loss (training and evaluation) under autocast in the mixed modes.
  auto autocast = [&precision, &device]() -> std::unique_ptr<AutocastGuard> {
    if (!precision.autocast) return nullptr;
    return std::make_unique<AutocastGuard>(device.kind, precision.dtype);
  };
  if (estimate_ranks > 0) {
    say("%s",
        memory_estimate_table(*model, *optimizer, so, estimate_ranks, precision.params_16).c_str());
    // Activations cannot be computed from shapes alone: one forward and backward of each rank
    // count's micro-batch (the first examples of the training split) under the single strategy.
    auto single = dist::make_strategy("single", model, *optimizer, {});
    model->train();
    std::vector<ActivationSample> samples;
    for (int64_t n : estimate_rank_counts(estimate_ranks)) {
      ActivationSample a{.ranks = n};
      if (batch % n != 0 || (batch / n) % accumulate != 0) {
        a.why = "(--batch-size " + std::to_string(batch) + " does not split into " +
                std::to_string(n) + " x " + std::to_string(accumulate) + " equal micro-batches)";
        samples.push_back(a);
        continue;
      }
      a.micro_batch = batch / n / accumulate;
      if (a.micro_batch > train_set->size()) {
        a.why = "(the training split has only " + std::to_string(train_set->size()) + " examples)";
        samples.push_back(a);
        continue;
      }
      std::vector<int64_t> first(static_cast<size_t>(a.micro_batch));
      for (size_t i = 0; i < first.size(); ++i) first[i] = static_cast<int64_t>(i);
      const nn::Batch b = train_set->get_batch(first);
      single->zero_grad();
      reset_peak_memory_stats(device);
      {
        auto cast_scope = autocast();
        Tensor loss = job.loss(*single, b, device, 0);
        cast_scope.reset();
        single->backward(loss);
      }
      const MemoryStats st = memory_stats(device);
      a.bytes = st.peak_bytes - st.live_bytes;
      samples.push_back(a);
    }
    single->zero_grad();
    say("%s", activation_table(samples, device).c_str());
    return 0;
  }
  std::unique_ptr<dist::Strategy> strategy =
      dist::make_strategy(opt.strategy, model, *optimizer, so);
  if (so.reduce_dtype && world > 1) {
    say("gradients are reduced in %s (averaged after rounding; the optimizer keeps its dtype)\n",
        dtype_name(*so.reduce_dtype));
  }
  // every rank converts the same model, so every rank refuses alike
  SL_CHECK(!so.sync_batchnorm || strategy->synced_batchnorms() > 0, name,
           ": --sync-batchnorm 1 has no effect on the model ", job.description,
           ": it has no BatchNorm layer to synchronise");
  if (so.sync_batchnorm) {
    say("sync batchnorm: %lld BatchNorm layer(s) use the statistics of all %d rank(s)\n",
        static_cast<long long>(strategy->synced_batchnorms()), world);
  }

  dist::DistributedLoader loader(train_set, rank, world,
                                 {.global_batch_size = batch, .shuffle = true, .seed = opt.seed});
  const int64_t per_epoch = loader.sampler().batches_per_epoch();
  SL_CHECK(per_epoch >= 1, name, ": --batch-size ", batch, " is larger than the ",
           train_set->size(), " training examples (each step takes a full batch)");
  const int64_t total_steps = opt.epochs * per_epoch;
  // At the last step it still stops the run before its last evaluation and checkpoint, as a crash
  // there would; past it, nothing.
  SL_CHECK(resume || stop_after_steps <= total_steps, name, ": --stop-after-steps ",
           stop_after_steps, " stops nothing: the run has ", total_steps, " steps (--epochs ",
           opt.epochs, " of ", per_epoch,
           " steps) and ends before it (a stop point must lie at or before the run's last step)");
  const int64_t warmup =
      warmup_given ? warmup_flag : static_cast<int64_t>(job.default_warmup_fraction * total_steps);
  SL_CHECK(warmup >= 0 && warmup <= total_steps, name, ": --warmup-steps must lie in [0, ",
           total_steps, "] (the run's steps), got ", warmup);
  LrSchedule schedule =
      make_lr_schedule(name, lr_schedule, lr_gamma, warmup, per_epoch, total_steps, *optimizer);
  std::unique_ptr<optim::LRScheduler> sched = std::move(schedule.scheduler);
  serialize::Json model_config = job.config;
  if (warmup > 0) model_config.set("warmup_steps", static_cast<long long>(warmup));
  // A checkpoint resumes only under the schedule that wrote it; "auto" adds no key, so that
  // checkpoints written before --lr-schedule existed still resume.
  if (lr_schedule != "auto") {
    model_config.set("lr_schedule", lr_schedule);
    model_config.set("lr_gamma", lr_gamma);
  }
  // The checkpoint's tensors are in the parameters' dtype, so that part of the precision must
  // agree on resume; autocast and --accumulate may change between runs.
  if (precision.params_16) model_config.set("param_dtype", dtype_name(precision.dtype));
  // Its state does not load into another optimizer's, nor under other hyperparameters.
  record_optimizer_config(optim_flags, *optimizer, model_config);
  const serialize::Json config =
      run_config(model_config, batch, opt.seed, opt.epochs, max_grad_norm);
  // Flags that may change between a run and its resumption, each announced when it does. The
  // buckets, the offload and cuDNN's algorithms change no formula, but may change the rounding
  // (Note [Resume configuration]).
  const serialize::Json run_settings =
      serialize::Json::object({{"accumulate", std::to_string(accumulate)},
                               {"precision", precision.name},
                               {"device", opt.device},
                               {"dp-replicas", std::to_string(dp_replicas)},
                               {"sync-batchnorm", std::to_string(sync_batchnorm)},
                               {"reduce-dtype", reduce_dtype_flag},
                               {"tf32", std::to_string(tf32)},
                               {"bucket-mb", number_text(bucket_mb)},
                               {"first-bucket-mb", number_text(first_bucket_mb)},
                               {"offload-optimizer", std::to_string(offload_optimizer)},
                               {"cudnn-benchmark", std::to_string(cudnn_benchmark)},
                               {"log-every", std::to_string(log_every)},
                               {"checkpoint-every", std::to_string(checkpoint_every)}});
  say("model: %s, %lld parameters; %s lr %g%s wd %g, %s over %lld "
      "steps; global batch %lld; strategy %s on %d rank(s), %d thread(s) each, on %s\n",
      job.description.c_str(), static_cast<long long>(model->num_parameters()), optimizer->name(),
      lr, optimizer_settings_text(optim_flags).c_str(), weight_decay, schedule.description.c_str(),
      static_cast<long long>(total_steps), static_cast<long long>(batch), strategy->name(), world,
      get_num_threads(), device.str().c_str());
  if (accumulate > 1 || precision.name != "32") {
    say("precision %s%s%s; %lld micro-batch(es) of %lld per rank per step\n",
        precision.name.c_str(), precision.loss_scaling ? " with dynamic loss scaling" : "",
        tf32 == 1 && precision.autocast
            ? " (--tf32 1: TF32 rounds only the float32 products autocast leaves; its matmuls, "
              "linear layers, convolutions and LSTM/GRU run in 16 bits)"
            : "",
        static_cast<long long>(accumulate), static_cast<long long>(batch / world / accumulate));
  }

  int64_t epoch0 = 0;
  double accuracy = -1;        // the last epoch's evaluation (-1: none yet)
  bool nothing_to_do = false;  // resumed at the run's end or at or past a stop point
  std::string saved_digest;    // the checkpoint's state digest, when its tensors were not loaded
  if (resume) {
    const Resumed r = resume_from_checkpoint({.job = name,
                                              .ckpt_dir = ckpt_dir,
                                              .config = config,
                                              .run_settings = run_settings,
                                              .documented = opt.documented,
                                              .lr_schedule = lr_schedule,
                                              .world = world},
                                             {.epochs = opt.epochs,
                                              .per_epoch = per_epoch,
                                              .stop_after_epochs = stop_after,
                                              .stop_after_steps = stop_after_steps},
                                             *strategy, *optimizer, *sched, loader);
    nothing_to_do = !r.nothing_to_do.empty();
    accuracy = r.accuracy;
    saved_digest = r.saved_digest;
    epoch0 = loader.position().epoch;
    say("resumed from %s: %lld epoch(s) and %lld step(s) of the next done, %lld steps taken\n",
        ckpt_dir.c_str(), static_cast<long long>(epoch0),
        static_cast<long long>(loader.position().batch),
        static_cast<long long>(strategy->steps_taken()));
    for (const std::string& c : r.changes) say("resume: %s\n", c.c_str());
    if (nothing_to_do) say("resume: nothing to do: %s (left as it is)\n", r.nothing_to_do.c_str());
  }

  {
    const nn::DataPosition at = loader.position();
    profile.check_window(total_steps - (at.epoch * per_epoch + at.batch));
  }

  // The run's state as a sharded checkpoint: at each epoch's end, and every --checkpoint-every
  // steps inside an epoch, where the data position is mid-epoch and a resume continues there.
  auto save_checkpoint = [&] {
    nn::DataPosition pos = loader.position();
    serialize::Json extra = serialize::Json::object(
        {{"config", config},
         {"scheduler", sched->state_dict().meta},
         {"rng", serialize::rng_state_to_json(default_generator().state())},
         {"data_position", serialize::Json::object({{"seed", std::to_string(pos.seed)},
                                                    {"epoch", static_cast<long long>(pos.epoch)},
                                                    {"batch", static_cast<long long>(pos.batch)}})},
         {"test_accuracy", accuracy},
         {"run_settings", run_settings},
         // rank 0's, as the manifest and the buffers are (a resume with nothing to do prints it)
         {"state_digest", models::state_digest(*model)}});
    if (job.checkpoint_extra) {
      serialize::Json own = job.checkpoint_extra();
      for (const auto& [key, value] : own.members()) {
        SL_CHECK(extra.find(key) == nullptr, name, ": the job's checkpoint entry '", key,
                 "' is one of the loop's");
        extra.set(key, value);
      }
    }
    profiler::Scope scope("checkpoint", profiler::Category::phase);
    dist::save_sharded_checkpoint(ckpt_dir, *strategy, extra);
  };
  int64_t run_step = 0;  // steps taken by this process (--profile counts these)
  auto next_batch = [&loader] {
    profiler::Scope scope("data", profiler::Category::phase);
    return loader.next();
  };
  bool stopped = false;  // by --stop-after-steps
  model->train();
  for (int64_t epoch = epoch0; epoch < opt.epochs && !stopped && !nothing_to_do; ++epoch) {
    if (stop_after >= 0 && epoch >= stop_after) break;
    auto t_epoch = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t steps = 0, skipped = 0;
    while (auto b = next_batch()) {
      profile.before_step(run_step);
      strategy->zero_grad();
      // The rank's share of the batch in `accumulate` equal micro-batches, each loss weighted
      // 1/accumulate, so the gradient is the whole share's (exactly so for a per-example mean).
      // ddp and zero1 communicate after the last one only; zero2 reduce-scatters each.
      double step_loss = 0;
      for (int64_t m = 0; m < accumulate; ++m) {
        auto sync = strategy->no_sync(m + 1 < accumulate);
        Tensor loss;
        {
          profiler::Scope scope("forward", profiler::Category::phase);
          auto cast_scope = autocast();
          loss = job.loss(*strategy, micro_batch(*b, m, accumulate), device, epoch);
        }
        if (accumulate > 1) loss = loss / static_cast<double>(accumulate);
        {
          profiler::Scope scope("backward", profiler::Category::phase);
          strategy->backward(loss);
        }
        step_loss += loss.item<double>();
      }
      {
        profiler::Scope scope("optimizer step", profiler::Category::phase);
        if (!strategy->step().taken) ++skipped;
        sched->step();
      }
      profile.after_step(run_step++);
      loss_sum += step_loss;
      ++steps;
      if (log_every > 0 && steps % log_every == 0) {
        say("  step %lld/%lld  loss %.4f  (%.1f s)\n", static_cast<long long>(steps),
            static_cast<long long>(per_epoch), step_loss, seconds_since(t_epoch));
      }
      const nn::DataPosition at = loader.position();
      const int64_t done = at.epoch * per_epoch + at.batch;  // the run's steps so far
      if (checkpoint_every > 0 && at.batch < per_epoch && done % checkpoint_every == 0) {
        save_checkpoint();
        say("  step %lld/%lld  checkpoint: %s\n", static_cast<long long>(at.batch),
            static_cast<long long>(per_epoch), ckpt_dir.c_str());
      }
      if (stop_after_steps >= 0 && done >= stop_after_steps) {
        stopped = true;
        break;
      }
    }
    if (stopped) {
      say("stopped after step %lld of the run (--stop-after-steps)\n",
          static_cast<long long>(stop_after_steps));
      break;
    }
    const double epoch_seconds = seconds_since(t_epoch);
    const double train_loss = sum_over_ranks(group, loss_sum) / (world * steps);
    broadcast_buffers(group, *model);
    const int64_t n = test_set->size();
    std::pair<int64_t, int64_t> counts;
    {
      profiler::Scope eval_scope("evaluate", profiler::Category::phase);
      NoGradGuard ng;
      model->eval();
      auto scope = autocast();
      counts = job.evaluate(*model, *test_set, rank * n / world, (rank + 1) * n / world);
      model->train();
    }
    const auto [correct, counted] = counts;
    const double total = sum_over_ranks(group, static_cast<double>(counted));
    accuracy = total > 0 ? sum_over_ranks(group, static_cast<double>(correct)) / total : 0.0;
    if (!ckpt_dir.empty()) save_checkpoint();
    std::string scaling;
    if (precision.loss_scaling || skipped > 0) {
      char buf[96];  // the scale may fall below 1 after many overflows
      std::snprintf(buf, sizeof buf, "  loss scale %g, %lld step(s) skipped (inf/NaN)",
                    strategy->loss_scale(), static_cast<long long>(skipped));
      scaling = buf;
    }
    say("epoch %lld/%d  loss %.6f  %s %.2f%%  lr %.3g  (%.1f s, %.0f examples/s)%s%s%s\n",
        static_cast<long long>(epoch + 1), opt.epochs, train_loss, job.metric.c_str(),
        100.0 * accuracy, sched->last_lr()[0], seconds_since(t_epoch),
        static_cast<double>(steps * batch) / epoch_seconds, scaling.c_str(),
        ckpt_dir.empty() ? "" : "  checkpoint: ", ckpt_dir.c_str());
  }
  profile.finish();
  // nothing trained, nothing measured (and the optimizer state was not loaded)
  if (!nothing_to_do) say("%s\n", strategy->memory_report().str().c_str());
  if (accuracy >= 0) {
    say("final %s %.2f%% after %lld epoch(s), %.1f s in all\n", job.metric.c_str(),
        100.0 * accuracy, static_cast<long long>(loader.position().epoch), seconds_since(t_start));
  }
  say("state digest %s\n",
      saved_digest.empty() ? models::state_digest(*model).c_str() : saved_digest.c_str());
  return 0;
}

const FlagDocs& loop_flags() {
  static const FlagDocs flags = {
      {"weight-decay", "0.01",
       "weight decay, not on biases and norms: decoupled (adamw, lamb) or L2 in the gradient "
       "(sgd, rmsprop, adagrad, adamax, nadam, radam)"},
      {"warmup-steps", "(the job's)",
       "W > 0: linear warmup over W steps, then linear decay "
       "(BERT's); 0: cosine annealing"},
      {"lr-schedule", "auto",
       "auto (linear if W > 0, else cosine), linear, cosine, exp (x gamma each epoch), "
       "step:E1,E2,... (x gamma after epochs E1, E2, ...) or constant; the last four after the "
       "warmup if W > 0"},
      {"lr-gamma", "0.1", "the factor of --lr-schedule exp and step"},
      {"max-grad-norm", "0", "> 0: clip the global gradient 2-norm to this value"},
      {"precision", "32", "32, bf16-mixed, f16-mixed (with loss scaling) or bf16-true"},
      {"accumulate", "1", "split each rank's share of a batch into K micro-batches"},
      {"dp-replicas", "2", "--strategy dp: model replicas (threads, or GPUs from --device's)"},
      {"bucket-mb", "25", "ddp/zero1/zero2: gradient bucket size in MiB"},
      {"first-bucket-mb", "1",
       "ddp/zero1/zero2: cap of the first bucket (the last layers' gradients) in MiB"},
      {"reduce-dtype", "same",
       "ddp/zero1/zero2: dtype gradients travel in (bf16, f16: half the bytes of f32; same: "
       "their own)"},
      {"offload-optimizer", "0",
       "1: zero1/zero2 keep the optimizer state in host memory and update on the CPU "
       "(--device cuda)"},
      {"estimate-memory", "0",
       "N > 0: print each strategy's model-state bytes per rank on 1..N ranks (this model, "
       "--precision, --optimizer, buckets, --offload-optimizer) and exit without training"},
      {"sync-batchnorm", "0",
       "1: BatchNorm normalises with every rank's batch (ddp, zero1, zero2; SyncBatchNorm)"},
      {"cudnn-benchmark", "0",
       "1: pick each cuDNN convolution's algorithm by timing them all, once per input size "
       "(--device cuda; as torch.backends.cudnn.benchmark)"},
      {"tf32", "0",
       "1: TF32 tensor cores in float32 matmuls and convolutions (--device cuda; about 10 "
       "mantissa bits). Under bf16-mixed / f16-mixed only the products autocast leaves in "
       "float32 (as PyTorch's allow_tf32 with autocast); refused with bf16-true"},
      {"checkpoint-dir", "(checkpoints/<job>)", "sharded checkpoints go here"},
      {"checkpoint-every", "0", "N > 0: also save every N steps (0: at epoch ends only)"},
      {"resume", "0",
       "1: continue from the checkpoint with the run's flags, at any world size and strategy"},
      {"log-every", "100", "print the loss every N steps (0: never)"},
      {"stop-after-epochs", "-1", "stop after this epoch as if interrupted (-1: never)"},
      {"stop-after-steps", "-1", "stop after this step as if interrupted (-1: never)"},
  };
  static const FlagDocs with_profile =
      join_flags(join_flags(optimizer_flags(), flags), profile_flags());
  return with_profile;
}

}  // namespace sl::train

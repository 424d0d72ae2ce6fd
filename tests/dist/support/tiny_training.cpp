#include "tiny_training.h"

#include <sstream>

namespace sl::testing {

TinyNet::TinyNet() : Module("TinyNet") {
  fc1 = register_module("fc1", std::make_shared<nn::Linear>(5, 7));
  fc2 = register_module("fc2", std::make_shared<nn::Linear>(7, 3));
  scale = register_parameter("scale", full({1}, 0.9, {.dtype = DType::f64}));
}

Tensor TinyNet::forward(const Tensor& x) {
  if (!use_fc2) return fc1->forward(x).narrow(1, 0, 3) * scale;
  return fc2->forward(fc1->forward(x).tanh()) * scale;
}

std::shared_ptr<TinyNet> make_tiny_net(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<TinyNet>();
}

const char* opt_name(OptKind k) {
  switch (k) {
    case OptKind::sgd:
      return "sgd";
    case OptKind::adam:
      return "adam";
    case OptKind::adamw:
      return "adamw";
    case OptKind::lamb:
      return "lamb";
    case OptKind::rmsprop:
      return "rmsprop";
    case OptKind::adagrad:
      return "adagrad";
    case OptKind::sgd_mixed:
      return "sgd_mixed";
    case OptKind::adam_mixed:
      return "adam_mixed";
    case OptKind::rmsprop_mixed:
      return "rmsprop_mixed";
    case OptKind::sgd_dampened:
      return "sgd_dampened";
    case OptKind::adamax:
      return "adamax";
    case OptKind::nadam:
      return "nadam";
    case OptKind::radam:
      return "radam";
  }
  return "?";
}

bool TrainConfig::uses_fc2(int step, int rank) const {
  return step >= fc2_from && (fc2_every <= 0 || step % fc2_every == 0) &&
         (fc2_rank < 0 || rank == fc2_rank);
}

std::string TrainConfig::str() const {
  std::ostringstream os;
  os << opt_name(opt) << " accum=" << accum << " clip=" << clip << " steps=" << steps;
  if (fc2_every > 0) os << " fc2_every=" << fc2_every;
  if (fc2_rank >= 0) os << " fc2_rank=" << fc2_rank;
  if (fc2_from > 0) os << " fc2_from=" << fc2_from;
  if (penalty > 0) os << " penalty=" << penalty;
  return os.str();
}

std::unique_ptr<optim::Optimizer> make_optimizer(OptKind k, nn::Module& m) {
  auto [decay, no_decay] = optim::split_no_decay(m.named_parameters(), {"bias", "scale"});
  switch (k) {
    case OptKind::sgd:
      return std::make_unique<optim::SGD>(std::vector<optim::ParamGroup<optim::SGDOptions>>{
          {decay, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01}},
          {no_decay, {.lr = 0.1, .momentum = 0.9}}});
    case OptKind::adam:
      return std::make_unique<optim::Adam>(std::vector<optim::ParamGroup<optim::AdamOptions>>{
          {decay, {.lr = 0.02, .weight_decay = 0.01}}, {no_decay, {.lr = 0.02}}});
    case OptKind::adamw:
      return std::make_unique<optim::AdamW>(std::vector<optim::ParamGroup<optim::AdamWOptions>>{
          {decay, {.lr = 0.02, .weight_decay = 0.05}},
          {no_decay, {.lr = 0.02, .weight_decay = 0}}});
    case OptKind::lamb:
      return std::make_unique<optim::Lamb>(std::vector<optim::ParamGroup<optim::LambOptions>>{
          {decay, {.lr = 0.02, .weight_decay = 0.05}},
          {no_decay, {.lr = 0.02, .weight_decay = 0}}});
    case OptKind::rmsprop:  // every buffer (a group without one: test_accounting_ranks.cpp)
      return std::make_unique<optim::RMSprop>(std::vector<optim::ParamGroup<optim::RMSpropOptions>>{
          {decay, {.lr = 0.01, .weight_decay = 0.01, .momentum = 0.9, .centered = true}},
          {no_decay, {.lr = 0.01, .alpha = 0.9, .momentum = 0.5, .centered = true}}});
    case OptKind::adagrad:  // a different initial sum per group
      return std::make_unique<optim::Adagrad>(std::vector<optim::ParamGroup<optim::AdagradOptions>>{
          {decay,
           {.lr = 0.05, .lr_decay = 0.01, .weight_decay = 0.01, .initial_accumulator_value = 0.1}},
          {no_decay, {.lr = 0.05}}});
    case OptKind::sgd_mixed:
      return std::make_unique<optim::SGD>(std::vector<optim::ParamGroup<optim::SGDOptions>>{
          {decay, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01}}, {no_decay, {.lr = 0.1}}});
    case OptKind::adam_mixed:
      return std::make_unique<optim::Adam>(std::vector<optim::ParamGroup<optim::AdamOptions>>{
          {decay, {.lr = 0.02, .weight_decay = 0.01}}, {no_decay, {.lr = 0.02, .amsgrad = true}}});
    case OptKind::rmsprop_mixed:
      return std::make_unique<optim::RMSprop>(std::vector<optim::ParamGroup<optim::RMSpropOptions>>{
          {decay, {.lr = 0.01, .centered = true}}, {no_decay, {.lr = 0.01, .momentum = 0.5}}});
    case OptKind::sgd_dampened:
      return std::make_unique<optim::SGD>(std::vector<optim::ParamGroup<optim::SGDOptions>>{
          {decay, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5, .weight_decay = 0.01}},
          {no_decay, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5}}});
    case OptKind::adamax:
      return std::make_unique<optim::Adamax>(std::vector<optim::ParamGroup<optim::AdamaxOptions>>{
          {decay, {.lr = 0.02, .weight_decay = 0.01}}, {no_decay, {.lr = 0.02, .eps = 1e-3}}});
    case OptKind::nadam:
      return std::make_unique<optim::NAdam>(std::vector<optim::ParamGroup<optim::NAdamOptions>>{
          {decay, {.lr = 0.02, .weight_decay = 0.01}},
          {no_decay, {.lr = 0.02, .momentum_decay = 0.1}}});
    case OptKind::radam:
      return std::make_unique<optim::RAdam>(std::vector<optim::ParamGroup<optim::RAdamOptions>>{
          {decay, {.lr = 0.02, .weight_decay = 0.01}}, {no_decay, {.lr = 0.02, .beta2 = 0.9}}});
  }
  return nullptr;
}

std::pair<Tensor, Tensor> global_batch(int step, int64_t g) {
  Generator gen(1000 + static_cast<uint64_t>(step));
  Tensor x = randn({g, 5}, {}, &gen);
  Tensor y = randn({g, 3}, {}, &gen);
  return {x, y};
}

namespace {

Tensor mse(const Tensor& out, const Tensor& y) {
  return (out - y).square().mean();
}

/// x as the leaf the penalty differentiates by (itself without a penalty).
Tensor penalty_input(const Tensor& x, const TrainConfig& c) {
  return c.penalty > 0 ? x.detach().requires_grad_() : x;
}

/// mse, plus TrainConfig::penalty's term: the rows are independent, so one gradient of
/// out.sum() w.r.t. x gives every row's input gradient.
Tensor loss_of(const Tensor& out, const Tensor& x, const Tensor& y, const TrainConfig& c) {
  Tensor loss = mse(out, y);
  if (c.penalty == 0) return loss;
  Tensor gx = grad({out.sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
  return loss + gx.square().sum({1}).mean() * c.penalty;
}

std::vector<Tensor> snapshot(nn::Module& m) {
  std::vector<Tensor> out;
  for (auto& [n, p] : m.named_parameters()) out.push_back(p.detach().clone());
  return out;
}

}  // namespace

RunResult train_reference(const TrainConfig& c, int ranks) {
  SL_CHECK(ranks == 1 || c.accum == 1, "train_reference: micro-batches over ", ranks, " ranks");
  auto net = make_tiny_net();
  auto opt = make_optimizer(c.opt, *net);
  optim::StepLR sched(*opt, 3, 0.5);
  RunResult r;
  for (int s = 0; s < c.steps; ++s) {
    auto [x, y] = global_batch(s, c.global_batch);
    opt->zero_grad();
    Tensor loss;
    if (ranks == 1 && c.fc2_rank < 0) {
      net->use_fc2 = c.uses_fc2(s, 0);
      Tensor xin = penalty_input(x, c);
      loss = loss_of(net->forward(xin), xin, y, c);
    } else {
      const int64_t share = c.global_batch / ranks;
      for (int k = 0; k < ranks; ++k) {
        net->use_fc2 = c.uses_fc2(s, k);
        Tensor xin = penalty_input(x.narrow(0, k * share, share), c);
        Tensor part = loss_of(net->forward(xin), xin, y.narrow(0, k * share, share), c) /
                      double(ranks);
        loss = loss.defined() ? loss + part : part;
      }
    }
    loss.backward();
    if (c.clip > 0) optim::clip_grad_norm_(net->parameters(), c.clip);
    opt->step();
    sched.step();
    r.losses.push_back(loss.item<double>());
  }
  r.params = snapshot(*net);
  return r;
}

TinyTrainer::TinyTrainer(const std::string& kind, const TrainConfig& c, dist::ProcessGroupPtr group,
                         dist::StrategyOptions opts)
    : config(c) {
  net = make_tiny_net();
  opt = make_optimizer(c.opt, *net);
  sched = std::make_unique<optim::StepLR>(*opt, 3, 0.5);
  opts.group = group;
  opts.max_grad_norm = c.clip;
  opts.bucket_cap_bytes = c.bucket_cap;
  replicas = std::make_shared<std::vector<std::shared_ptr<TinyNet>>>();
  if (!opts.replica_factory) {
    opts.replica_factory = [built = replicas] {
      built->push_back(make_tiny_net());
      return built->back();
    };
  }
  strategy = dist::make_strategy(kind, net, *opt, opts);
}

std::vector<double> TinyTrainer::run(int from, int to) {
  const TrainConfig& c = config;
  int n = strategy->world_size(), rank = strategy->rank();
  std::vector<double> losses;
  for (int s = from; s < to; ++s) {
    auto [x, y] = global_batch(s, c.global_batch);
    int64_t share = c.global_batch / n;
    x = x.narrow(0, rank * share, share);
    y = y.narrow(0, rank * share, share);
    if (s == c.inf_step && rank == c.inf_rank) {
      x = x.clone();
      x.select(0, 0).fill_(std::numeric_limits<double>::infinity());
    }
    strategy->zero_grad();
    net->use_fc2 = c.uses_fc2(s, rank);
    for (size_t i = 0; i < replicas->size(); ++i) {
      (*replicas)[i]->use_fc2 = c.uses_fc2(s, static_cast<int>(i) + 1);
    }
    int64_t micro = share / c.accum;
    double loss_sum = 0;
    for (int m = 0; m < c.accum; ++m) {
      auto sync = strategy->no_sync(m + 1 < c.accum);
      Tensor xin = penalty_input(x.narrow(0, m * micro, micro), c);
      Tensor out = strategy->forward(xin);
      Tensor loss = loss_of(out, xin, y.narrow(0, m * micro, micro), c) / double(c.accum);
      strategy->backward(loss);
      loss_sum += loss.item<double>();
    }
    results.push_back(strategy->step());
    sched->step();
    losses.push_back(loss_sum);
  }
  return losses;
}

serialize::Json TinyTrainer::extra() const {
  return serialize::Json::object({{"scheduler", sched->state_dict().meta}});
}

void TinyTrainer::restore(const serialize::Json& extra) {
  sched->load_state_dict(serialize::Section{{}, extra.at("scheduler")});
}

std::vector<Tensor> TinyTrainer::params() const {
  return snapshot(*net);
}

RunResult train_strategy(const std::string& kind, const TrainConfig& c, dist::ProcessGroupPtr group,
                         dist::StrategyOptions opts) {
  TinyTrainer t(kind, c, group, opts);
  RunResult r;
  r.losses = t.run(0, c.steps);
  r.steps = t.results;
  r.params = t.params();
  return r;
}

}  // namespace sl::testing

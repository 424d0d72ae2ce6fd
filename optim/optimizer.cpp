#include "optim/optimizer.h"

#include <charconv>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/ops/copy.h"

namespace sl::optim {

using serialize::Json;
using serialize::Section;

namespace {

/// The state tensors' keys, in a fixed order.
constexpr const auto& kStateKeys = ParamState::kKeys;

Tensor& state_tensor(ParamState& s, size_t k) {
  return s.tensor(k);
}

}  // namespace

void Optimizer::add_params(const TensorList& params) {
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    SL_CHECK(p.defined(), name(), ": parameter ", i, " of group ", params_.size(), " is undefined");
    SL_CHECK_DTYPE(p.is_floating_point(), name(), ": can only optimize floating tensors, got ",
                   dtype_name(p.dtype()), " (parameter ", i, " of group ", params_.size(), ")");
    // as PyTorch: the step writes the tensor in place, which a non-leaf's graph would not see
    SL_CHECK(p.is_leaf(), name(), ": can't optimize a non-leaf tensor (parameter ", i, " of group ",
             params_.size(), " has grad_fn ", p.grad_fn()->name(),
             "); pass the leaf, or detach() it");
    for (size_t j = 0; j < i; ++j) {
      SL_CHECK(!params[j].is_same(p), name(), ": parameter ", i, " appears twice in group ",
               params_.size());
    }
    for (const auto& group : params_) {
      for (const auto& q : group) {
        SL_CHECK(!q.is_same(p), name(),
                 ": some parameters appear in more than one parameter "
                 "group");
      }
    }
  }
  params_.push_back(params);
  state_.emplace_back(params.size());
  initial_lr_.emplace_back();
}

std::optional<double> Optimizer::initial_lr(size_t group) const {
  params(group);  // range check
  return initial_lr_[group];
}

void Optimizer::set_initial_lr(size_t group, double lr) {
  params(group);
  initial_lr_[group] = lr;
}

const TensorList& Optimizer::params(size_t group) const {
  SL_CHECK_INDEX(group < params_.size(), name(), ": group ", group, " out of range (",
                 params_.size(), " groups)");
  return params_[group];
}

size_t Optimizer::num_params() const {
  size_t n = 0;
  for (const auto& g : params_) n += g.size();
  return n;
}

ParamState& Optimizer::state(size_t group, size_t index) {
  SL_CHECK_INDEX(group < state_.size() && index < state_[group].size(), name(), ": no parameter ",
                 index, " in group ", group);
  return state_[group][index];
}

const ParamState& Optimizer::state(size_t group, size_t index) const {
  SL_CHECK_INDEX(group < state_.size() && index < state_[group].size(), name(), ": no parameter ",
                 index, " in group ", group);
  return state_[group][index];
}

ParamState* Optimizer::find_state(const Tensor& param) {
  for (size_t g = 0; g < params_.size(); ++g) {
    for (size_t i = 0; i < params_[g].size(); ++i) {
      if (params_[g][i].is_same(param)) return &state_[g][i];
    }
  }
  return nullptr;
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (const auto& group : params_) {
    for (const auto& p : group) {
      const Tensor& g = p.grad();
      if (!g.defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else {
        ops::fill_(g, 0);
        g.bump_version();
      }
    }
  }
}

void Optimizer::check_grad(const char* op, const Tensor& p, const Tensor& g) const {
  SL_CHECK_SHAPE(g.sizes() == p.sizes(), op, ": gradient of shape ", shape_str(g.sizes()),
                 " does not match its parameter of shape ", shape_str(p.sizes()));
}

Section Optimizer::state_dict() const {
  Section s;
  Json groups = Json::array();
  Json state = Json::object();
  size_t index = 0;
  for (size_t g = 0; g < params_.size(); ++g) {
    Json gj = group_to_json(g);
    Json ids = Json::array();
    for (size_t i = 0; i < params_[g].size(); ++i, ++index) {
      ids.push_back(static_cast<int64_t>(index));
      ParamState st = state_[g][i];
      if (st.empty()) continue;
      Json sj = Json::object({{"step", st.step}});
      if (st.mu_product) sj.set("mu_product", *st.mu_product);  // NAdam's
      state.set(std::to_string(index), std::move(sj));
      for (size_t k = 0; k < std::size(kStateKeys); ++k) {
        const Tensor& t = state_tensor(st, k);
        if (t.defined()) {
          s.tensors.insert("state." + std::to_string(index) + "." + kStateKeys[k], t);
        }
      }
    }
    if (initial_lr_[g]) gj.set("initial_lr", *initial_lr_[g]);
    gj.set("params", std::move(ids));
    groups.push_back(std::move(gj));
  }
  s.meta = Json::object(
      {{"optimizer", name()}, {"param_groups", std::move(groups)}, {"state", std::move(state)}});
  return s;
}

void Optimizer::load_state_dict(const Section& s) {
  const char* op = "load_state_dict";
  std::vector<std::vector<ParamState>> new_state(params_.size());
  const Json& m = s.meta;
  SL_CHECK(m.is_object() && m.contains("optimizer"), name(), ".", op,
           ": the section holds no optimizer state (missing 'optimizer')");
  SL_CHECK(m.at("optimizer").as_string() == name(), name(), ".", op, ": saved state is for ",
           m.at("optimizer").as_string(), ", not ", name());
  const Json& groups = m.at("param_groups");
  SL_CHECK(groups.size() == params_.size(), name(), ".", op, ": saved state has ", groups.size(),
           " parameter groups, this optimizer has ", params_.size());
  std::vector<std::pair<size_t, size_t>> where;  // global index -> (group, i)
  std::vector<std::optional<double>> new_initial_lr(params_.size());
  for (size_t g = 0; g < params_.size(); ++g) {
    if (const Json* il = groups[g].find("initial_lr")) {
      SL_CHECK(il->is_number(), name(), ".", op, ": group ", g, "'s initial_lr is not a number");
      new_initial_lr[g] = il->as_double();
    }
    const Json& ids = groups[g].at("params");
    SL_CHECK(ids.size() == params_[g].size(), name(), ".", op, ": group ", g,
             " of the saved state has ", ids.size(), " parameters, this optimizer's has ",
             params_[g].size());
    new_state[g].resize(params_[g].size());
    for (size_t i = 0; i < params_[g].size(); ++i) where.emplace_back(g, i);
  }
  for (const auto& [key, st] : m.at("state").members()) {
    size_t idx = 0;
    auto r = std::from_chars(key.data(), key.data() + key.size(), idx);
    SL_CHECK(r.ec == std::errc() && r.ptr == key.data() + key.size() && idx < where.size(), name(),
             ".", op, ": state for parameter '", key, "' but there are ", where.size(),
             " parameters");
    auto [g, i] = where[idx];
    const Tensor& p = params_[g][i];
    ParamState ps;
    ps.step = st.at("step").as_int();
    SL_CHECK(ps.step >= 0, name(), ".", op, ": negative step for parameter ", idx);
    if (const Json* mp = st.find("mu_product")) {
      SL_CHECK(mp->is_number(), name(), ".", op, ": mu_product of parameter ", idx,
               " is not a number");
      ps.mu_product = mp->as_double();
    }
    // state of a low-precision parameter with master weights lives in f32, like its master
    DType state_dtype = master_weights(g) && is_low_precision(p.dtype()) ? DType::f32 : p.dtype();
    for (size_t k = 0; k < std::size(kStateKeys); ++k) {
      const Tensor* t = s.tensors.find("state." + key + "." + kStateKeys[k]);
      if (!t) continue;
      SL_CHECK_SHAPE(t->sizes() == p.sizes(), name(), ".", op, ": state '", kStateKeys[k],
                     "' of parameter ", idx, " has shape ", shape_str(t->sizes()),
                     ", the parameter has ", shape_str(p.sizes()));
      SL_CHECK_DTYPE(t->is_floating_point(), name(), ".", op, ": state '", kStateKeys[k],
                     "' of parameter ", idx, " has dtype ", dtype_name(t->dtype()));
      DType dt = std::string_view(kStateKeys[k]) == "master" ? DType::f32 : state_dtype;
      state_tensor(ps, k) = ops::contiguous(ops::cast(ops::to_device(*t, p.device()), dt), true);
    }
    new_state[g][i] = std::move(ps);
  }
  load_groups_from_json(groups);  // all-or-nothing: throws before changing anything
  state_ = std::move(new_state);
  initial_lr_ = std::move(new_initial_lr);
}

std::pair<TensorList, TensorList> split_no_decay(
    const std::vector<std::pair<std::string, Tensor>>& named_params,
    const std::vector<std::string>& no_decay_substrings) {
  TensorList decay, no_decay;
  for (const auto& [n, p] : named_params) {
    bool nd = p.dim() < 2;
    for (const auto& s : no_decay_substrings) nd = nd || n.find(s) != std::string::npos;
    (nd ? no_decay : decay).push_back(p);
  }
  return {decay, no_decay};
}

}  // namespace sl::optim

#include "nn/module.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <unordered_set>

#include "autograd/grad_mode.h"
#include "core/error.h"

namespace sl::nn {

// ---- set_data -----------------------------------------------------------------------------------

void set_data(const Tensor& dst, const Tensor& src) {
  SL_CHECK(dst.defined() && src.defined(), "set_data: both tensors must be defined");
  TensorImpl* d = dst.impl();
  const TensorImpl* s = src.impl();
  if (d == s) return;
  bool same_meta =
      d->sizes == s->sizes && d->dtype == s->dtype && d->storage->device() == s->storage->device();
  // Take copies first: src may be a view of dst's own storage.
  std::shared_ptr<Storage> storage = s->storage;
  Shape sizes = s->sizes, strides = s->strides;
  d->storage = std::move(storage);
  d->sizes = std::move(sizes);
  d->strides = std::move(strides);
  d->offset = s->offset;
  d->dtype = s->dtype;
  if (!same_meta && d->autograd) {
    // The gradient and the AccumulateGrad node describe the old shape/dtype/device.
    d->autograd->grad = Tensor();
    d->autograd->grad_accumulator.reset();
  }
}

// ---- StateDict ----------------------------------------------------------------------------------

StateDict::StateDict(std::initializer_list<Item> items) {
  for (const auto& [k, v] : items) insert(k, v);
}

void StateDict::insert(const std::string& name, const Tensor& t) {
  SL_CHECK(!contains(name), "StateDict::insert: key '", name, "' is already present");
  index_.emplace(name, items_.size());
  items_.emplace_back(name, t);
}

void StateDict::set(const std::string& name, const Tensor& t) {
  auto it = index_.find(name);
  if (it == index_.end()) {
    insert(name, t);
  } else {
    items_[it->second].second = t;
  }
}

const Tensor* StateDict::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

const Tensor& StateDict::at(const std::string& name) const {
  const Tensor* t = find(name);
  SL_CHECK_INDEX(t != nullptr, "StateDict::at: no key '", name, "'");
  return *t;
}

void StateDict::erase(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) return;
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(it->second));
  index_.clear();
  for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> k;
  k.reserve(items_.size());
  for (const auto& it : items_) k.push_back(it.first);
  return k;
}

std::string LoadResult::str() const {
  std::ostringstream os;
  auto list = [&](const char* what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    os << what << ": ";
    for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << '"' << v[i] << '"';
    os << '\n';
  };
  list("missing keys", missing_keys);
  list("unexpected keys", unexpected_keys);
  return os.str();
}

// ---- Module: registration
// ------------------------------------------------------------------------

Module::Module(std::string type_name) : type_name_(std::move(type_name)) {}
Module::~Module() = default;

Tensor Module::forward(const Tensor&) {
  detail::throw_error<ValueError>(type_name_,
                                  ": this module has no one-tensor forward(x); call "
                                  "the forward overload it defines");
}

void Module::check_new_name(const std::string& name, const char* what) const {
  SL_CHECK(!name.empty(), type_name_, ".", what, ": the name must not be empty");
  SL_CHECK(name.find('.') == std::string::npos, type_name_, ".", what, ": name '", name,
           "' must not contain '.'");
  bool taken = find_param(name) || find_buffer(name) ||
               std::any_of(children_.begin(), children_.end(),
                           [&](const auto& c) { return c.first == name; });
  SL_CHECK(!taken, type_name_, ".", what, ": attribute '", name, "' already exists");
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name(name, "register_parameter");
  if (t.defined()) {
    SL_CHECK_DTYPE(t.is_floating_point(), type_name_, ".register_parameter: parameter '", name,
                   "' must be floating point, got ", dtype_name(t.dtype()));
    SL_CHECK(t.is_leaf(), type_name_, ".register_parameter: parameter '", name,
             "' must be a leaf tensor (detach() it first)");
    t.requires_grad_(requires_grad);
  }
  params_.push_back(Slot{name, t, true});
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  check_new_name(name, "register_buffer");
  buffers_.push_back(Slot{name, t, persistent});
  return t;
}

void Module::register_child(const std::string& name, std::shared_ptr<Module> m) {
  check_new_name(name, "register_module");
  SL_CHECK(m != nullptr, type_name_, ".register_module: module '", name, "' is null");
  SL_CHECK(m.get() != this, type_name_, ".register_module: a module cannot be its own child");
  children_.emplace_back(name, std::move(m));
}

void Module::replace_child(const std::string& name, std::shared_ptr<Module> m) {
  SL_CHECK(m != nullptr, type_name_, ".replace_module: module '", name, "' is null");
  for (auto& c : children_) {
    if (c.first == name) {
      c.second = std::move(m);
      return;
    }
  }
  detail::throw_error<IndexError>(type_name_, ".replace_module: no child named '", name, "'");
}

const Module::Slot* Module::find_param(const std::string& name) const {
  for (const auto& s : params_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const Module::Slot* Module::find_buffer(const std::string& name) const {
  for (const auto& s : buffers_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

// ---- traversal
// -----------------------------------------------------------------------------------

void Module::collect_named_modules(const std::string& prefix,
                                   std::vector<std::pair<std::string, Module*>>& out,
                                   std::vector<const Module*>& seen) const {
  if (std::find(seen.begin(), seen.end(), this) != seen.end()) return;
  seen.push_back(this);
  out.emplace_back(prefix, const_cast<Module*>(this));
  for (const auto& [name, child] : children_) {
    child->collect_named_modules(prefix.empty() ? name : prefix + "." + name, out, seen);
  }
}

std::vector<std::pair<std::string, Module*>> Module::named_modules(
    const std::string& prefix) const {
  std::vector<std::pair<std::string, Module*>> out;
  std::vector<const Module*> seen;
  collect_named_modules(prefix, out, seen);
  return out;
}

namespace {
std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}
}  // namespace

Module::NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  std::unordered_set<const TensorImpl*> seen;
  std::vector<std::pair<std::string, Module*>> mods;
  if (recurse) {
    mods = named_modules();
  } else {
    mods.emplace_back("", const_cast<Module*>(this));
  }
  for (const auto& [prefix, m] : mods) {
    for (const auto& s : m->params_) {
      if (!s.tensor.defined() || !seen.insert(s.tensor.impl()).second) continue;
      out.emplace_back(join(prefix, s.name), s.tensor);
    }
  }
  return out;
}

TensorList Module::parameters(bool recurse) const {
  TensorList out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

Module::NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  std::unordered_set<const TensorImpl*> seen;
  std::vector<std::pair<std::string, Module*>> mods;
  if (recurse) {
    mods = named_modules();
  } else {
    mods.emplace_back("", const_cast<Module*>(this));
  }
  for (const auto& [prefix, m] : mods) {
    for (const auto& s : m->buffers_) {
      if (!s.tensor.defined() || !seen.insert(s.tensor.impl()).second) continue;
      out.emplace_back(join(prefix, s.name), s.tensor);
    }
  }
  return out;
}

TensorList Module::buffers(bool recurse) const {
  TensorList out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& c : children_) out.push_back(c.second);
  return out;
}

Module& Module::get_submodule(const std::string& dotted) const {
  const Module* m = this;
  std::string walked;
  size_t pos = 0;
  while (pos < dotted.size()) {
    size_t dot = dotted.find('.', pos);
    std::string part = dotted.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    const Module* next = nullptr;
    for (const auto& c : m->children_) {
      if (c.first == part) next = c.second.get();
    }
    SL_CHECK_INDEX(next != nullptr, "get_submodule: ", m->type_name_,
                   walked.empty() ? "" : " '" + walked + "'", " has no child '", part,
                   "' (looking up '", dotted, "')");
    walked = join(walked, part);
    m = next;
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return const_cast<Module&>(*m);
}

namespace {
std::pair<std::string, std::string> split_last(const std::string& dotted) {
  size_t dot = dotted.rfind('.');
  if (dot == std::string::npos) return {"", dotted};
  return {dotted.substr(0, dot), dotted.substr(dot + 1)};
}
}  // namespace

Tensor& Module::parameter_slot(const std::string& dotted) {
  auto [path, name] = split_last(dotted);
  Module& m = get_submodule(path);
  for (auto& s : m.params_) {
    if (s.name == name) return s.tensor;
  }
  detail::throw_error<IndexError>("parameter_slot: ", m.type_name_, " has no parameter '", name,
                                  "' (looking up '", dotted, "')");
}

Tensor Module::get_parameter(const std::string& dotted) const {
  auto [path, name] = split_last(dotted);
  const Module& m = get_submodule(path);
  const Slot* s = m.find_param(name);
  SL_CHECK_INDEX(s != nullptr && s->tensor.defined(), "get_parameter: ", m.type_name_,
                 " has no parameter '", name, "' (looking up '", dotted, "')");
  return s->tensor;
}

Tensor Module::get_buffer(const std::string& dotted) const {
  auto [path, name] = split_last(dotted);
  const Module& m = get_submodule(path);
  const Slot* s = m.find_buffer(name);
  SL_CHECK_INDEX(s != nullptr && s->tensor.defined(), "get_buffer: ", m.type_name_,
                 " has no buffer '", name, "' (looking up '", dotted, "')");
  return s->tensor;
}

void Module::set_parameter_data(const std::string& dotted, const Tensor& src) {
  Tensor p = get_parameter(dotted);
  SL_CHECK(src.defined(), "set_parameter_data: the new data for '", dotted, "' is undefined");
  SL_CHECK_SHAPE(src.sizes() == p.sizes(), "set_parameter_data: '", dotted, "' has shape ",
                 shape_str(p.sizes()), " but the new data has shape ", shape_str(src.sizes()));
  set_data(p, src);
}

// ---- modes, devices, gradients
// ---------------------------------------------------------------------

void Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.second->train(on);
}

void Module::convert(const std::function<Tensor(const Tensor&, bool)>& fn) {
  NoGradGuard no_grad;
  for (const auto& [prefix, m] : named_modules()) {
    (void)prefix;
    for (auto* list : {&m->params_, &m->buffers_}) {
      bool is_param = list == &m->params_;
      for (auto& s : *list) {
        if (!s.tensor.defined()) continue;
        Tensor converted = fn(s.tensor, is_param);
        if (converted.is_same(s.tensor)) continue;
        Tensor g = s.tensor.grad();
        Tensor new_grad = g.defined() ? fn(g, false) : Tensor();
        set_data(s.tensor, converted.detach());
        if (new_grad.defined()) s.tensor.impl()->autograd_meta().grad = new_grad;
      }
    }
  }
}

void Module::to(Device device) {
  convert([&](const Tensor& t, bool) { return t.to(device); });
}

void Module::to(DType dtype) {
  SL_CHECK_DTYPE(is_floating(dtype), type_name_, ".to: only floating dtypes are accepted, got ",
                 dtype_name(dtype));
  convert([&](const Tensor& t, bool) { return t.is_floating_point() ? t.to(dtype) : t; });
}

void Module::to(Device device, DType dtype) {
  SL_CHECK_DTYPE(is_floating(dtype), type_name_, ".to: only floating dtypes are accepted, got ",
                 dtype_name(dtype));
  convert([&](const Tensor& t, bool) {
    return t.is_floating_point() ? t.to(device, dtype) : t.to(device);
  });
}

void Module::zero_grad(bool set_to_none) {
  for (auto& p : parameters()) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      Tensor g = p.grad();
      NoGradGuard no_grad;
      g.detach().zero_();
    }
  }
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& c : children_) c.second->apply(fn);
  fn(*this);
}

int64_t Module::num_parameters(bool trainable_only) const {
  int64_t n = 0;
  for (const auto& p : parameters()) {
    if (!trainable_only || p.requires_grad()) n += p.numel();
  }
  return n;
}

// ---- printing
// --------------------------------------------------------------------------------------

namespace {
// _addindent from torch/nn/modules/module.py: every line but the first gets `spaces` more.
std::string add_indent(const std::string& s, int spaces) {
  std::string out;
  std::string pad(static_cast<size_t>(spaces), ' ');
  for (char c : s) {
    out += c;
    if (c == '\n') out += pad;
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::string cur;
  for (char c : s) {
    if (c == '\n') {
      lines.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  lines.push_back(cur);
  return lines;
}
}  // namespace

std::string Module::str() const {
  std::vector<std::string> extra;
  std::string er = extra_repr();
  if (!er.empty()) extra = split_lines(er);
  std::vector<std::string> child_lines;
  for (const auto& [name, child] : children_) {
    child_lines.push_back("(" + name + "): " + add_indent(child->str(), 2));
  }
  std::string out = type_name_ + "(";
  if (!extra.empty() || !child_lines.empty()) {
    if (extra.size() == 1 && child_lines.empty()) {
      out += extra[0];
    } else {
      out += "\n";
      for (const auto& l : extra) out += "  " + l + "\n";
      for (const auto& l : child_lines) out += "  " + l + "\n";
    }
  }
  out += ")";
  return out;
}

// ---- state dicts
// -----------------------------------------------------------------------------------

void Module::collect_state(const std::string& prefix, StateDict& out) const {
  for (const auto& s : params_) {
    if (s.tensor.defined()) out.insert(join(prefix, s.name), s.tensor.detach());
  }
  for (const auto& s : buffers_) {
    if (s.tensor.defined() && s.persistent) out.insert(join(prefix, s.name), s.tensor.detach());
  }
  for (const auto& [name, child] : children_) child->collect_state(join(prefix, name), out);
}

StateDict Module::state_dict() const {
  StateDict out;
  collect_state("", out);
  return out;
}

LoadResult Module::load_state_dict(const StateDict& dict, bool strict) {
  // The module's own entries, as live handles (state_dict() returns detached aliases).
  std::vector<std::pair<std::string, Tensor>> targets;
  for (const auto& [prefix, m] : named_modules()) {
    for (const auto& s : m->params_) {
      if (s.tensor.defined()) targets.emplace_back(join(prefix, s.name), s.tensor);
    }
    for (const auto& s : m->buffers_) {
      if (s.tensor.defined() && s.persistent) targets.emplace_back(join(prefix, s.name), s.tensor);
    }
  }
  LoadResult r;
  std::string mismatched;
  std::unordered_set<std::string> known;
  for (const auto& [name, t] : targets) {
    known.insert(name);
    const Tensor* src = dict.find(name);
    if (!src || !src->defined()) {
      r.missing_keys.push_back(name);
    } else if (src->sizes() != t.sizes()) {
      mismatched += "\n  " + name + ": checkpoint " + shape_str(src->sizes()) + " vs model " +
                    shape_str(t.sizes());
    }
  }
  if (!mismatched.empty()) {
    detail::throw_error<ShapeError>("load_state_dict: size mismatch loading the state dict for ",
                                    type_name_, " (nothing was copied):", mismatched);
  }
  for (const auto& [name, t] : dict) {
    if (!known.count(name)) r.unexpected_keys.push_back(name);
  }
  if (strict && !r.ok()) {
    detail::throw_error<ValueError>("load_state_dict: error(s) loading the state dict for ",
                                    type_name_, ":\n", r.str());
  }
  NoGradGuard no_grad;
  for (const auto& [name, t] : targets) {
    const Tensor* src = dict.find(name);
    if (!src || !src->defined()) continue;
    Tensor dst = t.detach();
    dst.copy_(*src);
  }
  return r;
}

}  // namespace sl::nn

namespace sl::nn::repr {

std::string py_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  // Shortest round-tripping digits, then Python's layout rules (repr uses scientific notation
  // when the decimal exponent is < -4 or >= 16).
  char buf[64];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  bool neg = s[0] == '-';
  if (neg) s = s.substr(1);
  size_t e = s.find('e');
  int exp = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (s[i] != '.') digits += s[i];
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  } else if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return neg ? "-" + out : out;
}

std::string py_tuple(const std::vector<int64_t>& v) {
  std::string out = "(";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() == 1) out += ",";
  return out + ")";
}

}  // namespace sl::nn::repr

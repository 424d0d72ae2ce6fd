#include "core/amp.h"

namespace sl {
namespace {

AutocastState& state() {
  thread_local AutocastState s;
  return s;
}

bool eligible(const Tensor& t) {
  return t.defined() && is_floating(t.dtype()) && t.dtype() != DType::f64 &&
         is_autocast_enabled(t.device().kind);
}

}  // namespace

AutocastGuard::AutocastGuard(DeviceKind kind, DType dtype, bool enabled) : kind_(kind) {
  SL_CHECK_DTYPE(dtype == DType::f16 || dtype == DType::bf16,
                 "AutocastGuard: dtype must be float16 or bfloat16, got ", dtype_name(dtype));
  AutocastState& s = state();
  const auto k = static_cast<size_t>(kind);
  prev_enabled_ = s.enabled[k];
  prev_dtype_ = s.dtype[k];
  s.enabled[k] = enabled;
  s.dtype[k] = dtype;
}

AutocastGuard::~AutocastGuard() {
  AutocastState& s = state();
  const auto k = static_cast<size_t>(kind_);
  s.enabled[k] = prev_enabled_;
  s.dtype[k] = prev_dtype_;
}

AutocastState autocast_state() {
  return state();
}

AutocastStateGuard::AutocastStateGuard(const AutocastState& state_in) : prev_(state()) {
  state() = state_in;
}
AutocastStateGuard::~AutocastStateGuard() {
  state() = prev_;
}

bool is_autocast_enabled(DeviceKind kind) {
  return state().enabled[static_cast<size_t>(kind)];
}
DType autocast_dtype(DeviceKind kind) {
  return state().dtype[static_cast<size_t>(kind)];
}

Tensor autocast(const Tensor& t, AmpPolicy policy) {
  if (!eligible(t)) return t;
  switch (policy) {
    case AmpPolicy::lower: {
      DType low = autocast_dtype(t.device().kind);
      return t.dtype() == DType::f32 ? t.to(low) : t;
    }
    case AmpPolicy::fp32:
      return t.dtype() == DType::f32 ? t : t.to(DType::f32);
    case AmpPolicy::promote:
      return t;  // one tensor is already its own widest type
  }
  return t;
}

std::vector<Tensor> autocast(const std::vector<Tensor>& ts, AmpPolicy policy) {
  if (policy != AmpPolicy::promote) {
    std::vector<Tensor> out;
    out.reserve(ts.size());
    for (const Tensor& t : ts) out.push_back(autocast(t, policy));
    return out;
  }
  // promote: the widest floating dtype among the eligible inputs (f16 with bf16 gives f32)
  bool any = false;
  DType widest = DType::f16;
  for (const Tensor& t : ts) {
    if (!eligible(t)) continue;
    widest = any ? promote_types(widest, t.dtype()) : t.dtype();
    any = true;
  }
  std::vector<Tensor> out = ts;
  if (!any) return out;
  for (Tensor& t : out) {
    if (eligible(t) && t.dtype() != widest) t = t.to(widest);
  }
  return out;
}

}  // namespace sl

#include "dist/accounting.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace sl::dist {

MemoryPrediction predict_memory(StrategyKind kind, int64_t psi, int n, double param_bpe,
                                double state_bpe) {
  SL_CHECK(n >= 1 && psi >= 0, "predict_memory: need psi >= 0 and n >= 1, got psi=", psi, " n=", n);
  const double p = static_cast<double>(psi), nn = static_cast<double>(n);
  MemoryPrediction m;
  m.param_bytes = param_bpe * p;
  m.grad_bytes = param_bpe * p;
  m.optimizer_state_bytes = state_bpe * p;
  if (kind == StrategyKind::zero1 || kind == StrategyKind::zero2) m.optimizer_state_bytes /= nn;
  if (kind == StrategyKind::zero2) m.grad_bytes /= nn;
  return m;
}

double MemoryComparison::worst() const {
  return std::max({param_rel, grad_rel, state_rel});
}

std::string MemoryComparison::str() const {
  std::ostringstream os;
  os << "params " << param_rel * 100 << "%, grads " << grad_rel * 100 << "%, optimizer state "
     << state_rel * 100 << "% off the prediction";
  return os.str();
}

MemoryComparison compare_memory(const MemoryReport& m, const MemoryPrediction& p) {
  auto rel = [](double got, double want) {
    return want == 0 ? (got == 0 ? 0.0 : INFINITY) : std::abs(got - want) / want;
  };
  MemoryComparison c;
  c.param_rel = rel(static_cast<double>(m.param_bytes), p.param_bytes);
  c.grad_rel = rel(static_cast<double>(m.grad_bytes), p.grad_bytes);
  c.state_rel = rel(static_cast<double>(m.optimizer_state_bytes + m.master_weight_bytes),
                    p.optimizer_state_bytes);
  return c;
}

}  // namespace sl::dist

#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops/shape.h"
#include "core/creation.h"
#include "core/ops/copy.h"

namespace sl {

namespace {
std::vector<double> flat(const Tensor& t) { return t.detach().to_vector<double>(); }
}  // namespace

bool gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
               const GradcheckOptions& opts) {
  std::vector<size_t> checked;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined()) continue;
    SL_CHECK_DTYPE(!t.requires_grad() || (t.dtype() == DType::f64 && t.is_cpu()),
                   "gradcheck: input ", i, " must be a CPU float64 tensor, got ",
                   dtype_name(t.dtype()), " on ", t.device());
    if (t.requires_grad()) checked.push_back(i);
  }
  SL_CHECK(!checked.empty(), "gradcheck: no input requires grad");

  Tensor out = fn(inputs);
  SL_CHECK_DTYPE(out.dtype() == DType::f64, "gradcheck: fn must return float64, got ",
                 dtype_name(out.dtype()));
  const int64_t n_out = out.numel();

  // Analytic Jacobian: one vector-Jacobian product per output element.
  TensorList wrt;
  for (size_t i : checked) wrt.push_back(inputs[i]);
  std::vector<std::vector<double>> analytic(checked.size());
  for (size_t k = 0; k < checked.size(); ++k) {
    analytic[k].assign(static_cast<size_t>(n_out * inputs[checked[k]].numel()), 0.0);
  }
  if (out.requires_grad()) {
    for (int64_t j = 0; j < n_out; ++j) {
      Tensor onehot = zeros(out.sizes(), {.dtype = DType::f64});
      static_cast<double*>(onehot.data_ptr())[j] = 1.0;
      variable_list g = grad({out}, wrt, {onehot}, /*retain_graph=*/true);
      for (size_t k = 0; k < checked.size(); ++k) {
        if (!g[k].defined()) continue;
        std::vector<double> row = flat(g[k]);
        for (size_t e = 0; e < row.size(); ++e) analytic[k][static_cast<size_t>(j) * row.size() + e] = row[e];
      }
    }
  }

  // Numerical Jacobian by central differences on detached copies.
  for (size_t k = 0; k < checked.size(); ++k) {
    size_t idx = checked[k];
    int64_t n_in = inputs[idx].numel();
    for (int64_t e = 0; e < n_in; ++e) {
      std::vector<double> plus, minus;
      for (int sign = 1; sign >= -1; sign -= 2) {
        TensorList pert;
        for (size_t i = 0; i < inputs.size(); ++i) {
          pert.push_back(inputs[i].defined() ? ops::contiguous(inputs[i].detach(), true) : Tensor());
        }
        static_cast<double*>(pert[idx].data_ptr())[e] += sign * opts.eps;
        Tensor y;
        {
          NoGradGuard ng;
          y = fn(pert);
        }
        (sign > 0 ? plus : minus) = flat(y);
      }
      for (int64_t j = 0; j < n_out; ++j) {
        double num = (plus[static_cast<size_t>(j)] - minus[static_cast<size_t>(j)]) / (2 * opts.eps);
        double ana = analytic[k][static_cast<size_t>(j * n_in + e)];
        if (!(std::fabs(ana - num) <= opts.atol + opts.rtol * std::fabs(num))) {
          if (!opts.raise) return false;
          detail::throw_error<AutogradError>(
              "gradcheck: Jacobian mismatch for input ", idx, " (shape ",
              shape_str(inputs[idx].sizes()), ") element ", e, " and output element ", j,
              ": analytic ", ana, " vs numerical ", num, " (atol ", opts.atol, ", rtol ",
              opts.rtol, ")");
        }
      }
    }
  }
  return true;
}

bool gradgradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                   const GradcheckOptions& opts) {
  std::vector<size_t> checked;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined() && inputs[i].requires_grad()) checked.push_back(i);
  }
  SL_CHECK(!checked.empty(), "gradgradcheck: no input requires grad");
  Shape out_shape;
  {
    NoGradGuard ng;
    out_shape = fn(inputs).sizes();
  }
  // The output gradient v: fixed values in [-1.3, 1.3], none zero, no two neighbours equal.
  Tensor v = zeros(out_shape, {.dtype = DType::f64});
  double* pv = static_cast<double*>(v.data_ptr());
  for (int64_t j = 0; j < v.numel(); ++j)
    pv[j] = 0.4 + 0.9 * std::sin(1.7 * static_cast<double>(j) + 0.3);
  v.requires_grad_();

  auto first_order = [&fn, &checked](const TensorList& all) -> Tensor {
    // gradcheck evaluates this under NoGradGuard for its central differences, on detached copies:
    // the first-order gradient needs a graph there too.
    EnableGradGuard eg;
    TensorList xs(all.begin(), all.end() - 1);
    TensorList wrt;
    for (size_t i : checked) {
      if (!xs[i].requires_grad()) xs[i] = xs[i].detach().requires_grad_();
      wrt.push_back(xs[i]);
    }
    Tensor y = fn(xs);
    variable_list g = grad({y}, wrt, {all.back()}, /*retain_graph=*/true, /*create_graph=*/true);
    TensorList flat_grads;
    for (size_t k = 0; k < g.size(); ++k) {
      flat_grads.push_back(g[k].defined() ? g[k].reshape({-1})
                                          : zeros({wrt[k].numel()}, {.dtype = DType::f64}));
    }
    return cat(flat_grads, 0);
  };
  TensorList all(inputs.begin(), inputs.end());
  all.push_back(v);
  // Ops may compute their gradient one way in a plain backward (a kernel) and another under
  // create_graph (differentiable ops); central differences of the latter only show that the
  // second backward matches it, so it must equal the former first. Both are float64 evaluations
  // of the same derivative in different orders: they agree to roundoff, far inside 1e-9.
  Tensor with_graph = first_order(all).detach();
  std::vector<double> recorded = with_graph.to_vector<double>();
  std::vector<double> plain;
  {
    EnableGradGuard eg;
    TensorList wrt;
    for (size_t i : checked) wrt.push_back(inputs[i]);
    variable_list g = grad({fn(inputs)}, wrt, {v.detach()});
    for (size_t k = 0; k < g.size(); ++k) {
      std::vector<double> part = g[k].defined() ? g[k].contiguous().to_vector<double>()
                                                : std::vector<double>(wrt[k].numel(), 0.0);
      plain.insert(plain.end(), part.begin(), part.end());
    }
  }
  for (size_t j = 0; j < plain.size(); ++j) {
    const double a = recorded[j], b = plain[j];
    const bool same =
        (std::isnan(a) && std::isnan(b)) || std::fabs(a - b) <= 1e-9 * (1 + std::fabs(b));
    if (same) continue;
    if (!opts.raise) return false;
    detail::throw_error<AutogradError>(
        "gradgradcheck: the first-order gradient computed with create_graph differs from the "
        "plain backward's at element ",
        j, " of the flattened gradients: ", a, " vs ", b);
  }
  return gradcheck(first_order, all, opts);
}

}  // namespace sl

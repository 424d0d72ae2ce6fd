#include "cuda_testing.h"

namespace sl::testing {

void check_gpu_parity(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                      double rtol, double atol) {
  check_gpu_parity(fn, inputs, Tol{rtol, atol}, Tol{rtol, atol});
}

void check_gpu_parity(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                      Tol tol, Tol grad_tol) {
  TensorList cpu_in, gpu_in;
  for (const Tensor& t : inputs) {
    Tensor c = t.detach().clone();
    Tensor g = t.detach().to(kGPU);
    if (t.requires_grad()) {
      c.requires_grad_();
      g.requires_grad_();
    }
    cpu_in.push_back(c);
    gpu_in.push_back(g);
  }
  Tensor yc = fn(cpu_in);
  Tensor yg = fn(gpu_in);
  REQUIRE(yg.device() == kGPU);
  SL_CHECK_CLOSE_TOL(yg.cpu(), yc, tol);
  bool any_grad = false;
  for (const Tensor& t : inputs) any_grad = any_grad || t.requires_grad();
  if (!any_grad) return;
  Generator gen(4242);
  Tensor up = randn(yc.sizes(), {.dtype = yc.dtype()}, &gen);
  yc.backward(up);
  yg.backward(up.to(kGPU));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    CAPTURE(i);
    REQUIRE(gpu_in[i].grad().defined());
    CHECK(gpu_in[i].grad().device() == kGPU);
    SL_CHECK_CLOSE_TOL(gpu_in[i].grad().cpu(), cpu_in[i].grad(), grad_tol);
  }
}

}  // namespace sl::testing

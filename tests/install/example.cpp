// Fits y = 3x - 1 with a one-unit linear layer: autograd, backward, and a plain SGD step.
#include <shardlight/shardlight.h>

#include <iostream>

int main() {
  sl::manual_seed(0);
  sl::Tensor x = sl::randn({256, 1});
  sl::Tensor y = 3 * x - 1;

  sl::Tensor w = sl::zeros({1, 1}, {.requires_grad = true});
  sl::Tensor b = sl::zeros({1}, {.requires_grad = true});
  for (int step = 0; step < 100; ++step) {
    sl::Tensor loss = (sl::linear(x, w, b) - y).square().mean();
    loss.backward();
    sl::NoGradGuard no_grad;  // the update itself is not recorded
    for (sl::Tensor* p : {&w, &b}) {
      p->sub_(p->grad(), 0.1);
      p->set_grad(sl::Tensor());
    }
    if (step % 25 == 0) std::cout << "step " << step << " loss " << loss.item<float>() << "\n";
  }
  std::cout << "w = " << w.item<float>() << ", b = " << b.item<float>() << "\n";
  bool fitted = std::abs(w.item<float>() - 3) < 1e-3 && std::abs(b.item<float>() + 1) < 1e-3;
  return fitted ? 0 : 1;
}

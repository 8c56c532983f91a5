// A short tour of graft's autograd: backward, grad with create_graph, hooks, and gradcheck.
#include <iostream>

#include "graft.h"

using namespace graft;

int main() {
  manual_seed(0);
  Tensor x = randn({4, 3});
  Tensor w = randn({3, 2}, TensorOptions{}.requires_grad());
  Tensor loss = x.matmul(w).relu().softmax(1).log().mean();
  loss.backward();
  std::cout << "loss = " << loss << "\nd loss / d w =\n" << w.grad() << "\n\n";

  Tensor z = tensor({0.5, -1.0}, dtype(kFloat64)).requires_grad_();
  auto g = autograd::grad({z.tanh().sum()}, {z}, {}, std::nullopt, /*create_graph=*/true);
  auto gg = autograd::grad({g[0].sum()}, {z});
  std::cout << "d tanh = " << g[0] << "\nd2 tanh = " << gg[0] << "\n";

  Tensor h = z * 3;
  h.register_hook([](const Tensor& grad) { return grad * 10; });
  h.sum().backward();
  std::cout << "with a hook scaling by 10: " << z.grad() << "\n";

  bool ok = autograd::gradcheck([](const std::vector<Tensor>& in) { return in[0].sigmoid() * in[0]; }, {z});
  std::cout << "gradcheck: " << (ok ? "passed" : "failed") << "\n";
  return ok ? 0 : 1;
}

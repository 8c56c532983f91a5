#include <graft/graft.h>
#include <iostream>
using namespace graft;

int main() {
  manual_seed(0);
  Tensor x = randn({4, 3});
  Tensor w = randn({3, 2}, TensorOptions{}.requires_grad());
  Tensor loss = x.matmul(w).relu().softmax(1).log().mean();
  loss.backward();                                       // the engine runs MeanBackward ... MmBackward
  std::cout << w.grad() << '\n';                         // d loss / d w
  std::cout << loss << '\n';                             // tensor(..., grad_fn=<MeanBackward>)

  Tensor col = x.select(1, 0);                           // a view of x's storage
  col.mul_(2);                                           // bumps x's version counter too
  std::cout << x.version() << '\n';                      // 1

  // Higher-order gradients and gradcheck, as torch.autograd:
  Tensor z = tensor({0.5, -1.0}, dtype(kFloat64)).requires_grad_();
  auto g = autograd::grad({z.tanh().sum()}, {z}, {}, std::nullopt, /*create_graph=*/true);
  auto gg = autograd::grad({g[0].sum()}, {z});           // d2/dz2 tanh = -2 tanh(z) (1 - tanh(z)^2)
  std::cout << gg[0] << '\n';
  bool ok = autograd::gradcheck([](const std::vector<Tensor>& in) { return in[0].sigmoid() * in[0]; }, {z});
  return ok ? 0 : 1;
}

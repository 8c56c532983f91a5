// A custom differentiable function, as torch::autograd::Function: a numerically stable
// "softplus" with a hand-written backward, checked against finite differences.
#include <iostream>

#include "graft.h"

using namespace graft;
using namespace graft::autograd;

// softplus(x) = log(1 + exp(x)), computed as max(x, 0) + log1p(exp(-|x|)) so large |x| never
// overflows. Its derivative is sigmoid(x), which backward computes from the saved input.
struct Softplus : Function<Softplus> {
  static Tensor forward(FunctionCtx* ctx, const Tensor& x) {
    ctx->save_for_backward({x});  // goes through SavedVariable: version checks, hooks, release
    return x.relu() + x.abs().neg().exp().log1p();
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, std::vector<Tensor> grad_outputs) {
    Tensor x = ctx->saved_tensors()[0];
    return {grad_outputs[0] * x.sigmoid()};
  }
};

int main() {
  Tensor x = tensor({-30.0, -1.0, 0.0, 2.0, 40.0}, dtype(kFloat64)).requires_grad_();
  Tensor y = Softplus::apply(x);
  std::cout << "softplus(x) = " << y << '\n';  // grad_fn=<CppNode<Softplus>>
  y.sum().backward();
  std::cout << "d/dx       = " << x.grad() << '\n';
  bool ok = gradcheck([](const std::vector<Tensor>& in) { return Softplus::apply(in[0]); }, {x});
  std::cout << "gradcheck: " << (ok ? "passed" : "failed") << '\n';
  return ok ? 0 : 1;
}

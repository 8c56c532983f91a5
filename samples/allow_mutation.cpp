// AllowMutationOnSavedTensors: write in place to tensors autograd has saved.
//
// Normally, modifying a tensor after an op saved it for backward makes backward fail ("modified by
// an inplace operation"): the saved value is gone. Inside an AllowMutationOnSavedTensors scope the
// saved tensor is cloned just before the write, so backward still sees the value it had when it
// was saved. Forward and backward must both run inside the same scope.
#include <cmath>
#include <iostream>

#include "graft.h"

using namespace graft;
using namespace graft::autograd;

int main() {
  bool ok = true;
  {
    AllowMutationOnSavedTensors scope;
    // forward
    Tensor a = ones({2, 3}, requires_grad());
    Tensor b = a.clone();
    Tensor out = (b * b).sum();  // saves b (twice)
    b.sin_();                    // allowed: the saved b is cloned first
    std::cout << "b after sin_: " << b << "\n";
    // backward: d/da sum(b*b) = 2*b with b as it was when saved (all ones)
    out.backward();
    std::cout << "a.grad = " << a.grad() << "\n";
    ok = ok && a.grad().to_vector<float>() == std::vector<float>(6, 2.f);
    ok = ok && std::abs(b.to_vector<float>()[0] - std::sin(1.f)) < 1e-6f;
  }
  // Outside the scope the same program is an error.
  Tensor a = ones({2, 3}, requires_grad());
  Tensor b = a.clone();
  Tensor out = (b * b).sum();
  b.sin_();
  try {
    out.backward();
    ok = false;
  } catch (const Error& e) {
    std::cout << "without the scope: " << std::string(e.what()).substr(0, 80) << "...\n";
  }
  std::cout << (ok ? "ok" : "FAILED") << "\n";
  return ok ? 0 : 1;
}

#pragma once
// gradcheck: compares the analytical Jacobian (from backward) with central finite differences in
// float64, as torch.autograd.gradcheck. On a mismatch it throws graft::Error naming the output,
// the input, the worst element, both values and the tolerance; otherwise it returns true.
// gradgradcheck does the same for the gradient of the gradient (create_graph=true), with random
// grad_outputs.
#include <functional>
#include <vector>

#include "runtime/tensor.h"

namespace graft::autograd {

using GradcheckFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

bool gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6, double atol = 1e-5,
               double rtol = 1e-3);
bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
               double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3);
bool gradgradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps = 1e-6, double atol = 1e-5,
                   double rtol = 1e-3);
bool gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
                   double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3);

}  // namespace graft::autograd

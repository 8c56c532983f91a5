#include "nn/clip_grad.h"

#include <charconv>
#include <cmath>
#include <string>

#include "autograd/autograd.h"

namespace graft::nn::utils {
namespace {

// norm_type as Python prints a float ("2.0", "inf", "0.5"), so the error reads as PyTorch's.
std::string python_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters) {
    GRAFT_CHECK(p.defined(), "clip_grad_norm_: parameter ", grads.size(), " is an undefined tensor");
    if (Tensor g = p.grad(); g.defined()) grads.push_back(g);
  }
  if (grads.empty()) return graft::zeros({});
  const Device first = grads[0].device();
  DType dt = grads[0].dtype();
  for (const Tensor& g : grads) dt = promote_types(dt, g.dtype());
  std::vector<Tensor> norms;
  norms.reserve(grads.size());
  for (const Tensor& g : grads) norms.push_back(graft::norm(g, norm_type).to(first).to(dt));
  Tensor total = graft::norm(graft::stack(norms), norm_type);
  if (error_if_nonfinite && !std::isfinite(total.item<double>()))
    GRAFT_ERROR("clip_grad_norm_: The total norm of order ", python_float(norm_type),
                " for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this error "
                "and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`");
  const Tensor coef = graft::clamp(graft::rdiv(total + 1e-6, max_norm), std::nullopt, 1.0);
  for (Tensor& g : grads) g.mul_(coef.to(g.device()));
  return total;
}

}  // namespace graft::nn::utils

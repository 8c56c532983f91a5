#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "ops/ops.h"

namespace graft::autograd {

namespace {

// Pointer to logical element j of a float64 CPU tensor of any strides.
double* element(const Tensor& t, int64_t j) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    int64_t s = t.size(d);
    off += (j % s) * t.stride(d);
    j /= s;
  }
  return static_cast<double*>(t.data_ptr()) + off;
}

std::string index_str(const Shape& shape, int64_t j) {
  Shape idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = j % shape[d];
    j /= shape[d];
  }
  return shape_str(idx);
}

std::vector<Tensor> eval_flat(const GradcheckFn& fn, const std::vector<Tensor>& inputs) {
  NoGradGuard ng;
  std::vector<Tensor> outs = fn(inputs);
  for (auto& o : outs) o = ops::to_dtype(ops::contiguous(o), kFloat64);
  return outs;
}

void check_inputs(const std::vector<Tensor>& inputs, const char* api) {
  bool any = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.requires_grad()) continue;
    any = true;
    GRAFT_CHECK(t.dtype() == kFloat64, api, ": input ", i, " requires grad but is ", t.dtype(),
                "; gradcheck needs float64 inputs for accurate finite differences");
    GRAFT_CHECK(t.is_cpu(), api, ": input ", i, " must be a CPU tensor");
  }
  GRAFT_CHECK(any, api, ": at least one input must require grad");
}

bool compare(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps, double atol, double rtol,
             const char* api) {
  check_inputs(inputs, api);
  std::vector<Tensor> outs;
  {
    EnableGradGuard eg;
    outs = fn(inputs);
  }
  std::vector<Tensor> diff_inputs;
  std::vector<size_t> diff_idx;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      diff_inputs.push_back(inputs[i]);
      diff_idx.push_back(i);
    }
  for (size_t o = 0; o < outs.size(); ++o) {
    const Tensor& out = outs[o];
    if (!out.defined() || !is_floating(out.dtype())) continue;
    int64_t n_out = out.numel();
    // analytical[i]: [n_out, numel(input i)] rows from one backward per output element.
    std::vector<std::vector<double>> analytical(diff_inputs.size());
    for (size_t i = 0; i < diff_inputs.size(); ++i) analytical[i].assign(n_out * diff_inputs[i].numel(), 0.0);
    if (out.requires_grad()) {
      for (int64_t k = 0; k < n_out; ++k) {
        Tensor go = ops::zeros(out.sizes(), out.dtype());
        {
          Tensor flat = ops::reshape(go, {-1});
          Tensor one = ops::select(flat, 0, k);
          ops::fill_(one, 1.0);
        }
        auto gs = grad({out}, diff_inputs, {go}, true, false, true);
        for (size_t i = 0; i < diff_inputs.size(); ++i) {
          if (!gs[i].defined()) continue;
          GRAFT_CHECK(gs[i].sizes() == diff_inputs[i].sizes(), api, ": gradient for input ", diff_idx[i], " has shape ",
                      shape_str(gs[i].sizes()), " but the input has shape ", shape_str(diff_inputs[i].sizes()));
          auto v = ops::to_dtype(gs[i], kFloat64).to_vector<double>();
          std::copy(v.begin(), v.end(), analytical[i].begin() + k * diff_inputs[i].numel());
        }
      }
    }
    // numerical: central differences, one input element at a time.
    for (size_t i = 0; i < diff_inputs.size(); ++i) {
      const Tensor& x = diff_inputs[i];
      int64_t n_in = x.numel();
      double worst = -1, worst_a = 0, worst_n = 0;
      int64_t worst_k = 0, worst_j = 0;
      for (int64_t j = 0; j < n_in; ++j) {
        double* p = element(x, j);
        double orig = *p;
        *p = orig + eps;
        auto plus = eval_flat(fn, inputs)[o].to_vector<double>();
        *p = orig - eps;
        auto minus = eval_flat(fn, inputs)[o].to_vector<double>();
        *p = orig;
        for (int64_t k = 0; k < n_out; ++k) {
          double num = (plus[k] - minus[k]) / (2 * eps);
          double ana = analytical[i][k * n_in + j];
          double err = std::abs(ana - num);
          double tol = atol + rtol * std::abs(num);
          if (!(err <= tol) && (err - tol > worst || std::isnan(err))) {
            worst = std::isnan(err) ? INFINITY : err - tol;
            worst_a = ana;
            worst_n = num;
            worst_k = k;
            worst_j = j;
          }
        }
      }
      if (worst >= 0) {
        GRAFT_ERROR(api, ": Jacobian mismatch for output ", o, " with respect to input ", diff_idx[i],
                    ": output element ", index_str(out.sizes(), worst_k), ", input element ",
                    index_str(x.sizes(), worst_j), ": numerical ", worst_n, " vs analytical ", worst_a,
                    " (|difference| ", std::abs(worst_n - worst_a), " > atol ", atol, " + rtol ", rtol,
                    " * |numerical|)");
      }
    }
  }
  return true;
}

}  // namespace

bool gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps, double atol, double rtol) {
  return compare(fn, inputs, eps, atol, rtol, "gradcheck");
}

bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
               double eps, double atol, double rtol) {
  return gradcheck([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; }, inputs, eps, atol,
                   rtol);
}

bool gradgradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs, double eps, double atol, double rtol) {
  check_inputs(inputs, "gradgradcheck");
  // Fixed random grad_outputs, so the function checked is deterministic.
  std::vector<Tensor> outs;
  {
    NoGradGuard ng;
    outs = fn(inputs);
  }
  std::vector<Tensor> grad_outs;
  for (auto& o : outs) {
    Tensor g = ops::randn(o.sizes(), kFloat64);
    g.requires_grad_(true);
    grad_outs.push_back(g);
  }
  std::vector<Tensor> all = inputs;
  all.insert(all.end(), grad_outs.begin(), grad_outs.end());
  size_t n_in = inputs.size();
  GradcheckFn first_order = [&, n_in](const std::vector<Tensor>& xs) {
    std::vector<Tensor> in(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(n_in));
    std::vector<Tensor> go(xs.begin() + static_cast<std::ptrdiff_t>(n_in), xs.end());
    std::vector<Tensor> diff;
    for (auto& t : in)
      if (t.defined() && t.requires_grad()) diff.push_back(t);
    EnableGradGuard eg;
    std::vector<Tensor> o = fn(in);
    std::vector<Tensor> keep_o, keep_g;
    for (size_t i = 0; i < o.size(); ++i)
      if (o[i].requires_grad()) {
        keep_o.push_back(o[i]);
        keep_g.push_back(go[i]);
      }
    auto g = grad(keep_o, diff, keep_g, true, true, true);
    for (size_t i = 0; i < g.size(); ++i)
      if (!g[i].defined()) g[i] = graft::zeros_like(diff[i]);
    return g;
  };
  return compare(first_order, all, eps, atol, rtol, "gradgradcheck");
}

bool gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
                   double eps, double atol, double rtol) {
  return gradgradcheck([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; }, inputs, eps, atol,
                       rtol);
}

}  // namespace graft::autograd

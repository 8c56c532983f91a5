// Tensor's conveniences that are not ops, and its operators: forwards to the public functions, so a
// method or operator records exactly the history of the function call. The op methods themselves
// are generated from the declarations (autograd/tensor_methods_generated.cpp).
#include "autograd/functional.h"
#include "ops/ops.h"
#include "runtime/tensor.h"

namespace graft {

Tensor Tensor::t() const {
  GRAFT_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dimensions, but self is ", dim(), "-D (shape ",
              shape_str(sizes()), ")");
  return dim() < 2 ? *this : transpose(0, 1);
}
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t len) const {
  int64_t wd = wrap_dim(d, dim(), "narrow");
  int64_t n = sizes()[wd];
  int64_t start = s < 0 ? s + n : s;
  GRAFT_CHECK(start >= 0 && len >= 0 && start + len <= n, "narrow: start (", s, ") + length (", len,
              ") exceeds dimension size (", n, ")");
  return slice(wd, start, start + len);
}

// ---- operators ----
Tensor operator+(const Tensor& a, const Tensor& b) { return graft::add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return graft::sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return graft::mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return graft::div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return graft::add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return graft::sub(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return graft::mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return graft::div(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return graft::add(b, a); }
Tensor operator-(Scalar a, const Tensor& b) { return graft::add(graft::neg(b), a); }
Tensor operator*(Scalar a, const Tensor& b) { return graft::mul(b, a); }
Tensor operator/(Scalar a, const Tensor& b) { return graft::mul(graft::reciprocal(b), a); }
Tensor operator-(const Tensor& a) { return graft::neg(a); }

}  // namespace graft

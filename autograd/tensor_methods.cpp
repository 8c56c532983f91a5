// Tensor's math and view methods: thin forwards to the public functions, so that a method call and
// a free-function call record exactly the same history.
#include "autograd/functional.h"
#include "ops/ops.h"
#include "runtime/tensor.h"

namespace graft {

// ---- views ----
Tensor Tensor::view(const Shape& s) const { return graft::view(*this, s); }
Tensor Tensor::reshape(const Shape& s) const { return graft::reshape(*this, s); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return graft::transpose(*this, a, b); }
Tensor Tensor::t() const {
  GRAFT_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dimensions, but self is ", dim(), "-D (shape ",
              shape_str(sizes()), ")");
  return dim() < 2 ? *this : transpose(0, 1);
}
Tensor Tensor::permute(const Shape& d) const { return graft::permute(*this, d); }
Tensor Tensor::slice(int64_t d, int64_t s, int64_t e, int64_t st) const { return graft::slice(*this, d, s, e, st); }
Tensor Tensor::narrow(int64_t d, int64_t s, int64_t len) const {
  int64_t wd = wrap_dim(d, dim(), "narrow");
  int64_t n = sizes()[wd];
  int64_t start = s < 0 ? s + n : s;
  GRAFT_CHECK(start >= 0 && len >= 0 && start + len <= n, "narrow: start (", s, ") + length (", len,
              ") exceeds dimension size (", n, ")");
  return slice(wd, start, start + len);
}
Tensor Tensor::select(int64_t d, int64_t i) const { return graft::select(*this, d, i); }
Tensor Tensor::expand(const Shape& s) const { return graft::expand(*this, s); }
Tensor Tensor::squeeze() const { return graft::squeeze(*this, std::nullopt); }
Tensor Tensor::squeeze(int64_t d) const { return graft::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return graft::unsqueeze(*this, d); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return graft::flatten(*this, s, e); }
Tensor Tensor::contiguous() const { return graft::contiguous(*this); }
Tensor Tensor::contiguous(MemoryFormat f) const { return graft::contiguous(*this, f); }

// ---- math ----
Tensor Tensor::add(const Tensor& o, Scalar alpha) const { return graft::add(*this, o, alpha); }
Tensor Tensor::add(Scalar o) const { return graft::add(*this, o); }
Tensor Tensor::sub(const Tensor& o, Scalar alpha) const { return graft::sub(*this, o, alpha); }
Tensor Tensor::sub(Scalar o) const { return graft::sub(*this, o); }
Tensor Tensor::mul(const Tensor& o) const { return graft::mul(*this, o); }
Tensor Tensor::mul(Scalar o) const { return graft::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return graft::div(*this, o); }
Tensor Tensor::div(Scalar o) const { return graft::div(*this, o); }
Tensor Tensor::neg() const { return graft::neg(*this); }
Tensor Tensor::relu() const { return graft::relu(*this); }
Tensor Tensor::abs() const { return graft::abs(*this); }
Tensor Tensor::sign() const { return graft::sign(*this); }
#define GRAFT_UNARY_OP(name, ...) \
  Tensor Tensor::name() const { return graft::name(*this); }
#include "runtime/op_table/unary.def"
Tensor Tensor::gelu(const std::string& a) const { return graft::gelu(*this, a); }
Tensor Tensor::pow(Scalar e) const { return graft::pow(*this, e); }
Tensor Tensor::pow(const Tensor& e) const { return graft::pow(*this, e); }
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const { return graft::clamp(*this, lo, hi); }
Tensor Tensor::maximum(const Tensor& o) const { return graft::maximum(*this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return graft::minimum(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return graft::gt(*this, o); }
Tensor Tensor::gt(Scalar o) const { return ops::gt(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return graft::lt(*this, o); }
Tensor Tensor::lt(Scalar o) const { return ops::lt(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return graft::ge(*this, o); }
Tensor Tensor::ge(Scalar o) const { return ops::ge(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return graft::le(*this, o); }
Tensor Tensor::le(Scalar o) const { return ops::le(*this, o); }
Tensor Tensor::eq(const Tensor& o) const { return graft::eq(*this, o); }
Tensor Tensor::eq(Scalar o) const { return ops::eq(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return graft::ne(*this, o); }
Tensor Tensor::ne(Scalar o) const { return ops::ne(*this, o); }
Tensor Tensor::masked_fill(const Tensor& m, Scalar v) const { return graft::masked_fill(*this, m, v); }

Tensor Tensor::matmul(const Tensor& o) const { return graft::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return graft::mm(*this, o); }
Tensor Tensor::bmm(const Tensor& o) const { return graft::bmm(*this, o); }

Tensor Tensor::sum() const { return graft::sum(*this); }
Tensor Tensor::sum(const Shape& d, bool k) const { return graft::sum(*this, d, k); }
Tensor Tensor::mean() const { return graft::mean(*this); }
Tensor Tensor::mean(const Shape& d, bool k) const { return graft::mean(*this, d, k); }
Tensor Tensor::max() const { return graft::max(*this); }
std::vector<Tensor> Tensor::max(int64_t d, bool k) const { return graft::max(*this, d, k); }
Tensor Tensor::min() const { return graft::min(*this); }
std::vector<Tensor> Tensor::min(int64_t d, bool k) const { return graft::min(*this, d, k); }
Tensor Tensor::amax(const Shape& d, bool k) const { return graft::amax(*this, d, k); }
Tensor Tensor::amin(const Shape& d, bool k) const { return graft::amin(*this, d, k); }
Tensor Tensor::argmax(std::optional<int64_t> d, bool k) const { return graft::argmax(*this, d, k); }
Tensor Tensor::argmin(std::optional<int64_t> d, bool k) const { return graft::argmin(*this, d, k); }
Tensor Tensor::var(const Shape& d, int64_t c, bool k) const { return graft::var(*this, d, c, k); }
Tensor Tensor::std(const Shape& d, int64_t c, bool k) const { return graft::std(*this, d, c, k); }
Tensor Tensor::norm(double p, const Shape& d, bool k) const { return graft::norm(*this, p, d, k); }
Tensor Tensor::logsumexp(const Shape& d, bool k) const { return graft::logsumexp(*this, d, k); }

Tensor Tensor::softmax(int64_t d) const { return graft::softmax(*this, d); }
Tensor Tensor::log_softmax(int64_t d) const { return graft::log_softmax(*this, d); }
Tensor Tensor::clone() const { return graft::clone(*this); }
Tensor Tensor::clone(MemoryFormat f) const { return graft::clone(*this, f); }
Tensor Tensor::detach() const { return graft::detach(*this); }
Tensor Tensor::to(Device d, bool nb) const { return graft::to(*this, d, nb); }
Tensor Tensor::to(DType t) const { return graft::to(*this, t); }

// ---- in-place ----
Tensor& Tensor::add_(const Tensor& o, Scalar alpha) { return graft::add_(*this, o, alpha); }
Tensor& Tensor::add_(Scalar o) { return graft::add_(*this, o); }
Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) { return graft::sub_(*this, o, alpha); }
Tensor& Tensor::sub_(Scalar o) { return graft::sub_(*this, o); }
Tensor& Tensor::mul_(const Tensor& o) { return graft::mul_(*this, o); }
Tensor& Tensor::mul_(Scalar o) { return graft::mul_(*this, o); }
Tensor& Tensor::div_(const Tensor& o) { return graft::div_(*this, o); }
Tensor& Tensor::div_(Scalar o) { return graft::div_(*this, o); }
Tensor& Tensor::sin_() { return graft::sin_(*this); }
Tensor& Tensor::exp_() { return graft::exp_(*this); }
Tensor& Tensor::relu_() { return graft::relu_(*this); }
Tensor& Tensor::zero_() { return graft::zero_(*this); }
Tensor& Tensor::fill_(Scalar v) { return graft::fill_(*this, v); }
Tensor& Tensor::copy_(const Tensor& s, bool nb) { return graft::copy_(*this, s, nb); }
Tensor& Tensor::normal_(double m, double s) { return graft::normal_(*this, m, s); }
Tensor& Tensor::uniform_(double f, double t) { return graft::uniform_(*this, f, t); }
Tensor& Tensor::clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi) { return graft::clamp_(*this, lo, hi); }

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

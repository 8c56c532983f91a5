// Public op functions. Autograd recording is added here by the autograd layer; the calls below are
// the forward computation through the dispatcher.
#include "autograd/functional.h"

#include "ops/ops.h"

namespace graft {

// ---- factories ----
namespace {
Tensor finish(Tensor t, const TensorOptions& o) {
  (void)o;  // requires_grad is applied by the autograd layer (issue 3)
  return t;
}
template <class T>
Tensor from_values(const std::vector<T>& values, const Shape& sizes, TensorOptions o, DType natural) {
  GRAFT_CHECK(static_cast<int64_t>(values.size()) == shape_numel(sizes), "tensor: ", values.size(),
              " values do not fill shape ", shape_str(sizes));
  Tensor host = ops::empty(sizes, dtype_v<T>, kCPU);
  std::copy(values.begin(), values.end(), static_cast<T*>(host.data_ptr()));
  DType want = o.get_dtype(natural);
  Tensor t = ops::to_dtype(host, want);
  if (o.get_device() != kCPU || o.get_pinned_memory())
    t = ops::to_device(t, o.get_device(), false, o.get_pinned_memory());
  if (t.is_same(host) && want != dtype_v<T>) t = ops::clone(t);
  return finish(t, o);
}
}  // namespace

Tensor empty(const Shape& sizes, TensorOptions o) {
  return finish(ops::empty(sizes, o.get_dtype(), o.get_device(), o.get_pinned_memory()), o);
}
Tensor zeros(const Shape& sizes, TensorOptions o) { return finish(ops::zeros(sizes, o.get_dtype(), o.get_device()), o); }
Tensor ones(const Shape& sizes, TensorOptions o) { return finish(ops::ones(sizes, o.get_dtype(), o.get_device()), o); }
Tensor full(const Shape& sizes, Scalar v, TensorOptions o) {
  return finish(ops::full(sizes, v, o.get_dtype(), o.get_device()), o);
}
Tensor arange(Scalar end, TensorOptions o) { return arange(0, end, 1, o); }
Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions o) {
  bool integral = start.is_integral() && end.is_integral() && step.is_integral();
  DType d = o.get_dtype(integral ? kInt64 : kFloat32);
  return finish(ops::arange(start.to_double(), end.to_double(), step.to_double(), d, o.get_device()), o);
}
Tensor randn(const Shape& sizes, TensorOptions o) { return finish(ops::randn(sizes, o.get_dtype(), o.get_device()), o); }
Tensor rand(const Shape& sizes, TensorOptions o) { return finish(ops::rand(sizes, o.get_dtype(), o.get_device()), o); }
Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions o) {
  return finish(ops::randint(low, high, sizes, o.get_dtype(kInt64), o.get_device()), o);
}
static TensorOptions like(const Tensor& t, TensorOptions o) {
  return o.dtype(o.get_dtype(t.dtype())).device(o.has_dtype() || o.get_device() != kCPU ? o.get_device() : t.device());
}
Tensor empty_like(const Tensor& t, TensorOptions o) { return empty(t.sizes(), like(t, o)); }
Tensor zeros_like(const Tensor& t, TensorOptions o) { return zeros(t.sizes(), like(t, o)); }
Tensor ones_like(const Tensor& t, TensorOptions o) { return ones(t.sizes(), like(t, o)); }
Tensor full_like(const Tensor& t, Scalar v, TensorOptions o) { return full(t.sizes(), v, like(t, o)); }
Tensor randn_like(const Tensor& t, TensorOptions o) { return randn(t.sizes(), like(t, o)); }
Tensor rand_like(const Tensor& t, TensorOptions o) { return rand(t.sizes(), like(t, o)); }
Tensor tensor(std::initializer_list<double> values, TensorOptions o) {
  std::vector<double> v(values);
  return from_values(v, {static_cast<int64_t>(v.size())}, o, kFloat32);
}
Tensor tensor(const std::vector<float>& v, const Shape& s, TensorOptions o) { return from_values(v, s, o, kFloat32); }
Tensor tensor(const std::vector<double>& v, const Shape& s, TensorOptions o) { return from_values(v, s, o, kFloat64); }
Tensor tensor(const std::vector<int64_t>& v, const Shape& s, TensorOptions o) { return from_values(v, s, o, kInt64); }
Tensor tensor(const std::vector<bool>& v, const Shape& s, TensorOptions o) {
  std::vector<int64_t> iv(v.begin(), v.end());
  return from_values(iv, s, o.dtype(o.get_dtype(kBool)), kBool);
}
Tensor scalar_tensor(Scalar v, TensorOptions o) {
  return full({}, v, o.dtype(o.get_dtype(v.is_bool() ? kBool : v.is_integral() ? kInt64 : kFloat32)));
}

// ---- elementwise ----
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) { return ops::add(a, b, alpha); }
Tensor add(const Tensor& a, Scalar b) { return ops::add(a, b); }
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) { return ops::sub(a, b, alpha); }
Tensor sub(const Tensor& a, Scalar b) { return ops::sub(a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
Tensor mul(const Tensor& a, Scalar b) { return ops::mul(a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
Tensor div(const Tensor& a, Scalar b) { return ops::div(a, b); }
Tensor neg(const Tensor& x) { return ops::neg(x); }
Tensor exp(const Tensor& x) { return ops::exp(x); }
Tensor log(const Tensor& x) { return ops::log(x); }
Tensor sin(const Tensor& x) { return ops::sin(x); }
Tensor cos(const Tensor& x) { return ops::cos(x); }
Tensor tanh(const Tensor& x) { return ops::tanh(x); }
Tensor sigmoid(const Tensor& x) { return ops::sigmoid(x); }
Tensor relu(const Tensor& x) { return ops::relu(x); }
Tensor sqrt(const Tensor& x) { return ops::sqrt(x); }
Tensor rsqrt(const Tensor& x) { return ops::rsqrt(x); }
Tensor abs(const Tensor& x) { return ops::abs(x); }
Tensor sign(const Tensor& x) { return ops::sign(x); }
Tensor log1p(const Tensor& x) { return ops::log1p(x); }
Tensor expm1(const Tensor& x) { return ops::expm1(x); }
Tensor erf(const Tensor& x) { return ops::erf(x); }
Tensor reciprocal(const Tensor& x) { return ops::reciprocal(x); }
Tensor gelu(const Tensor& x, const std::string& approximate) { return ops::gelu(x, approximate); }
Tensor pow(const Tensor& x, Scalar e) { return ops::pow(x, e); }
Tensor pow(const Tensor& x, const Tensor& e) { return ops::pow(x, e); }
Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) { return ops::clamp(x, lo, hi); }
Tensor maximum(const Tensor& a, const Tensor& b) { return ops::maximum(a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return ops::minimum(a, b); }
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return ops::where(c, a, b); }
Tensor masked_fill(const Tensor& x, const Tensor& m, Scalar v) { return ops::masked_fill(x, m, v); }
Tensor gt(const Tensor& a, const Tensor& b) { return ops::gt(a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return ops::lt(a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return ops::ge(a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return ops::le(a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return ops::eq(a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return ops::ne(a, b); }

// ---- reductions ----
Tensor sum(const Tensor& x, const Shape& d, bool k) { return ops::sum(x, d, k); }
Tensor mean(const Tensor& x, const Shape& d, bool k) { return ops::mean(x, d, k); }
Tensor amax(const Tensor& x, const Shape& d, bool k) { return ops::amax(x, d, k); }
Tensor amin(const Tensor& x, const Shape& d, bool k) { return ops::amin(x, d, k); }
std::vector<Tensor> max(const Tensor& x, int64_t d, bool k) { return ops::max_dim(x, d, k); }
std::vector<Tensor> min(const Tensor& x, int64_t d, bool k) { return ops::min_dim(x, d, k); }
Tensor max(const Tensor& x) { return ops::max(x); }
Tensor min(const Tensor& x) { return ops::min(x); }
Tensor argmax(const Tensor& x, std::optional<int64_t> d, bool k) { return ops::argmax(x, d, k); }
Tensor argmin(const Tensor& x, std::optional<int64_t> d, bool k) { return ops::argmin(x, d, k); }
Tensor var(const Tensor& x, const Shape& d, int64_t c, bool k) { return ops::var(x, d, c, k); }
Tensor std(const Tensor& x, const Shape& d, int64_t c, bool k) { return ops::std(x, d, c, k); }
Tensor norm(const Tensor& x, double p, const Shape& d, bool k) { return ops::norm(x, p, d, k); }
Tensor logsumexp(const Tensor& x, const Shape& d, bool k) { return ops::logsumexp(x, d, k); }

// ---- linear algebra, convolution, pooling ----
Tensor matmul(const Tensor& a, const Tensor& b) { return ops::matmul(a, b); }
Tensor mm(const Tensor& a, const Tensor& b) { return ops::mm(a, b); }
Tensor bmm(const Tensor& a, const Tensor& b) { return ops::bmm(a, b); }
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) { return ops::linear(x, w, b); }
Tensor conv2d(const Tensor& in, const Tensor& w, const Tensor& b, const Shape& s, const Shape& p, const Shape& d,
              int64_t g) {
  return ops::conv2d(in, w, b, s, p, d, g);
}
Tensor max_pool2d(const Tensor& in, const Shape& k, const Shape& s, const Shape& p, const Shape& d, bool c) {
  return ops::max_pool2d(in, k, s, p, d, c);
}
Tensor avg_pool2d(const Tensor& in, const Shape& k, const Shape& s, const Shape& p, bool c, bool cip) {
  return ops::avg_pool2d(in, k, s, p, c, cip);
}

// ---- softmax, losses, normalisation ----
Tensor softmax(const Tensor& x, int64_t dim) { return ops::softmax(x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return ops::log_softmax(x, dim); }
Tensor nll_loss(const Tensor& lp, const Tensor& t, const Tensor& w, const std::string& r, int64_t ii) {
  return ops::nll_loss(lp, t, w, r, ii);
}
Tensor cross_entropy(const Tensor& x, const Tensor& t, const Tensor& w, const std::string& r, int64_t ii, double ls) {
  return ops::cross_entropy(x, t, w, r, ii, ls);
}
Tensor mse_loss(const Tensor& a, const Tensor& b, const std::string& r) { return ops::mse_loss(a, b, r); }
Tensor layer_norm(const Tensor& x, const Shape& ns, const Tensor& w, const Tensor& b, double eps) {
  return ops::layer_norm(x, ns, w, b, eps)[0];
}

// ---- indexing, joining ----
Tensor embedding(const Tensor& w, const Tensor& i, int64_t p) { return ops::embedding(w, i, p); }
Tensor index_select(const Tensor& x, int64_t d, const Tensor& i) { return ops::index_select(x, d, i); }
Tensor gather(const Tensor& x, int64_t d, const Tensor& i) { return ops::gather(x, d, i); }
Tensor scatter_add(const Tensor& x, int64_t d, const Tensor& i, const Tensor& s) { return ops::scatter_add(x, d, i, s); }
Tensor cat(const std::vector<Tensor>& ts, int64_t d) { return ops::cat(ts, d); }
Tensor stack(const std::vector<Tensor>& ts, int64_t d) { return ops::stack(ts, d); }
std::vector<Tensor> split(const Tensor& x, int64_t s, int64_t d) { return ops::split(x, s, d); }
std::vector<Tensor> chunk(const Tensor& x, int64_t c, int64_t d) { return ops::chunk(x, c, d); }
Tensor pad(const Tensor& x, const Shape& p, double v) { return ops::pad(x, p, v); }
Tensor one_hot(const Tensor& i, int64_t n) { return ops::one_hot(i, n); }

}  // namespace graft

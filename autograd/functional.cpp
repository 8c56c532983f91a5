// Public factories. The differentiable op functions live in functional_*.cpp, next to their rules.
#include "autograd/functional.h"

#include "ops/ops.h"
#include "runtime/memory_format.h"

namespace graft {

// ---- factories ----
namespace {
Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.get_requires_grad()) t.requires_grad_(true);
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
  return o.dtype(o.get_dtype(t.dtype())).device(o.has_device() ? o.get_device() : t.device());
}
// `make(sizes, options)` in t's layout, by PyTorch's preserve_format (preserve_format_strides, the
// rule clone and to keep a layout by): a gradient buffer or a noise tensor made like a
// channels-last activation is channels-last, so it takes the convolutions' fast path as the
// activation does. Made flat (so the factory's own kernel fills it, memory in order, and its
// version stays 0) and viewed with the strides. Pinned memory, and empty sources, come contiguous.
template <class Make>
static Tensor make_like(const Tensor& t, TensorOptions o, Make make) {
  const TensorOptions lo = like(t, o);
  if (t.numel() == 0 || lo.get_pinned_memory()) return make(t.sizes(), lo);
  const Shape strides = preserve_format_strides(t.sizes(), t.strides());
  if (strides == contiguous_strides(t.sizes())) return make(t.sizes(), lo);
  Tensor flat = make(Shape{t.numel()}, lo.requires_grad(false));
  return finish(ops::as_strided(flat, t.sizes(), strides, 0), lo);
}
Tensor empty_like(const Tensor& t, TensorOptions o) {
  return make_like(t, o, [](const Shape& s, TensorOptions lo) { return empty(s, lo); });
}
Tensor zeros_like(const Tensor& t, TensorOptions o) {
  return make_like(t, o, [](const Shape& s, TensorOptions lo) { return zeros(s, lo); });
}
Tensor ones_like(const Tensor& t, TensorOptions o) {
  return make_like(t, o, [](const Shape& s, TensorOptions lo) { return ones(s, lo); });
}
Tensor full_like(const Tensor& t, Scalar v, TensorOptions o) {
  return make_like(t, o, [&](const Shape& s, TensorOptions lo) { return full(s, v, lo); });
}
Tensor randn_like(const Tensor& t, TensorOptions o) {
  return make_like(t, o, [](const Shape& s, TensorOptions lo) { return randn(s, lo); });
}
Tensor rand_like(const Tensor& t, TensorOptions o) {
  return make_like(t, o, [](const Shape& s, TensorOptions lo) { return rand(s, lo); });
}
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

}  // namespace graft

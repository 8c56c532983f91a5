#pragma once
// Tensor: a cheap-to-copy handle to a TensorImpl (like libtorch's at::Tensor).
//
// Copying a Tensor shares the impl: `b = a` makes b the same tensor, not a view or a copy.
// The accessors below read the impl directly. The math methods forward to the public functions
// (autograd/functional.h), which record autograd history and then call the dispatcher; they are
// declared here so user code reads `x.matmul(w).relu()`, and defined in the layer that owns them.
#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <vector>

#include "runtime/error.h"
#include "runtime/hook_handle.h"
#include "runtime/scalar.h"
#include "runtime/tensor_impl.h"
#include "runtime/tensor_options.h"

namespace graft {

namespace autograd {
class Node;
}

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // ---- metadata ----
  const Shape& sizes() const { return checked()->sizes(); }
  int64_t size(int64_t dim) const;
  const Shape& strides() const { return checked()->strides(); }
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return checked()->dim(); }
  int64_t numel() const { return checked()->numel(); }
  int64_t storage_offset() const { return checked()->storage_offset(); }
  DType dtype() const { return checked()->dtype(); }
  DType scalar_type() const { return dtype(); }
  Device device() const { return checked()->device(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_contiguous() const { return checked()->is_contiguous(); }
  bool is_contiguous(MemoryFormat f) const { return checked()->is_contiguous(f); }
  MemoryFormat suggest_memory_format() const { return checked()->suggest_memory_format(); }
  bool is_pinned() const { return checked()->storage()->pinned(); }
  size_t element_size() const { return graft::element_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  TensorOptions options() const { return TensorOptions{}.dtype(dtype()).device(device()); }

  void* data_ptr() const { return checked()->data(); }
  template <class T> T* data_ptr() const {
    GRAFT_CHECK(dtype_v<T> == dtype(), "data_ptr: expected dtype ", dtype_v<T>, " but the tensor is ", dtype());
    return static_cast<T*>(data_ptr());
  }
  int64_t version() const { return checked()->version(); }
  // Created under InferenceMode: no version counter, never saved for backward.
  bool is_inference() const { return checked()->storage()->is_inference(); }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  // True when both tensors view the same storage.
  bool is_alias_of(const Tensor& o) const {
    return defined() && o.defined() && impl_->storage() == o.impl_->storage();
  }

  // Copies to host and reads. item() needs exactly one element.
  template <class T> T item() const;
  template <class T> std::vector<T> to_vector() const;

  // ---- views: share storage and version counter ----
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor permute(const Shape& dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;
  // Dense in `f` (Contiguous or ChannelsLast): self when it already is (size-1 dims ignored, so a
  // [N, 1, H, W] tensor is both, as in PyTorch), else a recorded copy.
  Tensor contiguous(MemoryFormat f) const;
  Tensor operator[](int64_t index) const { return select(0, index); }

  // ---- out-of-place math ----
  Tensor add(const Tensor& o, Scalar alpha = 1) const;
  Tensor add(Scalar o) const;
  Tensor sub(const Tensor& o, Scalar alpha = 1) const;
  Tensor sub(Scalar o) const;
  Tensor mul(const Tensor& o) const;
  Tensor mul(Scalar o) const;
  Tensor div(const Tensor& o) const;
  Tensor div(Scalar o) const;
  Tensor neg() const;
  Tensor relu() const;
  Tensor abs() const;
  Tensor sign() const;
  // The unary op table: Tensor exp() const; Tensor log() const; ... (runtime/op_table/unary.def)
#define GRAFT_UNARY_OP(name, ...) Tensor name() const;
#include "runtime/op_table/unary.def"
  Tensor gelu(const std::string& approximate = "none") const;
  Tensor pow(Scalar exponent) const;
  Tensor pow(const Tensor& exponent) const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor maximum(const Tensor& o) const;
  Tensor minimum(const Tensor& o) const;
  Tensor gt(const Tensor& o) const;
  Tensor gt(Scalar o) const;
  Tensor lt(const Tensor& o) const;
  Tensor lt(Scalar o) const;
  Tensor ge(const Tensor& o) const;
  Tensor ge(Scalar o) const;
  Tensor le(const Tensor& o) const;
  Tensor le(Scalar o) const;
  Tensor eq(const Tensor& o) const;
  Tensor eq(Scalar o) const;
  Tensor ne(const Tensor& o) const;
  Tensor ne(Scalar o) const;
  Tensor masked_fill(const Tensor& mask, Scalar value) const;

  Tensor matmul(const Tensor& o) const;
  Tensor mm(const Tensor& o) const;
  Tensor bmm(const Tensor& o) const;

  Tensor sum() const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;
  Tensor max() const;
  std::vector<Tensor> max(int64_t dim, bool keepdim = false) const;  // {values, indices}
  Tensor min() const;
  std::vector<Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor amax(const Shape& dims = {}, bool keepdim = false) const;
  Tensor amin(const Shape& dims = {}, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(const Shape& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor std(const Shape& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor norm(double p = 2, const Shape& dims = {}, bool keepdim = false) const;
  Tensor logsumexp(const Shape& dims, bool keepdim = false) const;

  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor clone() const;  // contiguous, as graft always did; clone(MemoryFormat::Preserve) keeps a dense layout
  Tensor clone(MemoryFormat f) const;
  Tensor detach() const;
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor to(DType dtype) const;
  Tensor cpu() const { return to(Device(DeviceType::CPU)); }
  Tensor cuda() const { return to(Device(DeviceType::CUDA)); }

  // ---- in-place: bump the version counter once ----
  Tensor& add_(const Tensor& o, Scalar alpha = 1);
  Tensor& add_(Scalar o);
  Tensor& sub_(const Tensor& o, Scalar alpha = 1);
  Tensor& sub_(Scalar o);
  Tensor& mul_(const Tensor& o);
  Tensor& mul_(Scalar o);
  Tensor& div_(const Tensor& o);
  Tensor& div_(Scalar o);
  Tensor& sin_();
  Tensor& exp_();
  Tensor& relu_();
  Tensor& zero_();
  Tensor& fill_(Scalar value);
  Tensor& copy_(const Tensor& src, bool non_blocking = false);
  Tensor& normal_(double mean = 0, double std = 1);
  Tensor& uniform_(double from = 0, double to = 1);
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);

  // ---- autograd (defined in autograd/) ----
  bool requires_grad() const;
  // Leaves only; floating dtypes only.
  Tensor& requires_grad_(bool requires_grad = true);
  bool is_leaf() const;
  Tensor grad() const;
  Tensor& mutable_grad();
  // libtorch's set_data (Python's `p.data = new`): this tensor takes new_data's storage, dtype,
  // shape and strides, and keeps its identity and its autograd state (requires_grad, .grad, hooks).
  // Everyone holding this tensor (an optimizer, a module's members) sees the new data. The version
  // counter is the new storage's; a leaf's gradient accumulator is dropped when the metadata a
  // gradient is checked against (shape, dtype, device) changed. Not on non-leaves or views.
  void set_data(const Tensor& new_data) const;
  void retain_grad();
  bool retains_grad() const;
  std::shared_ptr<autograd::Node> grad_fn() const;
  // Output index of this tensor in grad_fn (0 for leaves).
  uint32_t output_nr() const;
  void backward(const Tensor& gradient = {}, std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false, const std::vector<Tensor>& inputs = {}) const;
  // fn(grad) -> replacement (or an undefined Tensor to keep grad). Runs each time a gradient for
  // this tensor is computed, and with an undefined grad when the node producing this tensor ran
  // but this output got no gradient (as libtorch's C++ hooks): check grad.defined().
  HookHandle register_hook(std::function<Tensor(const Tensor& grad)> fn) const;
  // Leaves only: fn(leaf) runs after a backward added into leaf.grad(). Owned by the leaf.
  HookHandle register_post_accumulate_grad_hook(std::function<void(Tensor&)> fn) const;

 private:
  TensorImpl* checked() const {
    if (!impl_) [[unlikely]]
      detail::throw_error("Tensor: operation on an undefined tensor");
    return impl_.get();
  }
  std::shared_ptr<TensorImpl> impl_;
};

// Operators (both sides, Scalar on either side), as libtorch.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a);

// PyTorch's format: tensor([1., 2., 3.]), with dtype/device suffixes where not default.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

// A short description for error messages: "[2, 3] float32 cpu".
std::string describe(const Tensor& t);

}  // namespace graft
